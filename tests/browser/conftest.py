"""Real-browser tests: Playwright driving Debian's chromium (never a downloaded browser) against
pytest-django's live server. Screenshots of every page go to test-artifacts/screenshots/; a
failing test also leaves a screenshot of where it stopped. Skipped, with the reason shown, when
/usr/bin/chromium or the playwright package is missing."""

import os
import re
from pathlib import Path

import pytest

from tests.payouts.payout_fixtures import debtor, sandbox  # noqa: F401 - fixtures
from tests.portal.conftest import fake_tiktok  # noqa: F401 - fixture

CHROMIUM = "/usr/bin/chromium"
SHOTS = Path(__file__).resolve().parents[2] / "test-artifacts" / "screenshots"

# Playwright's sync API runs an event loop in this thread; the test's own ORM calls (importing a
# statement, running the payout worker) are still plain synchronous code.
os.environ.setdefault("DJANGO_ALLOW_ASYNC_UNSAFE", "true")


def pytest_collection_modifyitems(config, items):
    reason = None
    if not Path(CHROMIUM).exists():
        reason = f"browser tests need {CHROMIUM} (apt-get install chromium)"
    else:
        try:
            import playwright  # noqa: F401
        except ImportError:
            reason = "browser tests need the playwright package (pip install playwright)"
    if reason:
        for item in items:
            if "tests/browser/" in str(item.fspath):
                item.add_marker(pytest.mark.skip(reason=reason))


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_makereport(item, call):
    outcome = yield
    report = outcome.get_result()
    setattr(item, f"rep_{report.when}", report)


@pytest.fixture(scope="session")
def browser():
    from playwright.sync_api import sync_playwright

    with sync_playwright() as p:
        browser = p.chromium.launch(
            executable_path=CHROMIUM,
            args=["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking"],
        )
        yield browser
        browser.close()


class Shots:
    """Numbered screenshots per test: <test>-<nn>-<name>.png."""

    def __init__(self, test_name: str):
        self.prefix = re.sub(r"[^a-z0-9_]+", "_", test_name.lower())
        self.n = 0
        self.pages = []
        SHOTS.mkdir(parents=True, exist_ok=True)

    def __call__(self, page, name: str) -> Path:
        self.n += 1
        path = SHOTS / f"{self.prefix}-{self.n:02d}-{name}.png"
        page.screenshot(path=str(path), full_page=True)
        return path


@pytest.fixture
def shots(request):
    shots = Shots(request.node.name)
    yield shots
    failed = getattr(request.node, "rep_call", None)
    if failed is not None and failed.failed:
        for i, page in enumerate(shots.pages):
            if not page.is_closed():
                page.screenshot(path=str(SHOTS / f"{shots.prefix}-FAILED-{i}.png"), full_page=True)


@pytest.fixture
def new_page(browser, shots, live_server):
    """A fresh browser context (its own cookies: a different person) per call."""
    contexts = []

    def make(locale: str = "en-GB", mobile: bool = False):
        viewport = {"width": 390, "height": 844} if mobile else {"width": 1280, "height": 900}
        context = browser.new_context(base_url=live_server.url, locale=locale, viewport=viewport)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(15_000)
        shots.pages.append(page)
        return page

    yield make
    for context in contexts:
        context.close()
