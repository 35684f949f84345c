"""Payouts: money owed to a person, sent over a rail, confirmed by the rail or the bank.

Status moves only through ``payouts.services`` (conditional UPDATEs or lock-then-check, each with a
PayoutEvent in the same transaction)::

    created → submitting → submitted → settled → returned
        ↘ cancelled   ↘ created (retry)  ↘ failed

The ledger entries a payout posts are kept on the row: ``sent_entry`` (payable → in transit, when
the rail accepts), ``settled_entry`` (in transit → bank), ``back_entry`` (money back to payable:
from in transit when a submitted payout fails, from the bank when a payout is returned). A return
the bank statement shows before the debit may leave a returned payout without ``settled_entry``
until the debit line is matched. The CHECK constraints below make status and entries agree.
"""

from django.conf import settings
from django.db import models
from django.db.models import F, Q
from django.utils.translation import gettext_lazy as _

from campaigns.models import VopAction
from core.money import format_minor


class PayoutStatus(models.TextChoices):
    CREATED = "created", _("Created")
    SUBMITTING = "submitting", _("Submitting")
    SUBMITTED = "submitted", _("Submitted")
    SETTLED = "settled", _("Settled")
    FAILED = "failed", _("Failed")
    RETURNED = "returned", _("Returned")
    CANCELLED = "cancelled", _("Cancelled")


SERVICE_LEVELS = [("instant", "Instant (SCT Inst)"), ("standard", "Standard (SCT, 1 business day)")]

# A payout in one of these still owns its rewards (their items are active).
LIVE_STATUSES = (PayoutStatus.CREATED, PayoutStatus.SUBMITTING, PayoutStatus.SUBMITTED, PayoutStatus.SETTLED)


class BatchStatus(models.TextChoices):
    BUILT = "built", "Built"
    DOWNLOADED = "downloaded", "Downloaded"
    ACCEPTED = "accepted", "Accepted by the bank"
    REJECTED = "rejected", "Rejected by the bank"
    # Never downloaded within PAYOUT_BATCH_EXPIRE_DAYS: never sent, its payouts failed and paid anew.
    EXPIRED = "expired", "Expired (never downloaded)"


class PayoutBatch(models.Model):
    """One pain.001 file for one debtor account and execution date. ``batch_id`` is the file's
    MsgId; its single payment-information block is ``<batch_id>-<YYYYMMDD>``."""

    batch_id = models.CharField(max_length=26, unique=True)
    payment_information_id = models.CharField(max_length=35, unique=True)
    debtor_account_code = models.CharField(max_length=120)
    debtor_iban = models.CharField(max_length=34)
    currency = models.CharField(max_length=3, default="EUR")
    execution_date = models.DateField()
    count = models.PositiveIntegerField()
    control_sum_minor = models.BigIntegerField()
    status = models.CharField(max_length=12, choices=BatchStatus.choices, default=BatchStatus.BUILT)
    file = models.TextField(help_text="The XSD-validated pain.001.001.09 document.")
    requires_approval = models.BooleanField(default=False)
    # Marked SCT Inst (LclInstrm INST): the debtor's bank executes instant files.
    instant = models.BooleanField(default=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    approved_at = models.DateTimeField(null=True, blank=True)
    downloaded_at = models.DateTimeField(null=True, blank=True)
    downloaded_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        verbose_name_plural = "payout batches"
        constraints = [
            models.CheckConstraint(condition=Q(count__gt=0), name="payout_batch_count_positive"),
            models.CheckConstraint(condition=Q(control_sum_minor__gt=0), name="payout_batch_sum_positive"),
            models.CheckConstraint(condition=Q(status__in=BatchStatus.values), name="payout_batch_status_valid"),
            models.CheckConstraint(
                condition=Q(approved_by__isnull=True) | ~Q(approved_by=F("created_by")),
                name="payout_batch_four_eyes",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["built", "expired"])
                | Q(requires_approval=False)
                | Q(approved_at__isnull=False),
                name="payout_batch_approved_before_download",
            ),
        ]
        permissions = [
            ("approve_payoutbatch", "Can approve a payout batch created by someone else"),
            ("download_payoutbatch", "Can download a pain.001 file"),
        ]

    def __str__(self) -> str:
        return f"batch {self.batch_id} ({self.count})"


