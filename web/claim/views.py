"""Claim pages: thin views over ``web.claim.services``. Mobile first, no JavaScript needed
(waiting pages have a "check again" button; ``static/js/claim.js`` adds the live IBAN check and
auto-refresh). Every form is CSRF-protected, rate limited and carries a honeypot; every page that
takes a secret (a link's token, a code) is rate limited per client, GETs included
(``web.claim.ratelimit``)."""

import secrets
from functools import wraps

from babel.core import get_global
from django.conf import settings
from django.contrib import messages
from django.http import Http404, HttpResponse, JsonResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.translation import gettext as _
from django.views.decorators.http import require_GET, require_http_methods, require_POST

from campaigns.entitlements import claim_page_available
from campaigns.marketing import ConsentText, marketing_consent_text
from campaigns.models import (
    AmountType,
    Campaign,
    CampaignStatus,
    Reward,
    RewardRule,
    RewardStatus,
    TriggerEvent,
    VideoStatus,
    VideoSubmission,
)
from campaigns.platforms import PlatformUnavailable, platform_get
from campaigns.platforms.whatsapp import whatsapp_optin_code_issue, whatsapp_optin_redeem, whatsapp_optin_started_by
from campaigns.selectors import brand_plan_current, campaign_budget
from campaigns.services import smallest_reservation_minor
from campaigns.services.analytics import campaign_visit_count
from campaigns.triggers import content_trigger, trigger_spec, trigger_values
from core.exceptions import ApplicationError, InvalidInput
from core.money import format_minor
from payouts.links import (
    CHANGE_SALT,
    PAYOUT_SALT,
    STATUS_SALT,
    VIDEO_SALT,
    link_make,
    payout_link_find,
    payout_link_usable,
    reward_owed,
    token_make,
    token_read,
)
from payouts.services.paypal import paypal_offered
from recipients.models_claims import AccountChange, AccountChangeStatus, WhatsAppOptInCode
from recipients.normalise import iban_normalise
from recipients.selectors import person_cluster_ids
from recipients.whatsapp_link import click_to_chat_url
from web.claim.forms import PayoutForm
from web.claim.ratelimit import (
    campaign_busy,
    campaign_work_count,
    client_ip,
    client_limited,
    iban_check_limited,
    secret_limited,
)
from web.claim.services import (
    PayoutDetails,
    claim_account_change_confirm,
    claim_details_submit,
    claim_payee_confirm,
    claim_tiktok_login_submit,
    claim_video_submit,
    payout_link_renew,
)
from web.claim.status import reward_claim_status
from web.claim.texts import reason_text
from web.whatsapp_webhook import whatsapp_optin_hand_over

LANGUAGES = {"en", "it"}
# The session key of the secret that ties WhatsApp codes to the browser that asked for them.
WHATSAPP_STARTER = "claim_whatsapp_starter"


def _campaign(brand_slug: str, campaign_slug: str) -> Campaign:
    """The campaign of a public claim page; 404 also for a campaign of an API-only plan (the
    Cashback API alone) unless its brand turned on claim links for buyers (``claim_page_available``)."""
    campaign = get_object_or_404(
        Campaign.objects.select_related("brand", "budget_account"), brand__slug=brand_slug, slug=campaign_slug
    )
    if not claim_page_available(campaign=campaign, plan=brand_plan_current(brand=campaign.brand)):
        raise Http404
    return campaign


def _language(request, campaign: Campaign) -> None:
    """The person's own choice (the switch sets a cookie) wins, then their browser's language
    (Accept-Language), then the campaign's: Italian for campaigns run in Italy's time zone,
    English elsewhere."""
    chosen = request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME)
    if chosen not in LANGUAGES:
        chosen = _browser_language(request.META.get("HTTP_ACCEPT_LANGUAGE", ""))
    language = chosen or ("it" if campaign.timezone == "Europe/Rome" else "en")
    translation.activate(language)
    request.LANGUAGE_CODE = language


def _phone_region(campaign: Campaign) -> str:
    """Where a number typed without +country is from: the country of the campaign's time zone
    (Europe/Rome → IT), else ``PHONE_DEFAULT_REGION``."""
    return get_global("zone_territories").get(campaign.timezone) or settings.PHONE_DEFAULT_REGION


