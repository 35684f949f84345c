"""Campaigns: creation, rules, budget allocation and the status transitions.

Status moves only here: draft → active ⇄ paused → ended → closed, each a conditional UPDATE
(``WHERE status IN (…)`` must change exactly one row) with a CampaignEvent in the same
transaction. Money transitions take the campaign tally lock before the ledger (``campaigns.locks``).
"""

from datetime import datetime

from django.core.exceptions import ValidationError
from django.db import transaction

from campaigns.entitlements import entitlement_campaign_check, entitlement_launch_check, entitlement_trigger_check
from campaigns.evaluation import fee_for
from campaigns.locks import lock_campaign_tally
from campaigns.models import (
    Campaign,
    CampaignEvent,
    CampaignStatus,
    CampaignTally,
    Reward,
    RewardRule,
)
from campaigns.models.events import RESERVED_STATUSES
from campaigns.models.rules import verification_default
from campaigns.selectors import brand_plan_current
from campaigns.services.brands import brand_funds_account
from campaigns.services.test_mode import golive_require
from core.exceptions import InsufficientFunds, InvalidInput, InvalidTransition
from core.hooks import AUDIT_ROWS_WRITTEN, hook_fire
from core.money import validate_currency
from reconciliation.models import Account, AccountKind, JournalEntry
from reconciliation.services import Leg, account_get_or_create, ledger_entry_post


def _validation_to_invalid_input(exc: ValidationError) -> InvalidInput:
    return InvalidInput("; ".join(exc.messages), code="validation_error", details=exc.message_dict)


def campaign_create(
    *,
    brand,
    name: str,
    slug: str,
    mode: str,
    starts_at: datetime,
    currency: str = "",
    ends_at: datetime | None = None,
    timezone: str = "Europe/Amsterdam",
    actor=None,
    **settings,
) -> Campaign:
    """Create a draft campaign with its no-overdraft budget account ``campaign:<id>:budget:<CUR>``
    and its tally row, in one transaction. ``settings`` are further Campaign fields (payout mode,
    fraud thresholds); ``actor``, the user who created it, goes on its ``campaign.created`` row
    (None: the system, or a partner's API key). Raises InvalidInput (validation messages per field), PlanRefused (the
    brand's plan has no trigger for this mode; ``campaign_provision`` asks)."""
    currency = validate_currency(currency or brand.default_currency)
    campaign = Campaign(
        brand=brand,
        name=name,
        slug=slug,
        mode=mode,
        currency=currency,
        starts_at=starts_at,
        ends_at=ends_at,
        timezone=timezone,
        **settings,
    )
    try:
        campaign.full_clean(exclude=["budget_account"])
    except ValidationError as exc:
        raise _validation_to_invalid_input(exc) from exc
    return campaign_provision(campaign=campaign, actor=actor)


def campaign_provision(*, campaign: Campaign, actor=None) -> Campaign:
    """Save a new, validated campaign with its budget account and tally row, in one transaction
    (the admin's add form calls this with the instance it built, after its form ran the same
    plan check). Raises PlanRefused."""
    entitlement_campaign_check(brand=campaign.brand, mode=campaign.mode)
    currency = validate_currency(campaign.currency)
    with transaction.atomic():
        campaign.save()
        campaign.budget_account = account_get_or_create(
            code=f"campaign:{campaign.pk}:budget:{currency}",
            name=f"Budget {campaign.brand.slug}/{campaign.slug} {currency}",
            kind=AccountKind.LIABILITY,
            currency=currency,
            allow_overdraft=False,
            owner_type="campaign",
            owner_id=str(campaign.pk),
        )
        campaign.save(update_fields=["budget_account"])
        CampaignTally.objects.create(campaign=campaign)
        CampaignEvent.objects.create(campaign=campaign, kind="campaign.created", to_status=campaign.status, actor=actor)
    return campaign


def rule_create(*, campaign: Campaign, **fields) -> RewardRule:
    """Add a rule, validated with ``full_clean`` (the CHECK constraints are the backstop). Likes,
    comments and purchases default to partner-attested: TikTok cannot verify the first two, and a
    purchase is what the shop's system reports. Raises PlanRefused (the brand's plan lacks the
    trigger), InvalidInput."""
    entitlement_trigger_check(brand=campaign.brand, trigger=fields.get("trigger", ""))
    fields.setdefault("verification", verification_default(fields.get("trigger", "")))
    rule = RewardRule(campaign=campaign, **fields)
    try:
        rule.full_clean()
    except ValidationError as exc:
        raise _validation_to_invalid_input(exc) from exc
    rule.save()
    return rule


