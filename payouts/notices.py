"""What each notice says (``recipients.services.notices`` records and sends them), in English and
Italian, with the person's private link, by e-mail and as a WhatsApp template.

Every template is registered in WhatsApp Manager in ``en`` and ``it`` (category *utility*) with
the body parameters below, in this order, and one URL button ``<CLAIM_BASE_URL>/c/{{1}}`` whose
parameter is the rest of the person's link (``payouts.links``):

==========================  ==============================  ===========================
template                    body parameters                 the link opens
==========================  ==============================  ===========================
``payout_paid``             amount, account                 the reward's status page
``payout_failed``           amount, account, reason         the payout form (new IBAN)
``payout_returned``         amount, reason                  the payout form (new IBAN)
``account_changed``         account                         the status page
``iban_needed``             amount, brand                   the payout form
``claim_link``              brand                           the payout form
``reward_reminder``         amount, brand, deadline         the payout form
``reward_expired``          amount, brand                   the status page
``payee_check``             amount, account                 the status page (confirm or correct)
``account_change_code``     code, minutes                   (no button: the code is typed)
``reward_undone``           amount, brand, reason           the status page
==========================  ==============================  ===========================

``account_changed_no_link`` (no button) tells a person who has no reward yet, so no page.
The words are gettext strings (``locale/it``); amounts and dates follow the language.
"""

from dataclasses import dataclass
from datetime import datetime

from django.utils.formats import date_format
from django.utils.translation import gettext as _
from django.utils.translation import gettext_lazy

from campaigns.models import Brand, Reward
from core.money import format_minor
from payouts.iso import ACCOUNT_DETAIL_CODES
from payouts.links import PAYOUT_SALT, STATUS_SALT, link_make
from payouts.models import Payout
from recipients import crypto
from recipients.models import BankAccount, Notice, NoticeKind, Person
from recipients.selectors import person_cluster_ids
from recipients.services.notices import NoticeText


@dataclass(frozen=True)
class Wording:
    template: str
    link: str  # the salt of the page the link opens; "" for none
    subject: str
    body: str  # %(name)s placeholders, filled from the values below
    action: str  # the line with the link, under the body of the e-mail
    parameters: tuple[str, ...]  # the template's body parameters, in order


WORDINGS = {
    NoticeKind.PAID: Wording(
        "payout_paid",
        STATUS_SALT,
        gettext_lazy("Your money is on its way"),
        gettext_lazy("We have paid %(amount)s into your bank account %(account)s. Thank you!"),
        gettext_lazy("Follow your payout: %(link)s"),
        ("amount", "account"),
    ),
    NoticeKind.FAILED: Wording(
        "payout_failed",
        PAYOUT_SALT,
        gettext_lazy("We could not pay you"),
        gettext_lazy(
            "We could not pay %(amount)s into %(account)s: %(reason)s The money stays yours: "
            "please check your IBAN and give us the right one."
        ),
        gettext_lazy("Give us your IBAN: %(link)s"),
        ("amount", "account", "reason"),
    ),
    NoticeKind.RETURNED: Wording(
        "payout_returned",
        PAYOUT_SALT,
        gettext_lazy("Your payout came back"),
        gettext_lazy("Your bank sent back %(amount)s: %(reason)s Please give us another IBAN and we will pay again."),
        gettext_lazy("Give us your IBAN: %(link)s"),
        ("amount", "reason"),
    ),
    NoticeKind.ACCOUNT_CHANGED: Wording(
        "account_changed",
        STATUS_SALT,
        gettext_lazy("Your payout account changed"),
        # No promise to stop the next payout: one may already be on its way to the new account.
        gettext_lazy(
            "From now on we pay your rewards into %(account)s. If you did not ask for this, reply to this "
            "message at once."
        ),
        gettext_lazy("Your reward: %(link)s"),
        ("account",),
    ),
    NoticeKind.IBAN_NEEDED: Wording(
        "iban_needed",
        PAYOUT_SALT,
        gettext_lazy("Tell us where to send your money"),
        gettext_lazy("You have %(amount)s waiting from %(brand)s. Tell us where to send it."),
        gettext_lazy("Give us your IBAN: %(link)s"),
        ("amount", "brand"),
    ),
    NoticeKind.CLAIM_LINK: Wording(
        "claim_link",
        PAYOUT_SALT,
        gettext_lazy("Your reward is waiting"),
        gettext_lazy("%(brand)s has a reward for you. Tell us where to send it."),
        gettext_lazy("Give us your IBAN: %(link)s"),
        ("brand",),
    ),
    NoticeKind.REMINDER: Wording(
        "reward_reminder",
        PAYOUT_SALT,
        gettext_lazy("Your money is still waiting"),
        gettext_lazy(
            "%(amount)s from %(brand)s is still waiting for you. Give us your IBAN by %(deadline)s, or the "
            "money goes back to %(brand)s."
        ),
        gettext_lazy("Give us your IBAN: %(link)s"),
        ("amount", "brand", "deadline"),
    ),
    NoticeKind.EXPIRED: Wording(
        "reward_expired",
        STATUS_SALT,
        gettext_lazy("Your reward has gone back"),
        gettext_lazy("You did not give us an account in time, so %(amount)s from %(brand)s went back to %(brand)s."),
        gettext_lazy("Your reward: %(link)s"),
        ("amount", "brand"),
    ),
    NoticeKind.ACCOUNT_CHANGE_CODE: Wording(
        "account_change_code",
        "",  # the code is typed on the page where the new account was given: no link
        gettext_lazy("Your code to change your payout account"),
        gettext_lazy(
            "Someone asked to pay your rewards into a new account. If it was you, enter this code on that "
            "page: %(code)s. It works for %(minutes)s minutes. If it was not you, ignore this message: we "
            "keep paying your current account."
        ),
        "",
        ("code", "minutes"),
    ),
    NoticeKind.PAYEE_CHECK: Wording(
        "payee_check",
        STATUS_SALT,
        gettext_lazy("Please check your bank details"),
        gettext_lazy(
            "Your bank says the name for %(account)s is not the one we have. Open your reward's page to "
            "confirm or correct it; the %(amount)s stays yours until then."
        ),
        gettext_lazy("Confirm or correct: %(link)s"),
        ("amount", "account"),
    ),
    NoticeKind.ACTION_UNDONE: Wording(
        "reward_undone",
        STATUS_SALT,
        gettext_lazy("Your reward was cancelled"),
        gettext_lazy(
            "Your reward of %(amount)s from %(brand)s was cancelled before it was paid, because %(reason)s "
            "The money went back to %(brand)s."
        ),
        gettext_lazy("Your reward: %(link)s"),
        ("amount", "brand", "reason"),
    ),
}

