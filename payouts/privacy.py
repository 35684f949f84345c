"""Payouts' personal data, declared to the personal-data registry (``core.personal_data``):
creditor names, the Verification-of-Payee suggestion and the masked IBAN of payouts, their copies
in stored pain.001 files (``payouts.payment_files``), and the bank statement lines that booked
them; and the retention of notices to people and their deliveries, which hold no personal data but
grow with every payout: declared here because whether a notice is still needed depends on its
reward and its payout, which recipients (below campaigns and payouts) cannot know. Registered by
``PayoutsConfig.ready``."""

from datetime import timedelta

from django.conf import settings
from django.db.models import F, Q, Value
from django.db.models.functions import Concat

from campaigns.models import RewardStatus
from core.personal_data import (
    BLANK,
    DELETE,
    ERASED,
    EraseAgain,
    Erasure,
    PersonalData,
    Retention,
)
from payouts.models import Payout, PayoutStatus
from payouts.payment_files import payout_files_pseudonymise, payouts_lock
from recipients.models_notices import Notice, NoticeDelivery, NoticeStatus
from reconciliation.services.pseudonymise import statement_lines_pseudonymise, statement_lines_tied

PAYOUT_BLANK = {
    "creditor_name": ERASED,
    "vop_suggested_name": "",
    "creditor_iban_masked": Concat(F("creditor_country"), Value(" ***")),
}


def _payout_lines(payouts) -> dict:
    rows = list(payouts.values_list("pk", "end_to_end_id", "batch_id", "bank_debit_line_id", "bank_return_line_id"))
    batches: dict[int, set[str]] = {}
    for _, end_to_end_id, batch_id, _, _ in rows:
        if batch_id is not None:
            batches.setdefault(batch_id, set()).add(end_to_end_id)
    return {
        "payout_ids": [r[0] for r in rows],
        "line_ids": {line for r in rows for line in r[3:] if line is not None},
        "batch_end_to_end_ids": batches,
        "end_to_end_ids": {r[1] for r in rows},
    }


def _payouts_erase(erasure: Erasure) -> dict[str, int]:
    """First their payee data out of the statement lines tied to their payouts and of lines
    carrying their IBAN (``reconciliation.services.pseudonymise``: dedupe keys, amounts, dates,
    bank references and matches stay) — lines before payouts, the lock order (``core.locks``).
    Then names out of payouts, and name and IBAN out of their transactions in stored pain.001
    files (``payouts.payment_files``: a file not downloaded yet stays whole until its download).
    A payout keeps its amount, status, ledger entries and the masked IBAN's country;
    ``PRIVACY_PAYOUT_NAME_KEEP_DAYS`` keeps the creditor name, and the file's copy of it, of
    payouts younger than that where bookkeeping law requires it (the retention purge blanks them
    later). Raises EraseAgain when a line was matched to them meanwhile."""
    theirs = Payout.objects.filter(person_id__in=erasure.cluster)
    lines, lines_done = statement_lines_pseudonymise(
        **_payout_lines(theirs), ibans=erasure.values["iban"], needles=erasure.needles
    )
    payouts = Payout.objects.filter(pk__in=payouts_lock(payouts=theirs))
    tied = _payout_lines(payouts)
    if (
        statement_lines_tied(
            payout_ids=tied["payout_ids"], line_ids=tied["line_ids"], batch_ids=tied["batch_end_to_end_ids"]
        )
        - lines_done
    ):
        raise EraseAgain  # a line was matched to them after their lines were done: do them again
    keep_days = getattr(settings, "PRIVACY_PAYOUT_NAME_KEEP_DAYS", 0)
    erasable = payouts.filter(created_at__lt=erasure.now - timedelta(days=keep_days)) if keep_days else payouts
    erased = erasable.update(**PAYOUT_BLANK)
    payout_files_pseudonymise(payouts=erasable)
    return {"statement_lines": lines, "payouts": erased}


def _payouts_blank(rows) -> int:
    """Blank the names as erasure does, and pseudonymise those payouts' transactions in the
    stored pain.001 files (name and IBAN, by EndToEndId), batches and payouts locked in order."""
    found = Payout.objects.filter(pk__in=payouts_lock(payouts=rows))
    payout_files_pseudonymise(payouts=found)
    return found.update(**PAYOUT_BLANK)


_OPEN_REWARDS = (RewardStatus.REVIEW, RewardStatus.HELD, RewardStatus.PAYABLE)
_PAYOUTS_ON_THEIR_WAY = (PayoutStatus.CREATED, PayoutStatus.SUBMITTING, PayoutStatus.SUBMITTED)

# Registered by the app's ``AppConfig.ready``, in this order.
PERSONAL_DATA = (
    PersonalData(
        kind="payouts",
        model=Payout,
        blank=PAYOUT_BLANK,
        erase=_payouts_erase,
        blank_rows=_payouts_blank,
        retention=Retention(
            kind="payout_names",
            setting="PRIVACY_PAYOUT_NAME_KEEP_DAYS",
            default_days=0,
            date_field="created_at",
            purge=BLANK,
            scope=Q(person__erased_at__isnull=False),
            done=Q(creditor_name=ERASED),
        ),
        export=(
            "id",
            "amount_minor",
            "currency",
            "status",
            "rail",
            "end_to_end_id",
            "creditor_name",
            "creditor_iban_masked",
            "creditor_country",
            "vop_result",
            "vop_suggested_name",
            "reason_code",
            "reason_text",
            "created_at",
        ),
        names=("creditor_name", "vop_suggested_name"),
    ),
    # A notice is state while its reward is open: the claim-link sweep and the unclaimed-money
    # sweep (reminders, then the date the money goes back) read it back as "already told", and
    # ``notices_record`` skips a key it finds. Deleted while the reward is open, it would be sent
    # again. A payout still on its way may yet record its "paid" or "failed" notice.
    PersonalData(
        kind="notice_deliveries",
        model=NoticeDelivery,
        retention=Retention(
            kind="notice_deliveries",
            setting="RETENTION_NOTICES_DAYS",
            default_days=180,
            date_field="notice__done_at",
            purge=DELETE,
            scope=Q(notice__status=NoticeStatus.DONE),
            keep=Q(notice__reward__status__in=_OPEN_REWARDS) | Q(notice__payout__status__in=_PAYOUTS_ON_THEIR_WAY),
        ),
    ),
    # After its deliveries (a delivery protects its notice): one whose deliveries a run's time
    # budget left, or kept because its reward reopened in between, waits for a run that took them.
    # A dry run therefore counts only the notices whose deliveries are gone already.
    PersonalData(
        kind="notices",
        model=Notice,
        retention=Retention(
            kind="notices",
            setting="RETENTION_NOTICES_DAYS",
            default_days=180,
            date_field="done_at",
            purge=DELETE,
            scope=Q(status=NoticeStatus.DONE),
            keep=Q(reward__status__in=_OPEN_REWARDS)
            | Q(payout__status__in=_PAYOUTS_ON_THEIR_WAY)
            | Q(deliveries__isnull=False),
        ),
    ),
)
