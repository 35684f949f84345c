"""The books: a double-entry ledger in integer minor units.

Sign convention: a posting's ``amount_minor`` is positive for a debit and negative for a credit, so
every journal entry sums to zero per currency. An account's materialised ``posted_minor`` is its
balance on its *normal* side (debit for assets and expenses, credit for the others), kept by a
database trigger in the same statement that inserts the posting — never by Python — so raw SQL
cannot make the stored balance drift from the postings. ``reconciliation/sql/`` holds the
triggers and constraints; the migrations install them.
"""

from django.db import models
from django.db.models import F, Q

from core.money import format_minor


class AccountKind(models.TextChoices):
    ASSET = "asset", "Asset"
    LIABILITY = "liability", "Liability"
    EQUITY = "equity", "Equity"
    INCOME = "income", "Income"
    EXPENSE = "expense", "Expense"


DEBIT_NORMAL_KINDS = frozenset({AccountKind.ASSET, AccountKind.EXPENSE})


class Account(models.Model):
    code = models.CharField(max_length=120, unique=True)
    name = models.CharField(max_length=200)
    kind = models.CharField(max_length=16, choices=AccountKind.choices)
    currency = models.CharField(max_length=3)
    owner_type = models.CharField(max_length=40, blank=True, default="")
    owner_id = models.CharField(max_length=64, blank=True, default="")
    allow_overdraft = models.BooleanField(
        default=False, help_text="When off, the database refuses any posting or hold that takes available below zero."
    )
    is_active = models.BooleanField(default=True)
    # Materialised balances, written only by the posting and hold triggers.
    posted_minor = models.BigIntegerField(default=0, editable=False)
    held_minor = models.BigIntegerField(default=0, editable=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(allow_overdraft=True) | Q(posted_minor__gte=F("held_minor")),
                name="account_no_overdraft",
            ),
            models.CheckConstraint(condition=Q(held_minor__gte=0), name="account_held_not_negative"),
            models.CheckConstraint(condition=Q(kind__in=AccountKind.values), name="account_kind_valid"),
        ]
        indexes = [models.Index(fields=["owner_type", "owner_id"], name="account_owner_idx")]
        permissions = [("view_ledger_reports", "Can view ledger reports (trial balance, statements)")]

    def __str__(self) -> str:
        return self.code

    @property
    def is_debit_normal(self) -> bool:
        return self.kind in DEBIT_NORMAL_KINDS

    @property
    def available_minor(self) -> int:
        return self.posted_minor - self.held_minor

    def format(self, amount_minor: int) -> str:
        return format_minor(amount_minor, self.currency)


class JournalEntry(models.Model):
    idempotency_key = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=40)
    memo = models.CharField(max_length=500, blank=True, default="")
    effective_date = models.DateField()
    created_at = models.DateTimeField()
    # What caused it, as a loose reference so the books import no other app.
    reference_type = models.CharField(max_length=40, blank=True, default="")
    reference_id = models.CharField(max_length=64, blank=True, default="")
    reverses = models.OneToOneField("self", null=True, blank=True, on_delete=models.PROTECT, related_name="reversed_by")
    # sha256 of the canonical content: a replay with the same key must carry the same content.
    content_hash = models.CharField(max_length=64)

    class Meta:
        verbose_name_plural = "journal entries"
        indexes = [
            models.Index(fields=["reference_type", "reference_id"], name="entry_reference_idx"),
            models.Index(fields=["created_at"], name="entry_created_idx"),
        ]
        constraints = [
            models.CheckConstraint(condition=~Q(idempotency_key=""), name="entry_key_not_empty"),
            models.CheckConstraint(condition=~Q(reverses=F("id")), name="entry_not_self_reversing"),
        ]

    def __str__(self) -> str:
        return f"#{self.pk} {self.kind} {self.idempotency_key}"

    def save(self, *args, **kwargs):
        if self.pk is not None and not kwargs.get("force_insert"):
            raise RuntimeError("Journal entries are append-only; post a reversing entry instead.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise RuntimeError("Journal entries are append-only; post a reversing entry instead.")


class Posting(models.Model):
    # No database FK to the entry either: the posting trigger checks the entry exists (entries are
    # never deleted), with a point lookup, where Django's deferred FK check would run at commit —
    # inside the hot account's lock window — with a plan cached while the table was small.
    entry = models.ForeignKey(JournalEntry, on_delete=models.PROTECT, related_name="postings", db_constraint=False)
    # No database FK here on purpose: the posting trigger already refuses an unknown account (and
    # accounts can never be deleted), while an FK check would take a KEY SHARE lock on the account
    # row at every commit — on a hot budget account that turns every writer into a MultiXact
    # member and the throughput decays as the account's history grows.
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="postings", db_constraint=False)
    amount_minor = models.BigIntegerField(help_text="Positive: debit. Negative: credit.")
    currency = models.CharField(max_length=3)
    # The account's normal-side balance right after this posting, set by the trigger: statements
    # page by id without summing history.
    balance_after_minor = models.BigIntegerField(default=0, editable=False)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=~Q(amount_minor=0), name="posting_amount_not_zero"),
        ]
        indexes = [models.Index(fields=["account", "id"], name="posting_account_id_idx")]

    def __str__(self) -> str:
        return f"{self.account_id} {format_minor(self.amount_minor, self.currency)}"

    def save(self, *args, **kwargs):
        if self.pk is not None and not kwargs.get("force_insert"):
            raise RuntimeError("Postings are append-only.")
        super().save(*args, **kwargs)

    def delete(self, *args, **kwargs):
        raise RuntimeError("Postings are append-only.")

    @property
    def debit_minor(self) -> int:
        return self.amount_minor if self.amount_minor > 0 else 0

    @property
    def credit_minor(self) -> int:
        return -self.amount_minor if self.amount_minor < 0 else 0


