"""``event_ingest``: from a trigger event to a reserved reward (or a reasoned rejection).

Bulk ingestion: ``campaigns.services.ingest_bulk``; the query steps: ``ingest_steps``.

One short durable transaction per event: resolve the person (``recipients.person_resolve`` joins
it and keeps the person's root row locked), lock the IBAN, gather the facts, evaluate the rule
(``campaigns.evaluation``), then — under the campaign tally lock, as late as possible — check the
campaign-wide caps and reserve reward + fee as a ledger hold on the no-overdraft budget. Lock
order and why: ``campaigns.locks``.

Idempotency: ``(brand, external_id)`` is unique. A replay with the same payload (``request_hash``)
returns the first outcome with ``replayed=True``; the same id with another payload raises
IdempotencyConflict. Two concurrent deliveries of one event serialise on the person lock and the
loser's insert of the event row fails the unique constraint: its transaction rolls back whole and
it answers with the winner's outcome.
"""

import hashlib
import json
from dataclasses import asdict
from datetime import datetime, timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from campaigns.evaluation import (
    Facts,
    approval_verdict,
    cap_failure,
    condition_failure,
    fee_for,
    fraud_reasons,
    periods_for,
    reward_amount,
)
from campaigns.locks import lock_campaign_tally, lock_ibans
from campaigns.models import (
    BudgetAlert,
    CampaignEvent,
    CampaignStatus,
    EventOutcome,
    EventSource,
    Reward,
    RewardEvent,
    RewardStatus,
    Trigger,
    TriggerEvent,
)
from campaigns.models.events import LIVE_STATUSES
from campaigns.services.campaigns import _transition
from campaigns.services.ingest_steps import (
    CampaignContext,
    Reject,
    Who,
    campaign_context,
    counters_give_back,
    counters_take,
    signals_of,
    usage_of,
    who_resolve,
)
from campaigns.services.ingest_types import EventInput, IngestResult, PreparedEvent
from core.exceptions import IdempotencyConflict, InsufficientFunds, InvalidInput
from recipients.normalise import email_normalise, phone_normalise, social_normalise
from recipients.selectors import (
    iban_fingerprint,
)
from reconciliation.db import constraint_name
from reconciliation.services import ledger_hold_create

# An event claiming to come from the future beyond clock skew is refused: period caps count by
# occurred_at, and a future date would dodge today's cap.
FUTURE_TOLERANCE = timedelta(minutes=5)


def _request_hash(payload: EventInput) -> str:
    data = asdict(payload)
    data["occurred_at"] = payload.occurred_at.isoformat() if payload.occurred_at else None
    return hashlib.sha256(json.dumps(data, sort_keys=True, default=str).encode()).hexdigest()


def event_prepare(payload: EventInput, *, now: datetime) -> PreparedEvent:
    """Validate and normalise without touching the database. Raises InvalidInput."""
    if not payload.external_id or len(payload.external_id) > 200:
        raise InvalidInput("external_id must be 1 to 200 characters.", code="invalid_external_id")
    if payload.type not in Trigger.values:
        raise InvalidInput(f"Unknown event type {payload.type!r}.", code="invalid_event_type")
    if payload.source not in EventSource.values:
        raise InvalidInput(f"Unknown source {payload.source!r}.", code="invalid_source")
    if payload.purchase_amount_minor is not None and (
        type(payload.purchase_amount_minor) is not int or payload.purchase_amount_minor <= 0
    ):
        raise InvalidInput("purchase_amount_minor is a positive integer.", code="invalid_amount")
    occurred_at = payload.occurred_at or now
    if timezone.is_naive(occurred_at):
        raise InvalidInput("occurred_at needs a time zone.", code="invalid_occurred_at")
    if occurred_at > now + FUTURE_TOLERANCE:
        raise InvalidInput("occurred_at is in the future.", code="invalid_occurred_at")
    social = ""
    if payload.social_provider or payload.social_uid:
        social = social_normalise(payload.social_provider, payload.social_uid)
    return PreparedEvent(
        payload=payload,
        request_hash=_request_hash(payload),
        occurred_at=occurred_at,
        email=email_normalise(payload.email) if payload.email.strip() else "",
        whatsapp=phone_normalise(payload.whatsapp, region=payload.phone_region) if payload.whatsapp.strip() else "",
        social=social,
        iban_fingerprint=iban_fingerprint(payload.iban) if payload.iban.strip() else "",
    )


def event_replay(existing: TriggerEvent, request_hash: str) -> IngestResult:
    if existing.request_hash != request_hash:
        raise IdempotencyConflict(
            f"Event {existing.external_id!r} was sent before with different content.",
            details={"external_id": existing.external_id, "event_id": existing.pk},
        )
    reward = Reward.objects.filter(event=existing).first()
    return IngestResult(event=existing, reward=reward, outcome=existing.outcome, reason=existing.reason, replayed=True)