def _browser_language(header: str) -> str:
    """The supported language the browser ranks highest ("" when it names none of ours)."""
    ranked = []
    for position, part in enumerate(header.split(",")):
        tag, _, weight = part.strip().partition(";q=")
        try:
            quality = float(weight) if weight else 1.0
        except ValueError:
            continue
        primary = tag.strip().lower().split("-")[0]
        if primary in LANGUAGES and quality > 0:
            ranked.append((-quality, position, primary))
    return min(ranked)[2] if ranked else ""


def _rules(campaign: Campaign) -> dict[str, RewardRule]:
    return {r.trigger: r for r in RewardRule.objects.filter(campaign=campaign, is_active=True).order_by("id")}


def _amount_text(rule: RewardRule, currency: str) -> str:
    if rule.amount_type == AmountType.FIXED:
        return format_minor(rule.fixed_minor, currency)
    return _("%(pct)s%% of your purchase") % {"pct": f"{rule.percent_bps / 100:g}"}


def _closed_reason(campaign: Campaign) -> str:
    """Why nobody can claim right now, in plain words; "" when the campaign is open."""
    if campaign.status != CampaignStatus.ACTIVE:
        if (
            campaign.status == CampaignStatus.PAUSED
            and campaign.events.filter(kind="campaign.paused", reason="budget_exhausted").exists()
        ):
            return reason_text("budget_exhausted")
        return reason_text("campaign_not_active")
    need = smallest_reservation_minor(campaign=campaign)
    if need is not None and campaign_budget(campaign=campaign).available_minor < need:
        return reason_text("budget_exhausted")
    return ""


def _ctx(request, campaign: Campaign, **extra) -> dict:
    return {"campaign": campaign, "brand": campaign.brand, "lang": request.LANGUAGE_CODE, **extra}


def _too_many() -> str:
    return _("Too many attempts. Please wait a few minutes and try again.")


def _limited(request, campaign: Campaign | None = None) -> bool:
    """Count this client's post; True (and say so) when the client is over its limit or the
    campaign has taken its limit of accepted work this minute (``_accepted`` counts that)."""
    if client_limited(request) or (campaign is not None and campaign_busy(campaign_id=campaign.pk)):
        messages.error(request, _too_many())
        return True
    return False


def _accepted(campaign: Campaign) -> None:
    campaign_work_count(campaign_id=campaign.pk)


def takes_secret(view):
    """Rate limit a page whose URL or form carries a secret, per client, on every request."""

    @wraps(view)
    def limited(request, *args, **kwargs):
        if secret_limited(request):
            return HttpResponse(_too_many(), status=429, content_type="text/plain; charset=utf-8")
        return view(request, *args, **kwargs)

    return limited


def _marketing(request, campaign: Campaign) -> ConsentText:
    """The brand's marketing box in the page's language: the same words go on the page and, if
    ticked, into the consent."""
    return marketing_consent_text(brand=campaign.brand, language=request.LANGUAGE_CODE)


def _details(request, form: PayoutForm, marketing: ConsentText) -> PayoutDetails:
    d = form.cleaned_data
    return PayoutDetails(
        name=d["name"],
        email=d["email"],
        whatsapp=d["whatsapp"],
        iban=d["iban"],
        account=d["account"],
        language=request.LANGUAGE_CODE,
        marketing=marketing if d.get("marketing") else None,
        user_agent=request.headers.get("User-Agent", ""),
    )


def _status_redirect(reward: Reward):
    return redirect("claim:status", token=token_make(STATUS_SALT, reward.pk))


def _content_offer(campaign: Campaign, trigger: str, rule: RewardRule) -> dict:
    """For a trigger earned through a platform's content step: the offer's words and the login
    that leads to the step."""
    spec = trigger_spec(trigger)
    if spec is None or not spec.content:
        return {}
    platform = platform_get(spec.platform)
    texts = platform.content_texts
    return {
        "platform": platform.name,
        "content_hero": texts.offer_views % {"views": rule.view_threshold} if spec.content == "views" else texts.offer,
        "content_button": texts.offer_button,
        "content_login": platform.content_login_url(next_url=_content_url(campaign, platform.name)),
    }


