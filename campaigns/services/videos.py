"""Items (TikTok videos) a person submitted on a claim page's content step (run by
``campaigns.tasks``, at-least-once, idempotent), read through the submission's platform:

* ``video_submission_verify``: is the picked item the person's own and does it carry the
  hashtag? Then the platform's "share" trigger event (``ugc_share``); for a rule on its "views"
  trigger (``view_threshold``), the first view check (``campaigns.triggers``, ``content``).
* ``video_views_poll``: scheduled; verifies submissions whose verify task was lost, and re-reads
  the views of verified items still below a threshold.

Items are read with the account's stored token, renewed when it expires
(``campaigns.services.credentials``), which is kept while a submission of the account is still
read: pending, watched, or with a reward waiting for its re-check before maturing
(``campaigns.services.undone``: the video deleted or private, its views fallen). A renewal the
platform refuses for good sends the account's held rewards to review (``authorization_refused_record``:
a revocation looks like that, but so does a pair we lost).

The platform is called outside any transaction; each result is recorded in one short transaction, and
the events carry deterministic external ids, so a task run twice ingests nothing twice.
"""

import logging
from datetime import timedelta

from django.db import transaction
from django.utils import timezone

from campaigns.models import (
    CampaignStatus,
    EventSource,
    RewardRule,
    VideoStatus,
    VideoSubmission,
)
from campaigns.platforms import AuthorizationRefused, Content, PlatformUnavailable, platform_get
from campaigns.services import EventInput, event_ingest
from campaigns.services.analytics import video_views_record
from campaigns.services.credentials import WATCH_DAYS, platform_credential_release, platform_token_use
from campaigns.services.undone import authorization_refused_record
from campaigns.triggers import content_trigger, trigger_evidence

logger = logging.getLogger(__name__)
# A submission still pending this long after it was made lost its verify task: the task's attempts
# (Q_RETRY 90 s × Q_MAX_ATTEMPTS 5) ran out while the platform was down, or a copy queued before a deploy
# named a path that no longer imports. Verifying it again is safe: the events have fixed ids.
VERIFY_LOST_AFTER = timedelta(minutes=15)


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
            source=EventSource(submission.platform),
            social_provider=submission.platform,
            social_uid=submission.social_uid,
            code=code,
            view_count=video.view_count if trigger == content_trigger(submission.platform, "views") else None,
            evidence=trigger_evidence(
                trigger, video_id=video.id, description=video.description[:500], share_url=video.share_url
            ),
        ),
    )
    return result.reason


def _fetch(submission: VideoSubmission) -> Content | None:
    """The item as its platform sees it now (None: not among this person's items, or no token to
    read them with). Raises AuthorizationRefused (its held rewards sent to review first),
    PlatformUnavailable."""
    platform = platform_get(submission.platform)
    try:
        videos = platform_token_use(
            platform=submission.platform,
            uid=submission.social_uid,
            call=lambda token: platform.content_query(token=token, ids=[submission.video_id]),
        )
    except AuthorizationRefused as exc:
        authorization_refused_record(platform=submission.platform, uid=submission.social_uid, refused=exc)
        raise
    return next((v for v in videos or () if v.id == submission.video_id), None)


def _record(submission: VideoSubmission, video: Content | None = None, **fields) -> None:
    """One short transaction: the submission's new state and, for an item read, its views of the
    day (the brand's views over time) with the link and cover the platform gave. Then, when this
    reading was the last the account needed, its key to the person's videos is dropped."""
    fields["checked_at"] = timezone.now()
    if video is not None:
        fields.update(view_count=video.view_count, share_url=video.share_url[:1000], cover_url=video.cover_url[:2000])
    with transaction.atomic():
        VideoSubmission.objects.filter(pk=submission.pk).update(**fields)
        if video is not None and fields.get("status", submission.status) == VideoStatus.VERIFIED:
            video_views_record(video=submission, views=video.view_count, at=fields["checked_at"])
    if fields.get("threshold_done") or fields.get("status") == VideoStatus.REJECTED:
        platform_credential_release(platform=submission.platform, uid=submission.social_uid)


def _check_views(submission: VideoSubmission, video: Content, rules: dict[str, RewardRule]) -> bool:
    """Ingest the view-threshold event once the item passed it. True when nothing more to watch."""
    trigger = content_trigger(submission.platform, "views")
    rule = rules.get(trigger) if trigger else None
    if rule is None:
        return True
    if video.view_count < (rule.view_threshold or 0):
        return False
    _ingest(submission, trigger=trigger, video=video, code=rule.required_code)
    return True


def video_submission_verify(*, submission_id: int) -> str:
    """Verify a pending submission against its platform: rejected when the video is not among the
    person's own or lacks the campaign's hashtag, else verified and its ``ugc_share`` event (and a
    first view-threshold check) ingested. Returns the outcome; a submission no longer pending is
    left as it is. Raises PlatformUnavailable (retryable): the submission stays pending. The platform is
    called outside any transaction; each outcome is one short write."""
    submission = VideoSubmission.objects.select_related("campaign__brand").get(pk=submission_id)
    if submission.status != VideoStatus.PENDING:
        return submission.status
    rules = _rules(submission.campaign_id)
    tag = next((r.required_code for r in rules.values() if r.required_code), "")
    # PlatformUnavailable propagates: the queue retries and the submission stays pending.
    try:
        video = _fetch(submission)
    except AuthorizationRefused:
        _record(submission, status=VideoStatus.REJECTED, reason="authorization_revoked")
        return "rejected"
    if video is None:
        _record(submission, status=VideoStatus.REJECTED, reason="video_not_found")
        return "rejected"
    if tag and not video.has_tag(tag):
        _record(submission, video, status=VideoStatus.REJECTED, reason="required_code_missing")
        return "rejected"
    share = content_trigger(submission.platform, "share")
    if share in rules:
        _ingest(submission, trigger=share, video=video, code=tag)
    done = _check_views(submission, video, rules)
    _record(submission, video, status=VideoStatus.VERIFIED, threshold_done=done)
    return "verified"


def _verify_lost(*, since, limit: int) -> None:
    lost = (
        VideoSubmission.objects.filter(
            status=VideoStatus.PENDING, created_at__gte=since, created_at__lt=timezone.now() - VERIFY_LOST_AFTER
        )
        .order_by("created_at")
        .values_list("pk", flat=True)[:limit]
    )
    for submission_id in lost:
        video_submission_verify(submission_id=submission_id)


def video_views_poll(*, limit: int = 200) -> int:
    """Verify submissions still pending ``VERIFY_LOST_AFTER`` after they were made (oldest first),
    then re-check the views of verified videos still below a threshold (oldest check first), for
    campaigns still running. Returns how many passed their threshold. Stops at the first
    PlatformUnavailable: the next run goes on."""
    since = timezone.now() - timedelta(days=WATCH_DAYS)
    try:
        _verify_lost(since=since, limit=limit)
    except PlatformUnavailable as exc:
        logger.warning("A platform was unavailable while verifying lost submissions: %s", exc)
        return 0
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
        except AuthorizationRefused:
            _record(submission, threshold_done=True, reason="authorization_revoked")
            continue
        except PlatformUnavailable as exc:
            logger.warning("%s unavailable while polling views: %s", submission.platform, exc)
            break
        if video is None:
            _record(submission, threshold_done=True, reason="video_gone")
            continue
        done = _check_views(submission, video, _rules(submission.campaign_id))
        passed += done
        _record(submission, video, threshold_done=done)
    return passed
