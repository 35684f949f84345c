from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _


class BrandStatus(models.TextChoices):
    ACTIVE = "active", "Active"
    SUSPENDED = "suspended", "Suspended"


class Brand(models.Model):
    """The tenant. Its prepaid money sits in the ledger account ``brand:<id>:funds:<CUR>``.

    Fees are its plan's (``campaigns.models.plans``): per reward the platform charges the plan's
    fixed fee plus its basis points of the reward amount (ROUND_HALF_UP to the minor unit),
    reserved on the campaign budget together with the reward and booked to
    ``platform:fees:<CUR>`` when the reward matures. A negotiated price is a private plan.
    """

    name = models.CharField(max_length=200)
    slug = models.SlugField(max_length=80, unique=True)
    default_currency = models.CharField(max_length=3, default="EUR")
    funding_reference = models.CharField(
        max_length=12,
        unique=True,
        help_text="Typed by the brand into its bank transfer; matches top-ups to this brand. Has a check character.",
    )
    status = models.CharField(max_length=12, choices=BrandStatus.choices, default=BrandStatus.ACTIVE)
    created_at = models.DateTimeField(auto_now_add=True)
    # Test mode (issue 28): a test tenant is a Brand of its own, linked to its live brand, so every
    # row it makes is scoped by brand like any tenant's and its money sits in its own accounts
    # (campaigns.services.test_mode). A retired test tenant (reset) is suspended.
    livemode = models.BooleanField(default=True)
    test_of = models.ForeignKey("self", null=True, blank=True, on_delete=models.PROTECT, related_name="test_tenants")
    # Going live: what a brand that signed up itself must give before a live campaign launches.
    # ``live_since`` is set once the checklist was complete (brands made by ops, and every brand
    # before test mode existed, are live from the start).
    company_legal_name = models.CharField(max_length=200, blank=True, default="")
    company_address = models.CharField(max_length=300, blank=True, default="")
    company_vat_number = models.CharField(max_length=30, blank=True, default="")
    terms_accepted_at = models.DateTimeField(null=True, blank=True)
    live_since = models.DateTimeField(null=True, blank=True)
    # What the brand will send people who tick the (optional) marketing box on its claim pages,
    # in each language; the words around it (who, how to withdraw) are fixed
    # (``campaigns.marketing``). Blank: a default purpose naming the brand.
    marketing_purpose_en = models.CharField(max_length=300, blank=True, default="")
    marketing_purpose_it = models.CharField(max_length=300, blank=True, default="")
    # The language of the e-mails we send the brand's team (budget alerts, automatic pauses).
    language = models.CharField(
        max_length=8, choices=settings.LANGUAGES, default="en", verbose_name=_("Language of our e-mails to you")
    )

    class Meta:
        constraints = [
            models.CheckConstraint(
                condition=Q(livemode=True, test_of__isnull=True) | Q(livemode=False, test_of__isnull=False),
                name="brand_test_tenant_has_live_brand",
            ),
            models.CheckConstraint(
                condition=Q(livemode=True) | Q(live_since__isnull=True), name="brand_test_tenant_never_live"
            ),
            models.UniqueConstraint(
                fields=["test_of"], condition=Q(status="active"), name="brand_one_active_test_tenant"
            ),
            models.CheckConstraint(condition=Q(status__in=BrandStatus.values), name="brand_status_valid"),
            models.CheckConstraint(condition=~Q(funding_reference=""), name="brand_funding_reference_set"),
        ]

    def __str__(self) -> str:
        return self.name if self.livemode else f"{self.name} (test)"


class BrandRole(models.TextChoices):
    OWNER = "owner", _("Owner")
    ADMIN = "admin", _("Admin")
    ANALYST = "analyst", _("Analyst")


class BrandMembership(models.Model):
    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="brand_memberships")
    brand = models.ForeignKey(Brand, on_delete=models.CASCADE, related_name="memberships")
    role = models.CharField(max_length=12, choices=BrandRole.choices)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["user", "brand"], name="brand_membership_unique"),
            models.CheckConstraint(condition=Q(role__in=BrandRole.values), name="brand_membership_role_valid"),
        ]

    def __str__(self) -> str:
        return f"{self.user} @ {self.brand} ({self.role})"


class BrandEvent(models.Model):
    """Audit trail of a brand's own settings changed by its team (``brand.language_changed`` from
    the portal): who, through which ``channel``, and ``data`` with the value before and after.
    Written in the transaction of the change; never updated."""

    brand = models.ForeignKey(Brand, on_delete=models.PROTECT, related_name="audit", db_index=False)
    kind = models.CharField(max_length=40)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+", db_index=False
    )
    channel = models.CharField(max_length=10, blank=True, default="")
    data = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField()

    class Meta:
        indexes = [models.Index(fields=["brand", "id"], name="brand_event_idx")]

    def __str__(self) -> str:
        return f"{self.kind} {self.brand_id}"
