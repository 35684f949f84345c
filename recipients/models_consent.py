"""Marketing consent: a person's optional "yes" to hear from a brand, and the trail of it.

Separate from ``Consent`` (the terms and privacy notice a claim needs): marketing consent is never
required, is given by ticking an unticked box, and is what lets a brand see a person's name and
contacts (the portal's Contacts page, ``GET /api/v1/contacts/``). Everyone else stays masked.

``MarketingConsent`` is one "yes": the exact text shown (and its SHA-256, the version), the
language, the channel it came through, its proof (a keyed hash of the IP, the browser's user
agent, the claim link it was given behind) and, once withdrawn, when and through which channel.
At most one is open (pending or active) per person and brand (a partial unique index); a new text
makes a new row.

A "yes" given with an e-mail address typed on a public page proves nothing about that address, so
it is *pending* (double opt-in): ``confirmed_at`` stays empty until the person follows the link
e-mailed to ``confirm_email`` before ``confirm_by``. Only a confirmed consent that is not withdrawn
is *active* (``ACTIVE``): a pending one is never shown, exported or announced to the brand, and
one past its ``confirm_by`` never becomes active (a CHECK). A "yes" given on a channel already
proven (the e-mail our link was sent to, a WhatsApp number verified by the opt-in) is confirmed
when given.

``ConsentEvent`` is the append-only, hash-chained trail (``core.audit_sql``; one stream per
person, an export's row a chain of its own): ``consent.given`` and ``consent.confirmed`` (the
double opt-in's proof: when, through which channel), ``consent.withdrawn`` (also the outbox of the
``person.consent_given`` / ``person.consent_withdrawn`` webhooks, collected by
``campaigns.webhooks``), ``consent.pending`` and ``consent.cancelled`` (a pending consent asked
for and ended unconfirmed: the brand never hears of either) and ``contacts.exported`` (every CSV
export and API listing of contacts).
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


# The one definition of an active consent: confirmed and not withdrawn. Every read that shows,
# exports or acts on a consent filters by it.
ACTIVE = Q(withdrawn_at__isnull=True, confirmed_at__isnull=False)
# A pending consent: neither confirmed nor withdrawn (confirmable while before its ``confirm_by``).
PENDING = Q(withdrawn_at__isnull=True, confirmed_at__isnull=True)


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
    # The double opt-in: a pending consent has ``confirm_by`` and no ``confirmed_at``; the
    # confirmation link goes to ``confirm_email`` (the address typed, as the person's identifier).
    confirmed_at = models.DateTimeField(null=True, blank=True)
    confirm_by = models.DateTimeField(null=True, blank=True)
    confirm_email = models.ForeignKey(
        "recipients.Identifier", null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    withdrawn_at = models.DateTimeField(null=True, blank=True)
    withdrawal_channel = models.CharField(max_length=16, blank=True, default="", choices=WithdrawalChannel.choices)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["person", "brand"], condition=Q(withdrawn_at__isnull=True), name="marketing_consent_one_active"
            ),
            # Confirmed, or pending with a deadline; never confirmed after it. (Each NULL spelled
            # out: a comparison with NULL would pass the CHECK.)
            models.CheckConstraint(
                condition=Q(confirmed_at__isnull=False, confirmed_at__gte=models.F("given_at"))
                | Q(confirmed_at__isnull=True, confirm_by__isnull=False, confirm_by__gt=models.F("given_at")),
                name="marketing_consent_confirmed_or_pending",
            ),
            models.CheckConstraint(
                condition=Q(confirm_by__isnull=True)
                | Q(confirmed_at__isnull=True)
                | Q(confirmed_at__lte=models.F("confirm_by")),
                name="marketing_consent_confirmed_in_time",
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
            models.Index(fields=["brand", "-id"], condition=ACTIVE, name="marketing_consent_active_idx"),
            models.Index(fields=["person", "brand"], name="marketing_consent_person_idx"),
        ]

    def __str__(self) -> str:
        state = "withdrawn" if self.withdrawn_at else "active" if self.confirmed_at else "pending"
        return f"marketing consent #{self.pk} ({state})"


class ConsentEventKind(models.TextChoices):
    GIVEN = "consent.given", "Consent given"
    PENDING = "consent.pending", "Consent given, waiting for the e-mail's confirmation"
    CONFIRMED = "consent.confirmed", "Pending consent confirmed"
    CANCELLED = "consent.cancelled", "Pending consent ended unconfirmed"
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
