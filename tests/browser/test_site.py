"""The public site in a real browser (issue 28): every page in English and Italian, on a phone and
on a desktop, screenshotted, with an axe-core accessibility pass that must find no serious or
critical violation; the language switch and "Try it free" clicked as a visitor would.

axe-core comes from npm into tests/browser/node_modules (package.json and package-lock.json
here; `make install` and .ci/run install it). Without it the accessibility tests are skipped with
the reason shown."""

from pathlib import Path

import pytest
from django.conf import settings
from django.urls import reverse
from django.utils import translation

from tests.site.conftest import _site_packages, packages  # noqa: F401 - fixtures (the four packages)
from web.site.pages import PAGES

pytestmark = pytest.mark.django_db(transaction=True)

AXE = Path(__file__).resolve().parent / "node_modules" / "axe-core" / "axe.min.js"
needs_axe = pytest.mark.skipif(
    not AXE.exists(), reason=f"{AXE} is missing: run `make install` (npm ci in tests/browser)"
)
VIEWPORTS = {"phone": True, "desktop": False}


def site_url(name: str, language: str) -> str:
    with translation.override(language):
        return reverse(f"site:{name}")


def axe_violations(page) -> list[dict]:
    """Serious and critical WCAG 2.1 A/AA violations axe-core finds on the page as rendered."""
    page.add_script_tag(path=str(AXE))
    results = page.evaluate(
        """async () => await axe.run(document, {
            runOnly: {type: 'tag', values: ['wcag2a', 'wcag2aa', 'wcag21a', 'wcag21aa', 'best-practice']},
            resultTypes: ['violations'],
        })"""
    )
    return [
        {"id": v["id"], "impact": v["impact"], "nodes": [n["target"] for n in v["nodes"]][:5]}
        for v in results["violations"]
        if v["impact"] in ("serious", "critical")
    ]


@needs_axe
@pytest.mark.parametrize("viewport", list(VIEWPORTS))
@pytest.mark.parametrize("language", ["en", "it"])
def test_every_page_renders_and_passes_axe(new_page, shots, language, viewport):
    page = new_page(locale="it-IT" if language == "it" else "en-GB", mobile=VIEWPORTS[viewport])
    found = {}
    for site_page in PAGES:
        response = page.goto(site_url(site_page.name, language))
        assert response.status == 200
        assert page.locator("html").get_attribute("lang") == language
        assert page.locator("h1").count() == 1
        # "Try it free" on every page, and no page wider than the screen.
        assert page.locator(f'a[href="{reverse("account_signup")}"]').count() >= 1
        assert page.evaluate("document.documentElement.scrollWidth <= window.innerWidth")
        shots(page, f"{language}-{viewport}-{site_page.name}")
        violations = axe_violations(page)
        if violations:
            found[site_page.name] = violations
    assert found == {}


@needs_axe
@pytest.mark.parametrize("language", ["en", "it"])
def test_the_404_page_is_friendly_and_accessible(new_page, shots, language):
    page = new_page(locale="it-IT" if language == "it" else "en-GB", mobile=True)
    prefix = "/it" if language == "it" else ""

    response = page.goto(f"{prefix}/no-such-page/")

    assert response.status == 404
    assert page.locator("html").get_attribute("lang") == language
    shots(page, f"{language}-404")
    assert axe_violations(page) == []


def test_language_switch_is_remembered_on_the_next_visit(new_page, shots):
    page = new_page(mobile=True)
    page.goto("/pricing/")
    shots(page, "pricing-en")

    page.get_by_role("button", name="Italiano").click()

    page.wait_for_url("**/it/pricing/")
    assert page.locator("html").get_attribute("lang") == "it"
    assert page.get_by_role("heading", level=1).inner_text() == "Pacchetti e prezzi"
    assert any(c["name"] == settings.LANGUAGE_COOKIE_NAME and c["value"] == "it" for c in page.context.cookies())
    shots(page, "pricing-it")
    # Typing the plain address later brings the visitor back to their language.
    page.goto("/")
    page.wait_for_url("**/it/")
    assert page.locator("html").get_attribute("lang") == "it"
    page.get_by_role("button", name="English").click()
    page.wait_for_url(lambda url: url.endswith("/") and "/it/" not in url)
    assert page.locator("html").get_attribute("lang") == "en"


def test_try_it_free_leads_to_the_brand_sign_up(new_page, shots):
    page = new_page()
    page.goto("/")

    page.get_by_role("banner").get_by_role("link", name="Try it free").click()

    page.wait_for_url(f"**{reverse('account_signup')}")
    assert page.locator('input[type="email"]').count() == 1
    shots(page, "signup")
