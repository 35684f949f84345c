"""The four packages on sale (issue 28), and every existing brand on All-in-One from its creation,
with the per-reward fees it already had (its own fee fields). Ops edit the packages in the admin."""

from django.db import migrations

ALL = ["purchase", "tiktok_login", "whatsapp_optin", "ugc_share", "like", "comment", "view_threshold", "custom"]
TIKTOK = ["tiktok_login", "ugc_share", "like", "comment", "view_threshold"]

PLANS = [
    {
        "slug": "all-in-one",
        "name": "All-in-One",
        "name_it": "Tutto in uno",
        "tagline": "Every trigger, JoyBack and Cashback, claim pages and the API.",
        "tagline_it": "Tutti i trigger, JoyBack e Cashback, pagine di richiesta e API.",
        "highlights": "TikTok, WhatsApp and purchase triggers\nClaim pages and the partner API\nInstant SEPA and local payouts\nReconciled books",
        "highlights_it": "Trigger TikTok, WhatsApp e acquisto\nPagine di richiesta e API partner\nPagamenti SEPA istantanei e locali\nContabilità riconciliata",
        "triggers": ALL,
        "channels": ["claim_page", "api"],
        "fee_bps": 1000,
        "monthly_fee_minor": 49900,
        "position": 1,
    },
    {
        "slug": "tiktok-only",
        "name": "TikTok-only",
        "name_it": "Solo TikTok",
        "tagline": "Pay for TikTok logins, UGC videos and view thresholds.",
        "tagline_it": "Premia login TikTok, video UGC e soglie di visualizzazioni.",
        "highlights": "TikTok login, UGC videos, likes, comments and views\nClaim pages and the partner API\nInstant payouts",
        "highlights_it": "Login TikTok, video UGC, like, commenti e visualizzazioni\nPagine di richiesta e API partner\nPagamenti istantanei",
        "triggers": TIKTOK,
        "channels": ["claim_page", "api"],
        "fee_bps": 1200,
        "monthly_fee_minor": 19900,
        "position": 2,
    },
    {
        "slug": "whatsapp-with-reward",
        "name": "WhatsApp-with-reward",
        "name_it": "WhatsApp con premio",
        "tagline": "Reward people who opt in to your WhatsApp channel.",
        "tagline_it": "Premia chi si iscrive al tuo canale WhatsApp.",
        "highlights": "Verified WhatsApp opt-ins\nClaim pages and the partner API\nInstant payouts",
        "highlights_it": "Iscrizioni WhatsApp verificate\nPagine di richiesta e API partner\nPagamenti istantanei",
        "triggers": ["whatsapp_optin"],
        "channels": ["claim_page", "api"],
        "fee_fixed_minor": 15,
        "monthly_fee_minor": 14900,
        "position": 3,
    },
    {
        "slug": "cashback-api",
        "name": "Cashback API",
        "name_it": "Cashback API",
        "tagline": "Classic post-purchase cashback, through the API alone.",
        "tagline_it": "Il cashback classico dopo l'acquisto, solo tramite API.",
        "highlights": "Confirmed purchases from your shop\nRefund by order id\nInstant payouts",
        "highlights_it": "Acquisti confermati dal tuo negozio\nRimborso per numero d'ordine\nPagamenti istantanei",
        "triggers": ["purchase"],
        "channels": ["api"],
        "fee_bps": 200,
        "monthly_fee_minor": 9900,
        "position": 4,
    },
]


def seed(apps, schema_editor):
    Plan = apps.get_model("campaigns", "Plan")
    Brand = apps.get_model("campaigns", "Brand")
    BrandPlan = apps.get_model("campaigns", "BrandPlan")
    for fields in PLANS:
        Plan.objects.update_or_create(slug=fields["slug"], defaults=fields)
    all_in_one = Plan.objects.get(slug="all-in-one")
    BrandPlan.objects.bulk_create(
        BrandPlan(brand=brand, plan=all_in_one, started_at=brand.created_at, reason="Plans introduced")
        for brand in Brand.objects.exclude(plan_periods__ended_at__isnull=True)
    )


class Migration(migrations.Migration):
    dependencies = [("campaigns", "0018_plans")]

    operations = [migrations.RunPython(seed, migrations.RunPython.noop)]
