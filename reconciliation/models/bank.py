"""The bank side of reconciliation: the platform's bank accounts, imported statements and their
lines, matches (a line explained by a business object, with the ledger entry that records it),
suggestions for staff, and an audit row for every staff action.

Amounts on statements are kept exactly as the bank wrote them (``Decimal`` with up to five places);
``amount_minor`` is filled when the amount is exact in the currency's minor unit, which is what the
ledger and the matchers work with.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q

from core.money import format_amount
from reconciliation.models.ledger import Account, JournalEntry
from reconciliation.statements.formats import statement_format_validate


class PlatformBankAccount(models.Model):
    """One currency of one of the platform's bank accounts, with the ledger account mirroring it.

    The account is identified by its IBAN or, where the bank gives none (a USD account), by
    ``other_id`` in ``other_scheme`` (camt ``Acct/Id/Othr``). An account held in several currencies
    is one row per currency sharing the identifier, so each currency has its own ledger account.
    A bank that sends only a CSV export names its layout in ``statement_format``.
    """

    name = models.CharField(max_length=120)
    iban = models.CharField(max_length=34, blank=True, default="")
    other_id = models.CharField(max_length=34, blank=True, default="")
    other_scheme = models.CharField(max_length=35, blank=True, default="")
    bic = models.CharField(max_length=11, blank=True, default="")
    currency = models.CharField(max_length=3)
    ledger_account = models.OneToOneField(Account, on_delete=models.PROTECT, related_name="bank_account")
    # Where the bank's clock runs: a booking at 2014-01-04T23:00Z is booked on the 5th in Amsterdam.
    time_zone = models.CharField(max_length=64, default="Europe/Amsterdam")
    # How its uploads are read unless the upload says otherwise: a name from the statement format
    # registry (``reconciliation.statements.formats``; no ``choices`` here, so a new bank layout
    # needs no migration). Blank: camt.053 or camt.054, whichever the file is.
    statement_format = models.CharField(max_length=40, blank=True, default="", validators=[statement_format_validate])
    is_active = models.BooleanField(default=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=(Q(iban="") & ~Q(other_id="")) | (~Q(iban="") & Q(other_id="")),
                name="platform_account_one_identifier",
            ),
            models.UniqueConstraint(
                fields=["iban", "currency"], condition=~Q(iban=""), name="platform_account_iban_currency_unique"
            ),
            models.UniqueConstraint(
                fields=["other_id", "currency"],
                condition=~Q(other_id=""),
                name="platform_account_other_currency_unique",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.name} ({self.identifier} {self.currency})"

    @property
    def identifier(self) -> str:
        return self.iban or self.other_id


class StatementImport(models.Model):
    """One uploaded file. Its sha256 makes a re-upload of the same bytes a no-op."""

    class Source(models.TextChoices):
        ADMIN = "admin", "Admin upload"
        COMMAND = "command", "Management command"
        API = "api", "API"

    sha256 = models.CharField(max_length=64, unique=True)
    filename = models.CharField(max_length=255)
    size_bytes = models.PositiveBigIntegerField()
    kind = models.CharField(max_length=10)
    source = models.CharField(max_length=10, choices=Source.choices)
    imported_by = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT)
    created_at = models.DateTimeField(auto_now_add=True)
    statements_count = models.PositiveIntegerField(default=0)
    lines_count = models.PositiveIntegerField(default=0)
    new_lines_count = models.PositiveIntegerField(default=0)

    def __str__(self) -> str:
        return f"{self.filename} ({self.created_at:%Y-%m-%d %H:%M})"


class BankStatement(models.Model):
    """One statement, or one page of a statement the bank split over several messages (MsgPgntn /
    StmtPgntn). ``part`` numbers the blocks of one statement page that a single file repeats, so a
    repeated block is stored (and its bookings flagged) instead of being skipped."""

    statement_import = models.ForeignKey(StatementImport, on_delete=models.PROTECT, related_name="statements")
    bank_account = models.ForeignKey(PlatformBankAccount, on_delete=models.PROTECT, related_name="statements")
    statement_id = models.CharField(max_length=64)
    kind = models.CharField(max_length=10)
    version = models.CharField(max_length=10, blank=True, default="")
    message_id = models.CharField(max_length=64, blank=True, default="")
    electronic_sequence_number = models.BigIntegerField(null=True, blank=True)
    page_number = models.PositiveIntegerField(default=1)
    last_page = models.BooleanField(null=True, blank=True)
    part = models.PositiveSmallIntegerField(default=1)
    created_at_bank = models.DateTimeField(null=True, blank=True)
    opening_balance = models.DecimalField(max_digits=22, decimal_places=5, null=True, blank=True)
    opening_balance_date = models.DateField(null=True, blank=True)
    closing_balance = models.DecimalField(max_digits=22, decimal_places=5, null=True, blank=True)
    closing_balance_date = models.DateField(null=True, blank=True)
    entry_count = models.PositiveIntegerField(default=0)
    # Entries not stored as lines: stored lines + known_count == entry_count, which ledger_verify
    # checks. Before bank reports were linked (issue 25) a booking an earlier file brought was
    # skipped and counted here; since, it is stored as a confirmation, so newer pages count 0.
    known_count = models.PositiveIntegerField(default=0)
    credit_total = models.DecimalField(max_digits=22, decimal_places=5, default=0)
    debit_total = models.DecimalField(max_digits=22, decimal_places=5, default=0)
    # Opening + booked entries must equal the closing balance; a difference is flagged, not hidden.
    balance_difference = models.DecimalField(max_digits=22, decimal_places=5, null=True, blank=True)
    balance_note = models.CharField(max_length=255, blank=True, default="")  # why it could not be checked
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["bank_account", "statement_id", "page_number", "part"], name="statement_page_unique_per_account"
            ),
        ]

    def __str__(self) -> str:
        page = f" p{self.page_number}" if self.page_number != 1 or self.last_page is False else ""
        part = f" part {self.part}" if self.part != 1 else ""
        return f"{self.statement_id}{page}{part} ({self.bank_account.identifier})"

    @property
    def balance_mismatch(self) -> bool:
        return (self.balance_difference is not None and self.balance_difference != 0) or bool(self.balance_note)

    @property
    def balance_problem(self) -> str:
        if self.balance_note:
            return self.balance_note
        return f"opening balance + entries differs from the closing balance by {self.balance_difference}"


class StatementLineStatus(models.TextChoices):
    NEW = "new", "New (not yet matched)"
    MATCHED = "matched", "Matched"
    SUGGESTED = "suggested", "Suggestion waiting for staff"
    UNMATCHED = "unmatched", "Unmatched (in suspense)"
    WRITTEN_OFF = "written_off", "Written off"
    IGNORED = "ignored", "Ignored (not booked)"
    EXCEPTION = "exception", "Exception (could not be matched or parked)"
    # A later report of a booking an earlier line already holds (``confirms``): it posts nothing.
    CONFIRMATION = "confirmation", "Reported again (confirms an earlier line; posts nothing)"
    # Maybe a later report of an earlier line, maybe a booking of its own: held, posted by nobody
    # until a person decides (``services.statements.statement_line_report_decide``).
    AMBIGUOUS = "ambiguous", "Maybe reported before: a person decides (posts nothing until then)"


class StatementLine(models.Model):
    """One booking (camt Ntry / CSV row) on a platform bank account."""

    statement = models.ForeignKey(BankStatement, on_delete=models.PROTECT, related_name="lines")
    bank_account = models.ForeignKey(PlatformBankAccount, on_delete=models.PROTECT, related_name="lines")
    sequence = models.PositiveIntegerField()
    # The booking's identity (see ``services.statements``): unique per account among the lines
    # that hold a booking, so overlapping reports (camt.054 then camt.053) never post one twice;
    # a confirmation shares the key of the line it confirms.
    dedupe_key = models.CharField(max_length=128)
    # The earlier line holding this booking, for a later report of it (status ``confirmation``).
    confirms = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="confirmations")
    # A second booking with the same identity in one file: stored, and a person confirms it.
    possible_duplicate = models.BooleanField(default=False)
    # The transaction details add up to another amount than the booking: a person checks which.
    amount_mismatch = models.BooleanField(default=False)
    review_note = models.CharField(max_length=255, blank=True, default="")
    entry_reference = models.CharField(max_length=64, blank=True, default="")
    amount = models.DecimalField(max_digits=22, decimal_places=5)
    amount_minor = models.BigIntegerField(null=True, blank=True)
    currency = models.CharField(max_length=3)
    credit_debit = models.CharField(max_length=4)
    bank_status = models.CharField(max_length=8, default="BOOK")
    booking_date = models.DateField(null=True, blank=True)
    value_date = models.DateField(null=True, blank=True)
    reversal = models.BooleanField(default=False)
    bank_tx_code = models.CharField(max_length=40, blank=True, default="")
    end_to_end_id = models.CharField(max_length=64, blank=True, default="", db_index=True)
    uetr = models.CharField(max_length=36, blank=True, default="")  # Refs/UETR, lower case
    batch_message_id = models.CharField(max_length=64, blank=True, default="")
    batch_payment_information_id = models.CharField(max_length=64, blank=True, default="", db_index=True)
    batch_count = models.PositiveIntegerField(null=True, blank=True)
    counterparty_name = models.CharField(max_length=140, blank=True, default="")
    counterparty_iban = models.CharField(max_length=34, blank=True, default="")
    remittance = models.TextField(blank=True, default="")
    return_reason_code = models.CharField(max_length=8, blank=True, default="")
    details = models.JSONField(default=list, blank=True)
    status = models.CharField(max_length=12, choices=StatementLineStatus.choices, default=StatementLineStatus.NEW)
    # The entry that parks an unexplained line in suspense; reversed when the line is explained.
    suspense_entry = models.ForeignKey(JournalEntry, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    status_note = models.CharField(max_length=255, blank=True, default="")
    # Set when a matcher raised on this line alone: the line was parked instead of jamming its chunk.
    matching_error = models.CharField(max_length=255, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["bank_account", "dedupe_key"],
                condition=~Q(status="confirmation"),
                name="line_unique_per_account",
            ),
            models.CheckConstraint(
                condition=Q(status="confirmation", confirms__isnull=False)
                | (~Q(status="confirmation") & Q(confirms__isnull=True)),
                name="line_confirmation_confirms_a_line",
            ),
            models.CheckConstraint(condition=Q(amount__gte=0), name="line_amount_not_negative"),
            models.CheckConstraint(condition=Q(credit_debit__in=["CRDT", "DBIT"]), name="line_direction_valid"),
            models.CheckConstraint(
                condition=Q(status="unmatched", suspense_entry__isnull=False) | ~Q(status="unmatched"),
                name="line_unmatched_is_in_suspense",
            ),
        ]
        indexes = [
            models.Index(fields=["status", "booking_date"], name="line_status_date_idx"),
            models.Index(fields=["bank_account", "booking_date"], name="line_account_date_idx"),
        ]

    def __str__(self) -> str:
        sign = "+" if self.credit_debit == "CRDT" else "-"
        reference = self.entry_reference or self.dedupe_key[:12]
        return f"{self.booking_date} {sign}{format_amount(self.amount, self.currency)} {reference}"

    @property
    def is_credit(self) -> bool:
        return self.credit_debit == "CRDT"


class MatchStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    UNDONE = "undone", "Undone"


class Match(models.Model):
    """A line explained: which matcher (or staff member) tied it to which business object, and the
    ledger entry that records it. Undoing posts the reversal and keeps this row as history."""

    line = models.ForeignKey(StatementLine, on_delete=models.PROTECT, related_name="matches")
    matcher = models.CharField(max_length=40)
    target_type = models.CharField(max_length=40)
    target_id = models.CharField(max_length=64)
    amount_minor = models.BigIntegerField()
    entry = models.ForeignKey(JournalEntry, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    status = models.CharField(max_length=8, choices=MatchStatus.choices, default=MatchStatus.ACTIVE)
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    undone_at = models.DateTimeField(null=True, blank=True)
    undone_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    undo_entry = models.ForeignKey(JournalEntry, null=True, blank=True, on_delete=models.PROTECT, related_name="+")
    note = models.CharField(max_length=255, blank=True, default="")

    class Meta:
        verbose_name_plural = "matches"
        constraints = [
            models.UniqueConstraint(fields=["line"], condition=Q(status="active"), name="match_one_active_per_line"),
            models.CheckConstraint(
                condition=Q(status="active", undone_at__isnull=True) | Q(status="undone", undone_at__isnull=False),
                name="match_status_coherent",
            ),
        ]
        indexes = [models.Index(fields=["target_type", "target_id"], name="match_target_idx")]

    def __str__(self) -> str:
        return f"{self.line_id} → {self.target_type}:{self.target_id} ({self.matcher})"


class SuggestionStatus(models.TextChoices):
    OPEN = "open", "Open"
    CONFIRMED = "confirmed", "Confirmed"
    REJECTED = "rejected", "Rejected"


class Suggestion(models.Model):
    line = models.ForeignKey(StatementLine, on_delete=models.PROTECT, related_name="suggestions")
    matcher = models.CharField(max_length=40)
    target_type = models.CharField(max_length=40)
    target_id = models.CharField(max_length=64)
    score = models.PositiveSmallIntegerField()
    reason = models.CharField(max_length=255)
    status = models.CharField(max_length=10, choices=SuggestionStatus.choices, default=SuggestionStatus.OPEN)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["line", "target_type", "target_id"], name="suggestion_unique_target"),
        ]

    def __str__(self) -> str:
        return f"{self.line_id} ? {self.target_type}:{self.target_id} ({self.score})"


class ReconciliationAction(models.Model):
    """Audit of every staff action on the bank side, and the four-eyes queue for write-offs.

    Append-only and hash-chained per statement line in PostgreSQL (``core.audit_sql``), like the
    other audit tables: a staff action that moves money cannot be edited away. So a write-off is
    two rows: the request (``pending_approval``, by ``actor``) and, when a second person decides,
    a decision (``approved`` or ``rejected``, ``approved_by`` that person, ``decides`` the
    request); a request waits while no decision points at it. Rows from before the table became
    append-only (reconciliation 0015) were decided in place and have no decision row."""

    class Kind(models.TextChoices):
        IMPORT = "import", "Statement imported"
        CONFIRM_SUGGESTION = "confirm_suggestion", "Suggestion confirmed"
        MANUAL_MATCH = "manual_match", "Matched by hand"
        UNDO_MATCH = "undo_match", "Match undone"
        MOVE_TO_SUSPENSE = "move_to_suspense", "Moved to suspense"
        WRITE_OFF = "write_off", "Write-off"
        CONFIRM_BOOKING = "confirm_booking", "Repeated booking confirmed"
        SET_ASIDE_DUPLICATE = "set_aside_duplicate", "Set aside as a duplicate"

    class Status(models.TextChoices):
        DONE = "done", "Done"
        PENDING_APPROVAL = "pending_approval", "Requested: a second person decides"
        APPROVED = "approved", "Approved and executed"
        REJECTED = "rejected", "Rejected"

    kind = models.CharField(max_length=24, choices=Kind.choices)
    status = models.CharField(max_length=20, choices=Status.choices, default=Status.DONE)
    line = models.ForeignKey(StatementLine, null=True, blank=True, on_delete=models.PROTECT, related_name="actions")
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    approved_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    reason = models.CharField(max_length=500, blank=True, default="")
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    decides = models.OneToOneField(
        "self",
        null=True,
        blank=True,
        on_delete=models.PROTECT,
        related_name="decision",
        help_text="The write-off request this row decides; one decision per request.",
    )

    class Meta:
        constraints = [
            # Four-eyes in the database: whoever approves is not who asked.
            models.CheckConstraint(
                condition=Q(approved_by__isnull=True) | ~Q(approved_by=models.F("actor")),
                name="action_approver_is_not_actor",
            ),
            models.CheckConstraint(
                condition=Q(decides__isnull=True)
                | Q(
                    kind="write_off",
                    status__in=["approved", "rejected"],
                    approved_by__isnull=False,
                    decided_at__isnull=False,
                ),
                name="action_decision_is_a_decided_write_off",
            ),
        ]
        permissions = [
            ("reconcile_statement", "Can import statements and match lines"),
            ("approve_write_off", "Can approve a write-off requested by someone else"),
        ]

    def __str__(self) -> str:
        return f"{self.get_kind_display()} by {self.actor} ({self.status})"
