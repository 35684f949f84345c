"""The marketing-consent withdrawal link's page (``/c/w/<token>/``), sent in every e-mail to a
person who consented (``recipients.services.consent``). GET asks to confirm, POST withdraws at
once. The page names the brand and nothing about the person: whoever holds a forwarded link can
only withdraw, never read. A replay finds the consent withdrawn and says so."""

from django.conf import settings
from django.http import Http404
from django.shortcuts import render
from django.utils import translation
from django.views.decorators.http import require_http_methods

from core.exceptions import NotFound
from recipients.services.consent import consent_from_token, consent_withdraw_by_link
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
    # The switch's choice (its cookie) wins; else the language the consent was given in.
    language = request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME)
    language = language if language in LANGUAGES else consent.language
    translation.activate(language)
    request.LANGUAGE_CODE = language
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