class PayoutBatchEvent(models.Model):
    """The audit trail of a payout batch: what staff (and the expiry sweep) did with the file —
    ``batch.built``, ``batch.approved`` (the four-eyes step), ``batch.downloaded`` (every download:
    each hands out a file a bank would execute), ``batch.expired``. The batch row's own
    ``approved_by`` / ``downloaded_by`` are a convenience for the list; this table is the record.
    Append-only and hash-chained per batch in PostgreSQL (payouts 0003, ``core.audit_sql``)."""

    batch = models.ForeignKey(PayoutBatch, on_delete=models.PROTECT, related_name="events")
    kind = models.CharField(max_length=40)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    reason = models.TextField(blank=True, default="")
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["batch", "id"], name="payout_batch_event_batch_idx")]

    def __str__(self) -> str:
        return f"{self.kind} {self.batch_id}"


class RouteRule(models.Model):
    """Admin-configurable routing (``payouts.rails.routing``): lower priority first, blank = any."""

    priority = models.PositiveIntegerField(default=100)
    currency = models.CharField(max_length=3, blank=True, default="")
    country = models.CharField(max_length=2, blank=True, default="")
    min_amount_minor = models.BigIntegerField(null=True, blank=True)
    max_amount_minor = models.BigIntegerField(null=True, blank=True)
    rail = models.CharField(max_length=40)
    fallback_rail = models.CharField(max_length=40, blank=True, default="")
    active = models.BooleanField(default=True)

    class Meta:
        ordering = ["priority", "id"]
        constraints = [
            models.CheckConstraint(
                condition=Q(min_amount_minor__isnull=True)
                | Q(max_amount_minor__isnull=True)
                | Q(min_amount_minor__lte=F("max_amount_minor")),
                name="route_rule_amount_range",
            ),
            models.CheckConstraint(condition=~Q(rail=""), name="route_rule_rail_set"),
        ]

    def __str__(self) -> str:
        return f"{self.priority}: {self.currency or '*'}/{self.country or '*'} → {self.rail}"


