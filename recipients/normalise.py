"""Turn what people type into canonical identifiers, or say in plain words what is wrong.

Pure functions, no database. Every failure is an ``InvalidInput`` with a stable code
(``invalid_email``, ``invalid_phone``, ``invalid_iban``, ``invalid_social``; local bank accounts:
``invalid_account`` in ``recipients.accounts``) and a message a person can act on.
"""

import json
import re
import unicodedata
from dataclasses import dataclass

import idna
import phonenumbers
import schwifty
from django.core.exceptions import ValidationError
from django.core.validators import validate_email
from schwifty import exceptions as iban_errors

from core.exceptions import InvalidInput

_IBAN_SEPARATORS = re.compile(r"[\s\-.]+")
_IBAN_CHARACTERS = re.compile(r"[A-Z]{2}[0-9]{2}[A-Z0-9]+")


IBAN = "iban"
# A payout destination that is no bank account: a PayPal account, named by its e-mail address.
PAYPAL = "paypal"
# The two kinds of destination rails declare they pay (``payouts.rails.base.Rail.destination_kinds``):
# every account kind but PayPal is a bank account (an IBAN or a local type such as ``sort_code``).
BANK = "bank"


def destination_kind(account_kind: str) -> str:
    """``paypal`` for a PayPal account, ``bank`` for an IBAN or any local bank account type."""
    return PAYPAL if account_kind == PAYPAL else BANK


@dataclass(frozen=True)
class AccountInfo:
    """A bank account as given, validated: an IBAN, or a local account of a country without IBANs
    (``kind`` is then the PSP's account type, ``sort_code``, ``aba`` …, and ``details`` its fields
    under the PSP's keys). ``normalised`` is the account's identity in one canonical string: what
    its fingerprint is taken of, so the same account typed twice is one account for caps and fraud
    signals. ``secret`` is what is stored encrypted."""

    normalised: str  # IBAN: compact, upper case (NL91ABNA0417164300); local: "GB:GBP:sort_code:…"; "paypal:<e-mail>"
    country: str  # "" for a PayPal account (an e-mail address has no country)
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


# Unicode's Default_Ignorable_Code_Point (DerivedCoreProperties.txt): invisible when shown, so
# "ve\u00adra@" and "vera@" look like one address and must be one.
_DEFAULT_IGNORABLE = re.compile(
    "[\u00ad\u034f\u061c\u115f\u1160\u17b4\u17b5\u180b-\u180f\u200b-\u200f\u202a-\u202e"
    "\u2060-\u206f\u3164\ufe00-\ufe0f\ufeff\uffa0\ufff0-\ufff8\U0001bca0-\U0001bca3"
    "\U0001d173-\U0001d17a\U000e0000-\U000e0fff]"
)
# Scripts that one label of a domain name may mix (UTS #39's "highly restrictive" profile, roughly:
# Japanese, Chinese and Korean names mix these with Latin). Any other mix is a look-alike.
_MIXABLE_SCRIPTS = frozenset({"LATIN", "CJK", "HIRAGANA", "KATAKANA", "HANGUL", "BOPOMOFO"})


def email_normalise(raw: str) -> str:
    """One address, one string, however it was typed: trimmed, invisible characters removed,
    NFKC (full-width letters and a full-width ``@`` become ASCII), lower-cased, and the domain
    in IDNA 2008 (UTS #46) ASCII form, so ``müller.de`` and ``xn--mller-kva.de`` are one domain.
    The local part is case-sensitive in theory and never in practice; provider-specific aliases
    (dots and +tags at Gmail) are deliberately *not* folded, and neither are look-alike letters
    of another script (``email_mixed_script`` flags them): linking is irreversible and a wrong
    link merges two real people."""
    value = unicodedata.normalize("NFKC", _DEFAULT_IGNORABLE.sub("", (raw or "").strip())).lower()
    local, at, domain = value.rpartition("@")
    try:
        value = f"{local}{at}{_domain_normalise(domain)}" if at else value
        validate_email(value)
    except (ValidationError, idna.IDNAError):
        raise InvalidInput(f"'{(raw or '').strip()}' is not an email address.", code="invalid_email")
    return value


def _domain_normalise(domain: str) -> str:
    """The domain's ASCII form; an ASCII label is kept as it is (IDNA 2008 refuses some that mail
    accepts, like ``_``), every other one is encoded, and an ``xn--`` label must decode.
    Raises idna.IDNAError."""
    if domain.isascii() and "xn--" not in domain:
        return domain
    labels = idna.uts46_remap(domain, std3_rules=False, transitional=False).split(".")
    return ".".join(
        label if label.isascii() and not label.startswith("xn--") else idna.encode(label).decode("ascii")
        for label in labels
    )


def email_mixed_script(normalised: str) -> bool:
    """Does a label of the (normalised) address's domain mix letters of scripts that no real name
    mixes, like a Cyrillic ``а`` among Latin letters? Such an address is another address (its
    own person), but may be a look-alike of someone's: ingestion sends it to review. The local
    part needs no check: it is ASCII (``email_normalise`` accepts no other)."""
    domain = normalised.rpartition("@")[2]
    for label in domain.split("."):
        if not label.startswith("xn--"):
            continue
        scripts = {unicodedata.name(ch, "").split(" ", 1)[0] for ch in idna.decode(label) if ch.isalpha()}
        if len(scripts) > 1 and not scripts <= _MIXABLE_SCRIPTS:
            return True
    return False


def paypal_normalise(raw: str) -> AccountInfo:
    """A PayPal account named by its e-mail address, as a payout destination: the address
    normalised like every e-mail (``email_normalise``), so one account typed twice has one
    fingerprint and counts once under the caps, as an IBAN does. Stored encrypted like a local
    account's fields (``{"email": …}``), masked as ``PayPal v***@example.com``. Raises
    InvalidInput (``invalid_email``)."""
    email = email_normalise(raw)
    local, _, domain = email.rpartition("@")
    return AccountInfo(
        normalised=f"{PAYPAL}:{email}",
        country="",
        bic="",
        bank_name="PayPal",
        masked=f"PayPal {local[:1]}***@{domain}"[:40],
        kind=PAYPAL,
        details=(("email", email),),
    )


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
