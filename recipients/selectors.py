"""Reads about people. Callers that count anything per human (caps, fraud) must go through
``person_cluster_ids``: a person may have been merged into another since they last looked.

Registry: proofs that an account's holder is paid there (``iban_proof_register``), which payouts
fills from its ``AppConfig.ready``."""

import functools
from collections.abc import Callable
from dataclasses import dataclass
from datetime import date

from django.db import connection
from django.db.models import Exists, OuterRef, Q, QuerySet, Subquery
from django.db.models.functions import Coalesce

from core.exceptions import InvalidInput
from recipients import crypto
from recipients.models import (
    BankAccount,
    ClaimLink,
    Identifier,
    IdentifierKind,
    MarketingConsent,
    Person,
    WhatsAppOptInCode,
)
from recipients.models_consent import ACTIVE, ConsentChannel
from recipients.normalise import email_normalise, iban_normalise, phone_normalise


def person_root(*, person: Person) -> Person:
    """The surviving person ``person`` was merged into (itself if it is a root), read fresh from
    the database. Merges keep ``merged_into`` pointing straight at the root, so one query."""
    row = Person.objects.select_related("merged_into").get(pk=person.pk)
    root = row.merged_into or row
    while root.merged_into_id:  # only if a merge ever left a chain; merges flatten
        root = Person.objects.get(pk=root.merged_into_id)
    return root


def person_cluster_ids(*, person: Person) -> list[int]:
    """Ids of the root and everyone merged into it, ascending: the set to count caps over."""
    root_id = Person.objects.filter(pk=person.pk).values_list(Coalesce("merged_into_id", "id"), flat=True).first()
    return _cluster_members([root_id] if root_id is not None else [])


def _cluster_members(root_ids: list[int]) -> list[int]:
    # Literal ids, not a subquery: PostgreSQL then ORs two index scans (pk, merged_into) instead of
    # scanning the people table, which is what it did for the IN-subquery form on every event.
    if not root_ids:
        return []
    return sorted(
        Person.objects.filter(Q(id__in=root_ids) | Q(merged_into_id__in=root_ids)).values_list("id", flat=True)
    )


def person_current_bank_account(*, person: Person) -> BankAccount | None:
    """The account to pay this human: the root's current one, else the newest current account of
    anyone merged into it. None for an erased person. Call ``.iban()`` to decrypt."""
    root = person_root(person=person)
    if root.erased_at:
        return None
    cluster = person_cluster_ids(person=root)
    accounts = list(BankAccount.objects.filter(person_id__in=cluster, is_current=True).order_by("-created_at", "-id"))
    return next((a for a in accounts if a.person_id == root.id), accounts[0] if accounts else None)


def iban_fingerprint(iban: str) -> str:
    """Keyed HMAC-SHA256 (hex) of the normalised IBAN; accepts any human format.
    Raises InvalidInput(code="invalid_iban")."""
    return crypto.iban_fingerprint(iban_normalise(iban).normalised)


def iban_holder_ids(*, fingerprint: str) -> list[int]:
    """Every person id (all clusters of every brand, erased people included) that ever gave this
    IBAN: the set to count per-IBAN caps over. Erased people keep their fingerprints for exactly this."""
    holders = set(
        BankAccount.objects.filter(iban_fingerprint=fingerprint).values_list(
            Coalesce("person__merged_into_id", "person_id"), flat=True
        )
    )
    return _cluster_members(sorted(holders))


# Verification of Payee's answer when the bank says the name given is the account holder's
# (``payouts.rails.base.PayeeMatch.MATCH``, which the payouts app stores on the account).
PAYEE_MATCH = "match"

# Proofs that an account's holder is paid there, which higher apps keep: each returns a query of
# the ids of proven bank accounts (one column, no per-call parameters). The payouts app registers
# "a payout into it settled and was not returned" (``PayoutsConfig.ready``).
IbanProof = Callable[[], QuerySet]
_PROOFS: list[IbanProof] = []


def iban_proof_register(proof: IbanProof) -> None:
    """Add a proof for ``people_sharing_iban_counts`` (idempotent). Called from AppConfig.ready()."""
    if proof not in _PROOFS:
        _PROOFS.append(proof)
        _sharing_statement.cache_clear()