class HoldStatus(models.TextChoices):
    PENDING = "pending", "Pending"
    COMMITTED = "committed", "Committed"
    VOIDED = "voided", "Voided"
    EXPIRED = "expired", "Expired"


class Hold(models.Model):
    """Money reserved on an account (two-phase). Leaves ``pending`` exactly once; a trigger
    refuses any later change and keeps the account's ``held_minor`` equal to its pending holds."""

    idempotency_key = models.CharField(max_length=200, unique=True)
    # No database FK, for the same reason as Posting.account: the hold trigger checks the account.
    account = models.ForeignKey(Account, on_delete=models.PROTECT, related_name="holds", db_constraint=False)
    amount_minor = models.BigIntegerField()
    currency = models.CharField(max_length=3)
    status = models.CharField(max_length=12, choices=HoldStatus.choices, default=HoldStatus.PENDING)
    memo = models.CharField(max_length=500, blank=True, default="")
    reference_type = models.CharField(max_length=40, blank=True, default="")
    reference_id = models.CharField(max_length=64, blank=True, default="")
    expires_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField()
    resolved_at = models.DateTimeField(null=True, blank=True)
    committed_amount_minor = models.BigIntegerField(null=True, blank=True)
    # Unique where set (constraint below), not a one-to-one: its index would take every pending
    # hold's NULL.
    commit_entry = models.ForeignKey(
        JournalEntry, null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(amount_minor__gt=0), name="hold_amount_positive"),
            models.CheckConstraint(condition=Q(status__in=HoldStatus.values), name="hold_status_valid"),
            models.CheckConstraint(
                condition=(
                    Q(
                        status=HoldStatus.COMMITTED,
                        commit_entry__isnull=False,
                        committed_amount_minor__gt=0,
                        committed_amount_minor__lte=F("amount_minor"),
                        resolved_at__isnull=False,
                    )
                    | Q(
                        status__in=[HoldStatus.VOIDED, HoldStatus.EXPIRED],
                        commit_entry__isnull=True,
                        committed_amount_minor__isnull=True,
                        resolved_at__isnull=False,
                    )
                    | Q(
                        status=HoldStatus.PENDING,
                        commit_entry__isnull=True,
                        committed_amount_minor__isnull=True,
                        resolved_at__isnull=True,
                    )
                ),
                name="hold_status_coherent",
            ),
            models.UniqueConstraint(
                fields=["commit_entry"], condition=Q(commit_entry__isnull=False), name="hold_commit_entry_unique"
            ),
        ]
        # Only what is looked up: pending holds that can expire (a reward's hold never does). The
        # reference is not an index — nothing finds a hold by it; the reward points to its hold.
        indexes = [
            models.Index(
                fields=["expires_at"],
                name="hold_pending_expiry_idx",
                condition=Q(status="pending", expires_at__isnull=False),
            ),
        ]

    def __str__(self) -> str:
        return f"hold #{self.pk} {format_minor(self.amount_minor, self.currency)} {self.status}"
