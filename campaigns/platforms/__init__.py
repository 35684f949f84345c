"""Platform adapters (TikTok): every call to a social platform goes through here, behind a small
interface with a local fake (``tiktok_fake``) for tests and the demo."""