def iban_holders(*, brand_id: int, fingerprints: list[str]) -> QuerySet:
    """Rows of (fingerprint, root person, brand) for the people who count as paid into these
    IBANs when ``brand_id`` decides an event (``PEOPLE_SHARING_IBAN_SQL``'s ``holders`` is the
    same, in one statement):

    * The brand's own people, each one: the brand vouches for what its API sends about its own
      people and its claim pages record who typed an IBAN, and its data may decide its own
      outcomes. A stranger typing a customer's IBAN on its claim page is a second holder there
      (that is the signal), and costs the customer a review, never money.
    * Another brand's people only with proof that they are paid there: a Verification of Payee
      match on their account, or a registered proof (a settled payout into it that was not
      returned). A bare registration of another brand is that brand's word alone: counting it
      would let the brand push this brand's rewards into review, and learn from the outcome
      who holds an IBAN here.
    Erased people are left out: coming back is not fraud by itself."""
    proven = Q(person__brand_id=brand_id) | Q(payee_check_result=PAYEE_MATCH)
    for proof in _PROOFS:
        proven |= Q(id__in=proof())
    return (
        BankAccount.objects.filter(proven, iban_fingerprint__in=fingerprints, person__erased_at__isnull=True)
        .values_list("iban_fingerprint", Coalesce("person__merged_into_id", "person_id"), "person__brand_id")
        .order_by()
        .distinct()
    )


def people_sharing_iban_count(*, brand_id: int, fingerprint: str) -> int:
    """How many different people seem to be paid into this IBAN, as brand ``brand_id`` may count
    them (the fraud signal: the one place where one brand's people count for another's, and only
    with proof: ``iban_holders``).

    Within a brand everyone proven to use one IBAN is *one* root person, and one human is one
    person per brand, so counting roots says little. Instead the holders' identifiers are counted
    by value, across brands: the most distinct values of one kind (e-mails, WhatsApp numbers,
    accounts at one social provider), and at least the most roots holding it within one brand
    (people whose link to each other was refused), at least 1. One human known to three brands
    with the same e-mail and number is 1; five TikTok accounts funnelled into one IBAN are 5."""
    return people_sharing_iban_counts(brand_id=brand_id, fingerprints=[fingerprint])[fingerprint]


# people_sharing_iban_counts in one statement, for PostgreSQL (the ORM form below takes three).
PEOPLE_SHARING_IBAN_SQL = """
WITH accounts AS (
    SELECT b.id, b.iban_fingerprint AS fp, b.payee_check_result,
        COALESCE(p.merged_into_id, p.id) AS root, p.brand_id
    FROM recipients_bankaccount b JOIN recipients_person p ON p.id = b.person_id
    WHERE b.iban_fingerprint = ANY(%s) AND p.erased_at IS NULL
), holders AS (
    SELECT DISTINCT fp, root, brand_id FROM accounts WHERE brand_id = %s OR payee_check_result = %s{proofs}
), members AS (
    SELECT h.fp, m.id FROM holders h JOIN recipients_person m ON m.id = h.root
    UNION
    SELECT h.fp, m.id FROM holders h JOIN recipients_person m ON m.merged_into_id = h.root
), kinds AS (
    SELECT mb.fp, count(DISTINCT i.value) AS n
    FROM members mb JOIN recipients_identifier i ON i.person_id = mb.id
    WHERE i.is_active AND i.kind <> 'iban'
    GROUP BY mb.fp, CASE WHEN i.kind = 'social' THEN 'social:' || split_part(i.value, ':', 1) ELSE i.kind END
), roots AS (
    SELECT fp, count(DISTINCT root) AS n FROM holders GROUP BY fp, brand_id
), candidates AS (
    SELECT fp, n FROM kinds UNION ALL SELECT fp, n FROM roots
)
SELECT fp, GREATEST(1, max(n)) FROM candidates GROUP BY fp
"""


def people_sharing_iban_statement(*, brand_id: int, fingerprints: list[str]) -> tuple[str, list] | None:
    """The one-statement form, for callers batching their reads: rows of (fingerprint, people)
    for the fingerprints anyone counted holds (the others are 0). None where there is none
    (SQLite)."""
    if connection.vendor != "postgresql":
        return None
    sql, proof_params = _sharing_statement()
    return sql, [list(fingerprints), brand_id, PAYEE_MATCH, *proof_params]


@functools.cache
def _sharing_statement() -> tuple[str, tuple]:
    """``PEOPLE_SHARING_IBAN_SQL`` with the registered proofs (each a further set of holders),
    compiled once: the text is then the same for every call and prepared once per
    connection (compiling the proofs' queries per call cost milliseconds per event)."""
    sql, params = "", ()
    for proof in _PROOFS:
        query, values = proof().query.sql_with_params()
        # A lateral look-up per account, not an OR'd EXISTS: PostgreSQL turns that into a hash
        # of every proven account there is (every settled payout) on each call.
        sql += (
            "\n    UNION SELECT a.fp, a.root, a.brand_id FROM accounts a CROSS JOIN LATERAL"
            f" (SELECT 1 FROM ({query}) proof(account_id) WHERE proof.account_id = a.id LIMIT 1) proven"
        )
        params += tuple(values)
    return PEOPLE_SHARING_IBAN_SQL.replace("{proofs}", sql), params


