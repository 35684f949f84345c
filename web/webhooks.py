"""The inbound webhooks' doors (/api/webhooks/<provider>/): each verifies, stores and acknowledges
through ``core.webhooks_in``; the provider's handler processes the delivery later, in the app whose
work it is (``web.whatsapp_webhook``, ``campaigns.tiktok``, ``payouts.wise_webhooks``)."""

import hmac

from django.conf import settings
from django.http import HttpResponse

from core.webhooks_in import InboundWebhookView, security_logger


class WhatsAppWebhookView(InboundWebhookView):
    provider = "whatsapp"

    def get(self, request):
        """Meta's subscription check: echo ``hub.challenge`` when the verify token matches."""
        token = settings.WHATSAPP_VERIFY_TOKEN
        mode, given = request.GET.get("hub.mode", ""), request.GET.get("hub.verify_token", "")
        if token and mode == "subscribe" and hmac.compare_digest(given.encode(), token.encode()):
            return HttpResponse(request.GET.get("hub.challenge", ""), content_type="text/plain")
        security_logger.warning("WhatsApp subscription check refused (mode %r)", mode)
        return HttpResponse(status=403)


class TikTokWebhookView(InboundWebhookView):
    provider = "tiktok"


class WiseWebhookView(InboundWebhookView):
    provider = "wise"
