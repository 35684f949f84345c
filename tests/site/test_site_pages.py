"""The public site (issue 28): every page in English at / and Italian at /it/, each telling search
engines about its translation; pricing read from the packages in the database; sitemap.xml,
robots.txt, the language switch, and the friendly 404 of production settings."""

import re
import xml.etree.ElementTree as ET
from pathlib import Path

import pytest
from django.conf import settings
from django.contrib.staticfiles import finders
from django.test import Client, override_settings
from django.urls import reverse
from django.utils import translation

from campaigns.models import Plan
from web.site.pages import PAGES

pytestmark = pytest.mark.django_db

HOST = "http://testserver"
PAGE_NAMES = [page.name for page in PAGES]


def url(name: str, language: str) -> str:
    with translation.override(language):
        return reverse(f"site:{name}")


def test_home_is_the_site_in_english_at_root_and_italian_at_it():
    assert url("home", "en") == "/"
    assert url("home", "it") == "/it/"
    assert url("pricing", "it") == "/it/pricing/"

    english = Client().get("/")
    italian = Client().get("/it/")

    assert english.status_code == 200
    assert '<html lang="en">' in english.content.decode()
    assert "JoyBack and Cashback, side by side" in english.content.decode()
    assert italian.status_code == 200
    assert '<html lang="it">' in italian.content.decode()
    assert "JoyBack e Cashback a confronto" in italian.content.decode()


@pytest.mark.parametrize("name", PAGE_NAMES)
@pytest.mark.parametrize("language", ["en", "it"])
def test_every_page_answers_with_canonical_hreflang_and_link_preview(name, language):
    response = Client().get(url(name, language))

    assert response.status_code == 200
    html = response.content.decode()
    assert f'<html lang="{language}">' in html
    assert f'<link rel="canonical" href="{HOST}{url(name, language)}">' in html
    assert f'<link rel="alternate" hreflang="en" href="{HOST}{url(name, "en")}">' in html
    assert f'<link rel="alternate" hreflang="it" href="{HOST}{url(name, "it")}">' in html
    assert f'<link rel="alternate" hreflang="x-default" href="{HOST}{url(name, "en")}">' in html
    for tag in ("og:title", "og:description", "og:url", "og:image", "og:locale"):
        assert f'property="{tag}"' in html
    assert 'name="twitter:card" content="summary_large_image"' in html
    # "Try it free" everywhere, pointing at the brand sign-up.
    assert f'href="{reverse("account_signup")}"' in html


@pytest.mark.parametrize("name", PAGE_NAMES)
def test_italian_pages_have_no_english_paragraphs_left(name):
    html = Client().get(url(name, "it")).content.decode()
    # Every English sentence of the templates is translated: the common English words of their
    # prose do not appear in Italian pages outside the code samples and brand names.
    prose = re.sub(r"<pre.*?</pre>|<head>.*?</head>|<code>.*?</code>", "", html, flags=re.S)
    text = re.sub(r"<[^>]+>", " ", prose)
    leftovers = re.findall(r"\b(the|and|your|with|you|what|every|money|people|paid)\b", text)
    assert leftovers == []


def test_pricing_shows_the_packages_from_the_database_in_each_language():
    english = Client().get("/pricing/").content.decode()
    italian = Client().get("/it/pricing/").content.decode()

    for plan in Plan.objects.filter(is_public=True):
        assert plan.name in english
        assert (plan.name_it or plan.name) in italian
    # Money in the locale's format, from the plan's minor units.
    assert "€499.00" in english
    assert "499,00\xa0€" in italian
    assert "10% of each reward" in english


def test_a_plan_edited_by_ops_changes_the_pricing_page():
    plan = Plan.objects.get(slug="tiktok-only")
    plan.name = "TikTok Pro"
    plan.name_it = "TikTok Pro IT"
    plan.highlights = "Up to a million views\nA dedicated manager"
    plan.monthly_fee_minor = 123456
    plan.fee_fixed_minor = 25
    plan.fee_bps = 150
    plan.monthly_actions = 20000
    plan.save()
    Plan.objects.filter(slug="whatsapp-with-reward").update(is_public=False)

    english = Client().get("/pricing/").content.decode()
    italian = Client().get("/it/pricing/").content.decode()

    assert "TikTok Pro" in english
    assert "A dedicated manager" in english
    assert "€1,234.56" in english
    assert "1.5% + €0.25 per reward" in english
    assert "Up to 20,000 rewarded actions a month" in english
    assert "WhatsApp-with-reward" not in english
    assert "TikTok Pro IT" in italian
    assert "1.234,56\xa0€" in italian
    assert "1,5% + 0,25\xa0€ a premio" in italian
    assert "Fino a 20.000 azioni premiate al mese" in italian


