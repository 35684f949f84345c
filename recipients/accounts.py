"""Bank accounts beyond IBAN: which fields an account in a currency needs, and turning what a
person typed into an ``AccountInfo`` (``account_normalise``) or a clear error.

The fields come from the PSP's documented account-requirements contract (Wise's
``GET /v1/account-requirements``): a list of account types (``sort_code``, ``aba``, ``iban`` …),
each with fields carrying ``key``, ``type``, ``required``, ``minLength``/``maxLength``,
``validationRegexp``, ``valuesAllowed``, ``refreshRequirementsOnChange`` and ``validationAsync``.
The payouts app registers the PSP as the source (``requirements_source_register``); without one
(the demo, most tests) the built-in copy below answers, in the same shape and read by the same
parser. Answers are cached in Django's cache for ``ACCOUNT_REQUIREMENTS_CACHE_SECONDS``: they
change rarely and every claim page of a non-euro campaign asks.

An account is checked in this order: the contract's rules (required, lengths, pattern, allowed
values); what a maintained library knows (schwifty for IBANs, python-stdnum's ABA routing
checksum); then the contract's ``validationAsync`` checks through the source — for UK accounts
that is the PSP's sort code / account number modulus check, because no maintained Python library
carries Pay.UK's current modulus weight tables. A check the source cannot answer (PSP down) is
skipped: the rail refuses a wrong account later and the person is asked for another.

Local fields are kept under the PSP's keys (``sortCode``, ``abartn``, ``address.city``), the
vocabulary the rail adapter sends back unchanged.
"""

import hashlib
import logging
import re
import unicodedata
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Protocol
from urllib.parse import urlencode

import pycountry
from django.conf import settings
from django.core.cache import cache
from stdnum.us import rtn

from core.exceptions import ApplicationError, InvalidInput
from core.money import validate_currency
from recipients.normalise import IBAN, AccountInfo, iban_normalise

logger = logging.getLogger(__name__)

# What the engine always sends for these keys: the people it pays are private persons.
FIXED_VALUES = {"legalType": "PRIVATE"}
# Keys that describe the holder or the account's use, not which account it is: left out of the
# fingerprint, so the same account with a new address is still the same account.
_NOT_IDENTITY = re.compile(r"legalType|accountType|address\..*|email|phoneNumber")
# Bank and account codes: typed with spaces, dashes or in lower case by people, stored compact
# and upper case, so one account has one fingerprint however it was typed.
_COMPACT_KEYS = frozenset(
    {"sortCode", "accountNumber", "abartn", "iban", "swiftCode", "bic", "bsbCode", "ifscCode", "clabe", "bankCode"}
)
_LOCAL_COUNTRY = {"sort_code": "GB", "aba": "US"}
_MAX_VALUE = 200


@dataclass(frozen=True)
class AccountField:
    key: str
    name: str
    type: str = "text"  # text, select, radio, date
    required: bool = False
    example: str = ""
    min_length: int | None = None
    max_length: int | None = None
    pattern: str = ""
    choices: tuple[tuple[str, str], ...] = ()  # (key, name)
    refresh_on_change: bool = False
    check_url: str = ""
    check_params: tuple[tuple[str, str], ...] = ()  # (field key, the check's query parameter)


@dataclass(frozen=True)
class AccountType:
    type: str
    title: str
    fields: tuple[AccountField, ...]

    @property
    def asked(self) -> tuple[AccountField, ...]:
        """The fields a person fills in (not those the engine fixes)."""
        return tuple(f for f in self.fields if f.key not in FIXED_VALUES)


class RequirementsSource(Protocol):
    """A PSP that documents account requirements (``payouts.rails.psp_api.WiseRail``)."""

    def account_requirements(self, *, currency: str, kind: str = "", details: Mapping[str, str] | None = None) -> list:
        """The raw contract for accounts in ``currency``; with ``details`` of a ``kind`` of
        account, refreshed for them. Raises ApplicationError when it cannot answer."""

    def account_field_check(self, *, url: str, params: Mapping[str, str]) -> str:
        """A ``validationAsync`` check: "" when the value passed, else the PSP's message.
        Raises ApplicationError when it cannot tell."""


_sources: list[Callable[[], RequirementsSource | None]] = []


def requirements_source_register(factory: Callable[[], RequirementsSource | None]) -> None:
    """Called from a higher app's ``AppConfig.ready()``: ``factory`` returns the configured source,
    or None while the PSP is not configured (then the built-in contract answers)."""
    if factory not in _sources:
        _sources.append(factory)


