"""Who a person is: the identifiers a resolution is given (``IdentityInput``), normalised
(``identity_normalise``) before anything is written; the resolver is
``recipients.services.people``.

Who may change where a person is paid — the rule every resolution follows:

* People belong to one brand, and a look-up only ever sees the brand's own people: another brand's
  event, PATCH or registration carrying the same e-mail finds nothing and creates that brand's own
  person. Across brands identifiers link for fraud signals only (``recipients.selectors``).
* The brand's own API (events, ``POST``/``PATCH /people/``) vouches for every identifier it sends
  about its own people (``IdentityInput.proven`` is None): shared identifiers link its people (the
  younger merged into the oldest), and a new IBAN becomes the current account.
* A public page vouches only for what the person proved (``proven``: the TikTok account of an
  OAuth login, the WhatsApp number that sent the opt-in code) or for the person behind their own
  claim link (the resolution's ``anchor``, whose given account becomes the current one). Only
  proven identifiers find or link existing people; an unproven one attaches to the person found
  only where no other person of the brand holds it, otherwise the link is refused and audited
  (``link_refused``). Typing someone's e-mail with your own IBAN therefore reaches nobody else's
  person, account or money.
* Every change of an existing person's current account is an ``iban_set`` event with the
  previous account and an ``account_changed`` notice to the person, in the same transaction.

The resolver's locks and retries: ``recipients.services.roots``.
"""

from dataclasses import dataclass

from core.exceptions import InvalidInput
from recipients import crypto
from recipients.models import IdentifierKind, Language
from recipients.normalise import AccountInfo, email_normalise, iban_normalise, phone_normalise, social_normalise


@dataclass(frozen=True)
class IdentityInput:
    name: str = ""
    email: str = ""
    whatsapp: str = ""  # any human format; normalised to E.164
    iban: str = ""  # any human format; validated and normalised with schwifty
    social_provider: str = ""  # e.g. "tiktok"
    social_uid: str = ""  # e.g. the TikTok open_id
    phone_region: str = ""  # default region for numbers without +, e.g. "IT"
    language: str = ""  # "en" / "it"; applied only if the person has none yet
    # The bank account already validated by the caller: ``iban`` normalised (``iban_normalise``),
    # or a local account (``recipients.accounts.account_normalise``). Wins over ``iban``.
    account: AccountInfo | None = None
    # The identifier kinds the person proved on a public page (see the module docstring); None
    # when the brand's own API vouches for all of them.
    proven: frozenset[str] | None = None


@dataclass(frozen=True)
class Identity:
    name: str
    language: str
    keys: tuple[tuple[str, str], ...]  # (kind, value), sorted: the insert order that avoids deadlocks
    iban: AccountInfo | None  # the bank account: an IBAN or a local account
    proven: frozenset[str] | None = None

    def may_link(self, key: tuple[str, str]) -> bool:
        """May this identifier find (and link) an existing person of the brand?"""
        return self.proven is None or key[0] in self.proven

    @property
    def iban_fingerprint(self) -> str:
        """The IBAN's fingerprint as computed for ``keys`` ("" without an IBAN): not again."""
        return next((value for kind, value in self.keys if kind == IdentifierKind.IBAN), "")


_LANGUAGES = frozenset(Language.values)  # once: ``.values`` builds a new list on every access


def identity_normalise(identity: IdentityInput) -> Identity:
    keys: list[tuple[str, str]] = []
    if identity.email.strip():
        keys.append((IdentifierKind.EMAIL, email_normalise(identity.email)))
    if identity.whatsapp.strip():
        keys.append((IdentifierKind.WHATSAPP, phone_normalise(identity.whatsapp, region=identity.phone_region)))
    if identity.social_provider.strip() or identity.social_uid.strip():
        keys.append((IdentifierKind.SOCIAL, social_normalise(identity.social_provider, identity.social_uid)))
    iban = identity.account or (iban_normalise(identity.iban) if identity.iban.strip() else None)
    if iban is not None:
        keys.append((IdentifierKind.IBAN, crypto.iban_fingerprint(iban.normalised)))
    if not keys:
        raise InvalidInput(
            "Give at least one of: email, WhatsApp number, IBAN or social account.", code="no_identifier"
        )
    language = identity.language.strip().lower()
    if language and language not in _LANGUAGES:
        raise InvalidInput(f"'{identity.language}' is not a supported language.", code="invalid_language")
    return Identity(
        name=identity.name.strip()[:200],
        language=language,
        keys=tuple(sorted(keys)),
        iban=iban,
        proven=frozenset(identity.proven) if identity.proven is not None else None,
    )
