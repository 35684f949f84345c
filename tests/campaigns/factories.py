import importlib
from datetime import UTC, datetime

import factory

from campaigns.models import Channel, Plan, Trigger
from campaigns.services import (
    brand_create,
    brand_topup_record,
    campaign_allocate,
    campaign_create,
    campaign_launch,
    rule_create,
)

# A fixed campaign start in the past: events default to "now", which is inside the window.
CAMPAIGN_START = datetime(2026, 1, 1, tzinfo=UTC)


def make_iban(country: str, bban: str) -> str:
    """A valid IBAN (ISO 13616 mod-97 check digits) for a country's BBAN."""
    digits = "".join(str(int(ch, 36)) for ch in f"{bban}{country}00")
    return f"{country}{98 - int(digits) % 97:02d}{bban}"


def nl_iban(n: int) -> str:
    return make_iban("NL", f"ABNA{n:010d}")


# Valid IBANs from different countries, for conditions and per-IBAN caps.
IBAN_NL = "NL91ABNA0417164300"
IBAN_NL_2 = nl_iban(123456789)
IBAN_DE = "DE89370400440532013000"


_SEED = importlib.import_module("campaigns.migrations.0019_plans_seed")


def package(slug: str) -> Plan:
    """One of the four packages on sale, as migration 0019 seeds it (made again when a
    transactional test flushed the seeded rows)."""
    fields = next(p for p in _SEED.PLANS if p["slug"] == slug)
    plan, _ = Plan.objects.get_or_create(slug=slug, defaults=fields)
    return plan


def plan_with_fees(*, fee_fixed_minor: int = 0, fee_bps: int = 0, **fields) -> Plan:
    """A private plan with these fees that allows every trigger and channel, with no allowance
    unless told (``fields``): the tests' brands pay exactly the fees they name."""
    slug = fields.pop("slug", f"test-{fee_fixed_minor}-{fee_bps}")
    plan, _ = Plan.objects.get_or_create(
        slug=slug,
        defaults={
            "name": fields.pop("name", f"Test {fee_fixed_minor} + {fee_bps} bps"),
            "triggers": list(Trigger.values),
            "channels": list(Channel.values),
            "fee_fixed_minor": fee_fixed_minor,
            "fee_bps": fee_bps,
            "is_public": False,
            **fields,
        },
    )
    return plan


class BrandFactory(factory.Factory):
    """A brand on a private plan with the fees it names (none by default); ``plan=`` picks one."""

    class Meta:
        model = dict

    name = factory.Sequence(lambda n: f"Brand {n}")
    slug = factory.Sequence(lambda n: f"brand-{n}")
    fee_fixed_minor = 0
    fee_bps = 0
    plan = None

    @classmethod
    def _create(cls, model_class, **kwargs):
        fees = {"fee_fixed_minor": kwargs.pop("fee_fixed_minor"), "fee_bps": kwargs.pop("fee_bps")}
        plan = kwargs.pop("plan") or plan_with_fees(**fees)
        return brand_create(plan=plan, **kwargs)


def funded_campaign(
    *, brand, amount_minor: int, rules: list[dict], slug: str = "summer", timezone: str = "Europe/Amsterdam", **settings
):
    """A launched campaign with ``amount_minor`` allocated from a top-up, and the given rules."""
    campaign = campaign_create(
        brand=brand,
        name=slug.title(),
        slug=slug,
        mode=settings.pop("mode", "joyback"),
        starts_at=settings.pop("starts_at", CAMPAIGN_START),
        timezone=timezone,
        **settings,
    )
    for fields in rules:
        rule_create(campaign=campaign, **fields)
    if amount_minor:
        brand_topup_record(
            brand=brand,
            amount_minor=amount_minor,
            currency=campaign.currency,
            bank_account_code="NL00TEST0000000001",
            idempotency_key=f"topup:{brand.pk}:{slug}",
            reference=brand.funding_reference,
        )
        campaign_allocate(campaign=campaign, amount_minor=amount_minor, idempotency_key=f"alloc:{campaign.pk}")
    campaign_launch(campaign=campaign)
    campaign.refresh_from_db()
    return campaign
