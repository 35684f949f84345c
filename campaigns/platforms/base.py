"""The one interface every social platform implements, and the values that cross it.

A platform is the outside world where a person does what a JoyBack campaign pays for (TikTok,
WhatsApp). Like a payout rail (``payouts.rails.base.Rail``), each sits behind this interface, is
built by the registry (``campaigns.platforms``) and has a fake that follows the provider's
documented contract, its production checks beside it.

What the engine asks of a platform:

- **Identity proof**: how a person shows an account is theirs (``proof``). ``oauth``: a login on the
  claim page (allauth) leaves the proven account in the session, read back with
  ``identity_from_session``. ``inbound_code``: the person sends a one-time code from the account,
  and the signed inbound webhook redeems it.
- **Action verification and re-checking**, for a platform that reads people's content:
  ``content_list`` shows the person's own recent items to pick from; ``content_query`` fetches
  given items again — still there, still theirs (another person's item comes back missing), how
  many views now.
- **Re-checking an action before its reward matures**: ``action_recheck`` says which of the
  action's undoings it sees now (the video gone or private, its views below the threshold, the
  authorization revoked, the opt-in withdrawn), as ``UndoneReason`` codes; none when it still
  stands or the platform cannot tell. A transient failure raises ``PlatformUnavailable``.
- **Keeping a stored token usable**: an OAuth platform's access token is short-lived (TikTok's a
  day at most) while a hold lasts days, so what a login granted is kept as a ``TokenGrant`` (the
  access token and the refresh token, each with its expiry) and renewed with ``token_refresh``
  before a call that needs it (``campaigns.services.credentials``). A refusal for good (the
  person revoked us, or the refresh token expired) raises ``AuthorizationRefused``; an outage
  raises ``PlatformUnavailable``, which never counts as a refusal.
- **Inbound webhooks**: ``webhook_verify`` checks the signature over the raw body before anything
  is stored; ``webhook_events`` parses a stored body into ``InboundEvent`` values;
  ``webhook_handle`` acts on them and says whether the delivery was processed or ignored.
  ``core.webhooks_in`` stores, deduplicates and retries; the HTTP view is only the door.
- **The demo's fake**: ``fake`` hands back the function that answers as the provider would
  (``FakeRequest`` in, ``FakeResponse`` out) while its ``FAKE_<NAME>_ENABLED`` setting is on;
  ``web.fakes`` serves every platform's under /fake/<name>/.
- **Production checks**: ``production_checks`` says what a real deployment must set (the fake off,
  real credentials, https); ``core.checks`` runs them unless the deployment is declared sandboxed.

Calls to a platform never run inside a database transaction (STYLE 4): callers fetch first, then
write. A platform reads its settings when called, so a test's override takes effect at once.
"""

import json
from abc import ABC
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import ClassVar

from django.core import checks
from django.utils.functional import Promise

from core.exceptions import ApplicationError, InvalidInput
from core.models import InboundStatus
from core.webhooks_in import Rejected, Verified


class PlatformUnavailable(ApplicationError):
    """The platform did not answer or answered with an error: retry later (a job) or say so (a
    page)."""

    code = "platform_unavailable"
    http_status = 503


class AccessTokenRefused(PlatformUnavailable):
    """The platform no longer takes this access token (expired early, or revoked). Renewing it
    may help once (``campaigns.services.credentials.platform_token_use``); if it does not, the
    caller cannot tell what became of the action — never a reason to void on its own."""

    code = "access_token_refused"


class AuthorizationRefused(ApplicationError):
    """The platform refused, for good, to renew a stored authorization: the person revoked it, or
    its refresh token expired or was lost (OAuth ``invalid_grant``). Final, unlike
    ``PlatformUnavailable``; not proof of a revocation, so it voids nothing: the account's held
    rewards that a revocation would void go to review (``authorization_refused_record``)."""

    code = "authorization_refused"
    http_status = 409


