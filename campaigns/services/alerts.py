"""E-mails to a brand's team when a campaign's budget runs low or the campaign paused itself
(run by ``campaigns.tasks.brand_alerts_send_due_task`` every minute; idempotent).

The alerts themselves are already recorded exactly once, in the transaction that caused them:
a budget threshold crossed (``campaign.budget_threshold``, one per threshold and funded amount,
``BudgetAlert``) and an automatic pause (``campaign.paused`` with ``data.automatic``: the budget
ran out at ingestion, or a release left too little). This module only tells people: one
``BrandAlertMail`` per such event (its unique key makes it once per crossing), claimed by a
conditional UPDATE, sent outside any transaction in the brand's language, then marked sent.

A test tenant's campaigns alert too: test mode is for trying the whole product, and these mails go
to the brand's own team (the live brand's owners and admins, in its language), never to people.
Their subject and first line say test mode, so nobody mistakes them for live money.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db.models import F, Q
from django.utils import timezone, translation
from django.utils.translation import gettext as _

from campaigns.models import BrandAlertMail, BrandMembership, BrandRole, CampaignEvent
from core.money import format_minor

logger = logging.getLogger(__name__)

# An alert older than this is not e-mailed any more (a sweep that was down for days does not send
# a backlog of stale warnings).
ALERT_MAX_AGE = timedelta(days=2)
# A claim older than this belongs to a worker that died before recording the send.
CLAIM_STALE = timedelta(minutes=5)
MAX_ATTEMPTS = 5


def _alert_events():
    low = getattr(settings, "BRAND_BUDGET_ALERT_MIN_PCT", 80)
    return CampaignEvent.objects.filter(
        Q(kind="campaign.budget_threshold", data__threshold_pct__gte=low)
        | Q(kind="campaign.paused", data__automatic=True)
    )


def brand_alerts_record(*, now=None, limit: int = 500) -> int:
    """A ``BrandAlertMail`` for each recent alert that has none (a conflict on the unique key is
    a concurrent sweep's row: skipped). Returns how many were added."""
    now = now or timezone.now()
    events = list(
        _alert_events()
        .filter(created_at__gte=now - ALERT_MAX_AGE, alert_mail__isnull=True)
        .order_by("id")
        .values_list("id", flat=True)[:limit]
    )
    made = BrandAlertMail.objects.bulk_create(
        [BrandAlertMail(campaign_event_id=event_id) for event_id in events], ignore_conflicts=True
    )
    return len(made)


def _claim(mail_id: int, now) -> bool:
    """Take the mail for this worker: exactly one row changes, or someone else has it."""
    return (
        BrandAlertMail.objects.filter(pk=mail_id, sent_at__isnull=True, attempts__lt=MAX_ATTEMPTS)
        .filter(Q(claimed_at__isnull=True) | Q(claimed_at__lt=now - CLAIM_STALE))
        .update(claimed_at=now, attempts=F("attempts") + 1)
        == 1
    )


def _words(event: CampaignEvent) -> tuple[str, str]:
    campaign = event.campaign
    if event.kind == "campaign.paused":
        subject = _("Campaign “%(name)s” paused itself") % {"name": campaign.name}
        body = _(
            "Campaign “%(name)s” has paused itself: what is left of its budget (%(left)s) cannot pay its "
            "smallest reward. Move money to it in the portal to resume it."
        ) % {"name": campaign.name, "left": format_minor(event.data.get("available_minor", 0), campaign.currency)}
    else:
        subject = _("Campaign “%(name)s” has spent %(pct)s%% of its budget") % {
            "name": campaign.name,
            "pct": event.data.get("threshold_pct"),
        }
        body = _(
            "Campaign “%(name)s” has spent %(spent)s of the %(funded)s allocated to it (%(pct)s%%). "
            "Move more money to it in the portal to keep it running."
        ) % {
            "name": campaign.name,
            "spent": format_minor(event.data.get("spent_minor", 0), campaign.currency),
            "funded": format_minor(event.data.get("funded_minor", 0), campaign.currency),
            "pct": event.data.get("threshold_pct"),
        }
    if not campaign.brand.livemode:
        subject = _("[TEST MODE] %(subject)s") % {"subject": subject}
        body = _("Test mode: this campaign runs on test money, and nobody is paid real money.") + "\n\n" + body
    return subject, body


def brand_alert_send(*, mail_id: int, now=None) -> bool:
    """Send one alert mail to the brand's owners and admins (in the brand's language; a test
    tenant's to its live brand's, marked test mode), outside any transaction. True when this
    call sent it; False when it was sent, is being sent, or gave up. An SMTP error leaves it
    claimed: it is tried again once the claim is stale."""
    now = now or timezone.now()
    if not _claim(mail_id, now):
        return False
    mail = BrandAlertMail.objects.select_related("campaign_event__campaign__brand__test_of").get(pk=mail_id)
    event = mail.campaign_event
    # A test tenant has no members of its own: its team is its live brand's.
    brand = event.campaign.brand.test_of or event.campaign.brand
    to = list(
        BrandMembership.objects.filter(brand=brand, role__in=[BrandRole.OWNER, BrandRole.ADMIN])
        .exclude(user__email="")
        .order_by("id")
        .values_list("user__email", flat=True)
    )
    if to:
        with translation.override(brand.language or "en"):
            subject, body = _words(event)
        send_mail(
            subject=subject,
            message=body,
            from_email=getattr(settings, "DEFAULT_FROM_EMAIL", None),
            recipient_list=to,
        )
    BrandAlertMail.objects.filter(pk=mail_id).update(sent_at=timezone.now(), recipients_count=len(to))
    return True


def brand_alerts_send_due(*, limit: int = 100) -> int:
    """Record the mails of new alerts, then send every one not sent yet. Returns how many were sent."""
    brand_alerts_record()
    due = BrandAlertMail.objects.filter(sent_at__isnull=True, attempts__lt=MAX_ATTEMPTS).order_by("id")
    sent = 0
    for mail_id in list(due.values_list("id", flat=True)[:limit]):
        try:
            sent += brand_alert_send(mail_id=mail_id)
        except OSError:  # SMTP refused or unreachable: retried once the claim is stale
            logger.warning("Brand alert mail %s not sent", mail_id, exc_info=True)
    return sent
