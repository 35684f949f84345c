"""Rewards in review that the brand decides itself (campaigns with ``brand_reviews``): the list,
and for each reward a confirmation page (GET) and the decision (POST). A replayed POST changes
nothing: an approved reward stays approved, a rejected one stays voided."""

from django.contrib import messages
from django.http import Http404
from django.shortcuts import redirect, render
from django.utils.translation import gettext as _
from django.views.decorators.http import require_http_methods

from campaigns.models import BrandRole, Reward
from campaigns.selectors import review_queue
from campaigns.services import reward_brand_approve, reward_brand_reject
from core.exceptions import ApplicationError, NotFound
from web.portal.access import brand_view
from web.portal.forms import RejectForm
from web.portal.views.common import report


def _reward(access, reward_id: int) -> Reward:
    reward = (
        Reward.objects.select_related("campaign", "rule")
        .filter(pk=reward_id, campaign__brand=access.brand, campaign__brand_reviews=True)
        .first()
    )
    if reward is None:
        raise Http404("No such reward.")
    return reward


@brand_view()
def review_list(request, access):
    rewards = review_queue(brand=access.brand).filter(campaign__brand_reviews=True)[:200]
    return render(request, "portal/review_list.html", {"access": access, "brand": access.brand, "rewards": rewards})


def _decide(request, access, reward_id: int, *, approve: bool):
    reward = _reward(access, reward_id)
    form = None if approve else RejectForm(request.POST or None)
    status = 200
    if request.method == "POST":
        if form is not None and not form.is_valid():
            status = 400
        else:
            try:
                if approve:
                    reward_brand_approve(brand=access.brand, reward_id=reward.pk, actor=request.user)
                else:
                    reward_brand_reject(
                        brand=access.brand, reward_id=reward.pk, actor=request.user, reason=form.cleaned_data["reason"]
                    )
            except NotFound as exc:
                raise Http404(exc.message) from exc
            except ApplicationError as exc:
                report(request, exc, form=form)
                status = exc.http_status
            else:
                messages.success(request, _("Reward approved.") if approve else _("Reward rejected."))
                return redirect("portal:review", brand_slug=access.brand.slug)
    return render(
        request,
        "portal/review_decide.html",
        {"access": access, "brand": access.brand, "reward": reward, "form": form, "approve": approve},
        status=status,
    )


@brand_view(BrandRole.ADMIN)
@require_http_methods(["GET", "POST"])
def review_approve(request, access, reward_id: int):
    return _decide(request, access, reward_id, approve=True)


@brand_view(BrandRole.ADMIN)
@require_http_methods(["GET", "POST"])
def review_reject(request, access, reward_id: int):
    return _decide(request, access, reward_id, approve=False)
