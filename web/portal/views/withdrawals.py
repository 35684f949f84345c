"""Withdrawing unspent funds to the brand's own bank account (owners only: money leaves the
platform). The bank account page registers an account for ops to verify; the withdrawal page is
the confirmation (GET) and the act (POST), idempotent by the key the page drew."""

import uuid

from django.contrib import messages
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from campaigns.models import BrandRole
from core.exceptions import ApplicationError
from core.money import to_minor
from payouts.models import BrandBankAccount, BrandBankAccountStatus, Withdrawal
from payouts.services.withdrawals import WithdrawalRequest, brand_bank_account_register, withdrawal_create
from web.portal.access import brand_view
from web.portal.forms import BankAccountForm, WithdrawForm
from web.portal.selectors import brand_unallocated_minor
from web.portal.views.common import report


def _page(request, access, form, bank_form, status: int = 200):
    brand = access.brand
    return render(
        request,
        "portal/withdraw.html",
        {
            "access": access,
            "brand": brand,
            "form": form,
            "bank_form": bank_form,
            "accounts": BrandBankAccount.objects.filter(brand=brand).order_by("-id"),
            "withdrawals": Withdrawal.objects.filter(brand=brand)
            .select_related("payout", "bank_account")
            .order_by("-id")[:50],
            "unallocated_minor": brand_unallocated_minor(brand=brand, currency=brand.default_currency),
        },
        status=status,
    )


def _verified(brand):
    return list(BrandBankAccount.objects.filter(brand=brand, status=BrandBankAccountStatus.VERIFIED))


@brand_view(BrandRole.OWNER)
@require_http_methods(["GET", "POST"])
def withdraw(request, access):
    accounts = _verified(access.brand)
    if request.method == "POST":
        form = WithdrawForm(request.POST, accounts=accounts)
        if not form.is_valid():
            return _page(request, access, form, BankAccountForm(), status=400)
        data = form.cleaned_data
        try:
            withdrawal_create(
                brand=access.brand,
                request=WithdrawalRequest(
                    bank_account_id=data["bank_account"],
                    amount_minor=to_minor(data["amount"], access.brand.default_currency),
                    idempotency_key=data["idempotency_key"],
                ),
                actor=request.user,
            )
        except ApplicationError as exc:
            report(request, exc, form=form)
            return _page(request, access, form, BankAccountForm(), status=exc.http_status)
        messages.success(request, _("Withdrawal on its way to your bank account."))
        return redirect("portal:withdraw", brand_slug=access.brand.slug)
    form = WithdrawForm(initial={"idempotency_key": uuid.uuid4().hex}, accounts=accounts)
    return _page(request, access, form, BankAccountForm())


@brand_view(BrandRole.OWNER)
@require_http_methods(["POST"])
def bank_account_add(request, access):
    bank_form = BankAccountForm(request.POST)
    form = WithdrawForm(initial={"idempotency_key": uuid.uuid4().hex}, accounts=_verified(access.brand))
    if not bank_form.is_valid():
        return _page(request, access, form, bank_form, status=400)
    try:
        brand_bank_account_register(
            brand=access.brand,
            iban=bank_form.cleaned_data["iban"],
            holder_name=bank_form.cleaned_data["holder_name"],
            actor=request.user,
        )
    except ApplicationError as exc:
        report(request, exc, form=bank_form)
        return _page(request, access, form, bank_form, status=exc.http_status)
    messages.success(request, _("Bank account saved: we verify it before the first withdrawal."))
    return redirect("portal:withdraw", brand_slug=access.brand.slug)