class Payout(models.Model):
    person = models.ForeignKey("recipients.Person", on_delete=models.PROTECT, related_name="payouts")
    amount_minor = models.BigIntegerField()
    currency = models.CharField(max_length=3)
    rail = models.CharField(max_length=40)
    fallback_rail = models.CharField(max_length=40, blank=True, default="")
    status = models.CharField(max_length=12, choices=PayoutStatus.choices, default=PayoutStatus.CREATED)
    # Generated and stored at creation, before any rail call: the rail's idempotency key.
    end_to_end_id = models.CharField(max_length=35, unique=True)
    rail_reference = models.CharField(max_length=120, blank=True, default="")
    # How the payment travels, as the rail reported it after routing (instant: SCT Inst; standard:
    # SCT, next business day); blank until it is sent. What the person's status page promises.
    service_level = models.CharField(max_length=10, blank=True, default="", choices=SERVICE_LEVELS)
    # Creditor snapshot: what was sent, even if the person changes their IBAN later.
    bank_account = models.ForeignKey(
        "recipients.BankAccount", null=True, blank=True, on_delete=models.PROTECT, related_name="payouts"
    )
    creditor_name = models.CharField(max_length=140)
    creditor_iban_masked = models.CharField(max_length=40, blank=True, default="")
    creditor_iban_fingerprint = models.CharField(max_length=64, blank=True, default="", db_index=True)
    creditor_country = models.CharField(max_length=2)
    debtor_account_code = models.CharField(max_length=120)
    # Verification of Payee, checked once before the payout is sent (or put into a file), and
    # the campaign policy's action on the answer. A hold (review, ask, block) is ``needs_review``:
    # staff release a review; the person confirms the bank's name (ask) or corrects their
    # details (block, ask), which cancels this payout for a new one.
    vop_result = models.CharField(max_length=20, blank=True, default="")
    vop_suggested_name = models.CharField(max_length=140, blank=True, default="")
    vop_checked_at = models.DateTimeField(null=True, blank=True)
    vop_action = models.CharField(max_length=8, blank=True, default="", choices=VopAction.choices)
    needs_review = models.BooleanField(default=False)
    review_reason = models.CharField(max_length=200, blank=True, default="")
    reason_code = models.CharField(max_length=8, blank=True, default="")
    reason_text = models.CharField(max_length=500, blank=True, default="")
    # Execution bookkeeping: the claim is a conditional UPDATE on status + attempts.
    attempts = models.PositiveIntegerField(default=0)
    next_attempt_at = models.DateTimeField(null=True, blank=True)
    claimed_at = models.DateTimeField(null=True, blank=True)
    # When its execute task was enqueued (or its creator took it to run itself); cleared by the
    # claim. A payout has one executor waiting at a time: the sweep enqueues only those with none
    # (payouts_enqueue_due).
    queued_at = models.DateTimeField(null=True, blank=True)
    # Four-eyes.
    requires_approval = models.BooleanField(default=False)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    approved_at = models.DateTimeField(null=True, blank=True)
    batch = models.ForeignKey(PayoutBatch, null=True, blank=True, on_delete=models.PROTECT, related_name="payouts")
    # Ledger entries and how settlement / return were learnt ("rail", "pain002", "line:<id>").
    # Foreign keys: a pain.001 batch moves all its payouts to in transit with one entry, and one
    # bank line booking the whole batch settles them with one entry.
    sent_entry = models.ForeignKey(
        "reconciliation.JournalEntry", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    settled_entry = models.ForeignKey(
        "reconciliation.JournalEntry", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    back_entry = models.OneToOneField(
        "reconciliation.JournalEntry", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    settled_via = models.CharField(max_length=40, blank=True, default="")
    returned_via = models.CharField(max_length=40, blank=True, default="")
    # The statement lines that showed the money leave / come back (set by the matchers).
    bank_debit_line_id = models.BigIntegerField(null=True, blank=True)
    bank_return_line_id = models.BigIntegerField(null=True, blank=True)
    created_at = models.DateTimeField()
    submitted_at = models.DateTimeField(null=True, blank=True)
    settled_at = models.DateTimeField(null=True, blank=True)
    failed_at = models.DateTimeField(null=True, blank=True)
    returned_at = models.DateTimeField(null=True, blank=True)
    cancelled_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(amount_minor__gt=0), name="payout_amount_positive"),
            models.CheckConstraint(condition=Q(status__in=PayoutStatus.values), name="payout_status_valid"),
            models.CheckConstraint(condition=~Q(end_to_end_id=""), name="payout_end_to_end_id_set"),
            models.CheckConstraint(
                condition=Q(approved_by__isnull=True) | Q(created_by__isnull=True) | ~Q(approved_by=F("created_by")),
                name="payout_four_eyes",
            ),
            models.CheckConstraint(
                condition=Q(requires_approval=False)
                | Q(approved_at__isnull=False)
                | Q(status__in=["created", "cancelled", "failed"]),
                name="payout_approved_before_sending",
            ),
            models.CheckConstraint(
                condition=Q(status__in=["created", "submitting", "failed", "cancelled"]) | Q(sent_entry__isnull=False),
                name="payout_sent_has_entry",
            ),
            models.CheckConstraint(
                condition=~Q(status="settled") | Q(settled_entry__isnull=False, settled_at__isnull=False),
                name="payout_settled_has_entry",
            ),
            models.CheckConstraint(
                condition=~Q(status="returned") | Q(back_entry__isnull=False, returned_at__isnull=False),
                name="payout_returned_has_entry",
            ),
            models.CheckConstraint(
                condition=~Q(status="failed") | (Q(failed_at__isnull=False) & ~Q(reason_code="")),
                name="payout_failed_has_reason",
            ),
            models.CheckConstraint(
                condition=~Q(status="submitting") | Q(claimed_at__isnull=False), name="payout_submitting_claimed"
            ),
            models.CheckConstraint(
                condition=Q(vop_action="") | (Q(vop_action__in=VopAction.values) & Q(vop_checked_at__isnull=False)),
                name="payout_vop_action_checked",
            ),
            models.CheckConstraint(
                condition=Q(service_level__in=["", "instant", "standard"]), name="payout_service_level_valid"
            ),
        ]
        indexes = [
            models.Index(fields=["status", "next_attempt_at"], name="payout_status_next_idx"),
            models.Index(fields=["person", "status"], name="payout_person_status_idx"),
            models.Index(fields=["status", "settled_at"], name="payout_status_settled_idx"),
        ]
        permissions = [
            ("approve_payout", "Can approve a payout (four-eyes) or release one held for review"),
            ("retry_payout", "Can retry a failed or waiting payout"),
            ("cancel_payout", "Can cancel a payout that has not been sent"),
        ]

    def __str__(self) -> str:
        return f"payout {self.end_to_end_id} {format_minor(self.amount_minor, self.currency)} {self.status}"

    @property
    def held_by_ops(self) -> bool:
        """Not sent, waiting for staff: held for review, or for a second approval not given yet."""
        return self.status == PayoutStatus.CREATED and (
            self.needs_review or (self.requires_approval and not self.approved_at)
        )


class PayoutItem(models.Model):
    """A reward paid by a payout. ``active`` while the payout is live: the partial unique
    constraint means a reward is in at most one live payout, and a failed or returned payout
    releases its rewards (``active=False``) for the next one."""

    payout = models.ForeignKey(Payout, on_delete=models.PROTECT, related_name="items")
    reward = models.ForeignKey("campaigns.Reward", on_delete=models.PROTECT, related_name="payout_items")
    amount_minor = models.BigIntegerField()
    active = models.BooleanField(default=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["reward"], condition=Q(active=True), name="payout_item_reward_once_live"),
            models.UniqueConstraint(fields=["payout", "reward"], name="payout_item_unique"),
            models.CheckConstraint(condition=Q(amount_minor__gt=0), name="payout_item_amount_positive"),
        ]

    def __str__(self) -> str:
        return f"reward #{self.reward_id} in payout #{self.payout_id}{'' if self.active else ' (released)'}"