@require_GET
def campaign_page(request, brand_slug: str, campaign_slug: str):
    campaign = _campaign(brand_slug, campaign_slug)
    campaign_visit_count(campaign=campaign)  # the funnel's first step: a number a day, nothing of the visitor
    _language(request, campaign)
    rules = _rules(campaign)
    offers = [
        {"trigger": t, "rule": r, "amount": _amount_text(r, campaign.currency), **_content_offer(campaign, t, r)}
        for t, r in rules.items()
        if t in trigger_values(claim_page=True)
    ]
    here = reverse("claim:campaign", kwargs={"brand_slug": brand_slug, "campaign_slug": campaign_slug})
    return render(
        request,
        "claim/campaign.html",
        _ctx(
            request,
            campaign,
            offers=offers,
            closed=_closed_reason(campaign),
            tiktok_next=f"{here}tiktok/",
            hold_days=max((r.hold_days for r in rules.values()), default=0),
        ),
    )


@require_http_methods(["GET", "POST"])
def tiktok_claim(request, brand_slug: str, campaign_slug: str):
    """After the TikTok login: the payout form, then one ``tiktok_login`` event."""
    campaign = _campaign(brand_slug, campaign_slug)
    _language(request, campaign)
    identity = platform_get("tiktok").identity_from_session(request)
    if identity is None:
        messages.info(request, _("Log in with TikTok first."))
        return redirect("claim:campaign", brand_slug=brand_slug, campaign_slug=campaign_slug)
    marketing = _marketing(request, campaign)
    form = PayoutForm(
        request.POST or None,
        initial={"name": identity.name},
        phone_region=_phone_region(campaign),
        currency=campaign.currency,
        paypal=paypal_offered(campaign=campaign),
        marketing=marketing,
    )
    if request.method == "POST" and not _limited(request, campaign):
        if form.is_bot:
            raise Http404
        if form.is_valid():
            _accepted(campaign)
            try:
                outcome = claim_tiktok_login_submit(
                    campaign=campaign,
                    social_uid=identity.uid,
                    details=_details(request, form, marketing),
                    ip=client_ip(request),
                    evidence=dict(identity.evidence),
                )
            except ApplicationError as exc:
                messages.error(request, exc.message)
            else:
                if outcome.reward is not None:
                    if outcome.already_claimed:
                        messages.info(request, _("You already claimed this reward: here is its status."))
                    return _status_redirect(outcome.reward)
                messages.error(request, reason_text(outcome.reason))
    return render(
        request,
        "claim/payout_form.html",
        _ctx(
            request,
            campaign,
            form=form,
            step="details",
            tiktok_name=identity.name,
            closed=_closed_reason(campaign),
        ),
    )


def _content_platform(name: str):
    """The platform of a content step, its words; 404 for a name that is none or reads no content."""
    try:
        platform = platform_get(name)
    except InvalidInput:
        raise Http404("No such platform.")
    if platform.content_texts is None:
        raise Http404("This platform has no content step.")
    return platform, platform.content_texts


def _content_url(campaign: Campaign, platform: str) -> str:
    # TikTok's content step keeps its first address (…/videos/), the others live at …/content/<name>/.
    kwargs = {"brand_slug": campaign.brand.slug, "campaign_slug": campaign.slug}
    if platform == "tiktok":
        return reverse("claim:videos", kwargs=kwargs)
    return reverse("claim:content", kwargs={**kwargs, "platform": platform})