@dataclass(frozen=True)
class TokenGrant:
    """What an OAuth login or a refresh gave: the access token and the refresh token, each with
    the time it stops working (None: not said). Never logged."""

    access_token: str = field(repr=False)
    access_expires_at: datetime | None = None
    refresh_token: str = field(default="", repr=False)
    refresh_expires_at: datetime | None = None


@dataclass(frozen=True)
class ProvenIdentity:
    """An account the person proved is theirs on a platform."""

    platform: str
    uid: str  # the platform's id of the account (TikTok open_id, WhatsApp number)
    name: str = ""
    # A credential to read the person's own content (an OAuth access token): never stored in
    # evidence, never logged.
    token: str = field(default="", repr=False)
    evidence: Mapping = field(default_factory=dict)  # what a trigger event keeps as proof of it
    # The whole of what the login granted (``token`` with its expiry and the refresh token), kept
    # when an item of the person's is submitted, to read it again later. None: no OAuth login.
    grant: TokenGrant | None = field(default=None, repr=False)


@dataclass(frozen=True)
class Content:
    """An item the person published on a platform (a video, a story), as the platform sees it now."""

    id: str
    description: str
    view_count: int
    share_url: str = ""
    create_time: int = 0
    cover_url: str = ""

    def has_tag(self, tag: str) -> bool:
        """Case-insensitive hashtag/code match; ``#`` optional on either side."""
        wanted = tag.strip().lstrip("#").lower()
        words = {w.strip(".,!?;:").lstrip("#").lower() for w in self.description.split()}
        return bool(wanted) and wanted in words


@dataclass(frozen=True)
class InboundEvent:
    """One thing a platform's webhook told us, in our words (``kind``: ``message``,
    ``authorization_removed``, …)."""

    kind: str
    uid: str = ""  # the account it is about
    ref: str = ""  # the platform's id of the thing (a message id, a video id)
    name: str = ""
    text: str = ""
    data: Mapping = field(default_factory=dict)


@dataclass(frozen=True)
class ActionCheck:
    """One rewarded action to look at again: what its trigger event recorded."""

    trigger: str  # the rule's trigger ("ugc_share", "whatsapp_optin" …)
    uid: str  # the account that did it (TikTok open_id, WhatsApp number); "" if the event named none
    occurred_at: datetime
    item_id: str = ""  # the content item (a video id), for content triggers
    view_threshold: int | None = None  # the rule's threshold, for a views trigger


@dataclass
class FakeRequest:
    """A request to a platform's fake, whichever server carries it."""

    method: str
    path: str  # after the mount point, e.g. "/v2/oauth/token/"
    query: dict[str, str]
    form: dict[str, str] = field(default_factory=dict)
    body: bytes = b""
    authorization: str = ""


@dataclass
class FakeResponse:
    status: int
    body: str
    content_type: str = "application/json"
    location: str = ""


@dataclass(frozen=True)
class ContentTexts:
    """The claim pages' words for a platform's items (translated strings; ``%(…)s`` placeholders
    filled by the page)."""

    offer: Promise  # "Post a TikTok video"
    offer_views: Promise  # "Post a TikTok video with %(views)s+ views"
    offer_button: Promise  # "Pick my TikTok video"
    login_first: Promise  # "Log in with TikTok first."
    unavailable: Promise  # "TikTok is not answering right now. …"
    pick_title: Promise  # "Pick your video"
    pick_hint: Promise  # "Choose the video with %(tag)s in its caption."
    pick_legend: Promise  # "Your recent TikTok videos"
    pick_empty: Promise  # "No videos found on your TikTok account."
    pick_error: Promise  # "Choose one of your videos."
    submit: Promise  # "Check my video"
    status_title: Promise  # "Your video"
    checking: Promise  # "We are checking your video with TikTok…"
    pick_another: Promise  # "Pick another video"


