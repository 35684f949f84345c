"""TikTok's inbound door (Login Kit / Content Posting / Display API events): the signature check,
the parsing and what an event does are the TikTok platform's (``campaigns.platforms.tiktok``);
``core.webhooks_in`` stores, acknowledges and processes each delivery."""

from core.webhooks_in import InboundWebhookView


class TikTokWebhookView(InboundWebhookView):
    provider = "tiktok"
