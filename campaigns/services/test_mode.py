"""Test mode and going live (issue 28).

**Test mode is a linked test tenant.** Each live brand may open one active test tenant: a ``Brand``
row of its own with ``livemode=False`` and ``test_of`` = the live brand. Everything a tenant owns
is already scoped by brand (keys, campaigns, people, rewards, payouts, webhooks; the database's
composite keys keep people inside their brand), so a test key sees the test tenant's rows only and
a live key never sees them. Its money is booked like a live tenant's in its own brand, campaign and
person accounts; the platform's side of it in ``testmode:`` accounts (``reconciliation.test_books``),
never in the platform's real bank, fees or in-transit accounts. Its payouts always go to the
sandbox rail, whatever the routing rules say, and the execute step refuses any other
(``payouts.services.test_mode``).

A new test tenant gets ``TRIAL_BALANCE_MINOR`` of test money; more comes from a simulated bank
transfer. Resetting retires the tenant (suspended, its keys revoked, its webhooks off; its rows and
books stay, since the ledger is append-only) and opens a fresh one.

**Going live is a checklist**: company details, the terms accepted, a first real top-up. A brand
that signed up itself launches no live campaign until all three are done (``golive_require``);
brands made by ops, and every brand from before test mode, are live already (``live_since``).
"""

from dataclasses import dataclass

from django.db import IntegrityError, transaction
from django.utils import timezone

from campaigns.models import ApiKey, Brand, BrandStatus, WebhookEndpoint
from campaigns.selectors import brand_plan_current
from campaigns.services.brands import brand_create, brand_funds_account
from core.exceptions import InvalidInput, InvalidTransition, PermissionDenied
from core.hooks import AUDIT_ROWS_WRITTEN, hook_fire
from reconciliation.models import Account, JournalEntry
from reconciliation.services import Leg, ledger_entry_post
from reconciliation.test_books import trial_bank_account

# The trial's limits, stated on the portal's test mode page.
TRIAL_BALANCE_MINOR = 100_000  # free test money a new test tenant starts with (€1,000)
TRIAL_TOPUP_MAX_MINOR = 1_000_000  # one simulated bank transfer (€10,000)
TRIAL_FUNDS_MAX_MINOR = 5_000_000  # test funds are topped up to at most this (€50,000)


@dataclass(frozen=True)
class GoLiveStep:
    key: str
    label: str
    done: bool


def trial_tenant_active(*, brand: Brand) -> Brand | None:
    """The live brand's active test tenant, if it has opened one."""
    return Brand.objects.filter(test_of=brand, status=BrandStatus.ACTIVE).first()


def _free_slug(base: str) -> str:
    slug, n = base, 1
    while Brand.objects.filter(slug=slug).exists():
        n += 1
        slug = f"{base}-{n}"
    return slug


def trial_tenant_open(*, brand: Brand) -> Brand:
    """The live ``brand``'s active test tenant, created on first use: same name, currency and plan
    (its fees), a slug ``<slug>-test`` (or the next free one), ``TRIAL_BALANCE_MINOR`` of test money in its
    funds. Idempotent; two first uses at once make one tenant (the live brand row is locked and the
    partial unique constraint is the backstop). Raises PermissionDenied (``test_of_test``) for a
    test tenant and for a suspended brand. Durable transaction."""
    if not brand.livemode:
        raise PermissionDenied("A test tenant has no test tenant of its own.", code="test_of_test")
    if brand.status != BrandStatus.ACTIVE:
        raise PermissionDenied("This brand is suspended.", code="brand_suspended")
    existing = trial_tenant_active(brand=brand)
    if existing is not None:
        return existing
    try:
        with transaction.atomic(durable=True):
            Brand.objects.select_for_update().filter(pk=brand.pk).first()
            existing = trial_tenant_active(brand=brand)
            if existing is not None:
                return existing
            tenant = brand_create(
                name=brand.name[:200],
                slug=_free_slug(f"{brand.slug[:70]}-test"),
                default_currency=brand.default_currency,
                plan=brand_plan_current(brand=brand),
                live=False,
            )
            # One UPDATE sets both, as the CHECK pairing them wants.
            Brand.objects.filter(pk=tenant.pk).update(livemode=False, test_of=brand)
            tenant.refresh_from_db()
            _test_money_post(
                tenant=tenant,
                amount_minor=TRIAL_BALANCE_MINOR,
                idempotency_key=f"test_tenant:{tenant.pk}:welcome",
                memo="Free test balance",
            )
            return tenant
    except IntegrityError:
        # Another request opened it first (brand_one_active_test_tenant).
        return Brand.objects.get(test_of=brand, status=BrandStatus.ACTIVE)


def _test_money_post(*, tenant: Brand, amount_minor: int, idempotency_key: str, memo: str):
    """Test bank → the tenant's funds. A ``brand_topup`` entry like a real one, so the tenant's
    ``topup.received`` webhook (with ``livemode: false``) shows what an integration will see."""
    currency = tenant.default_currency
    funds = brand_funds_account(brand=tenant, currency=currency)
    hook_fire(AUDIT_ROWS_WRITTEN)
    return ledger_entry_post(
        idempotency_key=idempotency_key,
        kind="brand_topup",
        legs=[Leg.debit(trial_bank_account(currency=currency), amount_minor), Leg.credit(funds, amount_minor)],
        memo=memo,
        reference_type="brand",
        reference_id=str(tenant.pk),
    )