class Platform(ABC):
    name: ClassVar[str]  # registry key, event source and social provider ("tiktok")
    label: ClassVar[str]
    proof: ClassVar[str]  # "oauth" | "inbound_code"
    # How the claim pages' content step speaks of its items; None: it reads no content.
    content_texts: ClassVar[ContentTexts | None] = None
    # The headers of its webhooks kept with the body (lower case: signature, delivery id).
    webhook_headers: ClassVar[tuple[str, ...]] = ()

    # --- identity proof ---------------------------------------------------------------------

    def identity_from_session(self, request) -> ProvenIdentity | None:
        """The account proven by a login in this browser session (``oauth`` platforms), or None."""
        return None

    # --- action verification and re-checking ------------------------------------------------

    def content_list(self, *, identity: ProvenIdentity) -> list[Content]:
        """The person's recent items. Raises PlatformUnavailable."""
        raise NotImplementedError(f"{self.name} does not read people's content.")

    def content_query(self, *, token: str, ids: list[str]) -> list[Content]:
        """Fresh data on the person's own items by id; another person's come back missing.
        Raises PlatformUnavailable."""
        raise NotImplementedError(f"{self.name} does not read people's content.")

    def action_recheck(self, *, action: ActionCheck) -> list[str]:
        """The ``UndoneReason`` codes of what undid ``action`` since it was rewarded; [] when it
        still stands or this platform cannot tell. Content is read with the account's stored
        token (``campaigns.services.credentials``). Raises PlatformUnavailable (try again later:
        a transient failure never voids)."""
        return []

    def token_refresh(self, *, refresh_token: str) -> TokenGrant:
        """A new access token (and, where the platform rotates them, a new refresh token) for a
        stored authorization. Raises AuthorizationRefused (revoked or expired: final) or
        PlatformUnavailable (try again later)."""
        raise NotImplementedError(f"{self.name} has no refreshable tokens.")

    def content_login_url(self, *, next_url: str) -> str:
        """Where the claim page POSTs to have the person prove their account with the right to
        read their content, coming back to ``next_url``."""
        raise NotImplementedError(f"{self.name} does not read people's content.")

    # --- inbound webhooks --------------------------------------------------------------------

    def webhook_verify(self, *, body: bytes, headers: Mapping[str, str]) -> Verified | Rejected:
        """The signature check over the raw body, before anything is stored."""
        return Rejected(f"{self.name} sends no webhooks")

    def webhook_events(self, *, body: bytes) -> list[InboundEvent]:
        """The events of a verified body. Raises InvalidInput for a body that is not the platform's."""
        return []

    def webhook_handle(self, *, webhook_id: int, events: list[InboundEvent]) -> str:
        """Act on a delivery's events; ``InboundStatus.PROCESSED`` or ``IGNORED``."""
        return InboundStatus.IGNORED

    def webhook_challenge(self, *, params: Mapping[str, str]) -> str | None:
        """The answer to the provider's subscription check (a GET on the webhook), or None to refuse."""
        return None

    # --- the demo's fake --------------------------------------------------------------------

    def fake(self) -> Callable[[FakeRequest], FakeResponse] | None:
        """The fake that answers as the provider would, served under /fake/<name>/ by the demo;
        None when the platform has none or its ``FAKE_<NAME>_ENABLED`` is off."""
        return None

    # --- production --------------------------------------------------------------------------

    def production_checks(self) -> list[checks.CheckMessage]:
        """What a deployment that pays real people must set for this platform."""
        return []


def json_object(body: bytes, *, what: str) -> dict:
    """A webhook body as a JSON object, or InvalidInput (``webhook_invalid``, a final failure)."""
    try:
        payload = json.loads(body)
    except ValueError:
        raise InvalidInput("The body is not JSON.", code="webhook_invalid")
    if not isinstance(payload, dict):
        raise InvalidInput(f"The body is not {what}.", code="webhook_invalid")
    return payload
