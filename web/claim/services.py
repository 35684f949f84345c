"""Writes of the claim flow. Each one resolves the person and records consent in one durable
transaction, then hands the event to the rule engine (``campaigns.services.event_ingest``, its own
durable transaction) or to a job. Payouts follow through the payouts app's hooks and sweeps.

A claim page is public: only what the person proved finds them (the TikTok account of their
OAuth login, or the reward behind their own claim link); what they type (e-mail, number, IBAN)
never reaches another person of the brand (``recipients.services.identity``). The event handed
to the rule engine therefore carries only the proven identifier. A link sent to a person is not a
key to their money: it gives an account for the reward it names while that is owed, once
(``payouts.links``), and a person who already has an account confirms a new one with the code
sent to the contact they had longest."""

import hmac
import json
import secrets
from dataclasses import asdict, dataclass
from datetime import timedelta

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Count, F, Sum
from django.utils import timezone
from django.utils.translation import gettext as _

from campaigns.marketing import ConsentText
from campaigns.models import Campaign, EventSource, Reward, TriggerEvent, VideoSubmission
from campaigns.platforms import TokenGrant
from campaigns.services import EventInput, IngestResult, event_ingest
from campaigns.services.credentials import platform_credential_store
from core.exceptions import Conflict, IdempotencyConflict, InvalidInput, InvalidTransition
from core.queue import enqueue
from payouts.links import payout_link_spend, reward_owed
from payouts.models import Payout, PayoutItem
from payouts.services.payee import payout_payee_confirm, payouts_payee_recheck
from recipients import crypto
from recipients.models import BankAccount, NoticeKind, Person
from recipients.models_claims import AccountChange, AccountChangeStatus, ClaimLink
from recipients.models_consent import ConsentChannel
from recipients.normalise import AccountInfo, iban_normalise
from recipients.selectors import marketing_consent_proof, person_cluster_ids, person_current_bank_account
from recipients.services import (
    IdentityInput,
    bank_account_holder_name_set,
    consent_record,
    person_resolve,
    person_root_lock,
)
from recipients.services.consent import consent_give
from recipients.services.identity import Identity, identity_normalise
from recipients.services.notices import NoticeNew, notices_record

CHANNEL = "claim_page"


@dataclass(frozen=True)
class PayoutDetails:
    name: str
    email: str
    whatsapp: str
    iban: str
    language: str = ""
    account: AccountInfo | None = None  # a local account, validated by the form; wins over ``iban``
    # The marketing box's words when the person ticked it (never ticked for them); not carried
    # through an account change's code: it is recorded when the form is sent.
    marketing: ConsentText | None = None
    user_agent: str = ""


@dataclass(frozen=True)
class ClaimOutcome:
    reward: Reward | None
    reason: str  # "" when a reward exists; a rejection code otherwise
    already_claimed: bool = False


def _identity(details: PayoutDetails, *, social_uid: str = "", social_provider: str = "tiktok") -> IdentityInput:
    return IdentityInput(
        name=details.name,
        email=details.email,
        whatsapp=details.whatsapp,
        iban=details.iban,
        account=details.account,
        social_provider=social_provider if social_uid else "",
        social_uid=social_uid,
        language=details.language,
        proven=frozenset({"social"} if social_uid else ()),
    )


def _person_apply(
    *,
    normalised: Identity,
    details: PayoutDetails,
    brand_id: int | None,
    ip: str,
    anchor: Person,
    claim_link: ClaimLink | None = None,
) -> Person:
    """In the caller's transaction: the person behind ``anchor`` takes these details, the account
    (an IBAN or a local one) becoming their current account, and their consent is recorded."""
    person = person_resolve(brand_id=brand_id, identity=_identity(details), source=CHANNEL, anchor=anchor)
    consent_record(person=person, terms_version=settings.CLAIM_TERMS_VERSION, channel=CHANNEL, ip=ip)
    _marketing_record(person=person, details=details, ip=ip, claim_link=claim_link)
    # The form asks for the name "as on your bank account": the account is held under it.
    bank_account_holder_name_set(person=person, fingerprint=normalised.iban_fingerprint, name=details.name)
    return person