@require_http_methods(["GET", "POST"])
def content_claim(request, brand_slug: str, campaign_slug: str, platform: str):
    """The content step of a platform that reads people's content (``Platform.content_texts``),
    after a login with the right to read it: pick the item with the hashtag, give payout details; a
    job verifies the item and sends the event(s)."""
    campaign = _campaign(brand_slug, campaign_slug)
    _language(request, campaign)
    source, texts = _content_platform(platform)
    identity = source.identity_from_session(request)
    if identity is None or identity.grant is None:
        messages.info(request, texts.login_first)
        return redirect("claim:campaign", brand_slug=brand_slug, campaign_slug=campaign_slug)
    rules = _rules(campaign)
    tag = next((r.required_code for r in rules.values() if r.required_code), "")
    try:
        videos = source.content_list(identity=identity)
    except PlatformUnavailable:
        videos = []
        messages.error(request, texts.unavailable)
    marketing = _marketing(request, campaign)
    form = PayoutForm(
        request.POST or None,
        initial={"name": identity.name},
        phone_region=_phone_region(campaign),
        currency=campaign.currency,
        paypal=paypal_offered(campaign=campaign),
        marketing=marketing,
    )
    chosen = request.POST.get("video_id", "")
    if request.method == "POST" and not _limited(request, campaign):
        if form.is_bot:
            raise Http404
        if chosen not in {v.id for v in videos}:
            messages.error(request, texts.pick_error)
        elif form.is_valid():
            _accepted(campaign)
            try:
                submission = claim_video_submit(
                    campaign=campaign,
                    platform=source.name,
                    social_uid=identity.uid,
                    grant=identity.grant,
                    video_id=chosen,
                    details=_details(request, form, marketing),
                    ip=client_ip(request),
                )
            except ApplicationError as exc:
                messages.error(request, exc.message)
            else:
                return redirect("claim:video_status", token=token_make(VIDEO_SALT, submission.pk))
    return render(
        request,
        "claim/videos.html",
        _ctx(
            request,
            campaign,
            form=form,
            videos=videos,
            texts=texts,
            pick_hint=texts.pick_hint % {"tag": tag} if tag else "",
            chosen=chosen,
            closed=_closed_reason(campaign),
        ),
    )


@require_POST
def whatsapp_start(request, brand_slug: str, campaign_slug: str):
    campaign = _campaign(brand_slug, campaign_slug)
    _language(request, campaign)
    if _limited(request, campaign) or request.POST.get("website"):
        return redirect("claim:campaign", brand_slug=brand_slug, campaign_slug=campaign_slug)
    closed = _closed_reason(campaign)
    if closed:
        messages.error(request, closed)
        return redirect("claim:campaign", brand_slug=brand_slug, campaign_slug=campaign_slug)
    _accepted(campaign)
    starter = request.session.get(WHATSAPP_STARTER) or secrets.token_urlsafe(32)
    request.session[WHATSAPP_STARTER] = starter
    code = whatsapp_optin_code_issue(campaign=campaign, starter=starter)
    return redirect("claim:whatsapp_wait", brand_slug=brand_slug, campaign_slug=campaign_slug, code=code.code)


def _whatsapp_reward(row: WhatsAppOptInCode) -> tuple[str, Reward | None, str]:
    """(state, reward, rejection reason) of an opt-in code: waiting, expired, or done."""
    if row.used_at is None:
        return ("expired" if row.expires_at <= timezone.now() else "waiting"), None, ""
    event = TriggerEvent.objects.filter(brand_id=row.campaign.brand_id, external_id=f"wa:{row.used_message_id}").first()
    if event is None:
        return "waiting", None, ""  # redeemed, the event is being ingested right now
    reward = Reward.objects.filter(event=event).first()
    if reward is None and event.person_id and event.reason.startswith("cap_person_"):
        # The number already earned this campaign's reward (a claim left half-way and started
        # again): the proven number leads back to that reward, not to a dead end.
        reward = (
            Reward.objects.filter(campaign=row.campaign, person_id__in=person_cluster_ids(person=event.person))
            .exclude(status__in=[RewardStatus.VOIDED, RewardStatus.CLAWED_BACK])
            .order_by("id")
            .first()
        )
    return "done", reward, event.reason


@require_GET
@takes_secret
def whatsapp_wait(request, brand_slug: str, campaign_slug: str, code: str):
    """The page that waits for the person's WhatsApp message: only in the browser that asked for
    the code, which it hands the reward's payout form once (the code is then spent)."""
    campaign = _campaign(brand_slug, campaign_slug)
    _language(request, campaign)
    row = get_object_or_404(WhatsAppOptInCode.objects.select_related("campaign"), code=code.upper(), campaign=campaign)
    starter = request.session.get(WHATSAPP_STARTER, "")
    if not whatsapp_optin_started_by(row, starter=starter):
        raise Http404
    state, reward, reason = ("spent", None, "") if row.spent_at else _whatsapp_reward(row)
    if request.GET.get("format") == "json":
        return JsonResponse({"state": state})
    if state == "done" and reward is not None:
        link = whatsapp_optin_hand_over(row=row, starter=starter, reward_id=reward.pk)
        if link is not None:
            return redirect(link.path)
        state = "spent"
    text = _("Hi! My code is %(code)s") % {"code": row.code}
    return render(
        request,
        "claim/whatsapp.html",
        _ctx(
            request,
            campaign,
            code=row.code,
            state=state,
            reason=reason_text(reason) if reason else "",
            chat_url=click_to_chat_url(number=settings.WHATSAPP_BUSINESS_NUMBER, text=text),
            poll_url=f"{request.path}?format=json",
            fake_whatsapp=settings.FAKE_WHATSAPP_ENABLED,
        ),
    )


