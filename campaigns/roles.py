"""What each ops role may do with campaigns' models (``core.roles``). Granted by
``CampaignsConfig.ready``."""

# Every role sees people and money.
_SEE = [
    "campaigns.view_brand",
    "campaigns.view_campaign",
    "campaigns.view_reward",
    "campaigns.view_rewardevent",
    "campaigns.view_triggerevent",
]

GRANTS = {
    "Reviewer": [*_SEE, "campaigns.view_rewardinreview", "campaigns.change_rewardinreview", "campaigns.change_reward"],
    "Payout approver": _SEE,
    "Reconciler": _SEE,
    "Support": [*_SEE, "campaigns.view_videosubmission"],
    "Finance admin": _SEE,
}
