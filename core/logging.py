"""Logging helpers used by the settings' LOGGING dict.

The app's log lines carry no personal data, so erasing a person never needs a log rewritten:
``RedactPersonalData`` sits on every handler (``config/settings/base.py``) and masks what a
pattern can recognise — e-mail addresses, phone numbers, IBANs, IP addresses — in the message
with its arguments, the rendered traceback, the stack and string ``extra`` values. What no
pattern recognises (a name, a TikTok open_id) must not be logged at all: log ids instead.
"""

import ipaddress
import json
import logging
import re
from datetime import UTC, datetime

import phonenumbers
from django.conf import settings


class NoTracebackBelow500(logging.Filter):
    """A refused request (403, 404 …) is logged as one line: its traceback says nothing new and
    buried the real errors (issue 16). Server errors keep theirs."""

    def filter(self, record: logging.LogRecord) -> bool:
        if getattr(record, "status_code", 500) < 500:
            record.exc_info = None
            record.exc_text = None
        return True


EMAIL = re.compile(r"[\w.!#$%&'*+/=?^`{|}~-]+(?:@|%40)[\w-]+(?:\.[\w-]+)+")
# Compact in any case (as typed), or printed in groups of four.
IBAN = re.compile(r"\b(?:[A-Za-z]{2}\d{2}[A-Za-z0-9]{11,30}|[A-Z]{2}\d{2}(?: [A-Z0-9]{4}){2,7}(?: [A-Z0-9]{1,3})?)\b")
# A run of digits with the separators people type; whether it is a phone number is decided below.
PHONE = re.compile(r"(?<![\w+/.-])(?:\+|00)?\d(?:[ ./()-]{0,2}\d){6,16}(?!\w|[./-]\d)")
ISO_DATE = re.compile(r"\d{4}-\d{2}-\d{2}")
IPV4_NETWORK = re.compile(r"(?:\d{1,3}\.){3}\d{1,3}(?:/\d{1,2})?")
IPV4 = re.compile(r"(?<![\w.])(?:\d{1,3}\.){3}\d{1,3}(?![\w.]?\d)")
IPV6 = re.compile(r"(?<![\w:])(?:[0-9A-Fa-f]{0,4}:){2,7}[0-9A-Fa-f]{0,4}(?![\w:])")

# LogRecord's own attributes; anything else on a record came in through ``extra``.
_RECORD_ATTRIBUTES = set(vars(logging.LogRecord("", 0, "", 0, "", (), None))) | {"message", "asctime"}
_traceback_formatter = logging.Formatter()


def redact(text: str) -> str:
    """``text`` with e-mails, IBANs and phone numbers replaced by ``[email]``, ``[iban]``,
    ``[phone]``, and IP addresses cut to their network (/24, /48): enough to see a flood, not who."""
    text = EMAIL.sub("[email]", text)
    text = IBAN.sub("[iban]", text)
    text = IPV4.sub(_ip_network, text)
    text = IPV6.sub(_ip_network, text)
    return PHONE.sub(_phone, text)


def _ip_network(match: re.Match) -> str:
    try:
        address = ipaddress.ip_address(match.group())
    except ValueError:
        return match.group()
    prefix = 24 if address.version == 4 else 48
    return str(ipaddress.ip_network(f"{address}/{prefix}", strict=False))


def _phone(match: re.Match) -> str:
    """Digits with ``+`` or ``00`` in front are a phone number; a bare run of 9 to 15 digits is one
    when it is a valid number read internationally (a WhatsApp id: ``393471234567``) or in the
    default region. Shorter runs, dates and ids that are no valid number stay as they are."""
    candidate = match.group()
    if ISO_DATE.match(candidate) or IPV4_NETWORK.fullmatch(candidate):
        return candidate
    digits = re.sub(r"\D", "", candidate)
    if candidate.startswith("+") or candidate.startswith("00"):
        return "[phone]"
    if not 9 <= len(digits) <= 15:
        return candidate
    region = getattr(settings, "PHONE_DEFAULT_REGION", "IT")
    for number, where in ((f"+{digits}", None), (digits, region)):
        try:
            if phonenumbers.is_valid_number(phonenumbers.parse(number, where)):
                return "[phone]"
        except phonenumbers.NumberParseException:
            continue
    return candidate


class RedactPersonalData(logging.Filter):
    """Masks personal data in every record a handler writes (see the module docstring).

    The record itself is rewritten — message formatted with its arguments, traceback rendered —
    so a handler that renders ``exc_info`` itself (a mail or error-tracker handler) has no clear
    copy left to render. A message whose arguments do not format is written without them."""

    def filter(self, record: logging.LogRecord) -> bool:
        try:
            message = record.getMessage()
        except (TypeError, ValueError, KeyError):  # a broken format: logging would print the raw arguments
            message = f"{record.msg} [arguments withheld: they do not format]"
        record.msg, record.args = redact(str(message)), ()
        if record.exc_info:
            record.exc_text = _traceback_formatter.formatException(record.exc_info)
            record.exc_info = None
        if record.exc_text:
            record.exc_text = redact(record.exc_text)
        if record.stack_info:
            record.stack_info = redact(record.stack_info)
        for key, value in list(vars(record).items()):
            if key not in _RECORD_ATTRIBUTES and isinstance(value, str):
                setattr(record, key, redact(value))
        return True


class JsonFormatter(logging.Formatter):
    """One JSON object per line (``LOG_FORMAT=json``): time (UTC, ISO 8601), level, logger,
    message, the traceback when there is one, and the record's plain ``extra`` values. It formats what
    ``RedactPersonalData`` left on the record, so it writes nothing the plain format would not."""

    def format(self, record: logging.LogRecord) -> str:
        entry = {
            "time": datetime.fromtimestamp(record.created, UTC).isoformat(timespec="milliseconds"),
            "level": record.levelname,
            "logger": record.name,
            "message": record.getMessage(),
        }
        if record.exc_info and not record.exc_text:
            record.exc_text = self.formatException(record.exc_info)
        if record.exc_text:
            entry["traceback"] = record.exc_text
        if record.stack_info:
            entry["stack"] = record.stack_info
        # Plain values only: an object's text (Django's ``request`` extra: its path and query) was
        # never through the redaction, which rewrites the string values.
        for key, value in vars(record).items():
            if (
                key not in _RECORD_ATTRIBUTES
                and key not in entry
                and isinstance(value, str | int | float | bool | None)
            ):
                entry[key] = value
        return json.dumps(entry, ensure_ascii=False)