def _budget_alerts_and_pause(*, ctx: CampaignContext, funded: int, reserved: int, available: int) -> None:
    """After a reservation (the caller holds the tally and the budget row, so ``available`` is
    exact): record each 50/80/100 % threshold this reservation crossed, once, and pause the
    campaign when what is left cannot pay the smallest reward."""
    campaign = ctx.campaign
    if funded > 0:
        spent_after = funded - available
        spent_before = spent_after - reserved
        for pct in BudgetAlert.THRESHOLDS:
            if spent_before * 100 < pct * funded <= spent_after * 100:
                BudgetAlert.objects.create(
                    campaign=campaign, threshold_pct=pct, funded_minor=funded, spent_minor=spent_after
                )
                CampaignEvent.objects.create(
                    campaign=campaign,
                    kind="campaign.budget_threshold",
                    to_status=campaign.status,
                    data={"threshold_pct": pct, "funded_minor": funded, "spent_minor": spent_after},
                )
    _pause_if_spent(ctx, available=available)


def _pause_if_spent(ctx: CampaignContext, *, available: int) -> None:
    """Pause the campaign when ``available`` cannot pay the smallest reward any active rule can
    give (a large percentage reward that does not fit is refused without pausing: smaller ones
    still can)."""
    if ctx.smallest_reservation is None or available >= ctx.smallest_reservation:
        return
    _transition(
        campaign=ctx.campaign,
        from_statuses=(CampaignStatus.ACTIVE,),
        to=CampaignStatus.PAUSED,
        kind="campaign.paused",
        reason="budget_exhausted",
        data={"available_minor": available, "automatic": True},
    )


def early_rejection(ctx: CampaignContext, p: PreparedEvent) -> str | None:
    """Reasons that need no person: checked before resolving anyone."""
    campaign = ctx.campaign
    if campaign.status != CampaignStatus.ACTIVE:
        return "campaign_not_active"
    if p.occurred_at < campaign.starts_at or (campaign.ends_at and p.occurred_at >= campaign.ends_at):
        return "outside_campaign_window"
    if ctx.rule_for(p.payload) is None:
        return "no_matching_rule"
    return None


def ingest_locked(
    *, brand, ctx: CampaignContext, p: PreparedEvent, now: datetime, who: Who | None = None
) -> IngestResult:
    """The body of one ingestion, in the caller's transaction. ``who`` is given when the caller
    resolved the person already (bulk). Raises IntegrityError on a concurrent duplicate (the
    caller answers with the winner's outcome)."""
    payload = p.payload
    campaign = ctx.campaign
    rule = ctx.rule_for(payload)
    person = None
    fingerprint = country = ""
    review_reasons: list[str] = []
    try:
        early = early_rejection(ctx, p)
        if early:
            raise Reject(early)
        if who is None:  # bulk resolved and locked the whole chunk before
            who = who_resolve(payload)
            lock_ibans(fingerprints=[who.fingerprint])
        person, cluster, fingerprint, country = who.person, who.cluster, who.fingerprint, who.country
        new_to_brand = True
        if rule.new_people_only:
            new_to_brand = not Reward.objects.filter(
                person_id__in=cluster, campaign__brand=brand, status__in=LIVE_STATUSES
            ).exists()
        facts = Facts(
            trigger=payload.type,
            source=payload.source,
            occurred_at=p.occurred_at,
            purchase_amount_minor=payload.purchase_amount_minor,
            purchase_currency=payload.purchase_currency.upper(),
            view_count=payload.view_count,
            code=payload.code,
            evidence_text=json.dumps(payload.evidence, default=str) if rule.required_code else "",
            iban_fingerprint=fingerprint,
            iban_country=country,
            person_is_new_to_brand=new_to_brand,
        )
        reason = condition_failure(rule=rule, facts=facts, currency=campaign.currency)
        if reason:
            raise Reject(reason)
        amount = reward_amount(
            rule=rule, purchase_amount_minor=payload.purchase_amount_minor, currency=campaign.currency
        )
        if amount <= 0:
            raise Reject("amount_zero")
        periods = periods_for(p.occurred_at, campaign.tz)
        usage = usage_of(rule=rule, cluster=cluster, fingerprint=fingerprint, periods=periods)
        reason = cap_failure(rule=rule, usage=usage, amount_minor=amount)
        if reason:
            raise Reject(reason)
        signals = signals_of(campaign=campaign, payload=payload, fingerprint=fingerprint, now=now)
        verdict = approval_verdict(
            rule=rule, amount_minor=amount, fraud=fraud_reasons(campaign=campaign, signals=signals)
        )
        review_reasons = verdict.review_reasons
        fee = fee_for(brand=brand, amount_minor=amount, currency=campaign.currency)

        tally = lock_campaign_tally(campaign_id=campaign.pk)
        campaign.status = tally.status
        if tally.status != CampaignStatus.ACTIVE:
            raise Reject("campaign_not_active")
        if tally.budget_available_minor < amount + fee:
            _pause_if_spent(ctx, available=tally.budget_available_minor)
            raise Reject("budget_exhausted")
        taken = counters_take(rule=rule, day_key=periods.day_key)
        try:
            hold = ledger_hold_create(
                idempotency_key=f"reward:{brand.pk}:{payload.external_id}",
                account=campaign.budget_account,
                amount_minor=amount + fee,
                currency=campaign.currency,
                memo=f"Reward for {payload.type} {payload.external_id}",
                reference_type="trigger_event",
                reference_id=f"{brand.pk}:{payload.external_id}"[:64],
            ).hold
        except InsufficientFunds:
            # Backstop only: the locked balance above said it fits, and the database agrees.
            counters_give_back(rule=rule, periods=taken)
            _pause_if_spent(ctx, available=tally.budget_available_minor)
            raise Reject("budget_exhausted") from None
    except Reject as rejection:
        event = _event_create(
            brand, ctx, p, rule, person, fingerprint, country, now, EventOutcome.REJECTED, rejection.reason, []
        )
        return IngestResult(
            event=event, reward=None, outcome=EventOutcome.REJECTED, reason=rejection.reason, replayed=False
        )

    if verdict.needs_review:
        outcome, status = EventOutcome.REVIEW, RewardStatus.REVIEW
    else:
        outcome = EventOutcome.HELD if rule.hold_days else EventOutcome.REWARDED
        status = RewardStatus.HELD
    event = _event_create(brand, ctx, p, rule, person, fingerprint, country, now, outcome, "", review_reasons)
    reward = Reward.objects.create(
        event=event,
        campaign=campaign,
        rule=rule,
        person=person,
        amount_minor=amount,
        fee_minor=fee,
        currency=campaign.currency,
        status=status,
        hold=hold,
        occurred_at=p.occurred_at,
        matures_at=max(p.occurred_at + timedelta(days=rule.hold_days), now),
        iban_fingerprint=fingerprint,
        review_reasons=review_reasons,
        created_at=now,
        updated_at=now,
    )
    RewardEvent.objects.create(
        reward=reward,
        kind=f"reward.{status}",
        to_status=status,
        reason=",".join(review_reasons)[:200],
        data={"amount_minor": amount, "fee_minor": fee, "hold_id": hold.pk},
        created_at=now,
    )
    _budget_alerts_and_pause(
        ctx=ctx, funded=tally.funded_minor, reserved=amount + fee, available=tally.budget_available_minor - amount - fee
    )
    return IngestResult(event=event, reward=reward, outcome=outcome, reason="", replayed=False)


