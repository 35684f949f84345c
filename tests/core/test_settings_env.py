"""Every setting the README documents is read from the environment (issue 16: the payout
settings were listed but changed nothing)."""

import json
import os
import re
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def _readme_variables() -> set[str]:
    text = (ROOT / "README.md").read_text()
    table = text.split("## Configuration", 1)[1].split("\n## ", 1)[0]
    first_cells = [line.split("|")[1] for line in table.splitlines() if line.startswith("| `")]
    return {name for cell in first_cells for name in re.findall(r"`([A-Z][A-Z0-9_]+)`", cell)}


def test_every_variable_in_the_readme_table_is_read_by_the_settings():
    source = "\n".join(p.read_text() for p in (ROOT / "config" / "settings").glob("*.py"))
    variables = _readme_variables()
    assert len(variables) > 40  # the table was found
    unread = sorted(v for v in variables if f'"{v}"' not in source)
    assert not unread, f"documented in the README but never read from the environment: {unread}"


PAYOUT_ENV = {
    "PAYOUT_APPROVAL_THRESHOLD_MINOR": ("approval_threshold_minor", "5000", 5000),
    "PAYOUT_BATCH_APPROVAL_THRESHOLD_MINOR": ("batch_approval_threshold_minor", "70000", 70000),
    "PAYOUT_MAX_ATTEMPTS": ("max_attempts", "2", 2),
    "PAYOUT_BACKOFF_BASE_SECONDS": ("backoff_base_seconds", "3", 3),
    "PAYOUT_BACKOFF_MAX_SECONDS": ("backoff_max_seconds", "40", 40),
    "PAYOUT_STALE_CLAIM_SECONDS": ("stale_claim_seconds", "15", 15),
    "PAYOUT_REQUEUE_AFTER_SECONDS": ("requeue_after_seconds", "300", 300),
    "PAYOUT_ENQUEUE_ON_PAYABLE": ("enqueue_on_payable", "true", True),  # tests run tasks inline: off by default
}


def test_payout_settings_from_the_environment_reach_the_code_that_uses_them():
    calls = ", ".join(f'"{fn}": conf.{fn}()' for fn, _, _ in PAYOUT_ENV.values())
    script = f"import json, django; django.setup(); from payouts import conf; print(json.dumps({{{calls}}}))"
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "config.settings.test"}

    def read(extra: dict) -> dict:
        done = subprocess.run(
            [sys.executable, "-c", script], env={**env, **extra}, cwd=ROOT, capture_output=True, text=True, timeout=60
        )
        assert done.returncode == 0, done.stderr
        return json.loads(done.stdout.strip().splitlines()[-1])

    defaults = read({})
    configured = read({name: raw for name, (_, raw, _) in PAYOUT_ENV.items()})
    for name, (fn, _, expected) in PAYOUT_ENV.items():
        assert configured[fn] == expected, name
        assert defaults[fn] != expected, f"{name}: pick a test value other than the default"