# Why an action no longer counts (``campaigns.models.UndoneReason``), in the person's words.
UNDONE_WORDS = {
    "content_removed": gettext_lazy("your video was deleted or made private."),
    "views_dropped": gettext_lazy("your video's views fell below the number the reward asked for."),
    "authorization_revoked": gettext_lazy("you removed our access to your TikTok account."),
    "optin_withdrawn": gettext_lazy("you stopped our WhatsApp messages."),
}


def _reason(code: str) -> str:
    if code in ACCOUNT_DETAIL_CODES:
        return _("the account number is wrong, closed or blocked.")
    if code == "BE01":
        return _("the name does not match the account holder.")
    return _("the bank did not accept the payment.")


def _values(notice: Notice) -> dict[str, str]:
    """The facts the words need, read now (an account erased since shows as erased)."""
    values: dict[str, str] = {}
    payout = Payout.objects.filter(pk=notice.payout_id).first() if notice.payout_id else None
    reward = (
        Reward.objects.select_related("campaign__brand").filter(pk=notice.reward_id).first()
        if notice.reward_id
        else None
    )
    if payout is not None:
        values["amount"] = format_minor(payout.amount_minor, payout.currency)
        values["account"] = payout.creditor_iban_masked
    elif reward is not None:
        values["amount"] = format_minor(reward.amount_minor, reward.currency)
    if "amount_minor" in notice.data:
        values["amount"] = format_minor(notice.data["amount_minor"], notice.data["currency"])
    if reward is not None:
        values["brand"] = reward.campaign.brand.name
    if "reason_code" in notice.data:
        values["reason"] = _reason(notice.data["reason_code"])
    if "undone" in notice.data:
        values["reason"] = str(UNDONE_WORDS[notice.data["undone"]])
    if "bank_account" in notice.data:
        values["account"] = BankAccount.objects.get(pk=notice.data["bank_account"]).masked
    if "code" in notice.data:
        values["code"] = crypto.decrypt(notice.data["code"])
        values["minutes"] = str(notice.data["minutes"])
    if "deadline" in notice.data:
        values["deadline"] = date_format(datetime.fromisoformat(notice.data["deadline"]), "DATE_FORMAT")
    return values


def notice_render(notice: Notice, person: Person) -> NoticeText:
    """The notice in the active language (``recipients.services.notices`` sets the person's)."""
    wording = WORDINGS[notice.kind]
    values = _values(notice)
    body = str(wording.body) % values
    # An account change is about the person, not one reward: the link opens their newest one.
    reward_id = notice.reward_id or (
        Reward.objects.filter(person_id__in=person_cluster_ids(person=person))
        .order_by("-id")
        .values_list("id", flat=True)
        .first()
    )
    if reward_id is None or not wording.link:
        # A person with no reward yet (their brand registered them): there is no page to open.
        return NoticeText(
            subject=str(wording.subject),
            body=body,
            template=f"{wording.template}_no_link" if wording.link else wording.template,
            parameters=tuple(values[p] for p in wording.parameters),
            test_inbox=_test_person(person),
        )
    link = link_make(wording.link, reward_id)
    return NoticeText(
        subject=str(wording.subject),
        body=f"{body}\n\n{wording.action % {'link': link.url}}",
        template=wording.template,
        parameters=tuple(values[p] for p in wording.parameters),
        button_suffix=link.suffix,
        test_inbox=_test_person(person),
    )


def _test_person(person: Person) -> bool:
    """A test tenant's person: their messages go to the brand's test inbox, never to them."""
    return person.brand_id is not None and not Brand.objects.filter(pk=person.brand_id, livemode=True).exists()
