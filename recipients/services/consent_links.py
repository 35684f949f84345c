"""The two links a marketing consent sends, each signed (``django.core.signing``), naming one
consent and nothing else, each doing one thing:

* the withdrawal link every e-mail to a consenting person ends with (``/c/w/<token>/``,
  ``CONSENT_WITHDRAW_LINK_DAYS``): it only withdraws;
* the confirmation link of a pending consent (``/c/m/<token>/``, ``CONSENT_CONFIRM_LINK_DAYS``),
  e-mailed once to the address typed on the claim page: it only confirms, once, before the
  consent's ``confirm_by``.

Their own module so that the notices (which word the e-mails carrying them) and the consent
services (which record the notice of a pending consent) both use them without a cycle.
"""

from django.conf import settings
from django.core import signing
from django.urls import reverse
from django.utils.translation import gettext as _

from core.exceptions import NotFound
from recipients.models import Person
from recipients.models_consent import ACTIVE, MarketingConsent
from recipients.selectors import person_cluster_ids

WITHDRAW_SALT = "consent.withdraw"
CONFIRM_SALT = "consent.confirm"


def _days(salt: str) -> int:
    return settings.CONSENT_CONFIRM_LINK_DAYS if salt == CONFIRM_SALT else settings.CONSENT_WITHDRAW_LINK_DAYS


def consent_token(*, salt: str, consent_id: int) -> str:
    return signing.dumps(consent_id, salt=salt, compress=False)


def consent_withdraw_token(*, consent_id: int) -> str:
    return consent_token(salt=WITHDRAW_SALT, consent_id=consent_id)


def consent_from_token(*, token: str, salt: str = WITHDRAW_SALT) -> MarketingConsent:
    """The consent a link of ``salt`` names, whatever its state; NotFound for a token that is
    tampered with, expired, made for the other link, or names nothing."""
    try:
        consent_id = signing.loads(token, salt=salt, max_age=_days(salt) * 86400)
    except signing.BadSignature:
        consent_id = None
    consent = (
        MarketingConsent.objects.select_related("brand").filter(pk=consent_id).first()
        if isinstance(consent_id, int)
        else None
    )
    if consent is None:
        raise NotFound("This link does not work.", code="consent_link_invalid")
    return consent


def _url(view: str, salt: str, consent_id: int) -> str:
    path = reverse(view, kwargs={"token": consent_token(salt=salt, consent_id=consent_id)})
    return settings.CLAIM_BASE_URL.rstrip("/") + path


def consent_withdraw_url(*, consent_id: int) -> str:
    return _url("claim:consent_withdraw", WITHDRAW_SALT, consent_id)


def consent_confirm_url(*, consent_id: int) -> str:
    return _url("claim:consent_confirm", CONFIRM_SALT, consent_id)


def marketing_footer(*, person: Person) -> str:
    """The lines every e-mail to a person who consented to marketing ends with, in the active
    language: whom they said yes to and the link that withdraws it. "" without an active consent
    (a pending one included: the brand may not write to them yet)."""
    consents = (
        MarketingConsent.objects.filter(ACTIVE, person_id__in=person_cluster_ids(person=person))
        .select_related("brand")
        .order_by("id")
    )
    lines = [
        _("You agreed to hear from %(brand)s. To withdraw that consent at once: %(link)s")
        % {"brand": c.brand.name, "link": consent_withdraw_url(consent_id=c.pk)}
        for c in consents
    ]
    return "\n\n--\n" + "\n".join(lines) if lines else ""
