"""The OpenAPI schema: generated without warnings, documented errors, and a bounded Schemathesis
run against the served schema: every operation, every check, zero failures."""

import os
import subprocess
import sys
from pathlib import Path

import pytest
from drf_spectacular.drainage import GENERATOR_STATS
from drf_spectacular.generators import SchemaGenerator

from campaigns.api_keys import api_key_create
from tests.api.conftest import ALL_SCOPES, ingest


def test_schema_generates_without_warnings_or_errors(db, capsys):
    GENERATOR_STATS.reset()
    schema = SchemaGenerator().get_schema(request=None, public=True)
    captured = capsys.readouterr()
    assert not GENERATOR_STATS, (dict(GENERATOR_STATS._warn_cache), dict(GENERATOR_STATS._error_cache))
    assert "Warning" not in captured.err and "Error" not in captured.err
    assert schema["components"]["securitySchemes"]["ApiKey"]["scheme"] == "bearer"
    create = schema["paths"]["/api/v1/events/"]["post"]
    assert "application/problem+json" in create["responses"]["422"]["content"]
    assert any(p["name"] == "Idempotency-Key" for p in create["parameters"])
    assert create["requestBody"]["content"]["application/json"]["examples"]
    assert "invalid_api_key" in schema["info"]["description"]


def test_schema_and_docs_are_served(db, client, settings):
    assert client.get("/api/schema/").status_code == 200
    docs = client.get("/api/docs/")
    # Served from our own static files, never a CDN's (drf-spectacular's default is jsDelivr). The
    # page carries a random CSRF token, so look for the hosts, not for the letters "cdn".
    assert docs.status_code == 200 and b"/static/drf_spectacular_sidecar/" in docs.content
    assert not any(host in docs.content for host in (b"cdn.jsdelivr.net", b"unpkg.com", b"cdnjs.cloudflare.com"))


@pytest.mark.postgres
@pytest.mark.django_db(transaction=True)
def test_schemathesis_against_the_served_schema(live_server, brand, campaign, settings, tmp_path):
    """Schemathesis (CLI, a separate process) runs every operation with every check through real
    HTTP, stateful links included: no 5xx, every status, content type, header and body as
    documented, schema-violating input refused, schema-valid input accepted (save the business
    rules tests/api/schemathesis.toml lists), undeclared methods 405. Bounded: 10 examples per
    operation, deterministic, two workers; about two minutes on two cores."""
    settings.API_RATE_LIMIT_PER_MINUTE = 1_000_000
    ingest(campaign)  # something to read
    token = api_key_create(brand=brand, name="schemathesis", scopes=ALL_SCOPES).token
    result = subprocess.run(
        [
            str(Path(sys.executable).with_name("st")),
            "--config-file",
            str(Path(__file__).with_name("schemathesis.toml")),
            "run",
            f"{live_server.url}/api/schema/?format=json",
            "--url",
            live_server.url,
            "-H",
            f"Authorization: Bearer {token}",
            "--checks",
            "all",
            "--max-examples",
            "10",
            "--generation-deterministic",
            "--workers",
            "2",
            "--request-timeout",
            "20",
        ],  # fmt: skip
        capture_output=True,
        text=True,
        timeout=300,
        cwd=tmp_path,  # the CLI leaves a .schemathesis/ folder in its working directory
        env={**os.environ, "NO_COLOR": "1", "SCHEMATHESIS_TELEMETRY": "false"},
    )
    assert result.returncode == 0, result.stdout[-6000:] + result.stderr[-2000:]


def test_a_browser_is_shown_the_schema_and_tools_get_the_openapi_type(client):
    shown = client.get("/api/schema/", HTTP_ACCEPT="text/html,application/xhtml+xml,*/*;q=0.8")
    assert shown["Content-Type"].startswith("text/plain") and "Content-Disposition" not in shown
    assert shown.content.startswith(b"openapi: 3")
    tool = client.get("/api/schema/")
    assert tool["Content-Type"].startswith("application/vnd.oai.openapi")
