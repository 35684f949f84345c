from django.contrib import messages
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from campaigns.models import CampaignStatus
from core.exceptions import ApplicationError


def _campaign_cannot_move(exc: ApplicationError) -> str | None:
    status, to = exc.details.get("status"), exc.details.get("to")
    if status not in CampaignStatus.values or to not in CampaignStatus.values:
        return None
    return _("The campaign is %(status)s: it cannot become %(to)s.") % {
        "status": CampaignStatus(status).label,
        "to": CampaignStatus(to).label,
    }


GO_LIVE_STEPS = {
    "company": gettext_lazy("company details"),
    "terms": gettext_lazy("terms accepted"),
    "topup": gettext_lazy("first top-up"),
}

# Services outside the portal speak English (the API returns their message as it is); the codes a
# brand meets in the portal get words in the active language here. The portal's own services
# (web.portal.services) raise translated messages already.
PORTAL_MESSAGES = {
    "no_rules": lambda exc: _("Add a reward rule before launching."),
    "budget_insufficient": lambda exc: _(
        "The budget cannot cover the smallest reward; allocate money to the campaign first."
    ),
    "insufficient_funds": lambda exc: _("Your unallocated funds are insufficient for this amount."),
    "invalid_amount": lambda exc: _("Enter a positive amount."),
    "release_exceeds_available": lambda exc: _(
        "Only the budget no reward holds can go back: at most what is shown as available."
    ),
    "rewards_reserved": lambda exc: _(
        "Some rewards are still reserved: approve, reject or let them mature before closing."
    ),
    "reason_required": lambda exc: _("Say why the reward is rejected."),
    "invalid_iban": lambda exc: _("This IBAN is not valid: please check it for a typo."),
    "invalid_transition": _campaign_cannot_move,
    "go_live_incomplete": lambda exc: (
        _("Complete going live before launching a live campaign: %(missing)s missing.")
        % {"missing": ", ".join(str(GO_LIVE_STEPS.get(k, k)) for k in exc.details.get("missing", []))}
    ),
    "webhook_endpoint_deleted": lambda exc: _(
        "A deleted endpoint cannot be enabled again; register the URL as a new endpoint."
    ),
}


def report(request, exc: ApplicationError, *, form=None) -> None:
    """The one place the portal turns a service error into words for the brand: on ``form`` (its
    errors at the top) when the page has one, else as a message."""
    words = PORTAL_MESSAGES.get(exc.code)
    text = (words and words(exc)) or exc.message
    if form is not None:
        form.add_error(None, text)
    else:
        messages.error(request, text)
