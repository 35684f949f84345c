"""People and the identifiers that say who they are.

People belong to one brand: a human rewarded by two brands is two person rows, and nothing one
brand sends can find, merge, read or repoint the other's. Within a brand a person is reached
through identifiers (email, WhatsApp number, social account, IBAN). Each active identifier value
belongs to exactly one person row of the brand, enforced by a unique constraint, and that
constraint is what decides races between concurrent look-ups. When one look-up presents
identifiers of two people of the brand (and may link them: ``recipients.services``), they are the
same human: the younger rows get ``merged_into`` the oldest (the *root*) and keep their
identifiers, so history is never rewritten. ``merged_into`` always points straight at a root
(merges flatten), never along a chain, and never at another brand's person (a composite foreign
key on PostgreSQL). Across brands, identifiers are linked for fraud signals only, by value: the
same normalised e-mail, number or IBAN fingerprint (``recipients.selectors``).

Bank accounts are personal data with money attached: stored only encrypted (``ciphertext``),
looked up by a keyed fingerprint, shown masked. An account is an IBAN or a local account of a
country without IBANs (a UK sort code, a US ABA routing number …: ``BankAccount.kind``), or a
PayPal account named by its e-mail address (kind ``paypal``): every payout destination is a row
of ``BankAccount``. "IBAN" in the names of fingerprints, identifiers and caps is historical and
means any of them. The ``iban`` identifier row stores the fingerprint, never the account.
"""

import json

from django.conf import settings
from django.db import models
from django.db.models import F, Q

from recipients import crypto
from recipients.normalise import IBAN, PAYPAL


class Language(models.TextChoices):
    EN = "en", "English"
    IT = "it", "Italiano"


class Person(models.Model):
    # Null only for people from before people were scoped per brand that no brand knew: no
    # brand can find or see them. Every person created since has one.
    brand = models.ForeignKey(
        "campaigns.Brand", null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    display_name = models.CharField(max_length=200, blank=True, default="")
    preferred_language = models.CharField(max_length=8, choices=Language.choices, blank=True, default="")
    created_source = models.CharField(max_length=40, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    merged_into = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.PROTECT, related_name="merged_people"
    )
    merged_at = models.DateTimeField(null=True, blank=True)
    erased_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        verbose_name_plural = "people"
        indexes = [models.Index(fields=["brand", "id"], name="person_brand_idx")]
        constraints = [
            models.CheckConstraint(condition=~Q(merged_into=F("id")), name="person_not_merged_into_self"),
            models.CheckConstraint(
                condition=Q(merged_into__isnull=True, merged_at__isnull=True)
                | Q(merged_into__isnull=False, merged_at__isnull=False),
                name="person_merged_at_with_merged_into",
            ),
        ]
        permissions = [
            ("view_full_iban", "Can see full IBANs"),
            ("erase_person", "Can erase (pseudonymise) a person"),
            ("export_person", "Can export everything held about a person"),
        ]

    def __str__(self) -> str:
        if self.erased_at:
            return f"Erased person #{self.pk}"
        return self.display_name or f"Person #{self.pk}"


class IdentifierKind(models.TextChoices):
    EMAIL = "email", "Email"
    WHATSAPP = "whatsapp", "WhatsApp"
    SOCIAL = "social", "Social account"
    IBAN = "iban", "Bank account (fingerprint)"


class Identifier(models.Model):
    """One normalised identifier of a person. ``value`` is the lower-cased email, the E.164 number,
    ``provider:uid`` for social accounts, or the IBAN's keyed fingerprint. An erased identifier is
    inactive: it no longer links anyone, and for clear-text kinds its value is blanked."""

    person = models.ForeignKey(Person, on_delete=models.PROTECT, related_name="identifiers", db_index=False)
    # The person's brand, copied so the unique key can be per brand; a composite foreign key
    # (person_id, brand_id) on PostgreSQL keeps the two equal.
    brand = models.ForeignKey(
        "campaigns.Brand", null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    kind = models.CharField(max_length=16, choices=IdentifierKind.choices)
    value = models.CharField(max_length=255)
    is_active = models.BooleanField(default=True)
    source = models.CharField(max_length=40, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["brand", "kind", "value"], condition=Q(is_active=True), name="identifier_active_unique"
            ),
            models.CheckConstraint(condition=Q(kind__in=IdentifierKind.values), name="identifier_kind_valid"),
            models.CheckConstraint(condition=Q(is_active=False) | ~Q(value=""), name="identifier_active_has_value"),
        ]
        indexes = [
            models.Index(fields=["person", "kind"], name="identifier_person_kind_idx"),
            # Cross-brand fraud signals look a value up in every brand.
            models.Index(fields=["kind", "value"], name="identifier_kind_value_idx"),
        ]

    def __str__(self) -> str:
        if self.kind == IdentifierKind.IBAN:
            return f"iban fingerprint {self.value[:12]}…"
        return f"{self.kind} {self.value or '(erased)'}"


class BankAccount(models.Model):
    """A payout destination a person gave us: an IBAN, a local account (``kind`` is then the PSP's
    account type, e.g. ``sort_code`` or ``aba``, paid only in ``currency``), or a PayPal account
    (``kind`` ``paypal``: its e-mail encrypted as ``{"email": …}``, no country, bank or currency).
    At most one is current per person; older ones stay for history (payouts reference them). ``iban_fingerprint`` (the
    account's, whatever its kind) is unique per person: giving the same account again reuses the
    row."""

    # person leads bank_account_person_iban_unique; the fingerprint's index is a plain one (a
    # CharField's db_index also builds a pattern-ops index for LIKE, which nothing runs on it).
    person = models.ForeignKey(Person, on_delete=models.PROTECT, related_name="bank_accounts", db_index=False)
    kind = models.CharField(max_length=32, default=IBAN)
    currency = models.CharField(max_length=3, blank=True, default="", help_text="A local account's currency.")
    ciphertext = models.TextField(
        blank=True, default="", help_text="Fernet token of the IBAN or of the local fields (JSON); blank once erased."
    )
    iban_fingerprint = models.CharField(max_length=64)
    masked = models.CharField(max_length=40)
    country = models.CharField(max_length=2)
    bic = models.CharField(max_length=11, blank=True, default="")
    bank_name = models.CharField(max_length=200, blank=True, default="")
    is_current = models.BooleanField(default=True)
    source = models.CharField(max_length=40, blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    # A change the person confirmed on a claim page takes effect for new payouts only from here
    # (``ACCOUNT_CHANGE_COOLING_OFF_HOURS``): time for the "account changed" notice to reach
    # them, and for them to object, before money goes to it. Null: usable at once.
    usable_from = models.DateTimeField(null=True, blank=True)
    # The name the account is held under, as the person gave it with the account on their own
    # claim link or confirmed against their bank's answer; payouts are made out to it.
    holder_name = models.CharField(max_length=140, blank=True, default="")
    # Verification of Payee (name vs IBAN): the last check, filled in by the payouts app.
    payee_check_result = models.CharField(max_length=20, blank=True, default="")
    payee_check_name = models.CharField(max_length=200, blank=True, default="")
    payee_checked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["person"], condition=Q(is_current=True), name="bank_account_one_current"),
            models.UniqueConstraint(fields=["person", "iban_fingerprint"], name="bank_account_person_iban_unique"),
            # An IBAN's bank and PayPal take any currency; a local account is paid only in its own.
            models.CheckConstraint(
                condition=Q(kind__in=[IBAN, PAYPAL], currency="")
                | (~Q(kind__in=[IBAN, PAYPAL]) & Q(currency__regex=r"^[A-Z]{3}$")),
                name="bank_account_currency_by_kind",
            ),
            # A PayPal account is an e-mail address: no country, no bank; a bank account has both
            # a country and no PayPal in its name.
            models.CheckConstraint(
                condition=Q(kind=PAYPAL, country="", bic="", bank_name="PayPal")
                | (~Q(kind=PAYPAL) & Q(country__regex=r"^[A-Z]{2}$")),
                name="bank_account_fields_by_kind",
            ),
        ]
        indexes = [models.Index(fields=["iban_fingerprint"], name="bank_account_iban_idx")]

    def __str__(self) -> str:
        return self.masked

    def iban(self) -> str:
        """The clear IBAN (compact), decrypted on demand; "" for a local account and once erased.
        Callers that show it to a human must check ``recipients.view_full_iban`` first."""
        if self.kind != IBAN or not self.ciphertext:
            return ""
        return crypto.decrypt(self.ciphertext)

    def details(self) -> dict[str, str]:
        """A local account's fields under the PSP's keys (``sortCode``, ``accountNumber`` …), or a
        PayPal account's ``{"email": …}``, decrypted on demand; {} for an IBAN and once erased.
        Same permission as ``iban``."""
        if self.kind == IBAN or not self.ciphertext:
            return {}
        return json.loads(crypto.decrypt(self.ciphertext))

    def pays_in(self, currency: str) -> bool:
        """Can a payout in ``currency`` go to this account? A local account takes only its own
        (which currencies PayPal carries is its rail's capability)."""
        return self.kind in (IBAN, PAYPAL) or self.currency == currency