def smallest_reservation_minor(*, campaign: Campaign) -> int | None:
    """The least any active rule can reserve (reward + fee): below this available, the campaign
    cannot pay anyone and is paused. None when there is no active rule."""
    rules = list(RewardRule.objects.filter(campaign=campaign, is_active=True))
    if not rules:
        return None
    plan = brand_plan_current(brand=campaign.brand)
    return min(
        r.smallest_reward_minor + fee_for(plan=plan, amount_minor=r.smallest_reward_minor, currency=campaign.currency)
        for r in rules
    )


def _transition(
    *, campaign: Campaign, from_statuses: tuple[str, ...], to: str, kind: str, actor=None, reason: str = "", data=None
) -> bool:
    """Conditional UPDATE + audit row, in the caller's transaction. False if the status was not
    one of ``from_statuses`` (nothing written)."""
    previous = Campaign.objects.filter(pk=campaign.pk).values_list("status", flat=True).first()
    changed = Campaign.objects.filter(pk=campaign.pk, status__in=from_statuses).update(status=to)
    if changed != 1:
        return False
    hook_fire(AUDIT_ROWS_WRITTEN)  # a pause is a campaign.paused webhook
    CampaignEvent.objects.create(
        campaign=campaign,
        kind=kind,
        from_status=previous or "",
        to_status=to,
        actor=actor,
        reason=reason,
        data=data or {},
    )
    campaign.status = to
    return True


def _transition_or_raise(*, campaign: Campaign, from_statuses: tuple[str, ...], to: str, kind: str, actor, reason=""):
    with transaction.atomic(durable=True):
        if not _transition(
            campaign=campaign, from_statuses=from_statuses, to=to, kind=kind, actor=actor, reason=reason
        ):
            current = Campaign.objects.filter(pk=campaign.pk).values_list("status", flat=True).first()
            raise InvalidTransition(
                f"A {current} campaign cannot move to {to}.",
                details={"campaign_id": campaign.pk, "status": current, "to": to},
            )
    return campaign


def campaign_launch(*, campaign: Campaign, actor=None) -> Campaign:
    """draft → active. Requires at least one active rule and a budget that covers the smallest
    reward (``budget_insufficient``, as for resuming: a campaign that can pay nobody would pause
    at its first event), a live brand that signed up itself must have gone live
    (``go_live_incomplete``, naming what is missing), and its plan must still include every active
    rule's trigger. Raises InvalidTransition, PlanRefused."""
    golive_require(brand=campaign.brand)
    entitlement_launch_check(campaign=campaign)
    if not RewardRule.objects.filter(campaign=campaign, is_active=True).exists():
        raise InvalidTransition("Add a reward rule before launching.", code="no_rules")
    if campaign.status == CampaignStatus.DRAFT:  # any other status is refused as a transition
        _budget_covers_smallest_reward(campaign)
    return _transition_or_raise(
        campaign=campaign,
        from_statuses=(CampaignStatus.DRAFT,),
        to=CampaignStatus.ACTIVE,
        kind="campaign.launched",
        actor=actor,
    )


def campaign_pause(*, campaign: Campaign, actor=None, reason: str = "") -> Campaign:
    """active → paused. Rewards already reserved keep maturing. Raises InvalidTransition."""
    return _transition_or_raise(
        campaign=campaign,
        from_statuses=(CampaignStatus.ACTIVE,),
        to=CampaignStatus.PAUSED,
        kind="campaign.paused",
        actor=actor,
        reason=reason,
    )


def _budget_covers_smallest_reward(campaign: Campaign) -> None:
    need = smallest_reservation_minor(campaign=campaign)
    available = Account.objects.get(pk=campaign.budget_account_id).available_minor
    if need is not None and available < need:
        raise InvalidTransition(
            "The budget cannot cover the smallest reward; allocate money to the campaign first.",
            code="budget_insufficient",
            details={"available_minor": available, "needed_minor": need},
        )


def campaign_resume(*, campaign: Campaign, actor=None) -> Campaign:
    """paused → active. Refused (``budget_insufficient``) while the budget cannot cover the
    smallest reward, which would pause it again at once."""
    if campaign.status == CampaignStatus.PAUSED:  # any other status is refused as a transition
        _budget_covers_smallest_reward(campaign)
    return _transition_or_raise(
        campaign=campaign,
        from_statuses=(CampaignStatus.PAUSED,),
        to=CampaignStatus.ACTIVE,
        kind="campaign.resumed",
        actor=actor,
    )