@require_http_methods(["GET", "POST"])
@takes_secret
def payout_form(request, token: str):
    """The payout form of a reward earned elsewhere (purchase, WhatsApp), or a new IBAN after a
    payout came back, behind a link sent to the person (``payouts.links``): for that reward only,
    while it is owed, once. A person who already has another account is sent a code to confirm."""
    link = payout_link_find(token=token)
    if link is None:
        raise Http404
    reward = link.reward
    campaign = reward.campaign
    _language(request, campaign)
    if not payout_link_usable(link):
        renewed = payout_link_renew(link=link)
        return render(request, "claim/link_spent.html", _ctx(request, campaign, renewed=renewed), status=410)
    event = reward.event
    marketing = _marketing(request, campaign)
    form = PayoutForm(
        request.POST or None,
        needs_contact=not (event.email or event.whatsapp),
        phone_region=_phone_region(reward.campaign),
        currency=reward.currency,
        paypal=paypal_offered(campaign=campaign),
        marketing=marketing,
    )
    if request.method == "POST" and not _limited(request, campaign):
        if form.is_bot:
            raise Http404
        if form.is_valid():
            _accepted(campaign)
            try:
                outcome = claim_details_submit(
                    link=link, details=_details(request, form, marketing), ip=client_ip(request)
                )
            except ApplicationError as exc:
                messages.error(request, exc.message)
            else:
                if outcome.change is not None:
                    return redirect("claim:account_change", token=token_make(CHANGE_SALT, outcome.change.pk))
                return _status_redirect(reward)
    return render(
        request,
        "claim/payout_form.html",
        _ctx(
            request,
            campaign,
            form=form,
            step="details",
            reward=reward,
            amount=format_minor(reward.amount_minor, reward.currency),
        ),
    )


def _status_reward(token: str) -> Reward:
    reward_id = token_read(STATUS_SALT, token)
    return get_object_or_404(Reward.objects.select_related("campaign__brand", "person"), pk=reward_id or 0)


@require_GET
@takes_secret
def status_page(request, token: str):
    reward = _status_reward(token)
    status = reward_claim_status(reward=reward)
    if request.GET.get("format") == "json":
        return JsonResponse({"state": status.state, "speed": status.speed})
    _language(request, reward.campaign)
    return render(
        request,
        "claim/status.html",
        _ctx(
            request,
            reward.campaign,
            status=status,
            amount=format_minor(reward.amount_minor, reward.currency),
            fix_url=reverse("claim:status_account", kwargs={"token": token}),
            confirm_url=reverse("claim:payee_confirm", kwargs={"token": token}),
            poll_url=f"{request.path}?format=json",
            step="status",
        ),
    )


@require_GET
@takes_secret
def status_account(request, token: str):
    """From the status page to a fresh payout-form link, only while the reward is owed and waits
    for an account: the status link itself gives none."""
    reward = _status_reward(token)
    _language(request, reward.campaign)
    if not (reward_claim_status(reward=reward).needs_iban and reward_owed(reward_id=reward.pk)):
        messages.info(request, _("This reward does not need an account from you now."))
        return redirect("claim:status", token=token)
    return redirect(link_make(PAYOUT_SALT, reward.pk).path)


@require_POST
@takes_secret
def payee_confirm(request, token: str):
    """The person confirms the name their bank gave for their account ("did you mean …?"): the
    signed status link is the credential, the name posted must be the one the page showed."""
    reward = _status_reward(token)
    _language(request, reward.campaign)
    if not _limited(request):
        try:
            payout = claim_payee_confirm(reward=reward, name=request.POST.get("name", ""))
        except ApplicationError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(request, _("Thank you: we are paying %(name)s now.") % {"name": payout.creditor_name})
    return redirect("claim:status", token=token)


