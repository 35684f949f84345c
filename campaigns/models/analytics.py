"""What the money bought, pre-aggregated per campaign and day (DESIGN §7): the rows the stats
page and API read, so a campaign with a million actions is a few dozen rows a month.

Nothing here is written by ingestion. ``campaigns.services.analytics.campaign_stats_rollup``
(a periodic task) recomputes a day's rows from the events and rewards whenever a watermark
(``StatsCursor``) shows that day changed; the claim page adds its visit to ``CampaignDay``; the
views poll adds its reading to ``VideoViewDay``. Days are the campaign's own calendar days
(``Campaign.timezone``), as its caps count them. No row holds personal data.
"""

from django.db import models
from django.db.models import Q

from campaigns.models.campaigns import Campaign
from campaigns.models.portal import VideoSubmission


class CampaignDay(models.Model):
    """One calendar day of a campaign: the claim page's visits (a counter, no cookie, no person)
    and the id range of the day's trigger events that the roll-up has seen, so recomputing a day
    reads that range of the campaign's index instead of every event it ever had."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="+", db_index=False)
    day = models.DateField()
    visits = models.BigIntegerField(default=0)
    first_event_id = models.BigIntegerField(null=True, blank=True)
    last_event_id = models.BigIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["campaign", "day"], name="campaign_day_unique"),
            models.CheckConstraint(condition=Q(visits__gte=0), name="campaign_day_visits_not_negative"),
            models.CheckConstraint(
                condition=Q(first_event_id__isnull=True, last_event_id__isnull=True)
                | Q(first_event_id__lte=models.F("last_event_id")),
                name="campaign_day_event_range_ordered",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.campaign_id} {self.day}"


class CampaignDayTrigger(models.Model):
    """A campaign's figures for one day and one trigger, by the day its events were received.
    Recomputed whole for the day by the roll-up (never incremented), so running it twice writes
    the same values. ``spent_minor`` is what the budget paid for the day's actions: amount and fee
    of rewards made payable (paid or not), the fee alone of money that expired back, nothing for
    voided or clawed-back ones; ``reserved_minor`` is still held for rewards in review or held."""

    campaign = models.ForeignKey(Campaign, on_delete=models.CASCADE, related_name="+", db_index=False)
    day = models.DateField()
    trigger = models.CharField(max_length=20)
    events = models.BigIntegerField(default=0)  # actions started: every event received
    accepted = models.BigIntegerField(default=0)  # events that earned a reward (any status since)
    verified = models.BigIntegerField(default=0)  # rewards past verification and hold: payable, paid, expired
    paid = models.BigIntegerField(default=0)
    undone = models.BigIntegerField(default=0)  # voided or clawed back
    spent_minor = models.BigIntegerField(default=0)
    reserved_minor = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["campaign", "day", "trigger"], name="campaign_day_trigger_unique"),
            models.CheckConstraint(
                condition=Q(events__gte=models.F("accepted"))
                & Q(accepted__gte=models.F("verified") + models.F("undone"))
                & Q(verified__gte=models.F("paid"))
                & Q(paid__gte=0)
                & Q(undone__gte=0)
                & Q(spent_minor__gte=0)
                & Q(reserved_minor__gte=0),
                name="campaign_day_trigger_funnel_coherent",
            ),
        ]

    def __str__(self) -> str:
        return f"{self.campaign_id} {self.day} {self.trigger}"


class VideoViewDay(models.Model):
    """The highest view count the poll read for a video on a day: views over time without a row
    per reading (at-least-once readings and their order change nothing)."""

    video = models.ForeignKey(VideoSubmission, on_delete=models.CASCADE, related_name="view_days", db_index=False)
    day = models.DateField()
    views = models.BigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["video", "day"], name="video_view_day_unique"),
            models.CheckConstraint(condition=Q(views__gte=0), name="video_view_day_views_not_negative"),
        ]

    def __str__(self) -> str:
        return f"{self.video_id} {self.day}: {self.views}"


class StatsCursor(models.Model):
    """A watermark of the roll-up: the last id of a source table (``trigger_events``,
    ``reward_events``) whose rows are in the daily figures."""

    name = models.CharField(max_length=40, unique=True)
    last_id = models.BigIntegerField(default=0)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"{self.name} @ {self.last_id}"
