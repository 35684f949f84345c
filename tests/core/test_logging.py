"""The app's log lines carry no personal data (issue 18): every configured handler masks e-mails,
phone numbers, IBANs and IPs, so erasure has no log to rewrite."""

import io
import logging
from contextlib import contextmanager

from core.logging import RedactPersonalData, redact

EMAIL = "giulia.log@example.com"
PHONE = "+39 347 987 6543"
WA_ID = "393479876543"
IBAN = "IT60X0542811101000000123456"
IBAN_PRINTED = "IT60 X054 2811 1010 0000 0123 456"
IP = "203.0.113.77"
PERSONAL = [EMAIL, PHONE, WA_ID, IBAN, IBAN_PRINTED, IP, "3479876543", "X0542811101"]


def app_handlers() -> list[logging.Handler]:
    """Every handler that writes somewhere, on every logger, except the ones pytest adds."""
    loggers = [logging.getLogger(), *(logging.getLogger(name) for name in logging.root.manager.loggerDict)]
    handlers = {h for lg in loggers for h in lg.handlers if not isinstance(h, logging.NullHandler)}
    return [h for h in handlers if not type(h).__module__.startswith("_pytest")]


@contextmanager
def written_by_the_app():
    """What the configured handlers write, in one buffer."""
    buffer = io.StringIO()
    streams = [h for h in app_handlers() if isinstance(h, logging.StreamHandler)]
    assert streams, "the settings configure no stream handler"
    previous = [h.setStream(buffer) for h in streams]
    try:
        yield buffer
    finally:
        for handler, stream in zip(streams, previous, strict=True):
            handler.setStream(stream)


def test_every_handler_the_settings_configure_masks_personal_data():
    handlers = app_handlers()
    assert handlers
    unmasked = [h for h in handlers if not any(isinstance(f, RedactPersonalData) for f in h.filters)]
    assert unmasked == []


def test_a_line_with_an_email_a_phone_and_an_iban_is_written_without_them():
    with written_by_the_app() as out:
        logging.getLogger("payouts.services.execute").warning(
            "payout 4711 for %s (%s, wa %s) to %s / %s from %s", EMAIL, PHONE, WA_ID, IBAN, IBAN_PRINTED, IP
        )
        logging.getLogger("security").warning("refused %s", {"email": EMAIL, "ip": IP})
        logging.getLogger("django.request").error("Bad request for %s", EMAIL, extra={"status_code": 400})
        try:
            raise ValueError(f'duplicate key (email)=({EMAIL}) for IBAN "{IBAN}"')
        except ValueError:
            logging.getLogger("recipients.services.identity").exception("could not store %s", WA_ID)
        logging.getLogger("campaigns.tiktok").error("no format %s %s", EMAIL)

    written = out.getvalue()
    assert "payout 4711 for" in written and "ValueError: duplicate key" in written  # the lines are there
    assert "[email]" in written and "[phone]" in written and "[iban]" in written and "203.0.113.0/24" in written
    assert [value for value in PERSONAL if value in written] == []


def test_ids_amounts_dates_and_references_stay_legible():
    line = (
        "payout 123456789 of 12.50 EUR at 2026-01-15 10:00:00 took 10.9 ms; batch JBB260115ABCDEF123456-20260115, "
        "uetr 5f1c2d3e-4a5b-4c6d-8e9f-0a1b2c3d4e5f, lines 12345-12400, epoch 1749416383, masked IT60 **** **** 3456"
    )
    assert redact(line) == line


def test_phone_numbers_as_people_type_them_are_masked():
    for number in (PHONE, WA_ID, "3479876543", "0039 347 9876543", "+31 (0)6 1234 5678", "347.987.6543"):
        assert redact(f"number {number} end") == "number [phone] end", number
