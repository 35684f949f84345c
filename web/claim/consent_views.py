"""The marketing-consent links' pages (``recipients.services.consent_links``), each naming the
brand and nothing about the person: whoever holds a forwarded link can do its one thing, never
read.

* ``/c/w/<token>/``, the withdrawal link in every e-mail to a person who consented: GET asks,
  POST withdraws at once; a replay finds the consent withdrawn and says so.
* ``/c/m/<token>/``, the confirmation link e-mailed for a pending consent (double opt-in): GET
  asks (a mail scanner opening links confirms nothing), POST confirms; a replay, an expired or
  ended consent, or a link that does not work gets a page that says so, and changes nothing."""

from django.conf import settings
from django.http import Http404
from django.shortcuts import render
from django.utils import timezone, translation
from django.views.decorators.http import require_http_methods

from core.exceptions import NotFound
from recipients.services.consent import consent_confirm_by_link, consent_withdraw_by_link
from recipients.services.consent_links import CONFIRM_SALT, consent_from_token
from web.claim.views import LANGUAGES, takes_secret


@require_http_methods(["GET", "POST"])
@takes_secret
def consent_withdraw(request, token: str):
    try:
        if request.method == "POST":
            consent, just_now = consent_withdraw_by_link(token=token)
        else:
            consent, just_now = consent_from_token(token=token), False
    except NotFound:
        raise Http404
    language = _language(request, consent.language)
    return render(
        request,
        "claim/consent_withdraw.html",
        {
            "brand": consent.brand,
            "lang": language,
            "withdrawn": consent.withdrawn_at is not None,
            "just_now": just_now,
        },
    )


def _language(request, fallback: str) -> str:
    # The switch's choice (its cookie) wins; else the language the consent was given in.
    language = request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME)
    language = language if language in LANGUAGES else fallback
    translation.activate(language)
    request.LANGUAGE_CODE = language
    return language


@require_http_methods(["GET", "POST"])
@takes_secret
def consent_confirm(request, token: str):
    try:
        if request.method == "POST":
            consent, just_now = consent_confirm_by_link(token=token)
        else:
            consent, just_now = consent_from_token(token=token, salt=CONFIRM_SALT), False
    except NotFound:
        language = _language(request, request.LANGUAGE_CODE if request.LANGUAGE_CODE in LANGUAGES else "en")
        return render(request, "claim/consent_confirm.html", {"state": "invalid", "lang": language}, status=404)
    language = _language(request, consent.language)
    if consent.confirmed_at is not None and consent.withdrawn_at is None:
        state = "confirmed"
    elif consent.withdrawn_at is not None:  # withdrawn, replaced, or its person erased
        state = "ended"
    elif consent.confirm_by <= timezone.now():
        state = "expired"
    else:
        state = "ask"
    return render(
        request,
        "claim/consent_confirm.html",
        {"brand": consent.brand, "lang": language, "state": state, "just_now": just_now},
        status=410 if state in ("expired", "ended") else 200,
    )