def people_sharing_iban_counts(*, brand_id: int, fingerprints: list[str]) -> dict[str, int]:
    """``people_sharing_iban_count`` for many IBANs: one statement on PostgreSQL, three
    queries elsewhere (bulk ingestion)."""
    wanted = set(fingerprints)
    statement = people_sharing_iban_statement(brand_id=brand_id, fingerprints=sorted(wanted))
    if statement is not None:
        counts = dict.fromkeys(wanted, 0)
        with connection.cursor() as cursor:
            cursor.execute(*statement)
            counts.update({fp: int(n) for fp, n in cursor.fetchall()})
        return counts
    return _people_sharing_iban_counts_orm(brand_id, wanted)


def _people_sharing_iban_counts_orm(brand_id: int, wanted: set[str]) -> dict[str, int]:
    """The portable form (three queries); the PostgreSQL statement must answer the same."""
    holders: dict[str, set[tuple[int, int | None]]] = {fp: set() for fp in wanted}
    for fp, root, holder_brand in iban_holders(brand_id=brand_id, fingerprints=sorted(wanted)):
        holders[fp].add((root, holder_brand))
    roots = sorted({root for pairs in holders.values() for root, _ in pairs})
    values: dict[int, set[tuple[str, str]]] = {root: set() for root in roots}
    if roots:
        identifiers = (
            Identifier.objects.filter(is_active=True, person_id__in=_cluster_members(roots))
            .exclude(kind=IdentifierKind.IBAN)
            .annotate(root=Coalesce("person__merged_into_id", "person_id"))
            .values_list("root", "kind", "value")
        )
        for root, kind, value in identifiers:
            group = f"social:{value.split(':', 1)[0]}" if kind == IdentifierKind.SOCIAL else kind
            values[root].add((group, value))
    counts = {}
    for fp, pairs in holders.items():
        if not pairs:
            counts[fp] = 0
            continue
        distinct: dict[str, set[str]] = {}
        for root, _ in pairs:
            for group, value in values[root]:
                distinct.setdefault(group, set()).add(value)
        per_brand: dict[int | None, int] = {}
        for _, holder_brand in pairs:
            per_brand[holder_brand] = per_brand.get(holder_brand, 0) + 1
        counts[fp] = max(1, *(len(v) for v in distinct.values()), *per_brand.values())
    return counts


def person_find(*, brand_id: int, kind: str, value: str, phone_region: str = "") -> Person | None:
    """The root person of ``brand_id`` owning an identifier typed in any human format, or None.
    Raises InvalidInput if ``value`` is not a valid identifier of that kind."""
    if kind == IdentifierKind.EMAIL:
        normalised = email_normalise(value)
    elif kind == IdentifierKind.WHATSAPP:
        normalised = phone_normalise(value, region=phone_region)
    elif kind == IdentifierKind.IBAN:
        normalised = iban_fingerprint(value)
    elif kind == IdentifierKind.SOCIAL:
        normalised = value.strip()
    else:
        raise InvalidInput(f"Unknown identifier kind '{kind}'.", code="invalid_kind")
    identifier = (
        Identifier.objects.filter(brand_id=brand_id, kind=kind, value=normalised, is_active=True)
        .select_related("person")
        .first()
    )
    if identifier is None:
        return None
    return person_root(person=identifier.person)


def _newest_identifier(kind: str) -> Subquery:
    """The newest active, proven ``kind`` identifier of the consenting person's human: their root
    (the person who gave the consent, or the one they were merged into since) and everyone merged
    into it. An address or number typed on a public claim page proves nothing (anyone can type
    anyone's), so it is handed to the brand only once a confirmation link e-mailed to it was used;
    a number comes from our WhatsApp inbound or the brand's own API. (The social account on a claim
    page comes from the platform's login, not from typing.)"""
    typed = Q(source=ConsentChannel.CLAIM_PAGE) & ~Q(kind=IdentifierKind.SOCIAL)
    confirmed = Exists(MarketingConsent.objects.filter(confirm_email_id=OuterRef("pk"), confirmed_at__isnull=False))
    return Subquery(
        Identifier.objects.filter(
            Q(person_id=OuterRef("root_id")) | Q(person__merged_into_id=OuterRef("root_id")),
            kind=kind,
            is_active=True,
        )
        .filter(~typed | confirmed)
        .order_by("-created_at", "-id")
        .values("value")[:1]
    )


