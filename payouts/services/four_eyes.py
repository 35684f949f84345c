"""Four-eyes across the whole chain of one payment (DESIGN §5): whoever gives a payout above the
threshold, or a pain.001 file above its threshold, the second approval approved none of the
rewards it pays (review approval in the admin, or through the API with a key they created, both
recorded as ``Reward.decided_by``). Who created the payout or the file is refused by the
services and the ``*_four_eyes`` CHECK constraints; this covers the earlier link of the chain.
The database refuses the same (triggers ``payout_four_eyes_chain`` and
``payout_batch_four_eyes_chain``, payouts migration ``four_eyes_across_the_chain``): this check
is what gives staff a message instead of an IntegrityError."""

from django.db.models import QuerySet

from campaigns.models import Reward
from core.exceptions import PermissionDenied
from payouts.models import Payout


def four_eyes_require(*, payouts: QuerySet[Payout], approver, what: str) -> None:
    """Raises PermissionDenied (code ``four_eyes``) if ``approver`` decided any reward paid by
    ``payouts`` — every item, as the triggers count them. ``what`` names the thing approved."""
    if Reward.objects.filter(payout_items__payout__in=payouts, decided_by=approver).exists():
        raise PermissionDenied(
            f"{what} needs a second person across the whole chain: you approved one of the rewards it pays.",
            code="four_eyes",
        )
