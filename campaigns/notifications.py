"""Telling a brand about its money. Called after commit, never inside a transaction."""

from django.conf import settings
from django.core.mail import send_mail

from campaigns.models import Brand, BrandMembership, BrandRole
from core.money import format_minor


def brand_topup_received(*, brand: Brand, amount_minor: int, currency: str, statement_line_id: int) -> None:
    owners = list(
        BrandMembership.objects.filter(brand=brand, role__in=[BrandRole.OWNER, BrandRole.ADMIN])
        .exclude(user__email="")
        .values_list("user__email", flat=True)
    )
    if owners:
        send_mail(
            subject=f"{format_minor(amount_minor, currency)} received for {brand.name}",
            message=(
                f"We received {format_minor(amount_minor, currency)} with your funding reference "
                f"{brand.funding_reference}. It is now in your brand funds, ready to allocate to campaigns."
            ),
            from_email=getattr(settings, "DEFAULT_FROM_EMAIL", None),
            recipient_list=owners,
        )