class AttemptOutcome(models.TextChoices):
    RUNNING = "running", "Running (or the worker died)"
    SETTLED = "settled", "Settled"
    ACCEPTED = "accepted", "Accepted by the rail"
    RETRY = "retry", "Retryable error"
    FAILED = "failed", "Refused by the rail"
    REVIEW = "review", "Held for review"
    PAYEE = "payee", "Held for the person (Verification of Payee)"
    FALLBACK = "fallback", "Moved to the route's fallback rail (no instant transfer possible)"
    SUPERSEDED = "superseded", "Another worker recorded this payout"


class PayoutAttempt(models.Model):
    payout = models.ForeignKey(Payout, on_delete=models.CASCADE, related_name="attempt_log")
    number = models.PositiveIntegerField()
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    outcome = models.CharField(max_length=12, choices=AttemptOutcome.choices, default=AttemptOutcome.RUNNING)
    recovered = models.BooleanField(default=False, help_text="Started by asking the rail for the status first.")
    error_class = models.CharField(max_length=80, blank=True, default="")
    reason_code = models.CharField(max_length=8, blank=True, default="")
    reason_text = models.CharField(max_length=500, blank=True, default="")
    rail_response = models.CharField(max_length=500, blank=True, default="")

    class Meta:
        constraints = [models.UniqueConstraint(fields=["payout", "number"], name="payout_attempt_unique")]

    def __str__(self) -> str:
        return f"attempt {self.number}: {self.outcome}"


