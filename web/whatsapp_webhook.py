"""The claim page's hand-over of a WhatsApp opt-in code.

The opt-in itself (codes, the signed webhook, redeeming a code) is the WhatsApp platform
(``campaigns.platforms.whatsapp``); its inbound door is ``/api/webhooks/whatsapp/``, the one of
``core.webhooks_in``. ``whatsapp_optin_hand_over`` gives the browser that asked for a redeemed code the payout form of
its reward, once: the code is spent.
"""

from django.db import transaction
from django.utils import timezone

from campaigns.platforms.whatsapp import whatsapp_optin_started_by
from payouts.links import PAYOUT_SALT, Link, link_make
from recipients.models_claims import WhatsAppOptInCode


def whatsapp_optin_hand_over(*, row: WhatsAppOptInCode, starter: str, reward_id: int) -> Link | None:
    """Spend the redeemed ``row`` (a conditional UPDATE of ``spent_at``) and make the payout-form
    link of ``reward_id`` for the browser that started it, in one transaction: a code hands over
    one link, once. None when it was spent before or ``starter`` is not that browser's."""
    if not whatsapp_optin_started_by(row, starter=starter):
        return None
    now = timezone.now()
    with transaction.atomic():
        spent = WhatsAppOptInCode.objects.filter(
            pk=row.pk, used_at__isnull=False, spent_at__isnull=True, starter_hash=row.starter_hash
        ).update(spent_at=now)
        if spent != 1:
            return None
        return link_make(PAYOUT_SALT, reward_id)
