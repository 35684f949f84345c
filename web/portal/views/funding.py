from django.conf import settings
from django.shortcuts import redirect, render

from core.exceptions import InvalidInput
from core.money import to_minor
from web.portal.access import brand_view
from web.portal.forms import FundingForm
from web.portal.qr import epc_payload, epc_qr_svg
from web.portal.selectors import brand_unallocated_minor


@brand_view()
def funding(request, access):
    """How to send money: the platform's IBAN, the brand's reference (the only thing that ties a
    transfer to the brand) and a SEPA QR code with both. Arrives through the bank statement."""
    brand = access.brand
    if not brand.livemode:
        # A test tenant is funded by a simulated transfer: a real one to its reference is never booked.
        return redirect("portal:test_mode", brand_slug=brand.slug)
    form = FundingForm(request.GET or None)
    amount_minor = None
    if form.is_bound and form.is_valid() and form.cleaned_data.get("amount"):
        try:
            amount_minor = to_minor(form.cleaned_data["amount"], "EUR")
        except InvalidInput as exc:
            form.add_error("amount", exc.message)
    payload = epc_payload(
        name=settings.PLATFORM_FUNDING_NAME,
        iban=settings.PLATFORM_FUNDING_IBAN,
        bic=settings.PLATFORM_FUNDING_BIC,
        reference=brand.funding_reference,
        amount_minor=amount_minor,
    )
    iban = settings.PLATFORM_FUNDING_IBAN
    return render(
        request,
        "portal/funding.html",
        {
            "access": access,
            "brand": brand,
            "form": form,
            "qr_svg": epc_qr_svg(payload),
            "iban": " ".join(iban[i : i + 4] for i in range(0, len(iban), 4)),
            "bic": settings.PLATFORM_FUNDING_BIC,
            "beneficiary": settings.PLATFORM_FUNDING_NAME,
            "amount_minor": amount_minor,
            "unallocated_minor": brand_unallocated_minor(brand=brand, currency=brand.default_currency),
        },
    )
