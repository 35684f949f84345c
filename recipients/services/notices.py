"""Notices to people (``recipients.models_notices``): recording them with the change they announce,
and delivering them at least once, once per channel. Their wording is registered by payouts
(``notice_renderer_register``, from its ``AppConfig.ready``).

* ``notices_record`` joins the caller's transaction: the notice commits with the payout that
  settled, the reward that expired, the account that changed — or not at all. A replay of the
  change records nothing (the key is unique). A task for them is enqueued in the same transaction
  (``NOTICES_PER_TASK`` to a task); if the worker is lost, the every-minute sweep
  (``notices_send_due``) finds the notice pending and sends it.
* ``notices_send`` delivers: for each channel the person has now (their newest active e-mail and
  WhatsApp number), a delivery row is claimed by a conditional UPDATE (queued and due → sending;
  or a claim older than ``STALE_CLAIM`` whose worker died), the provider is called outside any
  transaction, and the answer recorded: sent; queued again with backoff for a transient error
  (``NOTICE_BACKOFF_*``), failed after ``NOTICE_MAX_ATTEMPTS`` or for a final refusal. A channel
  sent is never sent again, whoever runs next; a notice is done when every channel is sent or
  failed. A worker killed between the call and the record leaves a stale claim: that message is
  sent once more (neither SMTP nor WhatsApp takes an idempotency key).

What a notice says is the payouts app's (it knows payouts, rewards and the claim links): it
registers the renderer with ``notice_renderer_register`` (``PayoutsConfig.ready``), which is
called in the person's language. The one notice about no money, the link that confirms a pending
marketing consent (``consent_confirm``), is worded here, beside the consent it names; it goes
by e-mail only, to the one address the person typed (``data["identifier"]``), and only while
the consent still waits for it. A notice that cannot be worded counts as a failed attempt on
each channel (so it ends failed, not retried for ever); nothing one notice does holds up the others.
"""

import logging
import smtplib
import time
from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from django.conf import settings
from django.core.mail import send_mail
from django.db.models import F, Min, Q
from django.utils import timezone, translation
from django.utils.formats import date_format
from django.utils.translation import gettext as _

from core.logging import redact
from core.queue import enqueue
from recipients.models import Identifier, IdentifierKind, Person
from recipients.models_consent import PENDING, MarketingConsent
from recipients.models_notices import Channel, DeliveryState, Notice, NoticeDelivery, NoticeKind, NoticeStatus
from recipients.selectors import person_cluster_ids, person_root
from recipients.services.consent_links import consent_confirm_url, marketing_footer
from recipients.whatsapp_cloud import TemplateMessage, WhatsAppSendError, whatsapp_sender

logger = logging.getLogger(__name__)

SEND_TASK = "recipients.tasks.notices_send_task"
NOTICES_PER_TASK = 100
# Far below the task timeout (Q_TIMEOUT): the notices not reached go to a follow-up task.
SEND_BUDGET_SECONDS = 20.0
# A claim this old lost its worker (a send takes at most WHATSAPP_TIMEOUT_SECONDS, or the SMTP
# timeout): the message is sent again.
STALE_CLAIM = timedelta(minutes=5)
SWEEP_LIMIT = 500


@dataclass(frozen=True)
class NoticeNew:
    person_id: int
    kind: str
    key: str
    reward_id: int | None = None
    payout_id: int | None = None
    # Amounts, codes, dates: never personal data; ``channels`` limits the channels it goes on.
    data: dict = field(default_factory=dict)


@dataclass(frozen=True)
class NoticeText:
    """What a notice says in one language: the e-mail, and the WhatsApp template with its body
    parameters and the dynamic part of its URL button (the person's link)."""

    subject: str
    body: str
    template: str
    parameters: tuple[str, ...]
    button_suffix: str = ""
    # A test tenant's person (test mode): recorded as delivered to the brand's test inbox (the
    # portal's test mode page) and never handed to a mail server or WhatsApp.
    test_inbox: bool = False


Renderer = Callable[[Notice, Person], NoticeText]
_renderer: list[Renderer] = []


def notice_renderer_register(renderer: Renderer) -> None:
    """The one function that words notices (called inside ``translation.override``)."""
    _renderer[:] = [renderer]