def test_pricing_falls_back_to_english_texts_when_the_italian_ones_are_empty():
    Plan.objects.filter(slug="cashback-api").update(name_it="", tagline_it="", highlights_it="")

    italian = Client().get("/it/pricing/").content.decode()

    assert "Classic post-purchase cashback, through the API alone." in italian


def test_sitemap_lists_every_page_in_both_languages_with_alternates():
    response = Client().get("/sitemap.xml")

    assert response.status_code == 200
    root = ET.fromstring(response.content)  # noqa: S314 - our own response, not untrusted input
    ns = {"s": "http://www.sitemaps.org/schemas/sitemap/0.9", "x": "http://www.w3.org/1999/xhtml"}
    locations = {loc.text for loc in root.findall("s:url/s:loc", ns)}
    expected = {f"{HOST}{url(name, language)}" for name in PAGE_NAMES for language in ("en", "it")}
    assert locations == expected
    first = root.find("s:url", ns)
    hreflangs = {link.get("hreflang") for link in first.findall("x:link", ns)}
    assert hreflangs == {"en", "it", "x-default"}


def test_robots_txt_allows_the_site_and_names_the_sitemap():
    response = Client().get("/robots.txt")

    assert response.status_code == 200
    assert response["Content-Type"].startswith("text/plain")
    body = response.content.decode()
    assert "Disallow: /admin/" in body
    assert "Disallow: /portal/" in body
    assert "Allow: /api/docs/" in body
    assert f"Sitemap: {HOST}/sitemap.xml" in body


def test_language_switch_remembers_the_choice():
    client = Client()

    switched = client.post(reverse("set_language"), {"language": "it", "next": "/pricing/"})

    assert switched.status_code == 302
    assert switched["Location"] == "/it/pricing/"
    assert client.cookies[settings.LANGUAGE_COOKIE_NAME].value == "it"
    # Back at an unprefixed address, the remembered choice brings them to the Italian page.
    again = client.get("/faq/")
    assert again.status_code == 302
    assert again["Location"] == "/it/faq/"
    # Choosing English again serves the English pages.
    client.post(reverse("set_language"), {"language": "en", "next": "/it/faq/"})
    assert client.get("/faq/").status_code == 200


def test_a_prefixed_address_is_served_in_its_language_whatever_the_cookie():
    client = Client()
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "en"

    response = client.get("/it/faq/")

    assert response.status_code == 200
    assert '<html lang="it">' in response.content.decode()


def test_the_site_prefix_leaves_the_portal_in_the_language_of_its_cookie():
    """Django's own LocaleMiddleware would serve every unprefixed address in English once the
    site uses i18n_patterns; the portal's Italian comes from the language cookie."""
    client = Client()
    client.cookies[settings.LANGUAGE_COOKIE_NAME] = "it"

    login = client.get(reverse("account_login"))

    assert login.status_code == 200
    assert login.headers["Content-Language"] == "it"


def test_cashback_api_page_shows_the_real_endpoint_and_auth_header():
    html = Client().get("/cashback-api/").content.decode()

    assert f"{HOST}/api/v1/events/" in html
    assert "Authorization: Bearer" in html
    assert '"type": "purchase"' in html
    assert f'href="{reverse("api-docs")}"' in html


def test_admin_stays_at_admin():
    response = Client().get("/admin/")

    assert response.status_code == 302
    assert response["Location"].startswith("/admin/login/")


@override_settings(DEBUG=False)
@pytest.mark.parametrize(("path", "language"), [("/no-such-page/", "en"), ("/it/no-such-page/", "it")])
def test_unknown_address_gets_the_friendly_404(path, language):
    response = Client().get(path)

    assert response.status_code == 404
    html = response.content.decode()
    assert f'<html lang="{language}">' in html
    assert '<meta name="robots" content="noindex">' in html
    assert f'href="{url("home", language)}"' in html


def test_the_link_preview_image_and_stylesheet_are_served_from_our_static_files():
    assert finders.find("site/og-image.jpg")
    assert finders.find("site/site.css")
    html = Client().get("/").content.decode()
    assert f'content="{HOST}/static/site/og-image.jpg"' in html
    # No request leaves the site: no external stylesheet, font or script.
    assert not re.search(r'(src|href)="https?://(?!testserver/)', html)


def test_pages_answer_head_requests_as_monitors_and_crawlers_send_them():
    assert Client().head("/").status_code == 200
    assert Client().head("/it/pricing/").status_code == 200
    assert Client().post("/").status_code == 405


def test_the_500_page_has_no_template_logic_to_fail_in_turn():
    html = (Path(settings.BASE_DIR) / "templates" / "500.html").read_text()

    assert "{%" not in html
    assert "{{" not in html


def test_joyback_page_says_which_actions_are_verified_and_which_are_only_attested():
    html = Client().get("/joyback/").content.decode()

    assert html.count("Verified first-party</p>") == 4
    assert html.count("Partner-attested or reviewed</p>") == 1
    assert "TikTok does not let anyone verify likes and comments first-party" in html