def _source() -> RequirementsSource | None:
    for factory in _sources:
        source = factory()
        if source is not None:
            return source
    return None


def account_types(
    *, currency: str, kind: str = "", refresh: Mapping[str, str] | None = None
) -> tuple[AccountType, ...]:
    """The account types a person paid in ``currency`` may give, from the PSP's contract (cached),
    else the built-in one. ``refresh`` holds the values a ``kind`` of account has for fields
    marked ``refreshRequirementsOnChange`` (a country), for the refined contract; only values the
    contract offers for such a field are sent to the PSP."""
    if refresh:
        base = account_types(currency=currency, kind=kind)
        refresh = _offered(next((t for t in base if t.type == kind), None), refresh)
        if not refresh:
            return base
    refresh = dict(sorted((refresh or {}).items()))
    # Hashed: the kind and the refreshing values come from people and partners, and a cache key
    # must be short plain text whatever they typed.
    digest = hashlib.sha256(f"{currency}:{kind}:{urlencode(refresh)}".encode()).hexdigest()
    key = f"account-requirements:{digest}"
    found = cache.get(key)
    if found is not None:
        return found
    source, raw, seconds = _source(), None, settings.ACCOUNT_REQUIREMENTS_CACHE_SECONDS
    if source is not None:
        try:
            raw = source.account_requirements(currency=currency, kind=kind, details=refresh or None)
        except ApplicationError as exc:
            logger.warning("account requirements unavailable, using the built-in ones", extra={"code": exc.code})
            seconds = 60  # try the PSP again soon
    types = account_types_parse(raw if raw is not None else builtin_requirements(currency=currency, refresh=refresh))
    cache.set(key, types, seconds)
    return types


def _offered(account_type: AccountType | None, refresh: Mapping[str, str]) -> dict[str, str]:
    """The refreshing values a person may send: each a choice of a field that refreshes. Anything
    else would be one PSP request (and one cache entry) per value an attacker makes up."""
    fields = {f.key: f for f in account_type.fields} if account_type else {}
    return {
        key: value
        for key, value in refresh.items()
        if key in fields
        and fields[key].refresh_on_change
        and fields[key].choices
        and value in {choice for choice, _ in fields[key].choices}
    }


def account_types_parse(raw) -> tuple[AccountType, ...]:
    """The contract's JSON as values; entries that are not of its shape are skipped, since the
    answer comes from outside."""
    types = []
    for entry in raw if isinstance(raw, list) else []:
        if not isinstance(entry, dict) or not isinstance(entry.get("type"), str):
            continue
        fields = []
        for group in entry.get("fields") or []:
            for item in (group.get("group") or []) if isinstance(group, dict) else []:
                if isinstance(item, dict) and isinstance(item.get("key"), str):
                    fields.append(_field(item, group.get("name")))
        types.append(
            AccountType(type=entry["type"], title=str(entry.get("title") or entry["type"]), fields=tuple(fields))
        )
    return tuple(types)


def _field(item: dict, group_name) -> AccountField:
    check = item.get("validationAsync") if isinstance(item.get("validationAsync"), dict) else {}
    return AccountField(
        key=item["key"],
        name=str(item.get("name") or group_name or item["key"]),
        type=str(item.get("type") or "text"),
        required=bool(item.get("required")),
        example=str(item.get("example") or ""),
        min_length=item.get("minLength") if isinstance(item.get("minLength"), int) else None,
        max_length=item.get("maxLength") if isinstance(item.get("maxLength"), int) else None,
        pattern=str(item.get("validationRegexp") or ""),
        choices=tuple(
            (str(v["key"]), str(v.get("name") or v["key"]))
            for v in item.get("valuesAllowed") or []
            if isinstance(v, dict) and "key" in v
        ),
        refresh_on_change=bool(item.get("refreshRequirementsOnChange")),
        check_url=str(check.get("url") or ""),
        check_params=tuple(
            (str(p["key"]), str(p.get("parameterName") or p["key"]))
            for p in check.get("params") or []
            if isinstance(p, dict) and "key" in p
        ),
    )