def notices_record(*, notices: list[NoticeNew], now: datetime | None = None) -> None:
    """Record ``notices`` in the caller's transaction (call it in the transaction of the change
    they announce) and have the new ones sent after its commit. A key recorded before is skipped
    (and ``ON CONFLICT DO NOTHING`` against a concurrent recorder): the replay of a change tells
    nobody twice. Raises nothing of its own; a foreign key or CHECK violation is the caller's
    bug and rolls its change back."""
    now = now or timezone.now()
    wanted = {n.key[:120]: n for n in notices}
    # Asked first so a sweep that finds the same facts every minute enqueues nothing again.
    known = set(Notice.objects.filter(key__in=list(wanted)).values_list("key", flat=True))
    rows = [
        Notice(
            key=key,
            person_id=n.person_id,
            kind=n.kind,
            reward_id=n.reward_id,
            payout_id=n.payout_id,
            data=n.data,
            next_attempt_at=now,
            created_at=now,
        )
        for key, n in wanted.items()
        if key not in known
    ]
    if not rows:
        return
    Notice.objects.bulk_create(rows, ignore_conflicts=True)  # a concurrent recorder of a key wins
    keys = [row.key for row in rows]
    for start in range(0, len(keys), NOTICES_PER_TASK):
        # The task commits with the notices (core.queue); the sweep sends what a task did not.
        enqueue(SEND_TASK, keys[start : start + NOTICES_PER_TASK])


@dataclass(frozen=True)
class NoticesSent:
    sent: int  # messages sent (one per channel)
    left: list[str]  # keys not reached within the budget


def notices_send(*, keys: list[str], budget_seconds: float = SEND_BUDGET_SECONDS) -> NoticesSent:
    """Deliver the pending notices among ``keys`` (see the module docstring). Idempotent: a done
    notice, or a channel sent or being sent by another worker, is skipped. Outside any
    transaction (each claim and record is its own). Returns what it sent and the keys it had no
    time for."""
    notices = list(Notice.objects.filter(key__in=keys, status=NoticeStatus.PENDING).order_by("id"))
    return _send_all(notices, budget_seconds=budget_seconds)


def notices_send_due(*, now: datetime | None = None, limit: int = SWEEP_LIMIT) -> NoticesSent:
    """The sweep: send the pending notices whose next attempt is due, oldest first."""
    now = now or timezone.now()
    notices = list(
        Notice.objects.filter(status=NoticeStatus.PENDING, next_attempt_at__lte=now).order_by("next_attempt_at")[:limit]
    )
    return _send_all(notices, budget_seconds=SEND_BUDGET_SECONDS)


def _send_all(notices: list[Notice], *, budget_seconds: float) -> NoticesSent:
    deadline = time.monotonic() + budget_seconds
    sent = 0
    for position, notice in enumerate(notices):
        if time.monotonic() >= deadline:
            return NoticesSent(sent=sent, left=[n.key for n in notices[position:]])
        try:
            sent += _notice_send(notice)
        except Exception:  # one bad notice must not hold up the others: it is tried again later
            logger.exception("notice %s could not be sent", notice.pk)
            Notice.objects.filter(pk=notice.pk, status=NoticeStatus.PENDING).update(
                next_attempt_at=timezone.now() + backoff(1)
            )
    return NoticesSent(sent=sent, left=[])


def backoff(attempt: int) -> timedelta:
    """``NOTICE_BACKOFF_BASE_SECONDS`` doubling per attempt, at most ``NOTICE_BACKOFF_MAX_SECONDS``."""
    seconds = settings.NOTICE_BACKOFF_BASE_SECONDS * 2 ** max(0, attempt - 1)
    return timedelta(seconds=min(seconds, settings.NOTICE_BACKOFF_MAX_SECONDS))


def _contacts(person: Person, *, oldest: bool = False) -> dict[str, str]:
    """The person's newest (or ``oldest``) active e-mail and WhatsApp number (any of their merged
    rows)."""
    order = ("-created_at", "-id") if oldest else ("created_at", "id")
    rows = (
        Identifier.objects.filter(
            person_id__in=person_cluster_ids(person=person),
            is_active=True,
            kind__in=[IdentifierKind.EMAIL, IdentifierKind.WHATSAPP],
        )
        .order_by(*order)
        .values_list("kind", "value")
    )
    return dict(rows)  # later rows win