def _marketing_record(*, person: Person, details: PayoutDetails, ip: str, claim_link: ClaimLink | None = None) -> None:
    """The person ticked the marketing box: their "yes" to the words shown, with its proof. In
    the caller's transaction; nothing when the box was left unticked. A "yes" whose channel
    nothing proves (an e-mail typed here: ``marketing_consent_proof``) waits for the link
    e-mailed to that address (double opt-in)."""
    if details.marketing is None or person.brand_id is None:
        return
    proof = marketing_consent_proof(person=person, email=details.email, claim_link=claim_link)
    consent_give(
        person=person,
        brand=person.brand,
        text=details.marketing.text,
        version=details.marketing.version,
        language=details.marketing.language,
        channel=ConsentChannel.CLAIM_PAGE,
        ip=ip,
        user_agent=details.user_agent,
        claim_link_id=claim_link.pk if claim_link is not None else None,
        pending=not proof.proof,
        confirm_email_id=proof.confirm_email_id,
        proof=proof.proof,
    )


def _person_with_consent(
    *, brand_id: int | None, details: PayoutDetails, ip: str, social_uid: str, social_provider: str = "tiktok"
) -> Person:
    """Resolve the person whose account ``social_uid`` on ``social_provider`` is (proven by the
    login) with these details and record their consent, in one durable transaction. Raises
    InvalidInput before writing."""
    identity = _identity(details, social_uid=social_uid, social_provider=social_provider)
    normalised = identity_normalise(identity)  # InvalidInput here, before anything is written
    with transaction.atomic(durable=True):
        person = person_resolve(brand_id=brand_id, identity=identity, source=CHANNEL)
        consent_record(person=person, terms_version=settings.CLAIM_TERMS_VERSION, channel=CHANNEL, ip=ip)
        _marketing_record(person=person, details=details, ip=ip)
        bank_account_holder_name_set(person=person, fingerprint=normalised.iban_fingerprint, name=details.name)
    return person


def claim_tiktok_login_submit(
    *, campaign: Campaign, social_uid: str, details: PayoutDetails, ip: str, evidence: dict | None = None
) -> ClaimOutcome:
    """The person logged in with TikTok on the claim page and gave their payout details: one
    ``tiktok_login`` event, idempotent per (campaign, TikTok account) — a second claim by the same
    account returns the first outcome (``already_claimed``) whatever details it carries.
    ``evidence`` is the login's proof (``claim_login_evidence``: scopes, time, open_id; never a
    token), stored on the event. Raises InvalidInput (details), NotFound (campaign)."""
    # A keyed fingerprint, not the open_id: the id is copied into append-only ledger keys, and
    # erasing the person must leave nothing that names their TikTok account. (Claims stored with
    # the open_id before are still found, so nobody claims twice.)
    external_id = f"claim:{campaign.pk}:tiktok_login:{crypto.fingerprint('tiktok-claim', social_uid)[:32]}"
    legacy_id = f"claim:{campaign.pk}:tiktok_login:{social_uid}"
    existing = (
        TriggerEvent.objects.filter(brand_id=campaign.brand_id, external_id__in=[external_id, legacy_id])
        .order_by("id")
        .first()
    )
    if existing is not None:
        return ClaimOutcome(
            reward=Reward.objects.filter(event=existing).first(), reason=existing.reason, already_claimed=True
        )
    _person_with_consent(brand_id=campaign.brand_id, details=details, ip=ip, social_uid=social_uid)
    payload = EventInput(
        external_id=external_id,
        campaign=campaign.slug,
        type="tiktok_login",
        source=EventSource.TIKTOK,
        social_provider="tiktok",
        social_uid=social_uid,
        ip=ip,
        evidence=evidence or {},
    )
    try:
        result: IngestResult = event_ingest(brand=campaign.brand, payload=payload)
    except IdempotencyConflict:
        existing = TriggerEvent.objects.get(brand_id=campaign.brand_id, external_id=external_id)
        return ClaimOutcome(
            reward=Reward.objects.filter(event=existing).first(), reason=existing.reason, already_claimed=True
        )
    return ClaimOutcome(reward=result.reward, reason=result.reason, already_claimed=result.replayed)


