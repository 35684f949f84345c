"""A campaign's history as a brand reads it: each audit row (``CampaignEvent``) in words, amounts
formatted, instead of event names and raw data (issue 16)."""

from dataclasses import dataclass

from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from campaigns.evaluation import brand_visible_reason
from campaigns.models import BrandMembership, CampaignEvent
from core.money import format_minor

_TITLES = {
    "campaign.created": lambda e, cur: _("Created as a draft"),
    "campaign.updated": lambda e, cur: (
        _("Settings changed: %(fields)s") % {"fields": ", ".join(e.data.get("fields", []))}
    ),
    "campaign.launched": lambda e, cur: _("Launched: the claim page is live"),
    "campaign.paused": lambda e, cur: (
        _("Paused automatically: the budget cannot pay another reward") if e.data.get("automatic") else _("Paused")
    ),
    "campaign.resumed": lambda e, cur: _("Resumed"),
    "campaign.ended": lambda e, cur: _("Ended: no new rewards"),
    "campaign.closed": lambda e, cur: (
        _("Closed: %(amount)s went back to your funds") % {"amount": format_minor(e.data.get("released_minor", 0), cur)}
    ),
    "campaign.budget_allocated": lambda e, cur: (
        _("%(amount)s added to the budget (now %(funded)s)")
        % {
            "amount": format_minor(e.data.get("amount_minor", 0), cur),
            "funded": format_minor(e.data.get("funded_minor", 0), cur),
        }
    ),
    "campaign.budget_threshold": lambda e, cur: (
        _("%(pct)s%% of the budget spent (%(spent)s of %(funded)s)")
        % {
            "pct": e.data.get("threshold_pct", "?"),
            "spent": format_minor(e.data.get("spent_minor", 0), cur),
            "funded": format_minor(e.data.get("funded_minor", 0), cur),
        }
    ),
    "campaign.rule_replaced": lambda e, cur: (
        _("A rule was changed (rule %(old)s replaced by %(new)s)")
        % {"old": e.data.get("old_rule", "?"), "new": e.data.get("new_rule", "?")}
    ),
    "campaign.rule_retired": lambda e, cur: (
        _("Rule %(rule)s retired: it pays no new rewards") % {"rule": e.data.get("rule", "?")}
    ),
}

# Reasons the system writes; a reason a person typed (through the API) is shown as they wrote it.
_REASONS = {
    "budget_exhausted": gettext_lazy("the budget ran out"),
}


def _why(reason: str) -> str:
    return str(_REASONS.get(reason, reason.replace("_", " "))) if reason else ""


@dataclass(frozen=True)
class HistoryLine:
    when: object
    what: str
    who: str
    why: str


def _who(actor, members: set[int]) -> str:
    """The brand's own user by name (or e-mail); our staff as the JoyBack team, never by name;
    "automatic" only where no person acted."""
    if actor is None:
        return _("JoyBack (automatic)")
    if actor.pk not in members:
        return _("JoyBack team")
    return actor.get_full_name() or actor.email or actor.get_username()


def campaign_history(*, campaign, limit: int = 20) -> list[HistoryLine]:
    """The newest ``limit`` rows of the campaign's audit trail, in words."""
    rows = list(CampaignEvent.objects.filter(campaign=campaign).select_related("actor").order_by("-id")[:limit])
    actors = {row.actor_id for row in rows if row.actor_id}
    members = set(
        BrandMembership.objects.filter(brand_id=campaign.brand_id, user_id__in=actors).values_list("user_id", flat=True)
    )
    return [
        HistoryLine(
            when=row.created_at,
            what=_TITLES[row.kind](row, campaign.currency) if row.kind in _TITLES else row.kind,
            who=_who(row.actor, members),
            why=_why(brand_visible_reason(row.reason)),
        )
        for row in rows
    ]
