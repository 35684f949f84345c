"""Every trigger, declared once: its label, the platform it happens on, whether our adapters verify
it first-party, what proof its first-party event keeps, and how the portal and the claim page speak
of it.

Everything that lists triggers reads ``TRIGGERS``: the ``Trigger`` choices (and the CHECK
constraints built from them), the rule validation that refuses a first-party like, the first-party
event sources of the rule engine, the paid-engagement warning, the portal's rule preview and the
claim page's offers. Adding a trigger is one ``TriggerSpec`` here, a migration (the choices' CHECK
constraint) and its Italian strings; a first-party one also needs its platform
(``campaigns.platforms``) to send the event.
"""

from dataclasses import dataclass

from django.utils.functional import Promise
from django.utils.translation import gettext_lazy as _


@dataclass(frozen=True)
class TriggerSpec:
    value: str  # stored on rules and events; the ``Trigger`` member is its upper case
    label: Promise
    action: Promise  # completes the portal preview's "A person who … receives"
    # The platform it happens on (a ``campaigns.platforms`` name, also the event source of its
    # first-party events); "" for what only the brand's own system knows (a purchase, a custom action).
    platform: str = ""
    # Our platform adapter proves it (an OAuth login, a signed inbound message, the Display API).
    first_party: bool = False
    # The keys the evidence of its first-party event holds, exactly (partner events bring their own).
    evidence: tuple[str, ...] = ()
    # Paid engagement: the platform's terms forbid inflating it, so the portal and admin warn.
    engagement: bool = False
    # Offered on the public claim page.
    claim_page: bool = False

    @property
    def unverifiable(self) -> bool:
        """It happens on a platform whose public APIs cannot show it (a like on someone else's
        video): a rule may not demand first-party proof of it."""
        return bool(self.platform) and not self.first_party


VIDEO_EVIDENCE = ("video_id", "description", "share_url")

TRIGGERS: tuple[TriggerSpec, ...] = (
    TriggerSpec(
        "purchase",
        _("Confirmed purchase"),
        _("buys from you (the purchase confirmed by your system)"),
        claim_page=True,
    ),
    TriggerSpec(
        "tiktok_login",
        _("TikTok login"),
        _("logs in with TikTok on the claim page"),
        platform="tiktok",
        first_party=True,
        evidence=("login", "open_id", "scopes", "logged_in_at"),
        claim_page=True,
    ),
    TriggerSpec(
        "whatsapp_optin",
        _("WhatsApp opt-in"),
        _("opts in on WhatsApp by sending the code from the claim page"),
        platform="whatsapp",
        first_party=True,
        evidence=("message_id", "code"),
        claim_page=True,
    ),
    TriggerSpec(
        "ugc_share",
        _("UGC video shared on TikTok"),
        _("posts a TikTok video with your hashtag and picks it on the claim page"),
        platform="tiktok",
        first_party=True,
        evidence=VIDEO_EVIDENCE,
        claim_page=True,
    ),
    TriggerSpec(
        "like",
        _("Like on brand content"),
        _("likes your content (reported by your system or checked by hand)"),
        platform="tiktok",
        engagement=True,
    ),
    TriggerSpec(
        "comment",
        _("Comment on brand content"),
        _("comments on your content (reported by your system or checked by hand)"),
        platform="tiktok",
        engagement=True,
    ),
    TriggerSpec(
        "view_threshold",
        _("Video passed a view count"),
        _("posts a TikTok video that passes the view count"),
        platform="tiktok",
        first_party=True,
        evidence=VIDEO_EVIDENCE,
        engagement=True,
        claim_page=True,
    ),
    TriggerSpec(
        "custom",
        _("Custom (named) trigger"),
        _("does the custom action your system reports"),
    ),
)

_BY_VALUE = {spec.value: spec for spec in TRIGGERS}


def trigger_spec(value: str) -> TriggerSpec | None:
    return _BY_VALUE.get(value)


def trigger_values(**where: bool | str) -> tuple[str, ...]:
    """The values of the triggers whose spec has every given attribute, in declaration order:
    ``trigger_values(claim_page=True)``, ``trigger_values(platform="tiktok", first_party=True)``."""
    return tuple(s.value for s in TRIGGERS if all(getattr(s, k) == v for k, v in where.items()))


def first_party_platforms() -> frozenset[str]:
    """The platforms (event sources) whose adapters verify a trigger themselves."""
    return frozenset(s.platform for s in TRIGGERS if s.first_party)


def trigger_evidence(value: str, **proof: object) -> dict:
    """The evidence a first-party ``value`` event keeps: exactly the keys its spec declares.
    Raises ValueError for a missing or an undeclared key (a programming error, never a person's)."""
    declared = _BY_VALUE[value].evidence
    if set(proof) != set(declared):
        raise ValueError(f"{value} evidence keeps {declared}, not {tuple(proof)}.")
    return {key: proof[key] for key in declared}
