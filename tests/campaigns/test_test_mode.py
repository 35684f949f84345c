"""Test mode (issue 28): the linked test tenant, its free and simulated test money, its payouts on
the sandbox whatever the routing rules say, its fees and transit in the test books, the live books
untouched by a full test payout, the reset, and the go-live checklist."""

import pytest
from django.db.models import Q

from campaigns.api_keys import api_key_authenticate, api_key_create
from campaigns.models import Brand, BrandStatus, Campaign, Reward
from campaigns.selectors import brand_plan_current
from campaigns.services import (
    brand_topup_record,
    campaign_allocate,
    campaign_create,
    campaign_launch,
    event_ingest,
    rewards_mature,
    rule_create,
)
from campaigns.services.brands import brand_funds_account
from campaigns.services.rewards import platform_fees_account
from campaigns.services.test_mode import (
    TRIAL_BALANCE_MINOR,
    TRIAL_FUNDS_MAX_MINOR,
    TRIAL_TOPUP_MAX_MINOR,
    brand_company_details_set,
    brand_terms_accept,
    golive_checklist,
    trial_tenant_open,
    trial_tenant_reset,
    trial_topup_simulate,
)
from core.exceptions import InvalidInput, InvalidTransition, PermissionDenied
from payouts.models import Payout, PayoutStatus, RouteRule
from payouts.rails.base import Capabilities, Rail, SubmitResult, SubmitStatus
from payouts.services import payout_execute, payouts_create_for_payable
from reconciliation.models import Account, JournalEntry
from reconciliation.selectors import account_balance_by_code, ledger_verify_report
from reconciliation.services import Leg, ledger_entry_post
from reconciliation.test_books import trial_bank_account
from tests.campaigns.conftest import event
from tests.campaigns.factories import CAMPAIGN_START, BrandFactory, funded_campaign
from tests.payouts.payout_fixtures import *  # noqa: F403 - the fixtures
from tests.payouts.payout_fixtures import DEBTOR_IBAN, iban
from tests.reconciliation.test_ledger_concurrency import run_concurrently

pytestmark = pytest.mark.postgres

LOGIN_500 = {"trigger": "tiktok_login", "fixed_minor": 500}


@pytest.fixture
def live(db):
    """Joy Shoes, live, with a 10 cent + 2 % fee per reward."""
    return BrandFactory(name="Joy Shoes", slug="joy-shoes", fee_fixed_minor=10, fee_bps=200)


@pytest.fixture
def tenant(live):
    return trial_tenant_open(brand=live)


def trial_campaign(tenant, amount_minor=50_000, slug="try"):
    """A launched campaign of the test tenant, funded from its free test money."""
    campaign = campaign_create(brand=tenant, name="Try", slug=slug, mode="joyback", starts_at=CAMPAIGN_START)
    rule_create(campaign=campaign, **LOGIN_500)
    campaign_allocate(campaign=campaign, amount_minor=amount_minor, idempotency_key=f"alloc:{campaign.pk}")
    return campaign_launch(campaign=campaign)


def live_books() -> dict[str, tuple[int, int]]:
    """Every account that is not the test books' nor a test tenant's: code → (posted, held)."""
    tenants = [str(pk) for pk in Brand.objects.filter(livemode=False).values_list("pk", flat=True)]
    test_people = Reward.objects.filter(campaign__brand__livemode=False).values_list("person_id", flat=True)
    rows = (
        Account.objects.exclude(code__startswith="testmode:")
        .exclude(Q(owner_type="brand", owner_id__in=tenants))
        .exclude(code__in=[f"recipient:{p}:payable:EUR" for p in test_people])
        .exclude(pk__in=Campaign.objects.filter(brand__livemode=False).values("budget_account_id"))
    )
    return {a.code: (a.posted_minor, a.held_minor) for a in rows}


