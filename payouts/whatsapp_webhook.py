"""WhatsApp's inbound door and the claim page's hand-over of an opt-in code.

The opt-in itself (codes, the signed webhook, redeeming a code) is the WhatsApp platform
(``campaigns.platforms.whatsapp``); this view only answers Meta's subscription check and hands
the POST to ``core.webhooks_in``. ``whatsapp_optin_hand_over`` gives the browser that asked for a
redeemed code the payout form of its reward, once: the code is spent.
"""

from django.db import transaction
from django.http import HttpResponse
from django.utils import timezone

from campaigns.platforms import platform_get
from campaigns.platforms.whatsapp import whatsapp_optin_started_by
from core.webhooks_in import InboundWebhookView, security_logger
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


class WhatsAppWebhookView(InboundWebhookView):
    provider = "whatsapp"

    def get(self, request):
        """Meta's subscription check: echo ``hub.challenge`` when the verify token matches."""
        challenge = platform_get("whatsapp").webhook_challenge(params=request.GET)
        if challenge is not None:
            return HttpResponse(challenge, content_type="text/plain")
        security_logger.warning("WhatsApp subscription check refused (mode %r)", request.GET.get("hub.mode", ""))
        return HttpResponse(status=403)


__all__ = ["WhatsAppWebhookView", "whatsapp_optin_hand_over"]
