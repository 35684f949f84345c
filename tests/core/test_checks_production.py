"""Production refuses to run without a shared cache or with an unguarded /metrics (issue 30)."""

import json
import os
import secrets
import subprocess
import sys
from pathlib import Path

import pytest
from django.test import override_settings

from core.checks_production import infrastructure_safety

ROOT = Path(__file__).resolve().parents[2]
REAL = {
    "PRODUCTION_CHECKS": True,
    "CACHE_URL": "redis://cache:6379/0",
    "METRICS_TOKEN": "m" * 12 + "E7tq-9Kz_2pXw4vL",
    "METRICS_ALLOWED_IPS": [],
}


def errors(**changes) -> list[str]:
    with override_settings(**{**REAL, **changes}):
        return [m.id for m in infrastructure_safety() if m.is_serious()]


def test_a_complete_configuration_passes():
    assert errors() == []
    assert errors(METRICS_TOKEN="", METRICS_ALLOWED_IPS=["10.0.0.0/8", "192.0.2.7"]) == []


@pytest.mark.parametrize(
    ("changes", "code"),
    [
        ({"CACHE_URL": ""}, "core.E143"),
        ({"METRICS_TOKEN": ""}, "core.E141"),
        ({"METRICS_TOKEN": "short"}, "core.E141"),
        ({"METRICS_ALLOWED_IPS": ["10.0.0.0/8", "scraper.internal"]}, "core.E142"),
    ],
)
def test_each_gap_is_an_error_that_says_what_to_set(changes, code):
    with override_settings(**{**REAL, **changes}):
        found = [m for m in infrastructure_safety() if m.id == code]
    assert found and all(m.is_serious() and m.hint.startswith("Set") for m in found)
    assert errors(**changes) == [code]


def test_outside_production_only_a_malformed_address_is_reported():
    assert errors(PRODUCTION_CHECKS=False, CACHE_URL="", METRICS_TOKEN="") == []
    assert errors(PRODUCTION_CHECKS=False, METRICS_ALLOWED_IPS=["nope"]) == ["core.E142"]


def test_production_settings_wire_the_pooler_db_metrics_and_a_closed_metrics_endpoint():
    script = (
        "import json, django; django.setup(); from django.conf import settings as s; "
        "from core.checks_production import pooler_safety; d = s.DATABASES['default']; "
        "print(json.dumps([d['ENGINE'], d['DISABLE_SERVER_SIDE_CURSORS'], d['OPTIONS'].get('prepare_threshold'), "
        "s.DATABASE_POOLER, s.METRICS_ALLOWED_IPS, [m.id for m in pooler_safety()]]))"
    )
    env = {
        **{k: v for k, v in os.environ.items() if not k.startswith(("METRICS_", "DATABASE_", "DB_"))},
        "DJANGO_SETTINGS_MODULE": "config.settings.production",
        "SECRET_KEY": secrets.token_urlsafe(64),
        "DATABASE_URL": "postgres://app:pw@pgbouncer:6432/joyback?pgbouncer=1",
    }
    done = subprocess.run([sys.executable, "-c", script], env=env, cwd=ROOT, capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    engine, no_cursors, threshold, pooler, allowed, problems = json.loads(done.stdout.strip().splitlines()[-1])
    assert engine == "django_prometheus.db.backends.postgresql"
    assert (no_cursors, threshold, pooler, allowed, problems) == (True, None, "pgbouncer", [], [])