def test_a_test_tenant_is_a_linked_brand_with_free_test_money(live):
    # when the brand opens test mode
    tenant = trial_tenant_open(brand=live)
    # then a test tenant of its own exists, on the live brand's plan, with €1,000 of test money
    assert not tenant.livemode and tenant.test_of_id == live.pk and tenant.slug == "joy-shoes-test"
    assert tenant.live_since is None and tenant.funding_reference != live.funding_reference
    assert brand_plan_current(brand=tenant) == brand_plan_current(brand=live)
    plan = brand_plan_current(brand=tenant)
    assert (plan.fee_fixed_minor, plan.fee_bps) == (10, 200)
    funds = account_balance_by_code(code=f"brand:{tenant.pk}:funds:EUR")
    assert funds.posted_minor == TRIAL_BALANCE_MINOR
    # and the money came from the test books' sandbox bank, not a platform bank account
    assert account_balance_by_code(code="testmode:platform:bank:sandbox:EUR").posted_minor == TRIAL_BALANCE_MINOR
    assert not Account.objects.filter(code__startswith="platform:bank:").exists()
    # and opening again is the same tenant, credited once
    assert trial_tenant_open(brand=live) == tenant
    assert Brand.objects.filter(test_of=live).count() == 1
    assert JournalEntry.objects.filter(reference_type="brand", reference_id=str(tenant.pk)).count() == 1
    assert ledger_verify_report().ok


def test_a_test_tenant_has_no_test_tenant(tenant):
    with pytest.raises(PermissionDenied) as refused:
        trial_tenant_open(brand=tenant)
    assert refused.value.code == "test_of_test"
    assert Brand.objects.filter(test_of=tenant).count() == 0


def test_a_simulated_transfer_adds_test_money_once_and_within_limits(tenant):
    funds = f"brand:{tenant.pk}:funds:EUR"
    trial_topup_simulate(tenant=tenant, amount_minor=25_000, idempotency_key="click-1")
    trial_topup_simulate(tenant=tenant, amount_minor=25_000, idempotency_key="click-1")  # a double submit
    assert account_balance_by_code(code=funds).posted_minor == TRIAL_BALANCE_MINOR + 25_000
    entries = JournalEntry.objects.count()
    for amount in (0, -5, TRIAL_TOPUP_MAX_MINOR + 1):
        with pytest.raises(InvalidInput) as refused:
            trial_topup_simulate(tenant=tenant, amount_minor=amount, idempotency_key=f"bad-{amount}")
        assert refused.value.code == "invalid_amount"
    for n in range(4):
        trial_topup_simulate(tenant=tenant, amount_minor=TRIAL_TOPUP_MAX_MINOR, idempotency_key=f"big-{n}")
    with pytest.raises(InvalidInput) as refused:
        trial_topup_simulate(tenant=tenant, amount_minor=TRIAL_TOPUP_MAX_MINOR, idempotency_key="big-4")
    assert refused.value.code == "test_funds_limit"
    assert JournalEntry.objects.count() == entries + 4
    assert account_balance_by_code(code=funds).posted_minor <= TRIAL_FUNDS_MAX_MINOR


def test_a_live_brand_cannot_simulate_a_transfer(live):
    with pytest.raises(PermissionDenied) as refused:
        trial_topup_simulate(tenant=live, amount_minor=1_000, idempotency_key="x")
    assert refused.value.code == "live_brand"
    assert not JournalEntry.objects.exists()


