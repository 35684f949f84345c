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

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(status__in=BrandStatus.values), name="brand_status_valid"),
            models.CheckConstraint(condition=~Q(funding_reference=""), name="brand_funding_reference_set"),
        ]

    def __str__(self) -> str:
        return self.name


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
