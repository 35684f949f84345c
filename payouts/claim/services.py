"""Writes of the claim flow. Each one resolves the person and records consent in one durable
transaction, then hands the event to the rule engine (``campaigns.services.event_ingest``, its own
durable transaction) or to a job. Payouts follow through the payouts app's hooks and sweeps.

A claim page is public: only what the person proved finds them (the TikTok account of their
OAuth login, or the reward behind their own claim link); what they type (e-mail, number, IBAN)
never reaches another person of the brand (``recipients.services.identity``). The event handed
to the rule engine therefore carries only the proven identifier."""

from dataclasses import dataclass

from django.conf import settings
from django.db import IntegrityError, transaction
from django.utils.translation import gettext as _

from campaigns.models import Campaign, EventSource, Reward, TriggerEvent, VideoSubmission
from campaigns.services import EventInput, IngestResult, event_ingest
from core.exceptions import Conflict, IdempotencyConflict, InvalidTransition
from core.queue import enqueue
from payouts.models import Payout, PayoutItem
from payouts.services.payee import payout_payee_confirm, payouts_payee_recheck
from recipients import crypto
from recipients.models import Person
from recipients.normalise import AccountInfo
from recipients.services import IdentityInput, bank_account_holder_name_set, consent_record, person_resolve
from recipients.services.identity import identity_normalise, resolve_once, run_with_retries

CHANNEL = "claim_page"


@dataclass(frozen=True)
class PayoutDetails:
    name: str
    email: str
    whatsapp: str
    iban: str
    language: str = ""
    account: AccountInfo | None = None  # a local account, validated by the form; wins over ``iban``


@dataclass(frozen=True)
class ClaimOutcome:
    reward: Reward | None
    reason: str  # "" when a reward exists; a rejection code otherwise
    already_claimed: bool = False


def _person_with_consent(
    *, brand_id: int | None, details: PayoutDetails, ip: str, social_uid: str = "", anchor: Person | None = None
) -> Person:
    """Resolve the person behind these details and record their consent, in one durable
    transaction: the person behind ``anchor`` (their own claim link: the account, an IBAN or a
    local one, becomes their current account), else the one whose TikTok account ``social_uid``
    is (proven by the login). Raises InvalidInput before writing."""
    identity = IdentityInput(
        name=details.name,
        email=details.email,
        whatsapp=details.whatsapp,
        iban=details.iban,
        account=details.account,
        social_provider="tiktok" if social_uid else "",
        social_uid=social_uid,
        language=details.language,
        proven=frozenset({"social"} if social_uid else ()),
    )
    normalised = identity_normalise(identity)  # InvalidInput here, before anything is written
    with transaction.atomic(durable=True):
        if anchor is not None:
            person, _ = run_with_retries(
                lambda: resolve_once(
                    normalised, brand_id=brand_id, source=CHANNEL, anchor=anchor, iban_always_current=True
                )
            )
        else:
            person = person_resolve(brand_id=brand_id, identity=identity, source=CHANNEL)
        consent_record(person=person, terms_version=settings.CLAIM_TERMS_VERSION, channel=CHANNEL, ip=ip)
        # The form asks for the name "as on your bank account": the account is held under it.
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


def claim_details_submit(*, reward: Reward, details: PayoutDetails, ip: str) -> Person:
    """Payout details for a reward earned elsewhere (a purchase the partner reported, a WhatsApp
    opt-in), behind the person's own claim link: the IBAN becomes the current account of the
    reward's person, contact details no other person of the brand holds join them, consent is
    recorded. The payouts app pays once the reward is payable. Also used
    to give a new IBAN after a payout came back, or to correct the details a payout waits for
    after its Verification of Payee (that payout is replaced by one to the new details). Raises
    InvalidInput."""
    # The person's own brand: a person several brands knew before people were scoped per brand
    # has none (recipients 0004), and only this link, their own, may give them an account.
    person = _person_with_consent(brand_id=reward.person.brand_id, details=details, ip=ip, anchor=reward.person)
    # A payout waiting for them (their bank's answer on the name) goes to these details instead.
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
    *, campaign: Campaign, social_uid: str, access_token: str, video_id: str, details: PayoutDetails, ip: str
) -> VideoSubmission:
    """The person picked one of their TikTok videos: remember it (the access token encrypted) and
    verify it in the background (``payouts.claim.tasks``). One submission per video and
    campaign (Conflict ``video_already_submitted``). Raises InvalidInput (details)."""
    person = _person_with_consent(brand_id=campaign.brand_id, details=details, ip=ip, social_uid=social_uid)
    try:
        with transaction.atomic(durable=True):
            submission = VideoSubmission.objects.create(
                campaign=campaign,
                person=person,
                social_uid=social_uid,
                video_id=video_id,
                token_ciphertext=crypto.encrypt(access_token),
            )
            enqueue("payouts.claim.tasks.video_submission_verify_task", submission.pk)
    except IntegrityError as exc:
        raise Conflict("This video was already submitted for this campaign.", code="video_already_submitted") from exc
    return submission
