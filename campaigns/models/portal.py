"""Rows owned by the brand portal and the claim pages: team invitations, and the TikTok videos
people submit for UGC and view-threshold rewards."""

from django.conf import settings
from django.db import models
from django.db.models import Q
from django.utils.translation import gettext_lazy as _

from campaigns.models.brands import Brand, BrandRole
from campaigns.models.campaigns import Campaign


class InvitationStatus(models.TextChoices):
    PENDING = "pending", _("Pending")
    ACCEPTED = "accepted", _("Accepted")
    REVOKED = "revoked", _("Revoked")


class BrandInvitation(models.Model):
    """An invitation to join a brand's team with a role. The emailed link carries ``token`` (random,
    unique); it is accepted once, by a signed-in user whose verified email is ``email``."""

    brand = models.ForeignKey(Brand, on_delete=models.CASCADE, related_name="invitations")
    email = models.EmailField()
    role = models.CharField(max_length=12, choices=BrandRole.choices)
    token = models.CharField(max_length=64, unique=True)
    status = models.CharField(max_length=10, choices=InvitationStatus.choices, default=InvitationStatus.PENDING)
    invited_by = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.PROTECT, related_name="+")
    accepted_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.PROTECT, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    expires_at = models.DateTimeField()
    decided_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.CheckConstraint(condition=Q(role__in=BrandRole.values), name="brand_invitation_role_valid"),
            models.CheckConstraint(
                condition=Q(status__in=InvitationStatus.values), name="brand_invitation_status_valid"
            ),
            models.CheckConstraint(
                condition=Q(status="accepted", accepted_by__isnull=False)
                | (~Q(status="accepted") & Q(accepted_by__isnull=True)),
                name="brand_invitation_accepted_by_iff_accepted",
            ),
            models.UniqueConstraint(
                fields=["brand", "email"],
                condition=Q(status="pending"),
                name="brand_invitation_one_pending_per_email",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.email} → {self.brand} ({self.role}, {self.status})"


class VideoStatus(models.TextChoices):
    PENDING = "pending", "Waiting for verification"
    VERIFIED = "verified", "Verified"
    REJECTED = "rejected", "Rejected"


class VideoSubmission(models.Model):
    """An item (a TikTok video) a person picked on a claim page's content step. A job checks
    through its platform (``Platform.content_query``) that it is theirs and carries the campaign's
    hashtag, then sends the platform's "share" trigger event (``ugc_share``); for a view-threshold
    rule it keeps polling the views until the threshold is passed (or the campaign stops). The
    key to the person's videos is their account's ``PlatformCredential``, kept while this or
    another of the account's submissions still needs reading."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="video_submissions")
    # The ``campaigns.platforms`` name the item lives on (validated by the registry when submitted).
    platform = models.CharField(max_length=20, default="tiktok")
    person = models.ForeignKey("recipients.Person", on_delete=models.PROTECT, related_name="+")
    social_uid = models.CharField(max_length=200)
    video_id = models.CharField(max_length=64)
    status = models.CharField(max_length=10, choices=VideoStatus.choices, default=VideoStatus.PENDING)
    reason = models.CharField(max_length=60, blank=True, default="")
    view_count = models.BigIntegerField(default=0)
    # The item's public link and cover image as the platform last gave them (TikTok's cover URL is
    # signed and expires after a while: the next reading brings a fresh one).
    share_url = models.URLField(max_length=1000, blank=True, default="")
    cover_url = models.URLField(max_length=2000, blank=True, default="")
    threshold_done = models.BooleanField(default=False)
    checked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["campaign", "platform", "video_id"], name="video_submission_once_per_campaign"
            ),
            models.CheckConstraint(condition=Q(status__in=VideoStatus.values), name="video_submission_status_valid"),
            models.CheckConstraint(condition=Q(view_count__gte=0), name="video_submission_views_not_negative"),
        ]
        indexes = [
            models.Index(
                fields=["checked_at"],
                name="video_submission_watch_idx",
                condition=Q(status="verified", threshold_done=False),
            )
        ]

    def __str__(self) -> str:
        return f"video {self.video_id} for {self.campaign} ({self.status})"