def trial_topup_simulate(*, tenant: Brand, amount_minor: int, idempotency_key: str):
    """A simulated bank transfer of ``amount_minor`` into a test tenant's funds (in its currency).
    Raises PermissionDenied (``live_brand``) for a live brand — real money only comes from the
    bank — and InvalidInput (``invalid_amount``, ``test_funds_limit``) outside the trial's limits.
    Idempotent by ``idempotency_key``. Durable transaction."""
    if tenant.livemode:
        raise PermissionDenied("Only test mode can simulate a bank transfer.", code="live_brand")
    if type(amount_minor) is not int or not 0 < amount_minor <= TRIAL_TOPUP_MAX_MINOR:
        raise InvalidInput(
            f"A simulated transfer is between 0.01 and {TRIAL_TOPUP_MAX_MINOR // 100:,}.",
            code="invalid_amount",
            details={"max_minor": TRIAL_TOPUP_MAX_MINOR},
        )
    key = f"test_tenant:{tenant.pk}:transfer:{idempotency_key}"[:200]
    with transaction.atomic(durable=True):
        account = brand_funds_account(brand=tenant, currency=tenant.default_currency)
        # Locked, so two transfers at once cannot both fit under the limit; a replay of a
        # transfer already booked answers as the first time, whatever the funds are now.
        funds = Account.objects.select_for_update().get(pk=account.pk)
        replay = JournalEntry.objects.filter(idempotency_key=key).exists()
        if not replay and funds.posted_minor + amount_minor > TRIAL_FUNDS_MAX_MINOR:
            raise InvalidInput(
                f"Test funds stay at most {TRIAL_FUNDS_MAX_MINOR // 100:,}.",
                code="test_funds_limit",
                details={"max_minor": TRIAL_FUNDS_MAX_MINOR},
            )
        return _test_money_post(
            tenant=tenant,
            amount_minor=amount_minor,
            idempotency_key=key,
            memo="Simulated bank transfer",
        )


def trial_tenant_reset(*, brand: Brand) -> Brand:
    """Start test mode afresh: the live ``brand``'s active test tenant is retired — suspended (its
    claim pages and keys stop), its keys revoked, its webhook endpoints off; its campaigns,
    people, rewards, payouts and books stay as they were, because the ledger is append-only — and
    a new one is opened with a fresh free balance. Returns the new tenant. Raises what
    ``trial_tenant_open`` raises."""
    now = timezone.now()
    with transaction.atomic(durable=True):
        Brand.objects.select_for_update().filter(pk=brand.pk).first()
        old = trial_tenant_active(brand=brand)
        if old is not None:
            Brand.objects.filter(pk=old.pk).update(status=BrandStatus.SUSPENDED)
            ApiKey.objects.filter(brand=old, revoked_at__isnull=True).update(revoked_at=now)
            WebhookEndpoint.objects.filter(brand=old).update(is_active=False)
    return trial_tenant_open(brand=brand)


# --- going live ----------------------------------------------------------------------------------


def golive_checklist(*, brand: Brand) -> list[GoLiveStep]:
    """What ``brand`` has done of going live, in the order the portal shows it."""
    topped_up = JournalEntry.objects.filter(
        kind="brand_topup", reference_type="brand", reference_id=str(brand.pk)
    ).exists()
    return [
        GoLiveStep("company", "company details", bool(brand.company_legal_name and brand.company_address)),
        GoLiveStep("terms", "terms accepted", brand.terms_accepted_at is not None),
        GoLiveStep("topup", "first top-up", topped_up),
    ]


def golive_require(*, brand: Brand) -> None:
    """Nothing for a test tenant or a brand already live. Otherwise the checklist must be complete
    — then the brand is live from now on — or InvalidTransition (``go_live_incomplete``) names
    what is missing. Joins the caller's transaction."""
    if not brand.livemode or brand.live_since is not None:
        return
    missing = [step for step in golive_checklist(brand=brand) if not step.done]
    if missing:
        raise InvalidTransition(
            f"Complete going live before launching a live campaign: {', '.join(s.label for s in missing)} missing.",
            code="go_live_incomplete",
            details={"missing": [s.key for s in missing]},
        )
    now = timezone.now()
    Brand.objects.filter(pk=brand.pk, live_since__isnull=True).update(live_since=now)
    brand.live_since = brand.live_since or now


def brand_company_details_set(*, brand: Brand, legal_name: str, address: str, vat_number: str = "") -> Brand:
    """Record the company behind a live brand. Raises InvalidInput (``invalid_company``) for a
    missing or too long name or address, PermissionDenied (``test_mode``) for a test tenant."""
    if not brand.livemode:
        raise PermissionDenied("Company details belong to the live brand.", code="test_mode")
    legal_name, address, vat_number = (legal_name or "").strip(), (address or "").strip(), (vat_number or "").strip()
    if not legal_name or len(legal_name) > 200 or not address or len(address) > 300 or len(vat_number) > 30:
        raise InvalidInput(
            "Give the company's legal name (up to 200 characters) and address (up to 300).", code="invalid_company"
        )
    Brand.objects.filter(pk=brand.pk).update(
        company_legal_name=legal_name, company_address=address, company_vat_number=vat_number
    )
    brand.company_legal_name, brand.company_address, brand.company_vat_number = legal_name, address, vat_number
    return brand


def brand_terms_accept(*, brand: Brand) -> Brand:
    """The brand accepts the terms (the first acceptance time is kept). PermissionDenied
    (``test_mode``) for a test tenant."""
    if not brand.livemode:
        raise PermissionDenied("The terms are accepted by the live brand.", code="test_mode")
    Brand.objects.filter(pk=brand.pk, terms_accepted_at__isnull=True).update(terms_accepted_at=timezone.now())
    brand.refresh_from_db(fields=["terms_accepted_at"])
    return brand