def brand_contacts(
    *,
    brand_id: int,
    search: str = "",
    channel: str = "",
    given_from: date | None = None,
    given_to: date | None = None,
) -> QuerySet:
    """The brand's contacts: one row per active (confirmed, not withdrawn: ``ACTIVE``) marketing
    consent of a person not erased, with
    the person (``person.display_name``), their newest e-mail, WhatsApp number and social account
    (``provider:uid``) annotated. People who did not consent (or withdrew) are not here at all:
    this is the only read that shows a brand its people's contact details. Filters: ``search``
    in the name, e-mail or number; the consent's ``channel``; the day it was given (inclusive)."""
    rows = (
        MarketingConsent.objects.filter(ACTIVE, brand_id=brand_id, person__erased_at__isnull=True)
        .select_related("person")
        .annotate(root_id=Coalesce("person__merged_into_id", "person_id"))
        .annotate(
            email=_newest_identifier(IdentifierKind.EMAIL),
            whatsapp=_newest_identifier(IdentifierKind.WHATSAPP),
            social=_newest_identifier(IdentifierKind.SOCIAL),
        )
    )
    search = (search or "").strip()
    if search:
        rows = rows.filter(
            Q(person__display_name__icontains=search) | Q(email__icontains=search) | Q(whatsapp__icontains=search)
        )
    if channel:
        rows = rows.filter(channel=channel)
    if given_from:
        rows = rows.filter(given_at__date__gte=given_from)
    if given_to:
        rows = rows.filter(given_at__date__lte=given_to)
    return rows


@dataclass(frozen=True)
class ConsentProof:
    """How a "yes" ticked on a claim page reaches its person. ``proof`` names the fact that makes
    it active at once; "" when nothing does (it waits for its confirmation link), and then
    ``confirm_email_id`` is the typed address as the person's identifier (None: the address is
    another person's, nothing can confirm it)."""

    proof: str
    confirm_email_id: int | None = None


def marketing_consent_proof(*, person: Person, email: str, claim_link: ClaimLink | None) -> ConsentProof:
    """Is the channel of a marketing consent given on a claim page already proven? Read after the
    page's details were applied to ``person`` (the typed ``email`` is then theirs, unless another
    person of the brand holds it). Proven, in this order:

    * ``whatsapp_verified``: the person sent an opt-in code from their WhatsApp (a redeemed
      ``WhatsAppOptInCode``: the signed inbound message proved the number);
    * ``claim_link``: no e-mail typed, behind a claim link (it went to the contacts we had);
    * ``email_confirmed``: the typed address already confirmed one of their consents;
    * ``claim_link_email``: behind a claim link, the typed address is the one its message went
      to — the person's newest e-mail before the link was made (``notices`` write there) — and
      not itself typed on a public page (what was typed there proves nothing, whatever page
      leads back to it);
    * ``no_email``: neither e-mail nor link (a number typed next to a TikTok login): no address
      a confirmation could go to, so the consent is recorded as given (as before double opt-in).

    Otherwise an e-mail typed on a public page: pending until confirmed."""
    cluster = person_cluster_ids(person=person)
    if WhatsAppOptInCode.objects.filter(person_id__in=cluster, used_at__isnull=False).exists():
        return ConsentProof(proof="whatsapp_verified")
    if not (email or "").strip():
        return ConsentProof(proof="claim_link" if claim_link is not None else "no_email")
    emails = Identifier.objects.filter(person_id__in=cluster, kind=IdentifierKind.EMAIL, is_active=True)
    typed = emails.filter(value=email_normalise(email)).first()
    if typed is None:
        return ConsentProof(proof="")
    if MarketingConsent.objects.filter(confirm_email=typed, confirmed_at__isnull=False).exists():
        return ConsentProof(proof="email_confirmed")
    # The claim pages record what is typed on them with the source "claim_page".
    if claim_link is not None and typed.source != ConsentChannel.CLAIM_PAGE:
        sent_to = emails.filter(created_at__lt=claim_link.created_at).order_by("-created_at", "-id").first()
        if sent_to is not None and sent_to.pk == typed.pk:
            return ConsentProof(proof="claim_link_email")
    return ConsentProof(proof="", confirm_email_id=typed.pk)