@dataclass(frozen=True)
class DetailsOutcome:
    person: Person
    # Set when the person already had another account: the new one waits for the code sent to
    # the contact they had longest (``claim_account_change_confirm``).
    change: AccountChange | None = None


def claim_details_submit(*, link: ClaimLink, details: PayoutDetails, ip: str) -> DetailsOutcome:
    """Payout details given on a payout-form link (``payouts.links``): for a reward earned
    elsewhere (a purchase the partner reported, a WhatsApp opt-in), after a payout came back, or
    to correct the details a payout waits for after its Verification of Payee.

    The link is spent here, once, and only while its reward is owed (InvalidTransition
    ``claim_link_spent`` otherwise, nothing written). A person with no account yet, or giving the
    one they have, takes the details at once: the account becomes their current one, contact
    details no other person of the brand holds join them, consent is recorded, and a payout
    waiting for them goes to these details instead. A person who already has another account
    keeps it: the details wait, encrypted, in an ``AccountChange`` until the code sent to the
    contact they had longest is entered. Raises InvalidInput (details) before writing. One
    durable transaction (the person's root row locked first), then the recheck of waiting
    payouts in its own."""
    normalised = identity_normalise(_identity(details))  # InvalidInput here, before anything is written
    now = timezone.now()
    with transaction.atomic(durable=True):
        root = person_root_lock(person=link.reward.person)
        if not payout_link_spend(link=link, now=now):
            raise InvalidTransition(_("This link has been used or has expired."), code="claim_link_spent")
        current = person_current_bank_account(person=root)
        if current is not None and current.iban_fingerprint != normalised.iban_fingerprint:
            # The link proves the person: their "yes" counts now, whatever becomes of the change.
            _marketing_record(person=root, details=details, ip=ip, claim_link=link)
            return DetailsOutcome(
                person=root, change=_account_change_open(person=root, link=link, details=details, now=now)
            )
        # The person's own brand: a person several brands knew before people were scoped per
        # brand has none (recipients 0004), and only their own link may give them an account.
        person = _person_apply(
            normalised=normalised, details=details, brand_id=root.brand_id, ip=ip, anchor=root, claim_link=link
        )
    payouts_payee_recheck(person=person)
    return DetailsOutcome(person=person)


def _code_hash(link_id: int, code: str) -> str:
    # Keyed: a six-digit code's plain hash is undone by trying the million codes.
    return crypto.fingerprint("account-change-code", f"{link_id}:{code}")


def _details_dump(details: PayoutDetails) -> str:
    account = details.account if details.account is not None else iban_normalise(details.iban)
    return crypto.encrypt(
        json.dumps(
            {
                "name": details.name,
                "email": details.email,
                "whatsapp": details.whatsapp,
                "language": details.language,
                "account": {**asdict(account), "details": [list(pair) for pair in account.details]},
            }
        )
    )


def _details_load(ciphertext: str) -> PayoutDetails:
    data = json.loads(crypto.decrypt(ciphertext))
    account = data.pop("account")
    account["details"] = tuple(tuple(pair) for pair in account["details"])
    return PayoutDetails(**data, iban="", account=AccountInfo(**account))


# Each change sends a code to the person's oldest contacts: a link holder must not make that a
# stream of messages (nor of fresh allowances of guesses).
ACCOUNT_CHANGES_PER_DAY = 3