@require_http_methods(["GET", "POST"])
@takes_secret
def account_change(request, token: str):
    """Where a new account waits for the code sent to the contact the person had longest."""
    change = get_object_or_404(
        AccountChange.objects.select_related("link__reward__campaign__brand"), pk=token_read(CHANGE_SALT, token) or 0
    )
    reward = change.link.reward
    _language(request, reward.campaign)
    if request.method == "POST" and not _limited(request):
        try:
            claim_account_change_confirm(change_id=change.pk, code=request.POST.get("code", ""), ip=client_ip(request))
        except ApplicationError as exc:
            messages.error(request, exc.message)
        else:
            messages.success(
                request,
                _("Your new account is confirmed. Payouts to it start in %(hours)s hours.")
                % {"hours": settings.ACCOUNT_CHANGE_COOLING_OFF_HOURS},
            )
            return _status_redirect(reward)
        change.refresh_from_db()
    open_ = change.status == AccountChangeStatus.PENDING and change.expires_at > timezone.now()
    return render(request, "claim/account_change.html", _ctx(request, reward.campaign, open=open_))


@require_GET
@takes_secret
def video_status(request, token: str):
    submission_id = token_read(VIDEO_SALT, token)
    submission = get_object_or_404(VideoSubmission.objects.select_related("campaign__brand"), pk=submission_id or 0)
    _platform, texts = _content_platform(submission.platform)
    triggers = [t for t in (content_trigger(submission.platform, c) for c in ("share", "views")) if t]
    reward = (
        Reward.objects.filter(
            event__brand_id=submission.campaign.brand_id,
            event__external_id__in=[f"claim:{submission.campaign_id}:{t}:{submission.video_id}" for t in triggers],
        )
        .order_by("id")
        .first()
    )
    state = submission.status if reward is None else "rewarded"
    if request.GET.get("format") == "json":
        return JsonResponse({"state": state})
    if reward is not None:
        return _status_redirect(reward)
    _language(request, submission.campaign)
    return render(
        request,
        "claim/video_status.html",
        _ctx(
            request,
            submission.campaign,
            submission=submission,
            texts=texts,
            again_url=_content_url(submission.campaign, submission.platform),
            state=state,
            reason=reason_text(submission.reason) if submission.status == VideoStatus.REJECTED else "",
            poll_url=f"{request.path}?format=json",
        ),
    )


@require_GET
def iban_check(request):
    """Live IBAN check for the payout form: valid or not, in plain words, with the bank's name and
    BIC where known. Reads nothing from the database."""
    if iban_check_limited(request):
        return JsonResponse({"valid": False, "message": _("Too many attempts.")}, status=429)
    language = request.GET.get("lang")
    if language in LANGUAGES:
        translation.activate(language)
    try:
        info = iban_normalise(request.GET.get("iban", ""))
    except InvalidInput as exc:
        return JsonResponse({"valid": False, "message": _(exc.message)})
    return JsonResponse(
        {
            "valid": True,
            "formatted": info.formatted,
            "country": info.country,
            "bic": info.bic,
            "bank_name": info.bank_name,
        }
    )


@require_POST
@takes_secret
def whatsapp_fake_send(request, brand_slug: str, campaign_slug: str, code: str):
    """Demo only (``FAKE_WHATSAPP_ENABLED``): play the person sending the code from WhatsApp, i.e.
    what the signed inbound webhook does with a real message."""
    if not settings.FAKE_WHATSAPP_ENABLED:
        raise Http404
    campaign = _campaign(brand_slug, campaign_slug)
    row = get_object_or_404(WhatsAppOptInCode, code=code.upper(), campaign=campaign)
    number = "".join(ch for ch in request.POST.get("number", "") if ch.isdigit()) or "393470000001"
    try:
        whatsapp_optin_redeem(code=row.code, wa_number=number, message_id=f"fake.{row.code}", name="")
    except InvalidInput as exc:
        messages.error(request, exc.message)
    return redirect("claim:whatsapp_wait", brand_slug=brand_slug, campaign_slug=campaign_slug, code=row.code)