def _event_create(
    brand, ctx, p: PreparedEvent, rule, person, fingerprint, country, now, outcome, reason, review_reasons
):
    payload = p.payload
    return TriggerEvent.objects.create(
        brand=brand,
        campaign=ctx.campaign,
        rule=rule,
        type=payload.type,
        custom_name=payload.custom_name,
        external_id=payload.external_id,
        occurred_at=p.occurred_at,
        received_at=now,
        person=person,
        email=p.email,
        whatsapp=p.whatsapp,
        social_provider=p.social.split(":", 1)[0] if p.social else "",
        social_uid=p.social.split(":", 1)[1] if p.social else "",
        iban_fingerprint=fingerprint or p.iban_fingerprint,
        iban_country=country,
        evidence=payload.evidence,
        source=payload.source,
        ip=payload.ip or None,
        device_fingerprint=payload.device_fingerprint,
        purchase_amount_minor=payload.purchase_amount_minor,
        purchase_currency=payload.purchase_currency.upper(),
        order_id=payload.order_id,
        code=payload.code,
        view_count=payload.view_count,
        outcome=outcome,
        reason=reason,
        review_reasons=review_reasons,
        request_hash=p.request_hash,
    )


def is_duplicate_event(exc: IntegrityError) -> bool:
    return constraint_name(exc) == "trigger_event_external_id_unique" or "external_id" in str(exc)


def event_ingest(*, brand, payload: EventInput) -> IngestResult:
    """Ingest one trigger event: evaluate the campaign's rule for it and reserve the reward.

    Outcomes: ``rejected`` (``reason`` is a stable code: campaign_not_active, no_matching_rule,
    a failed condition, a full cap, budget_exhausted …), ``review`` (money reserved, a person
    decides; ``review_reasons`` stored), ``held`` (money reserved until ``matures_at``) or
    ``rewarded`` (no hold period: payable at the next maturing run). A business rejection is
    stored and replayed like any outcome.
    Raises: InvalidInput (bad identifiers, type, amounts — nothing stored), NotFound (campaign),
    IdempotencyConflict (same external_id, different payload).
    Transaction: one ``atomic(durable=True)``; when the budget cannot cover the smallest reward
    afterwards (or could not cover this one) the campaign is paused in the same transaction.
    """
    now = timezone.now()
    prepared = event_prepare(payload, now=now)
    existing = TriggerEvent.objects.filter(brand=brand, external_id=payload.external_id).first()
    if existing is not None:
        return event_replay(existing, prepared.request_hash)
    ctx = campaign_context(brand, payload.campaign)
    try:
        with transaction.atomic(durable=True):
            return ingest_locked(brand=brand, ctx=ctx, p=prepared, now=now)
    except IntegrityError as exc:
        if not is_duplicate_event(exc):
            raise
    return event_replay(TriggerEvent.objects.get(brand=brand, external_id=payload.external_id), prepared.request_hash)