def _account_change_open(*, person: Person, link: ClaimLink, details: PayoutDetails, now) -> AccountChange:
    """Record the change waiting for its code, and the notice that carries the code (encrypted
    in the notice: it is worded at send time) to the contacts the person had longest.

    The allowance of wrong codes is the person's, not the change's: a fresh link (the status
    page makes one while money is owed) would otherwise bring a fresh allowance each time, and a
    stranger could guess on. Once the person's changes of the last day used it up, no change
    opens (InvalidInput ``account_change_too_many``) until it ages out; a new change closes the
    person's pending one; at most ``ACCOUNT_CHANGES_PER_DAY`` open a day. The caller holds the
    person's lock."""
    recent = AccountChange.objects.filter(person=person, created_at__gte=now - timedelta(days=1)).exclude(
        status=AccountChangeStatus.CONFIRMED
    )
    tally = recent.aggregate(wrong=Sum("attempts"), opened=Count("pk"))
    if (tally["wrong"] or 0) >= settings.ACCOUNT_CHANGE_CODE_ATTEMPTS:
        raise InvalidInput(
            _("Too many wrong codes were entered for this account change. Please try again tomorrow."),
            code="account_change_too_many",
        )
    if tally["opened"] >= ACCOUNT_CHANGES_PER_DAY:
        raise InvalidInput(
            _("Too many account changes were started today. Please try again tomorrow."),
            code="account_change_too_many",
        )
    AccountChange.objects.filter(person=person, status=AccountChangeStatus.PENDING).update(expires_at=now)
    code = f"{secrets.randbelow(10**6):06d}"
    change = AccountChange.objects.create(
        person=person,
        link=link,
        details_ciphertext=_details_dump(details),
        code_hash=_code_hash(link.pk, code),
        created_at=now,
        expires_at=now + timedelta(minutes=settings.ACCOUNT_CHANGE_CODE_MINUTES),
    )
    notices_record(
        notices=[
            NoticeNew(
                person_id=person.pk,
                kind=NoticeKind.ACCOUNT_CHANGE_CODE,
                key=f"account_change_code:{change.pk}",
                reward_id=link.reward_id,
                data={"code": crypto.encrypt(code), "minutes": settings.ACCOUNT_CHANGE_CODE_MINUTES},
            )
        ],
        now=now,
    )
    return change


def claim_account_change_confirm(*, change_id: int, code: str, ip: str) -> Person:
    """The person entered the code sent to their oldest contact for a pending ``AccountChange``:
    the details it holds are applied as ``claim_details_submit`` applies them, and new payouts to
    the account wait ``ACCOUNT_CHANGE_COOLING_OFF_HOURS`` (``BankAccount.usable_from``).

    Each try is counted first by a conditional UPDATE (so parallel guesses share the allowance);
    a wrong code raises InvalidInput ``account_change_code_wrong``, and the last allowed wrong
    one locks the change. A change expired, locked or confirmed raises InvalidTransition
    ``account_change_closed``. One durable transaction for the change, then the recheck of
    waiting payouts."""
    now = timezone.now()
    tried = AccountChange.objects.filter(
        pk=change_id,
        status=AccountChangeStatus.PENDING,
        expires_at__gt=now,
        attempts__lt=settings.ACCOUNT_CHANGE_CODE_ATTEMPTS,
    ).update(attempts=F("attempts") + 1)
    if tried != 1:
        raise InvalidTransition(_("This code no longer works."), code="account_change_closed")
    change = AccountChange.objects.select_related("person").get(pk=change_id)
    if not hmac.compare_digest(change.code_hash, _code_hash(change.link_id, "".join(code.split()))):
        if change.attempts >= settings.ACCOUNT_CHANGE_CODE_ATTEMPTS:
            AccountChange.objects.filter(pk=change_id, status=AccountChangeStatus.PENDING).update(
                status=AccountChangeStatus.LOCKED, decided_at=now, details_ciphertext=""
            )
        raise InvalidInput(_("That code is not right."), code="account_change_code_wrong")
    details = _details_load(change.details_ciphertext)
    normalised = identity_normalise(_identity(details))
    with transaction.atomic(durable=True):
        root = person_root_lock(person=change.person)
        # A decided change keeps no personal data: the details now live where they belong.
        confirmed = AccountChange.objects.filter(
            pk=change_id, status=AccountChangeStatus.PENDING, expires_at__gt=now
        ).update(status=AccountChangeStatus.CONFIRMED, decided_at=now, details_ciphertext="")
        if confirmed != 1:
            raise InvalidTransition(_("This code no longer works."), code="account_change_closed")
        person = _person_apply(normalised=normalised, details=details, brand_id=root.brand_id, ip=ip, anchor=root)
        # Whoever holds the oldest contact confirmed, but a contact can be lost too: the money
        # waits long enough for the "account changed" notice to be read and objected to.
        BankAccount.objects.filter(
            person_id__in=person_cluster_ids(person=person),
            iban_fingerprint=normalised.iban_fingerprint,
            is_current=True,
        ).update(usable_from=now + timedelta(hours=settings.ACCOUNT_CHANGE_COOLING_OFF_HOURS))
    payouts_payee_recheck(person=person)
    return person


