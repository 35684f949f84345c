"""Telling people about their money: by email (Django's mail backend: console in development)
and by a WhatsApp template message through ``WhatsAppSender`` (a fake in tests and the demo).

The messages: ``paid`` (a payout settled), ``iban_needed`` (money is waiting and we have no
usable IBAN), ``returned`` / ``failed`` (the payout came back: please check your IBAN) and
``account_changed`` (the account we pay into changed: if it was not you, tell us).
Each is claimed by a unique ``Notification.key`` before anything is sent, so a task delivered
twice does not message anyone twice. Called from tasks, after commit, never in a transaction.
"""

import threading
from dataclasses import dataclass
from typing import Protocol

from django.core.mail import send_mail
from django.db import IntegrityError, transaction
from django.utils import timezone
from django.utils.module_loading import import_string

from core.money import format_minor
from payouts import conf
from payouts.models import Notification, Payout
from recipients.models import Identifier, IdentifierKind, Person
from recipients.selectors import person_cluster_ids, person_root


@dataclass(frozen=True)
class TemplateMessage:
    to: str  # E.164
    template: str
    language: str
    parameters: tuple[str, ...]


class WhatsAppSender(Protocol):
    def send_template(self, message: TemplateMessage) -> str:
        """Send an approved template message; return the provider's message id."""


class FakeWhatsAppSender:
    """Records messages in memory (class-wide, so tests can read what tasks sent)."""

    sent: list[TemplateMessage] = []
    _lock = threading.Lock()

    def send_template(self, message: TemplateMessage) -> str:
        with self._lock:
            self.sent.append(message)
            return f"fake-wamid-{len(self.sent)}"

    @classmethod
    def reset(cls) -> None:
        with cls._lock:
            cls.sent.clear()


def whatsapp_sender() -> WhatsAppSender:
    return import_string(conf.whatsapp_sender())()


_TEXTS = {
    "paid": (
        "payout_paid",
        "Your money is on its way",
        "We have paid {amount} into your bank account {iban}. Thank you!",
    ),
    "returned": (
        "payout_returned",
        "Your payout came back",
        "Your bank sent back {amount} ({reason}). Please check your IBAN and enter a new one; we will pay again.",
    ),
    "failed": (
        "payout_failed",
        "We could not pay you",
        "We could not pay {amount} into {iban} ({reason}). Please check your IBAN; the money stays yours.",
    ),
    "account_changed": (
        "account_changed",
        "Your payout account changed",
        # No promise to stop the next payout: one may already be on its way to the new account.
        "From now on we pay your rewards into {iban}. If you did not ask for this, reply to this message at once.",
    ),
    "payee_check": (
        "payee_check",
        "Please check your bank details",
        "Your bank says the name for {iban} is not the one we have. Open your reward page to confirm or correct "
        "it; the {amount} stays yours until then.",
    ),
    "iban_needed": (
        "iban_needed",
        "Tell us where to send your money",
        "You have {amount} waiting. Please give us your IBAN so we can pay you.",
    ),
}


def _contacts(person: Person) -> tuple[str, str]:
    cluster = person_cluster_ids(person=person)
    rows = dict(
        Identifier.objects.filter(
            person_id__in=cluster, is_active=True, kind__in=[IdentifierKind.EMAIL, IdentifierKind.WHATSAPP]
        )
        .order_by("created_at")
        .values_list("kind", "value")
    )
    return rows.get(IdentifierKind.EMAIL, ""), rows.get(IdentifierKind.WHATSAPP, "")


def person_notify(
    *,
    person_id: int,
    kind: str,
    key: str,
    amount_minor: int = 0,
    currency: str = "",
    payout: Payout | None = None,
    iban_masked: str = "",
) -> bool:
    """Send message ``kind`` once per ``key`` by email and WhatsApp (where the person gave them).
    Returns False when the key was used before. Call it from a task (after commit), never
    inside a transaction: a rollback cannot unsend a message."""
    person = person_root(person=Person.objects.get(pk=person_id))
    if person.erased_at:
        return False
    try:
        with transaction.atomic():
            notice = Notification.objects.create(key=key[:120], person=person, payout=payout, kind=kind)
    except IntegrityError:
        return False
    values = {
        "amount": format_minor(amount_minor, currency) if currency else "",
        "iban": payout.creditor_iban_masked if payout else iban_masked,
        "reason": (payout.reason_text if payout else "") or "",
    }
    email, whatsapp = _contacts(person)
    channels = []
    try:
        _send(kind, person, email, whatsapp, values, channels)
    except Exception:
        # Give the claim back, so the task's retry sends the message instead of skipping it.
        Notification.objects.filter(pk=notice.pk).delete()
        raise
    Notification.objects.filter(pk=notice.pk).update(channels=channels, sent_at=timezone.now())
    return True


def _send(kind: str, person: Person, email: str, whatsapp: str, values: dict, channels: list[str]) -> None:
    template, subject, body = _TEXTS[kind]
    if email:
        send_mail(subject, body.format(**values), conf.email_from(), [email])
        channels.append("email")
    if whatsapp:
        whatsapp_sender().send_template(
            TemplateMessage(
                to=whatsapp,
                template=template,
                language=person.preferred_language or "en",
                parameters=tuple(values[k] for k in ("amount", "iban", "reason") if "{" + k + "}" in body),
            )
        )
        channels.append("whatsapp")