def _pinned_contacts(person: Person, notice: Notice) -> dict[str, str]:
    """A notice that names its address (``data["identifier"]``: a consent's confirmation goes
    to the e-mail typed, nowhere else): that identifier while it is the person's and active, and
    the consent it confirms still waits; else nothing, and the notice is done unsent."""
    waiting = MarketingConsent.objects.filter(PENDING, pk=notice.data.get("consent"), confirm_by__gt=timezone.now())
    if notice.kind == NoticeKind.CONSENT_CONFIRM and not waiting.exists():
        return {}
    return dict(
        Identifier.objects.filter(
            pk=notice.data["identifier"], person_id__in=person_cluster_ids(person=person), is_active=True
        ).values_list("kind", "value")
    )


def consent_confirm_render(notice: Notice, person: Person) -> NoticeText:
    """The e-mail that asks the person to confirm a marketing consent given on a claim page, in
    the active language: the brand, the words they said yes to, the link and its deadline. A
    test tenant's person's goes to the test inbox (as ``payouts.notices`` decides for the rest)."""
    consent = MarketingConsent.objects.select_related("brand").get(pk=notice.data["consent"])
    values = {
        "brand": consent.brand.name,
        "link": consent_confirm_url(consent_id=consent.pk),
        "date": date_format(timezone.localtime(consent.confirm_by), "DATE_FORMAT"),
        "text": consent.text,
    }
    body = _(
        "On a %(brand)s reward page you ticked the box to hear from %(brand)s, with these words:\n\n"
        "%(text)s\n\nTo confirm that this e-mail address is yours and that you want their messages, open "
        "this link by %(date)s: %(link)s\n\nIf it was not you, ignore this e-mail: without your "
        "confirmation nothing is given to %(brand)s."
    )
    return NoticeText(
        subject=_("Please confirm: news from %(brand)s") % values,
        body=body % values,
        template="consent_confirm",  # e-mail only: no WhatsApp template is registered
        parameters=(),
        test_inbox=not consent.brand.livemode,
    )


def notice_text(notice: Notice, person: Person) -> NoticeText:
    """What ``notice`` says to ``person`` in the active language: the one way to word a notice
    (its sending, and the test inbox that shows it as the person would read it)."""
    render = consent_confirm_render if notice.kind == NoticeKind.CONSENT_CONFIRM else _renderer[0]
    return render(notice, person)


def _notice_send(notice: Notice) -> int:
    person = person_root(person=Person.objects.get(pk=notice.person_id))
    # "Your account changed" and the code that confirms a change go to the contact the person had
    # longest: whoever changed the account may have added the newest one in the same breath.
    oldest = notice.kind in (NoticeKind.ACCOUNT_CHANGED, NoticeKind.ACCOUNT_CHANGE_CODE)
    if person.erased_at:
        contacts = {}
    elif "identifier" in notice.data:
        contacts = _pinned_contacts(person, notice)
    else:
        contacts = _contacts(person, oldest=oldest)
    # A notice may name its channels (``data["channels"]``): one must not reach a person on the
    # channel they asked us to stop writing on.
    allowed = notice.data.get("channels") or (Channel.EMAIL, Channel.WHATSAPP)
    channels = [c for c in (Channel.EMAIL, Channel.WHATSAPP) if contacts.get(c) and c in allowed]
    now = timezone.now()
    NoticeDelivery.objects.bulk_create(
        [NoticeDelivery(notice=notice, channel=c, next_attempt_at=now) for c in channels], ignore_conflicts=True
    )
    # A channel the person no longer has (erased, or the number withdrawn) will never be sent.
    NoticeDelivery.objects.filter(notice=notice).exclude(channel__in=channels).filter(_claimable(now)).update(
        status=DeliveryState.FAILED, next_attempt_at=None, error_code="no_address", error="No such channel any more."
    )
    due = list(
        NoticeDelivery.objects.filter(notice=notice, channel__in=channels).filter(_claimable(now)).order_by("channel")
    )
    sent = 0
    if due:
        language = person.preferred_language or settings.LANGUAGE_CODE
        try:
            with translation.override(language):
                text = notice_text(notice, person)
                footer = marketing_footer(person=person)
        except Exception:  # a notice that cannot be worded counts as a failed attempt on each channel
            logger.exception("notice %s could not be worded", notice.pk)
            text = None
        for delivery in due:
            if not _claim(delivery, now=timezone.now()):
                continue
            if text is None:
                _record_failure(delivery, code="render_error", error="The notice could not be worded.", retryable=True)
            else:
                # Every e-mail to a person who consented to marketing carries the link that
                # withdraws it; a WhatsApp template's words are fixed, and a STOP reply withdraws.
                worded = replace(text, body=text.body + footer) if delivery.channel == Channel.EMAIL else text
                sent += _deliver(delivery, text=worded, language=language, to=contacts[delivery.channel])
    _settle(notice)
    return sent


