"""The inbound webhooks' doors (/api/webhooks/<provider>/): each verifies, stores and acknowledges
through ``core.webhooks_in``; the provider's handler processes the delivery later, in the app whose
work it is (the platforms' in ``campaigns.platforms``, the PSPs' in ``payouts.wise_webhooks`` and
``payouts.paypal_webhooks``)."""

from django.http import HttpResponse

from campaigns.platforms import platform_get
from core.webhooks_in import InboundWebhookView, security_logger


class WhatsAppWebhookView(InboundWebhookView):
    provider = "whatsapp"

    def get(self, request):
        """Meta's subscription check: echo ``hub.challenge`` when the verify token matches."""
        challenge = platform_get("whatsapp").webhook_challenge(params=request.GET)
        if challenge is not None:
            return HttpResponse(challenge, content_type="text/plain")
        security_logger.warning("WhatsApp subscription check refused (mode %r)", request.GET.get("hub.mode", ""))
        return HttpResponse(status=403)


class TikTokWebhookView(InboundWebhookView):
    provider = "tiktok"


class WiseWebhookView(InboundWebhookView):
    provider = "wise"


class PayPalWebhookView(InboundWebhookView):
    provider = "paypal"
