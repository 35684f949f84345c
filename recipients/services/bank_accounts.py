"""Where people are paid: the one writer of a new or re-current bank account and its ``iban_set``
event (``bank_accounts_make_current``, which the resolver calls for one person or for a batch of
new people), and the name an account is held under (``bank_account_holder_name_set``)."""

from dataclasses import dataclass

from django.db.models import Q
from django.utils import timezone

from core.bulk import rows_insert
from core.hooks import BANK_ACCOUNT_CHANGED, hook_fire
from recipients import crypto
from recipients.models import BankAccount, NoticeKind, Person, PersonEvent, PersonEventKind
from recipients.normalise import IBAN, AccountInfo
from recipients.selectors import person_cluster_ids
from recipients.services.notices import NoticeNew, notices_record


@dataclass(frozen=True)
class AccountWrite:
    person: Person  # a root person, its row locked by the caller (or created in its transaction)
    account: AccountInfo  # an IBAN or a local account, validated
    fingerprint: str  # ``crypto.iban_fingerprint(account.normalised)``
    source: str
    actor: object = None
    # Created in this transaction: no account to reuse or replace, nothing owed to announce.
    new_person: bool = False


def bank_accounts_make_current(*, writes: list[AccountWrite]) -> list[BankAccount]:
    """Make each write's account its person's current account (one write per person), reusing the
    row if they gave it before; returns the accounts in order. Every switch is an ``iban_set``
    event with the previous account; a person who had another current account gets an
    ``account_changed`` notice, and a person not new gets ``BANK_ACCOUNT_CHANGED`` (money owed
    goes to the new account) — all in the caller's transaction. Giving the current account again
    writes nothing. New people's rows go in one statement per table.

    Preconditions: the caller holds every person's root row lock (a new person is invisible to
    others until commit). Raises IntegrityError when a concurrent writer gave the same account
    first (``roots.race_lost``: the caller's retry settles it)."""
    known = [w for w in writes if not w.new_person]
    rows: list[BankAccount] = []
    if known:
        rows = list(
            BankAccount.objects.filter(
                Q(person_id__in=[w.person.id for w in known])
                & (Q(iban_fingerprint__in=[w.fingerprint for w in known]) | Q(is_current=True))
            )
        )
    now = timezone.now()
    made: list[BankAccount] = []
    inserts: list[BankAccount] = []
    switched: list[tuple[AccountWrite, BankAccount, BankAccount | None, bool]] = []  # write, account, previous, reused
    for write in writes:
        mine = [r for r in rows if r.person_id == write.person.id]
        existing = next((r for r in mine if r.iban_fingerprint == write.fingerprint), None)
        current = next((r for r in mine if r.is_current), None)
        if existing is not None and existing.kind != IBAN:
            # The same local account given again may carry new holder details (an address, which
            # the fingerprint leaves out): the newest are the ones to pay with.
            existing.ciphertext = crypto.encrypt(write.account.secret)
            existing.save(update_fields=["ciphertext"])
        if existing is not None and existing.is_current:
            made.append(existing)
            continue
        if current is not None:
            current.is_current = False
            current.save(update_fields=["is_current"])
        if existing is not None:
            existing.is_current = True
            existing.save(update_fields=["is_current"])
            account = existing
        else:
            account = BankAccount(
                person=write.person,
                iban_fingerprint=write.fingerprint,
                is_current=True,
                source=write.source,
                created_at=now,
                **_columns(write.account),
            )
            inserts.append(account)
        made.append(account)
        switched.append((write, account, current, existing is not None))
    rows_insert(BankAccount, inserts)
    events = rows_insert(
        PersonEvent,
        [
            PersonEvent(
                person=write.person,
                kind=PersonEventKind.IBAN_SET,
                actor=write.actor,
                source=write.source,
                detail={
                    "bank_account": account.id,
                    "previous_bank_account": previous.id if previous else None,
                    "country": write.account.country,
                    "reused": reused,
                },
                created_at=now,
            )
            for write, account, previous, reused in switched
        ],
        keys=bool(known),
    )
    # Someone who did not make the change must learn of it before the money moves.
    notices = [
        NoticeNew(
            person_id=write.person.id,
            kind=NoticeKind.ACCOUNT_CHANGED,
            key=f"account_changed:{event.pk}",
            data={"bank_account": account.id},
        )
        for (write, account, previous, _), event in zip(switched, events, strict=True)
        if previous is not None
    ]
    if notices:
        notices_record(notices=notices)
    announced = [event for (write, *_), event in zip(switched, events, strict=True) if not write.new_person]
    if announced:
        hook_fire(BANK_ACCOUNT_CHANGED, *announced)
    return made


def _columns(account: AccountInfo) -> dict:
    return {
        "kind": account.kind,
        "currency": account.currency,
        "ciphertext": crypto.encrypt(account.secret),
        "masked": account.masked,
        "country": account.country,
        "bic": account.bic,
        "bank_name": account.bank_name,
    }


def bank_account_holder_name_set(*, person: Person, fingerprint: str, name: str) -> BankAccount | None:
    """Record ``name`` as the name ``person``'s current account (an IBAN or a local account, by
    its ``fingerprint``) is held under: the person gave the two together on their own claim link,
    or confirmed their bank's name for the account. Payouts are made out to it. No-op (None) when
    that account is not the current account of the person's cluster. Joins the caller's
    transaction."""
    name = " ".join((name or "").split())[:140]
    if not fingerprint:
        return None
    account = BankAccount.objects.filter(
        person_id__in=person_cluster_ids(person=person), iban_fingerprint=fingerprint, is_current=True
    ).first()
    if account is None or not name:
        return None
    if account.holder_name != name:
        account.holder_name = name
        account.save(update_fields=["holder_name"])
    return account
