"""WhatsApp click-to-chat links (https://wa.me/<number>?text=…): opens WhatsApp on the phone (or
WhatsApp Web) with the message typed in, so opting in is one tap on "send"."""

from urllib.parse import quote


def click_to_chat_url(*, number: str, text: str) -> str:
    digits = "".join(ch for ch in number if ch.isdigit())
    return f"https://wa.me/{digits}?text={quote(text)}"
