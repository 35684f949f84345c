"""Background work of the claim flow (django-q2, at-least-once, idempotent):

* ``video_submission_verify_task``: is the picked video the person's own and does it carry the
  hashtag? Then the ``ugc_share`` event; for a view-threshold rule, the first view check.
* ``video_views_poll``: scheduled; re-reads the views of verified videos still below a threshold.
* ``claim_links_send_due``: scheduled; tells people whose reward came from a partner's event and
  who have not given an IBAN yet where to give it (a ``claim_link`` notice with the payout form).

TikTok is called outside any transaction; each result is recorded in one short transaction, and
the events carry deterministic external ids, so a task run twice ingests nothing twice.
"""

import logging
from datetime import timedelta

from django.conf import settings
from django.db import transaction
from django.db.models import Exists, OuterRef
from django.db.models.functions import Coalesce
from django.utils import timezone

from campaigns.models import (
    CampaignStatus,
    EventSource,
    Reward,
    RewardRule,
    RewardStatus,
    Trigger,
    VideoStatus,
    VideoSubmission,
)
from campaigns.platforms import Content, PlatformUnavailable, platform_get
from campaigns.services import EventInput, event_ingest
from campaigns.triggers import trigger_evidence
from core.queue import tick
from recipients import crypto
from recipients.models import BankAccount, NoticeKind
from recipients.selectors import person_current_bank_account
from recipients.services.notices import NoticeNew, notices_record

logger = logging.getLogger(__name__)
WATCH_DAYS = 30


def _rules(campaign_id: int) -> dict[str, RewardRule]:
    return {r.trigger: r for r in RewardRule.objects.filter(campaign_id=campaign_id, is_active=True)}


def _ingest(submission: VideoSubmission, *, trigger: str, video: Content, code: str) -> str:
    campaign = submission.campaign
    result = event_ingest(
        brand=campaign.brand,
        payload=EventInput(
            external_id=f"claim:{campaign.pk}:{trigger}:{submission.video_id}",
            campaign=campaign.slug,
            type=trigger,
            source=EventSource.TIKTOK,
            social_provider="tiktok",
            social_uid=submission.social_uid,
            code=code,
            view_count=video.view_count if trigger == Trigger.VIEW_THRESHOLD else None,
            evidence=trigger_evidence(
                trigger, video_id=video.id, description=video.description[:500], share_url=video.share_url
            ),
        ),
    )
    return result.reason


def _fetch(submission: VideoSubmission) -> Content | None:
    """The video as TikTok sees it now (None: not among this person's videos)."""
    token = crypto.decrypt(submission.token_ciphertext) if submission.token_ciphertext else ""
    if not token:
        return None
    videos = platform_get("tiktok").content_query(token=token, ids=[submission.video_id])
    return next((v for v in videos if v.id == submission.video_id), None)


def _record(submission: VideoSubmission, **fields) -> None:
    fields["checked_at"] = timezone.now()
    if fields.get("threshold_done") or fields.get("status") == VideoStatus.REJECTED:
        fields["token_ciphertext"] = ""  # no more reading needed: drop the key to their videos
    VideoSubmission.objects.filter(pk=submission.pk).update(**fields)


def _check_views(submission: VideoSubmission, video: Content, rules: dict[str, RewardRule]) -> bool:
    """Ingest the view-threshold event once the video passed it. True when nothing more to watch."""
    rule = rules.get(Trigger.VIEW_THRESHOLD)
    if rule is None:
        return True
    if video.view_count < (rule.view_threshold or 0):
        return False
    _ingest(submission, trigger=Trigger.VIEW_THRESHOLD, video=video, code=rule.required_code)
    return True


def video_submission_verify_task(submission_id: int) -> str:
    submission = VideoSubmission.objects.select_related("campaign__brand").get(pk=submission_id)
    if submission.status != VideoStatus.PENDING:
        return submission.status
    rules = _rules(submission.campaign_id)
    tag = next((r.required_code for r in rules.values() if r.required_code), "")
    # PlatformUnavailable propagates: the queue retries and the submission stays pending.
    video = _fetch(submission)
    if video is None:
        _record(submission, status=VideoStatus.REJECTED, reason="video_not_found")
        return "rejected"
    if tag and not video.has_tag(tag):
        _record(submission, status=VideoStatus.REJECTED, reason="required_code_missing", view_count=video.view_count)
        return "rejected"
    if Trigger.UGC_SHARE in rules:
        _ingest(submission, trigger=Trigger.UGC_SHARE, video=video, code=tag)
    done = _check_views(submission, video, rules)
    _record(submission, status=VideoStatus.VERIFIED, view_count=video.view_count, threshold_done=done)
    return "verified"


def video_views_poll(*, limit: int = 200) -> int:
    """Re-check the views of verified videos still below a threshold (oldest check first), for
    campaigns still running. Returns how many passed their threshold."""
    since = timezone.now() - timedelta(days=WATCH_DAYS)
    watching = (
        VideoSubmission.objects.filter(
            status=VideoStatus.VERIFIED,
            threshold_done=False,
            created_at__gte=since,
            campaign__status=CampaignStatus.ACTIVE,
        )
        .select_related("campaign__brand")
        .order_by("checked_at")[:limit]
    )
    passed = 0
    for submission in watching:
        try:
            video = _fetch(submission)
        except PlatformUnavailable as exc:
            logger.warning("TikTok unavailable while polling views: %s", exc)
            break
        if video is None:
            _record(submission, threshold_done=True, reason="video_gone")
            continue
        done = _check_views(submission, video, _rules(submission.campaign_id))
        passed += done
        _record(submission, view_count=video.view_count, threshold_done=done)
    return passed


@tick
def video_views_poll_task() -> int:
    return video_views_poll()


def claim_links_send_due(*, limit: int = 500) -> int:
    """Record the payout-form link notice (``claim_link``) once per reward earned through a
    partner's event (purchases and custom triggers) whose person has no bank account yet; the
    notice outbox sends it. Returns how many were recorded."""
    people_with_account = (
        BankAccount.objects.filter(is_current=True)
        .annotate(root=Coalesce("person__merged_into_id", "person_id"))
        .filter(root=OuterRef("root"))
    )
    rewards = (
        Reward.objects.filter(
            status__in=[RewardStatus.REVIEW, RewardStatus.HELD, RewardStatus.PAYABLE],
            event__source__in=[EventSource.API, EventSource.ADMIN],
            created_at__gte=timezone.now() - timedelta(days=settings.CLAIM_LINK_MAX_AGE_DAYS),
        )
        .exclude(notices__kind=NoticeKind.CLAIM_LINK)
        .annotate(root=Coalesce("person__merged_into_id", "person_id"))
        .exclude(Exists(people_with_account))
        .select_related("person")
        .order_by("id")[:limit]
    )
    notices = [
        NoticeNew(
            person_id=reward.person_id,
            kind=NoticeKind.CLAIM_LINK,
            key=f"reward:{reward.pk}:claim_link",
            reward_id=reward.pk,
        )
        for reward in rewards
        if person_current_bank_account(person=reward.person) is None
    ]
    with transaction.atomic():
        notices_record(notices=notices)
    return len(notices)


@tick
def claim_links_send_due_task() -> int:
    return claim_links_send_due()