def claim_payee_confirm(*, reward: Reward, name: str) -> Payout:
    """On their own status page the person confirms the name their bank gave for the account
    (a close match): the reward's payout is paid to that name (``payout_payee_confirm``).
    Idempotent. Raises InvalidTransition when the reward's payout does not wait for it."""
    item = (
        PayoutItem.objects.filter(reward=reward).select_related("payout").order_by("-payout__created_at", "-id").first()
    )
    if item is None:
        raise InvalidTransition(_("This reward has no payout waiting for you."), code="payee_confirm_not_waiting")
    return payout_payee_confirm(payout=item.payout, name=name)


def claim_video_submit(
    *,
    campaign: Campaign,
    platform: str = "tiktok",
    social_uid: str,
    grant: TokenGrant,
    video_id: str,
    details: PayoutDetails,
    ip: str,
) -> VideoSubmission:
    """The person picked one of their items (TikTok videos) on ``platform``: remember it, keep what
    their login granted (access and refresh token, encrypted, as the account's
    ``PlatformCredential``: the item is read again until its rewards mature) and verify it in the
    background (``campaigns.tasks``). One submission per item and campaign (Conflict
    ``video_already_submitted``, nothing kept). Raises InvalidInput (details)."""
    person = _person_with_consent(
        brand_id=campaign.brand_id, details=details, ip=ip, social_uid=social_uid, social_provider=platform
    )
    try:
        with transaction.atomic(durable=True):
            submission = VideoSubmission.objects.create(
                campaign=campaign,
                platform=platform,
                person=person,
                social_uid=social_uid,
                video_id=video_id,
            )
            platform_credential_store(platform=platform, uid=social_uid, grant=grant)
            enqueue("campaigns.tasks.video_submission_verify_task", submission.pk)
    except IntegrityError as exc:
        raise Conflict("This video was already submitted for this campaign.", code="video_already_submitted") from exc
    return submission


def payout_link_renew(*, link: ClaimLink) -> bool:
    """A payout-form link expired unused while its money is still owed: a fresh one goes to the
    person's own contacts (the ``claim_link`` notice), never to whoever opened the dead one, so
    no money is left without a way to claim it. Once per dead link (the notice's key); a link
    used, or whose money is paid, renews nothing. Returns whether a notice was recorded."""
    if link.used_at is not None or link.expires_at > timezone.now() or not reward_owed(reward_id=link.reward_id):
        return False
    with transaction.atomic():
        notices_record(
            notices=[
                NoticeNew(
                    person_id=link.person_id,
                    kind=NoticeKind.CLAIM_LINK,
                    key=f"claim_link:{link.pk}:renewed",
                    reward_id=link.reward_id,
                )
            ]
        )
    return True
