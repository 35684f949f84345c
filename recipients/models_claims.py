"""What a claim page takes as proof, kept in the database so each is spent once: one-time codes
that complete a WhatsApp opt-in (the claim page shows the code, the person sends it to the
brand's WhatsApp number, and the signed inbound message proves they own that number:
``campaigns.platforms.whatsapp``), links sent to a person (``payouts.links``), and account changes
waiting for the code sent to a contact the person already had (``web.claim.services``)."""

from django.db import models
from django.db.models import Q


class WhatsAppOptInCode(models.Model):
    code = models.CharField(max_length=16, unique=True)
    campaign = models.ForeignKey("campaigns.Campaign", on_delete=models.CASCADE, related_name="+")
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)
    used_message_id = models.CharField(max_length=200, blank=True, default="")
    person = models.ForeignKey(
        "recipients.Person", null=True, blank=True, on_delete=models.PROTECT, related_name="whatsapp_codes"
    )
    # SHA-256 of a secret kept in the session of the browser that asked for the code: only that
    # browser may follow the opt-in to its payout form (the code itself is shown and typed).
    starter_hash = models.CharField(max_length=64, blank=True, default="")
    # When the redeemed code handed its browser the payout form: a code does that once.
    spent_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(spent_at__isnull=True) | Q(used_at__isnull=False), name="whatsapp_code_spent_after_use"
            ),
            models.CheckConstraint(
                condition=Q(used_at__isnull=True, used_message_id="")
                | Q(used_at__isnull=False, person__isnull=False) & ~Q(used_message_id=""),
                name="whatsapp_code_used_coherent",
            ),
            models.CheckConstraint(condition=Q(expires_at__gt=models.F("created_at")), name="whatsapp_code_expires"),
        ]

    def __str__(self) -> str:
        return f"WhatsApp code {self.code}"


class ClaimLinkPurpose(models.TextChoices):
    PAYOUT_ACCOUNT = "payout_account", "Give an account for a reward owed"


class ClaimLink(models.Model):
    """A link sent to a person that lets them do one thing (``purpose``) for one object: give an
    account for the money of ``reward`` while it is owed. Only the token's SHA-256 is stored (the
    token is 256 random bits: no key needed against guessing). Spent once by a conditional UPDATE
    of ``used_at``; dead after ``expires_at`` (``CLAIM_PAYOUT_LINK_DAYS``) whatever happened."""

    token_hash = models.CharField(max_length=64, unique=True)
    purpose = models.CharField(max_length=20, choices=ClaimLinkPurpose.choices)
    person = models.ForeignKey("recipients.Person", on_delete=models.PROTECT, related_name="+", db_index=False)
    reward = models.ForeignKey("campaigns.Reward", on_delete=models.PROTECT, related_name="+")
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    used_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(purpose__in=ClaimLinkPurpose.values), name="claim_link_purpose_valid"),
            models.CheckConstraint(condition=Q(expires_at__gt=models.F("created_at")), name="claim_link_expires"),
            models.CheckConstraint(
                condition=Q(used_at__isnull=True) | Q(used_at__gte=models.F("created_at")), name="claim_link_used_after"
            ),
        ]

    def __str__(self) -> str:
        return f"{self.purpose} link #{self.pk}"


class AccountChangeStatus(models.TextChoices):
    PENDING = "pending", "Waiting for the code"
    CONFIRMED = "confirmed", "Confirmed"
    LOCKED = "locked", "Locked (too many wrong codes)"


class AccountChange(models.Model):
    """A new payout account given on a claim link for a person who already has one: it waits,
    and their current account stays, until the code sent to the contact they had longest is
    entered. ``details_ciphertext`` holds what the form gave (name, contacts, account), encrypted;
    ``code_hash`` the code's keyed fingerprint. ``attempts`` counts codes tried, each claimed by a
    conditional UPDATE, so parallel guesses cannot exceed ``ACCOUNT_CHANGE_CODE_ATTEMPTS``."""

    person = models.ForeignKey(
        "recipients.Person", on_delete=models.PROTECT, related_name="account_changes", db_index=False
    )
    link = models.OneToOneField(ClaimLink, on_delete=models.PROTECT, related_name="account_change")
    details_ciphertext = models.TextField()
    code_hash = models.CharField(max_length=64)
    status = models.CharField(max_length=10, choices=AccountChangeStatus.choices, default=AccountChangeStatus.PENDING)
    attempts = models.PositiveSmallIntegerField(default=0)
    created_at = models.DateTimeField()
    expires_at = models.DateTimeField()
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(status__in=AccountChangeStatus.values), name="account_change_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(status="pending", decided_at__isnull=True)
                | ~Q(status="pending") & Q(decided_at__isnull=False),
                name="account_change_decided_has_time",
            ),
            models.CheckConstraint(condition=Q(expires_at__gt=models.F("created_at")), name="account_change_expires"),
        ]
        indexes = [models.Index(fields=["person", "-created_at"], name="account_change_person_idx")]

    def __str__(self) -> str:
        return f"account change #{self.pk} ({self.status})"