class Consent(models.Model):
    person = models.ForeignKey(Person, on_delete=models.PROTECT, related_name="consents")
    terms_version = models.CharField(max_length=40)
    channel = models.CharField(max_length=40)
    ip = models.GenericIPAddressField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["person", "-created_at"], name="consent_person_created_idx")]

    def __str__(self) -> str:
        return f"{self.terms_version} via {self.channel}"


class PersonEventKind(models.TextChoices):
    MERGED = "merged", "Merged"
    IBAN_SET = "iban_set", "IBAN set"
    LINK_REFUSED = "link_refused", "Link refused (identifier not proven)"
    ERASED = "erased", "Erased"
    EXPORTED = "exported", "Exported (access request)"


class PersonEvent(models.Model):
    """Audit trail, written in the same transaction as the change. ``detail`` never holds clear
    personal data (ids, countries and fingerprints only), so erasure need not rewrite history."""

    # Covered by person_event_person_idx; the actor's index skips the (many) rows without one.
    person = models.ForeignKey(Person, on_delete=models.PROTECT, related_name="events", db_index=False)
    kind = models.CharField(max_length=16, choices=PersonEventKind.choices)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    source = models.CharField(max_length=40, blank=True, default="")
    detail = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [
            models.Index(fields=["person", "-created_at"], name="person_event_person_idx"),
            models.Index(fields=["actor"], name="person_event_actor_idx", condition=Q(actor__isnull=False)),
        ]

    def __str__(self) -> str:
        return f"{self.kind} #{self.person_id}"


# WhatsApp opt-in codes (their own module; imported here so Django finds it).
from recipients.models_claims import AccountChange, ClaimLink, WhatsAppOptInCode  # noqa: E402, F401

# Marketing consent and its trail (their own module).
from recipients.models_consent import ConsentEvent, MarketingConsent  # noqa: E402, F401

# Notices to people, the outbox of what they must be told (their own module).
from recipients.models_notices import Notice, NoticeDelivery, NoticeKind  # noqa: E402, F401
