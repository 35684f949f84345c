"""Erased people out of the stored copies of the pain.001 files the engine built.

What the law lets go. A pain.001 is the record of a payment instruction and stays for the
bookkeeping period (about ten years), but the record the books need — amount, date, our
EndToEndId, the ledger entry, the bank's statement — does not need the payee's name and IBAN
once the bank has the file: the bank keeps its own copy of what it executed. So an erased
person's transactions in our copies keep everything but who was paid: ``Cdtr/Nm`` becomes
``(erased)``, the IBAN becomes ``<country>00ERASED`` (check digits 00 never validate, so the
copy can never pay anyone if it is uploaded again), any other account id ``ERASED``, and a
postal address of the creditor is dropped. Amounts are not touched, so every ``NbOfTxs`` and
``CtrlSum`` still holds, and the document stays well-formed and valid against its XSD.

A file not downloaded yet (``built``) is an instruction still to be given, for money the person
is owed: it is left whole, and the first download pseudonymises the stored copy after handing
out the file the bank needs (``payouts.services.batches.payout_batch_download``); a later
download is that copy, so a file re-uploaded after an erasure no longer pays the erased person.

Lock order. Rewriting a stored file locks its batch row, and the callers that also write payouts
(erasure, the retention purge) lock both through ``payouts_lock``: batch rows first, then payout
rows, each ascending by id — the order pain.002, the batch matcher and the download take them in
(defined in ``core.locks``), so none of them can wait on another in a cycle.

Erasure and the retention purge reach this module through payouts' personal-data declaration
(``payouts.privacy``).
"""

from collections import defaultdict
from collections.abc import Collection

from django.db import transaction
from lxml import etree

from core.exceptions import TemporaryFailure
from core.personal_data import ERASED, pseudonym_iban
from payouts.models import PayoutBatch

_LOCK_ATTEMPTS = 5


def pain001_payees_pseudonymise(document: str, end_to_end_ids: Collection[str]) -> tuple[str, int]:
    """``document`` with the creditor of each transaction whose EndToEndId is in
    ``end_to_end_ids`` pseudonymised (see the module docstring), and how many transactions
    changed. Namespace-agnostic (any pain.001 version); the document unchanged when none did.
    Idempotent. Raises lxml's XMLSyntaxError for a document that does not parse."""
    wanted = set(end_to_end_ids)
    if not wanted or not document:
        return document, 0
    parser = etree.XMLParser(resolve_entities=False, no_network=True, huge_tree=True)
    root = etree.fromstring(document.encode(), parser)
    changed = 0
    for tx in root.iter("{*}CdtTrfTxInf"):
        if tx.findtext("{*}PmtId/{*}EndToEndId") not in wanted:
            continue
        before = etree.tostring(tx)
        for path in ("{*}Cdtr/{*}Nm", "{*}UltmtCdtr/{*}Nm", "{*}CdtrAcct/{*}Nm"):
            for name in tx.iterfind(path):
                name.text = ERASED
        for path in ("{*}Cdtr/{*}PstlAdr", "{*}UltmtCdtr/{*}PstlAdr"):
            for address in list(tx.iterfind(path)):
                address.getparent().remove(address)
        for iban in tx.iterfind("{*}CdtrAcct/{*}Id/{*}IBAN"):
            iban.text = pseudonym_iban(iban.text or "")
        for other in tx.iterfind("{*}CdtrAcct/{*}Id/{*}Othr/{*}Id"):
            other.text = "ERASED"
        changed += etree.tostring(tx) != before
    if not changed:
        return document, 0
    return etree.tostring(root.getroottree(), xml_declaration=True, encoding="UTF-8").decode(), changed


class _PutInAnotherBatch(Exception):
    """A payout joined a batch between reading its batch and locking it."""


def payouts_lock(*, payouts) -> list[int]:
    """Lock ``payouts`` (a Payout queryset) in the payout engine's lock order: the rows of the
    batches they travelled in, ascending, then the payout rows, ascending. Returns their ids.

    A payout put into a new batch between the two steps would need that batch's lock after its
    own: the attempt is rolled back (its savepoint, so its locks go too) and made again. Joins the
    caller's transaction. Raises TemporaryFailure (``payouts_contended``) when payouts keep moving
    into new batches (practically never), having locked nothing."""
    for _ in range(_LOCK_ATTEMPTS):
        try:
            with transaction.atomic():
                batch_ids = set(payouts.exclude(batch=None).values_list("batch_id", flat=True))
                list(PayoutBatch.objects.select_for_update().filter(pk__in=batch_ids).order_by("pk").values("pk"))
                locked = list(payouts.select_for_update(of=("self",)).order_by("pk").values_list("pk", "batch_id"))
                if {batch_id for _, batch_id in locked if batch_id is not None} - batch_ids:
                    raise _PutInAnotherBatch
                return [pk for pk, _ in locked]
        except _PutInAnotherBatch:
            continue
    raise TemporaryFailure("Payouts kept moving into new payment files; try again.", code="payouts_contended")


def payout_files_pseudonymise(*, payouts) -> int:
    """Pseudonymise the transactions of ``payouts`` (a Payout queryset) in the stored copy of
    every file they travelled in that has been downloaded; returns how many transactions changed.
    Joins the caller's transaction and locks the batch rows it rewrites: a caller that writes the
    payouts too locks both first, in order (``payouts_lock``)."""
    by_batch: dict[int, set[str]] = defaultdict(set)
    for batch_id, end_to_end_id in payouts.exclude(batch=None).values_list("batch_id", "end_to_end_id"):
        by_batch[batch_id].add(end_to_end_id)
    changed = 0
    batches = PayoutBatch.objects.select_for_update().filter(pk__in=list(by_batch)).exclude(status="built")
    for batch in batches.only("pk", "file"):
        document, count = pain001_payees_pseudonymise(batch.file, by_batch[batch.pk])
        if count:
            PayoutBatch.objects.filter(pk=batch.pk).update(file=document)
            changed += count
    return changed
