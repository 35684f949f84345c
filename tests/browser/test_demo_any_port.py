"""The demo as `make run` starts it — local settings, its own SQLite database, web and worker —
on a port other than 8000 (issue 16: the TikTok login ended on "Third-Party Login Failure" there,
because the fake TikTok's server-side URL was fixed to port 8000). A person claims through the
fake TikTok login and sees "paid"."""

import os
import re
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
GOOD_IBAN = "DE89370400440532013000"

pytestmark = pytest.mark.slow


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture
def demo(tmp_path):
    """`make run PORT=<free port>` with its own SQLite database; stopped as a person would, with
    Ctrl-C (SIGINT to the terminal's process group), which must end it cleanly within 10 s."""
    port = _free_port()
    assert port != 8000
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'demo.sqlite3'}",
        "SANDBOX_STORE_PATH": str(tmp_path / "sandbox-bank.sqlite3"),
    }
    for name in ("DJANGO_SETTINGS_MODULE", "CLAIM_BASE_URL", "TIKTOK_API_BASE_URL", "TIKTOK_AUTH_BASE_URL", "Q_SYNC"):
        env.pop(name, None)
    log_path = tmp_path / "make-run.log"
    log = log_path.open("w")
    make = subprocess.Popen(
        ["make", "--no-print-directory", "run", f"PORT={port}", f"PYTHON={sys.executable}"],
        env=env,
        cwd=ROOT,
        stdout=log,
        stderr=subprocess.STDOUT,
        start_new_session=True,  # its own process group: the "terminal" Ctrl-C goes to
        # A terminal delivers Ctrl-C; a suite started in the background (`make test &`) inherits
        # SIGINT ignored, which no shell can trap again.
        preexec_fn=lambda: signal.signal(signal.SIGINT, signal.SIG_DFL),
    )
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 240  # migrate + seed on a new database first
    while True:
        try:
            urllib.request.urlopen(f"{base}/c/sole-shoes/summer-joy/", timeout=2)  # noqa: S310 - loopback
            break
        except OSError:
            assert make.poll() is None, log_path.read_text()
            assert time.monotonic() < deadline, log_path.read_text()
            time.sleep(1)
    yield base
    os.killpg(make.pid, signal.SIGINT)
    started = time.monotonic()
    try:
        make.wait(timeout=10)
    except subprocess.TimeoutExpired:
        os.killpg(make.pid, signal.SIGKILL)
        pytest.fail(f"make run still running 10 s after Ctrl-C:\n{log_path.read_text()[-3000:]}")
    log.close()
    output = log_path.read_text()
    stopped = output[output.rfind("Web server stopped.") - 400 :]
    assert time.monotonic() - started < 10
    assert "Web server stopped." in output and "Workers stopped." in output, output[-3000:]
    assert "Traceback" not in stopped and "Segmentation" not in output and "Error" not in stopped, stopped


def test_the_demo_on_another_port_pays_a_tiktok_login_claim(browser, shots, demo):
    context = browser.new_context(base_url=demo, locale="en-GB", viewport={"width": 390, "height": 844})
    page = context.new_page()
    page.set_default_timeout(20_000)
    shots.pages.append(page)
    try:
        page.goto("/c/sole-shoes/summer-joy/")
        page.click("[data-testid=tiktok-login]")
        page.wait_for_selector("text=Fake TikTok")
        page.fill("input[name=name]", "Porta Diversa")
        page.click("#authorize")
        page.wait_for_url(re.compile(r"/tiktok/$"))
        shots(page, "after-tiktok-login")
        assert "Third-Party Login Failure" not in page.content()
        page.fill("input[name=name]", "Porta Diversa")
        if page.locator("input[name=email]").count():
            page.fill("input[name=email]", "porta@person.example")
        page.fill("input[name=iban]", GOOD_IBAN)
        page.check("input[name=consent]")
        page.click("[data-testid=payout-submit]")
        page.wait_for_url(re.compile(r"/c/s/"))
        status_url = page.url
        deadline = time.monotonic() + 60
        while page.get_attribute("[data-testid=claim-status]", "data-state") != "paid":
            assert time.monotonic() < deadline, page.inner_text("main")
            time.sleep(1)
            page.goto(status_url)
        shots(page, "paid")
    finally:
        context.close()

    # The demo ops login reconciles what was just paid: the dashboard offers the demo statement.
    staff = browser.new_context(base_url=demo, locale="en-GB", viewport={"width": 1280, "height": 900})
    ops = staff.new_page()
    ops.set_default_timeout(20_000)
    shots.pages.append(ops)
    try:
        ops.goto("/admin/login/?next=/admin/reconciliation/dashboard/")
        ops.fill("input[name=username]", "ops")
        ops.fill("input[name=password]", "ops-demo-password")
        ops.click("input[type=submit]")
        ops.wait_for_url(re.compile(r"/admin/reconciliation/dashboard/$"))
        shots(ops, "ops-dashboard-before")
        ops.click("[data-testid=demo-statement]")
        ops.wait_for_selector(".messagelist")
        message = ops.inner_text(".messagelist")
        shots(ops, "ops-dashboard-after-demo-statement")
        assert "1 payout(s)" in message and "Matched 1" in message, message
        for page_path in ("/admin/campaigns/rewardinreview/", "/admin/payouts/payout/", "/admin/recipients/person/"):
            ops.goto(page_path)
            assert "not part of your role" not in ops.content(), page_path
        shots(ops, "ops-people")
    finally:
        staff.close()
