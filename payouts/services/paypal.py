"""PayPal as a payout destination: whether a claim page offers it, and what PayPal's item events
do to a payout. Settlement and returns go through the same state machine and ledger entries as
every rail's status (``payout_apply_rail_status``), against the platform's PayPal balance."""

from django.core.exceptions import ImproperlyConfigured

from campaigns.models import Campaign
from payouts.models import Payout
from payouts.rails import get_rail
from payouts.rails.base import RetryableRailError
from payouts.rails.paypal import PAYPAL_RAIL, PayPalPayoutsRail
from payouts.services.execute import payout_apply_rail_status


def paypal_rail(name: str = PAYPAL_RAIL) -> PayPalPayoutsRail | None:
    """The configured PayPal rail, or None while it is not configured."""
    try:
        rail = get_rail(name)
    except ImproperlyConfigured:
        return None
    return rail if isinstance(rail, PayPalPayoutsRail) else None


def paypal_offered(*, campaign: Campaign) -> bool:
    """Does ``campaign``'s claim page offer a PayPal account? Only where the campaign allows it
    and a PayPal rail is configured that pays in the campaign's currency; never in test mode
    (test payouts go to the sandbox, which pays bank accounts only)."""
    if not campaign.allow_paypal or not campaign.brand.livemode:
        return False
    rail = paypal_rail()
    return rail is not None and campaign.currency in rail.capabilities().currencies


def paypal_item_event_apply(*, rail: str, sender_item_id: str, batch_id: str) -> bool:
    """A verified PayPal item event names a payout (its ``sender_item_id`` is the payout's
    ``end_to_end_id``): ask PayPal for the batch's status now — the event's content is not what
    moves money — and record it (settled, returned, failed; ledger entries against the PayPal
    balance in the same transaction). Returns whether the payout changed; an item of no payout of
    this rail changes nothing. Idempotent: a replayed event finds the payout already there.
    Raises ConnectionError when PayPal cannot be asked (the inbound sweep tries again)."""
    payout = Payout.objects.filter(rail=rail, end_to_end_id=sender_item_id).values("id", "rail_reference").first()
    if payout is None:
        return False
    try:
        # The batch must carry our sender_batch_id (``status`` checks): a stray id moves nothing.
        known = get_rail(rail).status(sender_item_id, rail_reference=payout["rail_reference"] or batch_id)
    except RetryableRailError as exc:
        raise ConnectionError(f"PayPal could not be asked about {sender_item_id}: {exc}") from exc
    if not payout["rail_reference"] and batch_id:
        # PayPal finds a payout only by its batch id, and ``status`` just confirmed this batch is
        # ours: keep it, so a payout whose submit answer was lost (back in review) can be looked up
        # and is never cancelled and paid again.
        Payout.objects.filter(pk=payout["id"], rail_reference="").update(rail_reference=batch_id)
    return payout_apply_rail_status(payout_id=payout["id"], known=known)