def test_a_full_test_payout_settles_on_the_sandbox_and_leaves_the_live_books_alone(live, tenant, sandbox, debtor):
    # given a live brand paying people for real, and its test tenant with a campaign
    live_campaign = funded_campaign(brand=live, amount_minor=100_000, rules=[LOGIN_500])
    paid_live = event_ingest(brand=live, payload=event(campaign=live_campaign.slug, iban=iban(), name="Live Person"))
    rewards_mature()
    live_payout = Payout.objects.get(pk=payouts_create_for_payable().created[0])
    payout_execute(payout_id=live_payout.pk)
    campaign = trial_campaign(tenant)
    before = live_books()
    # when a test event becomes a reward, a payout, and the payout runs
    result = event_ingest(brand=tenant, payload=event(campaign=campaign.slug, iban=iban(), name="Test Person"))
    assert result.reward is not None and rewards_mature() == 1
    (payout_id,) = payouts_create_for_payable().created
    payout_execute(payout_id=payout_id)
    # then the test payout settled on the sandbox, paid from the test books
    payout = Payout.objects.get(pk=payout_id)
    assert payout.status == PayoutStatus.SETTLED and payout.rail == "sandbox" and payout.fallback_rail == ""
    assert payout.debtor_account_code == "testmode:platform:bank:sandbox:EUR"
    assert account_balance_by_code(code="testmode:payouts:in_transit:EUR").posted_minor == 0
    assert account_balance_by_code(code="testmode:platform:bank:sandbox:EUR").posted_minor == TRIAL_BALANCE_MINOR - 500
    # and its fee (10 cents + 2 %) went to the test books' fees
    assert account_balance_by_code(code="testmode:platform:fees:EUR").posted_minor == 20
    # and not one live account moved: the platform's bank, fees, in transit, the live brand's money
    assert live_books() == before
    assert account_balance_by_code(code="platform:fees:EUR").posted_minor == 20  # the live reward's only
    assert paid_live.reward.person_id != result.reward.person_id
    assert ledger_verify_report().ok


def test_routing_rules_naming_another_rail_never_take_a_test_payout(tenant, sandbox, debtor):
    # given routing rules that send every payout elsewhere
    RouteRule.objects.create(priority=0, rail="sepa_file")
    RouteRule.objects.create(priority=1, rail="psp_api", fallback_rail="sepa_file")
    campaign = trial_campaign(tenant)
    event_ingest(brand=tenant, payload=event(campaign=campaign.slug, iban=iban(), name="Test Person"))
    rewards_mature()
    # then the test payout is on the sandbox all the same
    (payout_id,) = payouts_create_for_payable().created
    assert Payout.objects.values_list("rail", "fallback_rail").get(pk=payout_id) == ("sandbox", "")


class LiveLookingRail(Rail):
    """A rail that is not the sandbox and records every submit (none may reach it)."""

    submits: list = []

    def submit(self, payment):
        LiveLookingRail.submits.append(payment.end_to_end_id)
        return SubmitResult(status=SubmitStatus.ACCEPTED, rail_reference="x")

    def status(self, end_to_end_id, *, rail_reference=None):
        raise AssertionError("not called")

    def verify_payee(self, *, name, iban):
        raise AssertionError("not called")

    def capabilities(self):
        return Capabilities(
            currencies=frozenset({"EUR"}),
            countries=frozenset({"IT", "NL"}),
            instant=True,
            max_amount_minor=None,
            verify_payee=False,
            file_based=False,
        )


def test_a_test_payout_moved_to_a_live_rail_is_refused_before_the_rail(tenant, sandbox, debtor, settings):
    settings.PAYOUT_RAILS = {**settings.PAYOUT_RAILS, "live_bank": {"BACKEND": f"{__name__}.LiveLookingRail"}}
    LiveLookingRail.submits = []
    campaign = trial_campaign(tenant)
    result = event_ingest(brand=tenant, payload=event(campaign=campaign.slug, iban=iban(), name="Test Person"))
    rewards_mature()
    (payout_id,) = payouts_create_for_payable().created
    # when someone points the test payout at a live rail
    Payout.objects.filter(pk=payout_id).update(rail="live_bank")
    payout_execute(payout_id=payout_id)
    # then the rail never saw it, the payout failed AG01 and the money is payable again
    payout = Payout.objects.get(pk=payout_id)
    assert LiveLookingRail.submits == []
    assert payout.status == PayoutStatus.FAILED and payout.reason_code == "AG01" and payout.sent_entry_id is None
    assert account_balance_by_code(code=f"recipient:{result.reward.person_id}:payable:EUR").posted_minor == 500
    assert ledger_verify_report().ok


