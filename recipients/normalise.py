"""Turn what people type into canonical identifiers, or say in plain words what is wrong.

Pure functions, no database. Every failure is an ``InvalidInput`` with a stable code
(``invalid_email``, ``invalid_phone``, ``invalid_iban``, ``invalid_social``; local bank accounts:
``invalid_account`` in ``recipients.accounts``) and a message a person can act on.
"""

import json
import re
from dataclasses import dataclass

import phonenumbers
import schwifty
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from schwifty import exceptions as iban_errors

from core.exceptions import InvalidInput

_IBAN_SEPARATORS = re.compile(r"[\s\-.]+")
_IBAN_CHARACTERS = re.compile(r"[A-Z]{2}[0-9]{2}[A-Z0-9]+")


IBAN = "iban"


@dataclass(frozen=True)
class AccountInfo:
    """A bank account as given, validated: an IBAN, or a local account of a country without IBANs
    (``kind`` is then the PSP's account type, ``sort_code``, ``aba`` …, and ``details`` its fields
    under the PSP's keys). ``normalised`` is the account's identity in one canonical string: what
    its fingerprint is taken of, so the same account typed twice is one account for caps and fraud
    signals. ``secret`` is what is stored encrypted."""

    normalised: str  # IBAN: compact, upper case (NL91ABNA0417164300); local: "GB:GBP:sort_code:…"
    country: str
    bic: str  # "" when the bank is not in schwifty's registry
    bank_name: str
    masked: str  # NL91 **** **** 4300; GB 04-00-75 ****8842
    kind: str = IBAN
    currency: str = ""  # a local account's currency; "" for an IBAN (its bank takes any)
    details: tuple[tuple[str, str], ...] = ()  # a local account's fields, sorted by key

    @property
    def formatted(self) -> str:
        return " ".join(self.normalised[i : i + 4] for i in range(0, len(self.normalised), 4))

    @property
    def secret(self) -> str:
        """The clear text kept encrypted: the IBAN, or the local fields as JSON."""
        if self.kind == IBAN:
            return self.normalised
        return json.dumps(dict(self.details), sort_keys=True, separators=(",", ":"))


def iban_mask(normalised: str) -> str:
    """Country and check digits, then the last four characters; the middle is always four-by-four
    stars so the mask does not even reveal the length."""
    return f"{normalised[:4]} **** **** {normalised[-4:]}"


# Not cached: a cache would keep clear IBANs in process memory, out of erasure's reach. Ingestion
# normalises each IBAN once (``event_prepare``) and hands the result on (``IdentityInput.account``).
def iban_normalise(raw: str) -> AccountInfo:
    """Validate an IBAN typed in any human format (spaces, dashes, lower case). Checks the
    characters, the country, the country's length and structure, and the mod-97 check digits.
    The national check digits inside the account part are not checked: schwifty cannot verify them
    for every country, and the mod-97 digits already catch typos and swapped characters."""
    value = _IBAN_SEPARATORS.sub("", raw or "").upper()
    if not value:
        raise InvalidInput("The IBAN is empty.", code="invalid_iban")
    if not _IBAN_CHARACTERS.fullmatch(value):
        raise InvalidInput(
            "An IBAN starts with two letters and two digits, then only letters and digits.", code="invalid_iban"
        )
    country = value[:2]
    try:
        spec = schwifty.registry.get_iban_spec(country)
    except iban_errors.InvalidCountryCode:
        raise InvalidInput(f"'{country}' is not a country that uses IBANs.", code="invalid_iban")
    if len(value) != spec.iban_length:
        raise InvalidInput(
            f"{country} IBANs have {spec.iban_length} characters; this one has {len(value)}.", code="invalid_iban"
        )
    try:
        iban = schwifty.IBAN(value)
    except iban_errors.InvalidChecksumDigits:
        raise InvalidInput("The IBAN checksum is wrong: please check it for a typo.", code="invalid_iban")
    except iban_errors.SchwiftyException:
        raise InvalidInput(
            f"This is not a valid {country} IBAN: the account part has the wrong format.", code="invalid_iban"
        )
    bic = iban.bic
    return AccountInfo(
        normalised=iban.compact,
        country=iban.country_code,
        bic=str(bic) if bic else "",
        bank_name=iban.bank_name or "",
        masked=iban_mask(iban.compact),
    )


def email_normalise(raw: str) -> str:
    """Trimmed and lower-cased. The local part is case-sensitive in theory and never in practice;
    provider-specific aliases (dots and +tags at Gmail) are deliberately *not* folded, because
    linking is irreversible and a wrong link merges two real people."""
    value = (raw or "").strip().lower()
    try:
        validate_email(value)
    except ValidationError:
        raise InvalidInput(f"'{raw.strip()}' is not an email address.", code="invalid_email")
    return value


def phone_normalise(raw: str, *, region: str = "") -> str:
    """E.164 (``+393331234567``). Numbers without ``+``/``00`` need ``region`` (e.g. ``IT``)."""
    value = (raw or "").strip()
    region = (region or "").strip().upper() or None
    try:
        number = phonenumbers.parse(value, region)
    except phonenumbers.NumberParseException as exc:
        if exc.error_type == phonenumbers.NumberParseException.INVALID_COUNTRY_CODE:
            raise InvalidInput(
                "Add the country code to the phone number, for example +39 for Italy.", code="invalid_phone"
            )
        raise InvalidInput(f"'{value}' is not a phone number.", code="invalid_phone")
    if not phonenumbers.is_valid_number(number):
        where = phonenumbers.region_code_for_country_code(number.country_code)
        where = where if where != phonenumbers.UNKNOWN_REGION else "its country"
        raise InvalidInput(f"'{value}' is not a valid phone number for {where}.", code="invalid_phone")
    return phonenumbers.format_number(number, phonenumbers.PhoneNumberFormat.E164)


def social_normalise(provider: str, uid: str) -> str:
    """``provider:uid`` with the provider lower-cased; the uid is kept as given (TikTok open_ids are
    case-sensitive)."""
    provider = (provider or "").strip().lower()
    uid = (uid or "").strip()
    if not provider or not uid:
        raise InvalidInput("A social identity needs both the provider and the account id.", code="invalid_social")
    if not re.fullmatch(r"[a-z0-9_]{1,30}", provider):
        raise InvalidInput(f"'{provider}' is not a known kind of social provider name.", code="invalid_social")
    return f"{provider}:{uid}"