def account_normalise(*, kind: str, currency: str, details: Mapping[str, str]) -> AccountInfo:
    """Validate an account of type ``kind`` for payouts in ``currency`` (``details`` under the
    contract's keys; an IBAN as ``{"iban": …}``). Returns the canonical ``AccountInfo``.

    Raises InvalidInput: ``invalid_iban``; ``invalid_account`` with ``details["fields"]`` mapping
    each wrong field's key to what is wrong, in words a person can act on."""
    if kind == IBAN:
        return iban_normalise(str(details.get("iban") or ""))
    currency = validate_currency(currency)  # InvalidInput(unknown_currency): never a PSP question
    known = {t.type: t for t in account_types(currency=currency)}
    account_type = known.get(kind)
    if account_type is None:
        choices = ", ".join(sorted(known)) or "none"
        raise InvalidInput(
            f"A {currency or '(no currency)'} account cannot be of type '{kind}' (known: {choices}).",
            code="invalid_account",
            details={"fields": {"type": f"Choose one of: {choices}."}},
        )
    values = {key: _compact(key, value) for key, value in details.items()}
    refresh = {f.key: values[f.key] for f in account_type.fields if f.refresh_on_change and values.get(f.key)}
    if refresh:
        refined = {t.type: t for t in account_types(currency=currency, kind=kind, refresh=refresh)}.get(kind)
        account_type = refined or account_type
    unknown = sorted(set(values) - {f.key for f in account_type.fields})
    if unknown:
        raise InvalidInput(
            f"Unknown field(s) for a {kind} account: {', '.join(unknown)}.",
            code="invalid_account",
            details={"fields": dict.fromkeys(unknown, "Not a field of this kind of account.")},
        )
    problems: dict[str, str] = {}
    kept: dict[str, str] = {}
    for field in account_type.fields:
        value = FIXED_VALUES.get(field.key) or values.get(field.key, "")
        problem = _field_problem(field, value)
        if problem:
            problems[field.key] = problem
        elif value:
            kept[field.key] = value
    problems = problems or _library_problems(kind, kept) or _source_problems(account_type, kept)
    if problems:
        raise InvalidInput(" ".join(problems.values()), code="invalid_account", details={"fields": problems})
    return _account_info(kind=kind, currency=currency, values=kept)


def _compact(key: str, value) -> str:
    # NFKC: full-width or other compatibility digits become ASCII before any pattern sees them.
    text = unicodedata.normalize("NFKC", value).strip() if isinstance(value, str) else ""
    return re.sub(r"[\s\-]", "", text).upper() if key in _COMPACT_KEYS else text


def _field_problem(field: AccountField, value: str) -> str:
    if not value:
        return f"{field.name} is required." if field.required else ""
    if len(value) > _MAX_VALUE:
        return f"{field.name} is too long."
    if field.min_length is not None and len(value) < field.min_length:
        return f"{field.name} needs at least {field.min_length} characters."
    if field.max_length is not None and len(value) > field.max_length:
        return f"{field.name} takes at most {field.max_length} characters."
    if field.choices and value not in {key for key, _ in field.choices}:
        return f"Choose a value for {field.name} from the list."
    try:
        if field.pattern and not re.search(field.pattern, value):
            example = f" For example {field.example}." if field.example else ""
            return f"{field.name} does not have the right format.{example}"
    except re.error:
        logger.warning("unusable validationRegexp in the account requirements", extra={"field": field.key})
    return ""


def _library_problems(kind: str, values: dict[str, str]) -> dict[str, str]:
    if kind == "aba" and values.get("abartn") and not rtn.is_valid(values["abartn"]):
        return {"abartn": "The ABA routing number is not valid: its check digit is wrong. Please check it for a typo."}
    return {}


def _source_problems(account_type: AccountType, values: dict[str, str]) -> dict[str, str]:
    source = _source()
    if source is None:
        return {}
    problems = {}
    for field in account_type.fields:
        if not field.check_url or field.key not in values:
            continue
        params = {param: values[key] for key, param in field.check_params if key in values}
        try:
            message = source.account_field_check(url=field.check_url, params=params)
        except ApplicationError as exc:
            logger.warning("account field check unavailable, skipped", extra={"field": field.key, "code": exc.code})
            continue
        if message:
            problems[field.key] = message
    return problems