def test_production_never_routes_live_money_to_the_sandbox(live, sandbox, debtor, settings):
    # given production's checks on, and the sandbox as the only rail that could carry a payout
    campaign = funded_campaign(brand=live, amount_minor=100_000, rules=[LOGIN_500])
    settings.PRODUCTION_CHECKS = True
    settings.SANDBOXED_DEPLOYMENT = ""
    RouteRule.objects.create(priority=0, rail="sandbox")
    event_ingest(brand=live, payload=event(campaign=campaign.slug, iban=iban(), name="Live Person"))
    rewards_mature()
    # then no live payout is created on it
    payouts_create_for_payable()
    assert not Payout.objects.filter(rail__in=["sandbox", "sandbox_nodedupe"]).exists()


def test_production_refuses_a_live_payout_put_on_the_sandbox_by_hand(live, sandbox, debtor, settings):
    campaign = funded_campaign(brand=live, amount_minor=100_000, rules=[LOGIN_500])
    event_ingest(brand=live, payload=event(campaign=campaign.slug, iban=iban(), name="Live Person"))
    rewards_mature()
    (payout_id,) = payouts_create_for_payable().created
    settings.PRODUCTION_CHECKS = True
    settings.SANDBOXED_DEPLOYMENT = ""
    payout_execute(payout_id=payout_id)
    payout = Payout.objects.get(pk=payout_id)
    assert payout.status == PayoutStatus.FAILED and payout.reason_code == "AG01"
    assert sandbox.transfer_count(payout.end_to_end_id) == 0


def test_production_still_pays_test_payouts_on_the_sandbox(tenant, sandbox, debtor, settings):
    settings.PRODUCTION_CHECKS = True
    settings.SANDBOXED_DEPLOYMENT = ""
    campaign = trial_campaign(tenant)
    event_ingest(brand=tenant, payload=event(campaign=campaign.slug, iban=iban(), name="Test Person"))
    rewards_mature()
    (payout_id,) = payouts_create_for_payable().created
    payout_execute(payout_id=payout_id)
    assert Payout.objects.get(pk=payout_id).status == PayoutStatus.SETTLED


def test_reset_retires_the_test_tenant_and_opens_a_fresh_one(live, tenant, sandbox, debtor):
    campaign = trial_campaign(tenant)
    event_ingest(brand=tenant, payload=event(campaign=campaign.slug, iban=iban(), name="Test Person"))
    token = api_key_create(brand=tenant, name="trial", scopes=["read"]).token
    # when the brand resets test data
    fresh = trial_tenant_reset(brand=live)
    # then the old tenant is suspended with its key revoked; its rows and books stay (append-only)
    old = Brand.objects.get(pk=tenant.pk)
    assert old.status == BrandStatus.SUSPENDED and api_key_authenticate(token=token) is None
    assert Reward.objects.filter(campaign__brand=old).count() == 1
    # and the fresh tenant starts empty with a new free balance
    assert fresh.pk != tenant.pk and fresh.test_of_id == live.pk and fresh.status == BrandStatus.ACTIVE
    assert not Reward.objects.filter(campaign__brand=fresh).exists()
    assert account_balance_by_code(code=f"brand:{fresh.pk}:funds:EUR").posted_minor == TRIAL_BALANCE_MINOR
    assert trial_tenant_open(brand=live) == fresh
    assert ledger_verify_report().ok


