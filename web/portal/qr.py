"""The EPC069-12 "SEPA QR" (GiroCode) a banking app scans to pre-fill a credit transfer: the
platform's account, the amount, and the brand's funding reference as the remittance text, so
the top-up finds the brand when the bank statement comes back."""

from decimal import Decimal

import qrcode
import qrcode.image.svg
from qrcode.constants import ERROR_CORRECT_M

from core.money import minor_to_decimal


def epc_payload(
    *, name: str, iban: str, bic: str, reference: str, amount_minor: int | None, currency: str = "EUR"
) -> str:
    """The EPC069-12 version 002 text: one field per line, UTF-8, at most 331 bytes. Only EUR can
    be carried; the amount (0.01 to 999,999,999.99) is optional so the brand can choose it."""
    if currency != "EUR":
        raise ValueError("A SEPA QR code carries euro amounts only.")
    amount = ""
    if amount_minor:
        value = minor_to_decimal(amount_minor, currency)
        if not Decimal("0.01") <= value <= Decimal("999999999.99"):
            raise ValueError("The amount is outside what a SEPA QR code can carry.")
        amount = f"EUR{value}"
    lines = ["BCD", "002", "1", "SCT", bic, name[:70], iban.replace(" ", ""), amount, "", "", reference[:140]]
    return "\n".join(lines)


def epc_qr_svg(payload: str) -> str:
    """The QR code as an inline SVG element (no file, no external service)."""
    qr = qrcode.QRCode(error_correction=ERROR_CORRECT_M, box_size=10, border=4)
    qr.add_data(payload.encode("utf-8"))
    qr.make(fit=True)
    image = qr.make_image(image_factory=qrcode.image.svg.SvgPathImage)
    svg = image.to_string(encoding="unicode")
    return svg[svg.index("<svg") :]