def _account_info(*, kind: str, currency: str, values: dict[str, str]) -> AccountInfo:
    country = _LOCAL_COUNTRY.get(kind) or currency[:2]  # an ISO 4217 code starts with its country
    identity = sorted((k, v) for k, v in values.items() if not _NOT_IDENTITY.fullmatch(k))
    if not identity:
        # Every such account would share one fingerprint, and so one person (e.g. a type
        # identified by an e-mail address alone): refused rather than merge strangers.
        raise InvalidInput(
            f"A {kind} account names no account number; choose another type of account.",
            code="invalid_account",
            details={"fields": {"type": "This type of account cannot be used here."}},
        )
    number = values.get("accountNumber") or max((v for _, v in identity), key=len, default="")
    shown = number[-4:] if len(number) >= 8 else number[-2:]  # a short number is never shown whole
    if kind == "sort_code":
        bank = f"{values['sortCode'][:2]}-{values['sortCode'][2:4]}-{values['sortCode'][4:]} "
    elif kind == "aba":
        bank = f"{values['abartn']} "
    else:
        bank = ""
    return AccountInfo(
        normalised=f"{country}:{currency}:{kind}:" + ";".join(f"{k}={v}" for k, v in identity),
        country=country,
        bic="",
        bank_name="",
        masked=f"{country} {bank}****{shown}",
        kind=kind,
        currency=currency,
        details=tuple(sorted(values.items())),
    )


def builtin_requirements(*, currency: str, refresh: Mapping[str, str] | None = None) -> list:
    """The contract as Wise documents it for the currencies the engine pays to local accounts,
    for when no PSP is configured: GBP (sort code, or IBAN), USD (ABA), IBAN elsewhere."""
    if currency == "GBP":
        return [_type("sort_code", "Local bank account", _SORT_CODE_FIELDS), _IBAN_TYPE]
    if currency == "USD":
        fields = [*_ABA_FIELDS, *_address_fields((refresh or {}).get("address.country", ""))]
        return [_type("aba", "Local bank account", fields)]
    return [_IBAN_TYPE]


def _type(kind: str, title: str, fields: list[dict]) -> dict:
    return {"type": kind, "title": title, "fields": [{"name": f["name"], "group": [f]} for f in fields]}


def _text(key: str, name: str, *, required: bool = True, example: str = "", regexp: str | None = None, **extra) -> dict:
    return {
        "key": key,
        "name": name,
        "type": "text",
        "refreshRequirementsOnChange": False,
        "required": required,
        "example": example,
        "validationRegexp": regexp,
        "valuesAllowed": None,
        "validationAsync": None,
        **extra,
    }


_LEGAL_TYPE = {
    **_text("legalType", "Recipient type"),
    "type": "select",
    "valuesAllowed": [{"key": "PRIVATE", "name": "Person"}, {"key": "BUSINESS", "name": "Business"}],
}
_SORT_CODE_FIELDS = [
    _LEGAL_TYPE,
    _text("sortCode", "UK sort code", example="40-30-20", regexp=r"^[0-9]{6}$", minLength=6, maxLength=6),
    _text("accountNumber", "Account number", example="12345678", regexp=r"^[0-9]{8}$", minLength=8, maxLength=8),
]
_IBAN_TYPE = _type(
    "iban", "IBAN", [_LEGAL_TYPE, _text("iban", "IBAN", example="GB29NWBK60161331926819", regexp=r"^[A-Z0-9 ]{15,42}$")]
)
_ABA_FIELDS = [
    _LEGAL_TYPE,
    _text("abartn", "ACH routing number", example="111000025", regexp=r"^[0-9]{9}$", minLength=9, maxLength=9),
    _text("accountNumber", "Account number", example="12345678", regexp=r"^[0-9]{4,17}$", minLength=4, maxLength=17),
    {
        **_text("accountType", "Account type"),
        "type": "radio",
        "valuesAllowed": [{"key": "CHECKING", "name": "Checking"}, {"key": "SAVINGS", "name": "Savings"}],
    },
]


def _address_fields(country: str) -> list[dict]:
    fields = [
        {
            **_text("address.country", "Country"),
            "type": "select",
            "refreshRequirementsOnChange": True,
            "valuesAllowed": [
                {"key": c.alpha_2, "name": c.name} for c in sorted(pycountry.countries, key=lambda c: c.name)
            ],
        },
        _text("address.city", "City", maxLength=60),
        _text("address.firstLine", "Address", maxLength=120),
        _text("address.postCode", "Post code", maxLength=20),
    ]
    if country == "US":
        states = sorted(pycountry.subdivisions.get(country_code="US"), key=lambda s: s.name)
        fields.append(
            {
                **_text("address.state", "State"),
                "type": "select",
                "valuesAllowed": [{"key": s.code.split("-", 1)[1], "name": s.name} for s in states],
            }
        )
    return fields
