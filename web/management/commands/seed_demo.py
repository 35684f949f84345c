"""Demo data for `make run`. Idempotent: every object is looked up by a natural key and every
ledger entry carries a fixed idempotency key, so running it twice creates nothing twice."""

from datetime import timedelta

from allauth.account.models import EmailAddress
from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from django.utils import timezone

from campaigns.models import Brand, BrandRole, Campaign, CampaignStatus
from campaigns.services import (
    brand_create,
    brand_membership_set,
    campaign_allocate,
    campaign_create,
    campaign_launch,
    rule_create,
)
from campaigns.services.test_mode import trial_tenant_open
from core.roles import ROLES
from reconciliation.models import JournalEntry
from reconciliation.services.statements import platform_bank_account_create
from web.demo_bank import PLATFORM_IBAN, demo_funding_import

DEMO_USERS = [
    # username, password, superuser, roles (None: every role)
    ("admin", "admin-demo-password", True, None),
    ("ops", "ops-demo-password", False, None),
    # Four-eyes spans the whole chain: whoever approved a reward in review cannot also give its
    # payout the second approval, so the demo has a second pair of eyes.
    ("approver", "approver-demo-password", False, ["Payout approver"]),
]
DEMO_BRAND_USER = ("brand@demo.joyback.example", "brand-demo-password")
# A brand that signed up itself and is trying JoyBack for free: in test mode, not yet live.
DEMO_TRIAL_USER = ("trial@demo.joyback.example", "trial-demo-password")
# Two live campaigns of the brand "Sole Shoes": what the claim pages at /c/sole-shoes/<slug>/ show.
DEMO_CAMPAIGNS = [
    (
        "summer-joy",
        "Summer Joy",
        "joyback",
        [
            {"trigger": "tiktok_login", "fixed_minor": 500, "person_count_per_campaign": 1},
            {"trigger": "whatsapp_optin", "fixed_minor": 300, "person_count_per_campaign": 1},
            {"trigger": "ugc_share", "fixed_minor": 800, "required_code": "#joyback", "person_count_per_campaign": 3},
            {"trigger": "view_threshold", "fixed_minor": 1500, "view_threshold": 1000, "required_code": "#joyback"},
        ],
    ),
    (
        "cashback",
        "10% back on sneakers",
        "cashback",
        [
            {
                "trigger": "purchase",
                "amount_type": "percent",
                "percent_bps": 1000,
                "min_minor": 100,
                "max_minor": 2000,
                "hold_days": 14,
                "verification": "partner_attested",
            }
        ],
    ),
]


class Command(BaseCommand):
    help = "Load the demo data (idempotent). Refuses to run with DEBUG off unless --force."

    def add_arguments(self, parser):
        parser.add_argument("--force", action="store_true", help="Allow outside DEBUG (never in production).")

    def handle(self, *args, force: bool = False, **options):
        if not settings.DEBUG and not force:
            raise CommandError("seed_demo creates well-known passwords; it runs only with DEBUG on (or --force).")
        with transaction.atomic():
            self._users()
        # Outside the block above: the money services open their own durable transactions.
        self._brand()
        self._trial_brand()
        self.stdout.write(self.style.SUCCESS("Demo data ready."))

    def _users(self) -> None:
        # The roles come from the data migration (core.roles); the demo ops user holds them all.
        User = get_user_model()
        for username, password, is_superuser, role_names in DEMO_USERS:
            user, created = User.objects.get_or_create(
                username=username,
                defaults={"is_staff": True, "is_superuser": is_superuser, "email": f"{username}@demo.joyback.example"},
            )
            if created:
                user.set_password(password)
                user.save(update_fields=["password"])
            if not is_superuser:
                user.groups.add(*Group.objects.filter(name__in=role_names or list(ROLES)))

    def _login(self, email: str, password: str):
        user, created = get_user_model().objects.get_or_create(username=email, defaults={"email": email})
        if created:
            user.set_password(password)
            user.save(update_fields=["password"])
        EmailAddress.objects.update_or_create(user=user, email=email, defaults={"verified": True, "primary": True})
        return user

    def _trial_brand(self) -> None:
        """ "Bici Trial", signed up and in test mode: its test tenant with the free test money and a
        launched test campaign; its go-live checklist still open (idempotent)."""
        brand = Brand.objects.filter(slug="bici-trial").first() or brand_create(
            name="Bici Trial", slug="bici-trial", live=False
        )
        brand_membership_set(brand=brand, user=self._login(*DEMO_TRIAL_USER), role=BrandRole.OWNER)
        tenant = trial_tenant_open(brand=brand)
        campaign = Campaign.objects.filter(brand=tenant, slug="try-joy").first()
        if campaign is None:
            campaign = campaign_create(
                brand=tenant,
                name="Try Joy",
                slug="try-joy",
                mode="joyback",
                starts_at=timezone.now() - timedelta(days=1),
                timezone="Europe/Rome",
            )
            rule_create(campaign=campaign, trigger="tiktok_login", fixed_minor=500, verification="partner_attested")
        campaign_allocate(campaign=campaign, amount_minor=20_000, idempotency_key=f"demo:alloc:{tenant.slug}:try-joy")
        if campaign.status == CampaignStatus.DRAFT:
            campaign_launch(campaign=campaign)

    def _brand(self) -> None:
        """The demo brand, its owner login, and two funded, launched campaigns (idempotent)."""
        platform_bank_account_create(name="Operating account (demo bank)", iban=PLATFORM_IBAN, currency="EUR")
        brand = Brand.objects.filter(slug="sole-shoes").first() or brand_create(name="Sole Shoes", slug="sole-shoes")
        user = self._login(*DEMO_BRAND_USER)
        brand_membership_set(brand=brand, user=user, role=BrandRole.OWNER)
        # The brand's money arrives as it would in production: on the bank statement, matched by
        # its funding reference (a demo seeded before this kept its directly booked top-up).
        if not JournalEntry.objects.filter(idempotency_key="demo:sole-shoes:topup:1").exists():
            demo_funding_import(
                funding_reference=brand.funding_reference, amount_minor=500_000, today=timezone.localdate()
            )
        for slug, name, mode, rules in DEMO_CAMPAIGNS:
            campaign = Campaign.objects.filter(brand=brand, slug=slug).first()
            if campaign is None:
                campaign = campaign_create(
                    brand=brand,
                    name=name,
                    slug=slug,
                    mode=mode,
                    starts_at=timezone.now() - timedelta(days=1),
                    timezone="Europe/Rome",
                )
                for fields in rules:
                    rule_create(campaign=campaign, **fields)
            campaign_allocate(campaign=campaign, amount_minor=100_000, idempotency_key=f"demo:alloc:{slug}")
            if campaign.status == CampaignStatus.DRAFT:
                campaign_launch(campaign=campaign)