def campaign_end(*, campaign: Campaign, actor=None) -> Campaign:
    """active | paused → ended: no new rewards; reserved ones still mature or are voided."""
    return _transition_or_raise(
        campaign=campaign,
        from_statuses=(CampaignStatus.ACTIVE, CampaignStatus.PAUSED),
        to=CampaignStatus.ENDED,
        kind="campaign.ended",
        actor=actor,
    )


def _status_after_lock(campaign: Campaign) -> str:
    """The campaign's status read by a statement of its own after the tally lock. The lock's
    statement re-reads only the rows it locks (tally, budget) once it has waited: the campaign
    row it joins keeps the version of its first snapshot, so a close or pause that committed
    while it waited would be missed (tests/campaigns/test_budget_release.py races one)."""
    return Campaign.objects.filter(pk=campaign.pk).values_list("status", flat=True).get()


def campaign_close(*, campaign: Campaign, actor=None) -> Campaign:
    """active | paused | ended → closed, releasing the unspent budget back to the brand's funds.

    An active or paused campaign is ended and closed in the same transaction (a
    ``campaign.ended`` then a ``campaign.closed`` row): under the tally lock no reservation can
    slip in between, so no new action is paid once this commits. A closed campaign is returned
    unchanged (a replay posts nothing).

    Precondition: no reward is still reserved (review or held) — closing means the campaign's
    money is settled; approve, reject, void or let them mature first (InvalidTransition
    ``rewards_reserved``, nothing written). Payable rewards stay owed to their people; what
    expires unclaimed afterwards goes to the brand's funds (``reward_expire``).
    Durable transaction: tally lock (with the budget row), release entry
    (``campaign:<id>:close-release``), transitions, audit rows."""
    closable = (CampaignStatus.ACTIVE, CampaignStatus.PAUSED, CampaignStatus.ENDED)
    with transaction.atomic(durable=True):
        lock_campaign_tally(campaign_id=campaign.pk)
        status = _status_after_lock(campaign)
        if status == CampaignStatus.CLOSED:
            campaign.status = status
            return campaign
        if status not in closable:
            raise InvalidTransition(
                f"A {status} campaign cannot be closed.",
                details={"campaign_id": campaign.pk, "status": status, "to": CampaignStatus.CLOSED},
            )
        reserved = Reward.objects.filter(campaign=campaign, status__in=RESERVED_STATUSES).count()
        if reserved:
            raise InvalidTransition(
                f"{reserved} rewards are still reserved; decide or void them first.",
                code="rewards_reserved",
                details={"reserved": reserved},
            )
        if status != CampaignStatus.ENDED:
            _transition(
                campaign=campaign,
                from_statuses=(CampaignStatus.ACTIVE, CampaignStatus.PAUSED),
                to=CampaignStatus.ENDED,
                kind="campaign.ended",
                actor=actor,
            )
        budget = Account.objects.get(pk=campaign.budget_account_id)
        released = budget.available_minor
        if released > 0:
            funds = brand_funds_account(brand=campaign.brand, currency=campaign.currency)
            ledger_entry_post(
                idempotency_key=f"campaign:{campaign.pk}:close-release",
                kind="budget_release",
                legs=[Leg.debit(budget, released), Leg.credit(funds, released)],
                memo=f"Unspent budget of {campaign} back to the brand",
                reference_type="campaign",
                reference_id=str(campaign.pk),
            )
        _transition(
            campaign=campaign,
            from_statuses=(CampaignStatus.ENDED,),
            to=CampaignStatus.CLOSED,
            kind="campaign.closed",
            actor=actor,
            data={"released_minor": released},
        )
    return campaign


