"""Marketing consent: a person's optional "yes" to hear from a brand, and the trail of it.

Separate from ``Consent`` (the terms and privacy notice a claim needs): marketing consent is never
required, is given by ticking an unticked box, and is what lets a brand see a person's name and
contacts (the portal's Contacts page, ``GET /api/v1/contacts/``). Everyone else stays masked.

``MarketingConsent`` is one "yes": the exact text shown (and its SHA-256, the version), the
language, the channel it came through, its proof (a keyed hash of the IP, the browser's user
agent, the claim link it was given behind) and, once withdrawn, when and through which channel.
At most one is active per person and brand (a partial unique index); a new text makes a new row.

``ConsentEvent`` is the append-only, hash-chained trail (``core.audit_sql``; one stream per
person, an export's row a chain of its own): ``consent.given``, ``consent.withdrawn`` (also the
outbox of the ``person.consent_given`` / ``person.consent_withdrawn`` webhooks, collected by
``campaigns.webhooks``) and ``contacts.exported`` (every CSV export and API listing of contacts).
Its ``data`` never holds personal data: ids, channels, filters and counts.
"""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _


class ConsentChannel(models.TextChoices):
    CLAIM_PAGE = "claim_page", _("Claim page")
    WHATSAPP = "whatsapp", _("WhatsApp")
    API = "api", _("API")


class WithdrawalChannel(models.TextChoices):
    LINK = "link", "Withdrawal link"
    WHATSAPP = "whatsapp", "WhatsApp (STOP)"
    API = "api", "API"
    ADMIN = "admin", "Admin"
    SUPERSEDED = "superseded", "Replaced by consent to a newer text"
    ERASURE = "erasure", "Person erased"


class MarketingConsent(models.Model):
    person = models.ForeignKey(
        "recipients.Person", on_delete=models.PROTECT, related_name="marketing_consents", db_index=False
    )
    # The brand the person said yes to; a composite foreign key (person_id, brand_id) on
    # PostgreSQL keeps it the person's own brand.
    brand = models.ForeignKey("campaigns.Brand", on_delete=models.PROTECT, related_name="+", db_index=False)
    text = models.TextField(help_text="The exact words the person saw next to the box.")
    text_version = models.CharField(max_length=64, help_text="SHA-256 (hex) of the text.")
    language = models.CharField(max_length=8)
    channel = models.CharField(max_length=16, choices=ConsentChannel.choices)
    given_at = models.DateTimeField()
    ip_hash = models.CharField(max_length=64, blank=True, default="", help_text="Keyed fingerprint of the IP.")
    user_agent = models.CharField(max_length=300, blank=True, default="")
    claim_link = models.ForeignKey(
        "recipients.ClaimLink", null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    withdrawn_at = models.DateTimeField(null=True, blank=True)
    withdrawal_channel = models.CharField(max_length=16, blank=True, default="", choices=WithdrawalChannel.choices)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["person", "brand"], condition=Q(withdrawn_at__isnull=True), name="marketing_consent_one_active"
            ),
            models.CheckConstraint(
                condition=Q(channel__in=ConsentChannel.values), name="marketing_consent_channel_valid"
            ),
            models.CheckConstraint(
                condition=Q(withdrawn_at__isnull=True, withdrawal_channel="")
                | Q(withdrawn_at__isnull=False, withdrawal_channel__in=WithdrawalChannel.values),
                name="marketing_consent_withdrawal_coherent",
            ),
            models.CheckConstraint(
                condition=Q(text_version__regex=r"^[0-9a-f]{64}$") & ~Q(text=""),
                name="marketing_consent_text_versioned",
            ),
            models.CheckConstraint(
                condition=Q(withdrawn_at__isnull=True) | Q(withdrawn_at__gte=models.F("given_at")),
                name="marketing_consent_withdrawn_after_given",
            ),
        ]
        indexes = [
            # The Contacts page and API: a brand's active consents, newest first.
            models.Index(
                fields=["brand", "-id"], condition=Q(withdrawn_at__isnull=True), name="marketing_consent_active_idx"
            ),
            models.Index(fields=["person", "brand"], name="marketing_consent_person_idx"),
        ]

    def __str__(self) -> str:
        state = "withdrawn" if self.withdrawn_at else "active"
        return f"marketing consent #{self.pk} ({state})"


class ConsentEventKind(models.TextChoices):
    GIVEN = "consent.given", "Consent given"
    WITHDRAWN = "consent.withdrawn", "Consent withdrawn"
    EXPORTED = "contacts.exported", "Contacts exported"


class ConsentEvent(models.Model):
    brand = models.ForeignKey("campaigns.Brand", on_delete=models.PROTECT, related_name="+", db_index=False)
    person = models.ForeignKey(
        "recipients.Person", null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    consent = models.ForeignKey(
        MarketingConsent, null=True, blank=True, on_delete=models.PROTECT, related_name="events", db_index=False
    )
    kind = models.CharField(max_length=20, choices=ConsentEventKind.choices)
    channel = models.CharField(max_length=16)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(kind__in=ConsentEventKind.values), name="consent_event_kind_valid"),
            # A consent's events name its person; an export names nobody.
            models.CheckConstraint(
                condition=Q(kind="contacts.exported", person__isnull=True, consent__isnull=True)
                | (~Q(kind="contacts.exported") & Q(person__isnull=False, consent__isnull=False)),
                name="consent_event_subject_coherent",
            ),
        ]
        indexes = [
            models.Index(fields=["brand", "id"], name="consent_event_brand_idx"),
            models.Index(fields=["consent"], name="consent_event_consent_idx", condition=Q(consent__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"{self.kind} #{self.pk}"