def test_a_brand_that_signed_up_launches_live_only_after_the_checklist(db):
    # given a brand that signed up itself, with a draft campaign and a rule
    brand = BrandFactory(name="New Shop", slug="new-shop", live=False)
    campaign = campaign_create(brand=brand, name="First", slug="first", mode="joyback", starts_at=CAMPAIGN_START)
    rule_create(campaign=campaign, **LOGIN_500)
    # when it launches, the refusal names everything missing
    with pytest.raises(InvalidTransition) as refused:
        campaign_launch(campaign=campaign)
    assert refused.value.code == "go_live_incomplete"
    assert refused.value.details["missing"] == ["company", "terms", "topup"]
    assert "company details, terms accepted, first top-up" in refused.value.message
    # and step by step the list shrinks
    brand_company_details_set(brand=brand, legal_name="New Shop S.r.l.", address="Via Roma 1, Milano")
    brand_terms_accept(brand=brand)
    with pytest.raises(InvalidTransition) as refused:
        campaign_launch(campaign=campaign)
    assert refused.value.details["missing"] == ["topup"]
    campaign.refresh_from_db()
    assert campaign.status == "draft"
    # test money does not count as a first top-up
    trial_topup_simulate(tenant=trial_tenant_open(brand=brand), amount_minor=10_000, idempotency_key="t")
    assert [s.done for s in golive_checklist(brand=brand)] == [True, True, False]
    brand_topup_record(
        brand=brand,
        amount_minor=10_000,
        currency="EUR",
        bank_account_code=DEBTOR_IBAN,
        idempotency_key="first-real",
        reference=brand.funding_reference,
    )
    campaign_allocate(campaign=campaign, amount_minor=10_000, idempotency_key="alloc")
    # then it launches and the brand is live from now on
    assert campaign_launch(campaign=campaign).status == "active"
    brand.refresh_from_db()
    assert brand.live_since is not None


def test_a_test_tenant_launches_without_the_checklist(live):
    tenant = trial_tenant_open(brand=BrandFactory(name="Trial", slug="trial", live=False))
    assert trial_campaign(tenant).status == "active"


def test_company_details_and_terms_belong_to_the_live_brand(tenant):
    with pytest.raises(PermissionDenied):
        brand_company_details_set(brand=tenant, legal_name="X", address="Y")
    with pytest.raises(PermissionDenied):
        brand_terms_accept(brand=tenant)
    tenant.refresh_from_db()
    assert tenant.company_legal_name == "" and tenant.terms_accepted_at is None
    with pytest.raises(InvalidInput):
        brand_company_details_set(brand=tenant.test_of, legal_name=" ", address="Y")


def test_brands_made_by_ops_are_live_at_once(live):
    assert live.livemode and live.live_since is not None


def test_ledger_verify_fails_an_entry_that_mixes_test_and_live_books(db):
    # given an entry moving test money into the platform's real fees (what no service may do)
    entry = ledger_entry_post(
        idempotency_key="leak",
        kind="manual",
        legs=[
            Leg.debit(trial_bank_account(currency="EUR"), 100),
            Leg.credit(platform_fees_account(currency="EUR"), 100),
        ],
    ).entry
    # then the books do not verify, and the report names the entry
    report = ledger_verify_report()
    assert not report.ok and report.mixed_books_entries == [entry.pk]


@pytest.mark.django_db(transaction=True)
def test_simulated_transfers_at_once_never_pass_the_test_funds_limit(live):
    """Six simulated transfers of the largest size at once, into a tenant that holds its free
    balance: only as many as fit under the limit are booked, the others are refused."""
    tenant = trial_tenant_open(brand=live)

    def transfer(i):
        return trial_topup_simulate(tenant=tenant, amount_minor=TRIAL_TOPUP_MAX_MINOR, idempotency_key=f"k{i}")

    results = run_concurrently(transfer, n=6)

    fits = (TRIAL_FUNDS_MAX_MINOR - TRIAL_BALANCE_MINOR) // TRIAL_TOPUP_MAX_MINOR
    refused = [r for r in results if isinstance(r, InvalidInput)]
    assert len(results) - len(refused) == fits, results
    assert all(r.code == "test_funds_limit" for r in refused)
    funds = brand_funds_account(brand=tenant, currency="EUR")
    assert funds.posted_minor == TRIAL_BALANCE_MINOR + fits * TRIAL_TOPUP_MAX_MINOR <= TRIAL_FUNDS_MAX_MINOR
    # a booked transfer sent again is the same transfer, even with the funds at the limit
    booked = next(i for i, r in enumerate(results) if not isinstance(r, InvalidInput))
    assert transfer(booked).replayed
