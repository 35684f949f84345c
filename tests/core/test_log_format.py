"""LOG_FORMAT=json writes one JSON object per line, masked like the plain lines; Sentry events are
masked the same way before they leave (core.error_reporting)."""

import io
import json
import logging

from core.error_reporting import scrubbed
from core.logging import JsonFormatter, RedactPersonalData


def test_json_lines_carry_the_masked_message_traceback_and_plain_extras():
    stream = io.StringIO()
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    handler.addFilter(RedactPersonalData())
    logger = logging.getLogger("tests.json")
    logger.addHandler(handler)
    try:
        try:
            raise ValueError("bad iban NL91ABNA0417164300")
        except ValueError:
            logger.error("payout %s to %s failed", 42, "fan@example.com", exc_info=True, extra={"payout_id": 42})
    finally:
        logger.removeHandler(handler)
    entry = json.loads(stream.getvalue().strip())
    assert entry["level"] == "ERROR" and entry["logger"] == "tests.json"
    assert entry["message"] == "payout 42 to [email] failed"
    assert "[iban]" in entry["traceback"] and "NL91ABNA" not in entry["traceback"]
    assert entry["payout_id"] == 42
    assert entry["time"].endswith("+00:00")


def test_sentry_events_are_masked_before_they_leave():
    event = {
        "message": "call +39 347 123 4567",
        "exception": {"values": [{"value": "no account NL91ABNA0417164300", "type": "ApplicationError"}]},
        "breadcrumbs": [{"message": "sent to fan@example.com"}],
        "level": "error",
        "extra": {"count": 3},
    }
    clean = scrubbed(event)
    assert clean["message"] == "call [phone]"
    assert clean["exception"]["values"][0] == {"value": "no account [iban]", "type": "ApplicationError"}
    assert clean["breadcrumbs"][0]["message"] == "sent to [email]"
    assert clean["extra"] == {"count": 3}