def campaign_budget_release(*, campaign: Campaign, amount_minor: int, idempotency_key: str, actor=None) -> Campaign:
    """Move ``amount_minor`` of the campaign's unspent budget back to the brand's funds (the
    reverse of ``campaign_allocate``).

    Only what is available may go: money held for rewards in review or held stays (available =
    posted − held, read under the tally lock that also locks the budget row, so two concurrent
    releases see each other's result and cannot overdraw; the no-overdraft CHECK is the
    backstop). The funded total drops by the amount (never below zero), which re-arms the budget
    alerts. An active campaign left unable to pay its smallest reward pauses itself in the same
    transaction (``campaign.paused``, reason ``budget_released``), as ingestion does.

    Idempotent by ``idempotency_key``: a key already posted returns at once, changing nothing.
    Raises InvalidInput (``invalid_amount``), InsufficientFunds (more than available, nothing
    written), InvalidTransition (a closed campaign has nothing left), IdempotencyConflict.
    Durable transaction: tally lock → ledger entry → funded total → audit row(s)."""
    if type(amount_minor) is not int or amount_minor <= 0:
        raise InvalidInput("Release a positive amount in minor units.", code="invalid_amount")
    with transaction.atomic(durable=True):
        tally = lock_campaign_tally(campaign_id=campaign.pk)
        status = _status_after_lock(campaign)
        funds = brand_funds_account(brand=campaign.brand, currency=campaign.currency)
        budget = Account.objects.get(pk=campaign.budget_account_id)
        legs = [Leg.debit(budget, amount_minor), Leg.credit(funds, amount_minor)]
        memo = f"Release from {campaign} back to the brand"
        if JournalEntry.objects.filter(idempotency_key=idempotency_key).exists():
            # A replay: the ledger answers with the stored entry (or IdempotencyConflict when the
            # key was used for something else), before the balance check that would now refuse it.
            ledger_entry_post(
                idempotency_key=idempotency_key,
                kind="budget_release",
                legs=legs,
                memo=memo,
                reference_type="campaign",
                reference_id=str(campaign.pk),
            )
            return campaign
        if status == CampaignStatus.CLOSED:
            raise InvalidTransition(
                "A closed campaign has given its budget back already.",
                details={"campaign_id": campaign.pk, "status": status, "to": "released"},
            )
        if amount_minor > tally.budget_available_minor:
            raise InsufficientFunds(
                "Only the budget not reserved for rewards can go back.",
                code="release_exceeds_available",
                details={"available_minor": tally.budget_available_minor, "amount_minor": amount_minor},
            )
        result = ledger_entry_post(
            idempotency_key=idempotency_key,
            kind="budget_release",
            legs=legs,
            memo=memo,
            reference_type="campaign",
            reference_id=str(campaign.pk),
        )
        funded = max(tally.funded_minor - amount_minor, 0)
        CampaignTally.objects.filter(pk=campaign.pk).update(funded_minor=funded)
        available = tally.budget_available_minor - amount_minor
        CampaignEvent.objects.create(
            campaign=campaign,
            kind="campaign.budget_released",
            to_status=status,
            actor=actor,
            data={
                "amount_minor": amount_minor,
                "entry_id": result.entry.pk,
                "funded_minor": funded,
                "available_minor": available,
            },
        )
        need = smallest_reservation_minor(campaign=campaign)
        if status == CampaignStatus.ACTIVE and need is not None and available < need:
            _transition(
                campaign=campaign,
                from_statuses=(CampaignStatus.ACTIVE,),
                to=CampaignStatus.PAUSED,
                kind="campaign.paused",
                actor=actor,
                reason="budget_released",
                data={"available_minor": available, "automatic": True},
            )
    return campaign


def campaign_allocate(*, campaign: Campaign, amount_minor: int, actor=None, idempotency_key: str) -> Campaign:
    """Move ``amount_minor`` from the brand's funds to the campaign budget.

    Idempotent by ``idempotency_key`` (a replay posts nothing and funds nothing twice).
    Raises InvalidInput (amount), InsufficientFunds (the brand has not that much unallocated),
    InvalidTransition (closed campaign), IdempotencyConflict. Durable transaction: tally lock →
    ledger entry → funded total → audit row. A new allocation re-arms the 50/80/100 % alerts."""
    if type(amount_minor) is not int or amount_minor <= 0:
        raise InvalidInput("Allocate a positive amount in minor units.", code="invalid_amount")
    with transaction.atomic(durable=True):
        tally = lock_campaign_tally(campaign_id=campaign.pk)
        funded, status = tally.funded_minor, _status_after_lock(campaign)
        if status == CampaignStatus.CLOSED:
            raise InvalidTransition("A closed campaign takes no more money.")
        funds = brand_funds_account(brand=campaign.brand, currency=campaign.currency)
        budget = Account.objects.get(pk=campaign.budget_account_id)
        result = ledger_entry_post(
            idempotency_key=idempotency_key,
            kind="budget_allocate",
            legs=[Leg.debit(funds, amount_minor), Leg.credit(budget, amount_minor)],
            memo=f"Allocate to {campaign}",
            reference_type="campaign",
            reference_id=str(campaign.pk),
        )
        if not result.replayed:
            CampaignTally.objects.filter(pk=campaign.pk).update(funded_minor=funded + amount_minor)
            CampaignEvent.objects.create(
                campaign=campaign,
                kind="campaign.budget_allocated",
                to_status=status,
                actor=actor,
                data={"amount_minor": amount_minor, "entry_id": result.entry.pk, "funded_minor": funded + amount_minor},
            )
    return campaign