class PayoutEvent(models.Model):
    """Audit trail and webhook source: ``payout.created``, ``payout.submitted``, ``payout.settled``,
    ``payout.failed``, ``payout.returned``, ``payout.cancelled``, ``payout.approved``,
    ``payout.review``, ``payout.retry``, ``payout.settle_undone``, ``payout.return_undone``."""

    payout = models.ForeignKey(Payout, on_delete=models.CASCADE, related_name="events")
    kind = models.CharField(max_length=40)
    from_status = models.CharField(max_length=12, blank=True, default="")
    to_status = models.CharField(max_length=12, blank=True, default="")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        indexes = [
            models.Index(fields=["payout", "id"], name="payout_event_payout_idx"),
            models.Index(fields=["kind", "id"], name="payout_event_kind_idx"),
        ]

    def __str__(self) -> str:
        return f"{self.kind} {self.from_status}→{self.to_status}"


class BrandBankAccountStatus(models.TextChoices):
    PENDING = "pending", _("Waiting for our check")
    VERIFIED = "verified", _("Verified")
    REJECTED = "rejected", _("Rejected")


class BrandBankAccount(models.Model):
    """A bank account a brand withdraws its unspent funds to. The brand is paid like a person —
    through its own payee ``Person`` and that person's ``BankAccount`` — so a withdrawal is a
    plain ``Payout`` on the one execution path (rails, four-eyes, statement matching, returns).

    Proof that the account is the brand's: ops check it against the brand's company documents
    (or a top-up it sent from) and verify it in the admin — never the member who registered it
    (``brand_bank_account_verifier_differs``). Only a verified account receives money."""

    brand = models.ForeignKey("campaigns.Brand", on_delete=models.PROTECT, related_name="+")
    payee = models.ForeignKey("recipients.Person", on_delete=models.PROTECT, related_name="+")
    bank_account = models.OneToOneField("recipients.BankAccount", on_delete=models.PROTECT, related_name="+")
    masked = models.CharField(max_length=40)
    holder_name = models.CharField(max_length=140)
    status = models.CharField(
        max_length=10, choices=BrandBankAccountStatus.choices, default=BrandBankAccountStatus.PENDING
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField()
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=BrandBankAccountStatus.values), name="brand_bank_account_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(status="pending", decided_at__isnull=True, decided_by__isnull=True)
                | (~Q(status="pending") & Q(decided_at__isnull=False, decided_by__isnull=False)),
                name="brand_bank_account_decided_coherent",
            ),
            models.CheckConstraint(
                condition=Q(decided_by__isnull=True) | ~Q(decided_by=F("created_by")),
                name="brand_bank_account_verifier_differs",
            ),
        ]
        permissions = [("verify_brandbankaccount", "Can verify a brand's bank account for withdrawals")]

    def __str__(self) -> str:
        return f"{self.masked} ({self.get_status_display()})"


class Withdrawal(models.Model):
    """A brand's unspent funds sent to its verified bank account. Owns one ``Payout`` to the
    brand's payee: the withdrawal's entry (``withdrawal:<key>``) moves the money from
    ``brand:<id>:funds`` to the payee's payable; from there the payout moves it like any other."""

    brand = models.ForeignKey("campaigns.Brand", on_delete=models.PROTECT, related_name="+")
    bank_account = models.ForeignKey(BrandBankAccount, on_delete=models.PROTECT, related_name="withdrawals")
    payout = models.OneToOneField(Payout, on_delete=models.PROTECT, related_name="withdrawal")
    amount_minor = models.BigIntegerField()
    currency = models.CharField(max_length=3)
    idempotency_key = models.CharField(max_length=120, unique=True)
    entry = models.OneToOneField("reconciliation.JournalEntry", on_delete=models.PROTECT, related_name="+")
    # The money of a payout that did not reach the bank (returned, failed, cancelled) back in the
    # brand's funds (``withdrawal_refund``): payee's payable → ``brand:<id>:funds``, once.
    back_entry = models.OneToOneField(
        "reconciliation.JournalEntry", null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField()

    class Meta:
        constraints = [models.CheckConstraint(condition=Q(amount_minor__gt=0), name="withdrawal_amount_positive")]
        permissions = [("refund_withdrawal", "Can give a withdrawal that did not arrive back to the brand's funds")]

    def __str__(self) -> str:
        return f"withdrawal #{self.pk} {format_minor(self.amount_minor, self.currency)}"