def _claimable(now: datetime) -> Q:
    return Q(status=DeliveryState.QUEUED, next_attempt_at__lte=now) | Q(
        status=DeliveryState.SENDING, claimed_at__lt=now - STALE_CLAIM
    )


def _claim(delivery: NoticeDelivery, *, now: datetime) -> bool:
    """Queued and due (or a stale claim) → sending, one attempt more; exactly one claimer wins."""
    won = (
        NoticeDelivery.objects.filter(pk=delivery.pk)
        .filter(_claimable(now))
        .update(status=DeliveryState.SENDING, claimed_at=now, attempts=F("attempts") + 1)
    )
    if won == 1:
        delivery.attempts += 1
    return won == 1


TEST_INBOX = "test-inbox"  # the provider message id of a test person's delivery: nothing was sent


def _deliver(delivery: NoticeDelivery, *, text: NoticeText, language: str, to: str) -> int:
    """Call the provider (outside any transaction) and record the answer. Returns 1 if sent."""
    try:
        if text.test_inbox:
            message_id = TEST_INBOX
        elif delivery.channel == Channel.EMAIL:
            send_mail(text.subject, text.body, settings.DEFAULT_FROM_EMAIL, [to])
            message_id = ""
        else:
            message_id = whatsapp_sender().send_template(
                TemplateMessage(
                    to=to,
                    template=text.template,
                    language=language,
                    parameters=text.parameters,
                    button_suffix=text.button_suffix,
                )
            )
    except WhatsAppSendError as exc:
        return _record_failure(delivery, code=exc.code, error=str(exc), retryable=exc.retryable)
    except smtplib.SMTPRecipientsRefused:
        return _record_failure(delivery, code="recipient_refused", error="The mail server refused the address.")
    except (smtplib.SMTPException, OSError) as exc:
        return _record_failure(delivery, code=type(exc).__name__, error="The mail server failed.", retryable=True)
    NoticeDelivery.objects.filter(pk=delivery.pk, status=DeliveryState.SENDING).update(
        status=DeliveryState.SENT,
        sent_at=timezone.now(),
        next_attempt_at=None,
        provider_message_id=message_id[:200],
        error_code="",
        error="",
    )
    return 1


def _record_failure(delivery: NoticeDelivery, *, code: str, error: str, retryable: bool = False) -> int:
    final = not retryable or delivery.attempts >= settings.NOTICE_MAX_ATTEMPTS
    now = timezone.now()
    NoticeDelivery.objects.filter(pk=delivery.pk, status=DeliveryState.SENDING).update(
        status=DeliveryState.FAILED if final else DeliveryState.QUEUED,
        next_attempt_at=None if final else now + backoff(delivery.attempts),
        error_code=code[:40],
        error=redact(error)[:200],
    )
    if final:
        logger.warning("notice delivery %s failed for good (%s)", delivery.pk, code)
    return 0


def _settle(notice: Notice) -> None:
    """Done once no channel is left to send; else due again when its next channel is. One read:
    two (is anything open? when is it due?) raced with another worker finishing the last channel
    in between, and found an open channel with no time."""
    due = NoticeDelivery.objects.filter(notice=notice).aggregate(
        queued=Min("next_attempt_at", filter=Q(status=DeliveryState.QUEUED)),
        claimed=Min("claimed_at", filter=Q(status=DeliveryState.SENDING)),
    )
    times = [t for t in (due["queued"], due["claimed"] and due["claimed"] + STALE_CLAIM) if t is not None]
    pending = Notice.objects.filter(pk=notice.pk, status=NoticeStatus.PENDING)
    if times:
        pending.update(next_attempt_at=min(times))
    else:
        pending.update(status=NoticeStatus.DONE, done_at=timezone.now())
