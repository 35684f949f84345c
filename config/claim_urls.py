"""The claim pages (/c/) for people being rewarded. Fixed prefixes come before the campaign
pattern; signed tokens contain ':' and never match a slug."""

from django.urls import include, path

import campaigns.platforms.tiktok  # noqa: F401 - points allauth's TikTok adapter at the configured hosts
from web.claim import consent_views, views

app_name = "claim"

campaign = "<slug:brand_slug>/<slug:campaign_slug>/"

urlpatterns = [
    path("i18n/", include("django.conf.urls.i18n")),
    path("iban-check/", views.iban_check, name="iban_check"),
    path("r/<str:token>/", views.payout_form, name="payout_form"),
    path("r/change/<str:token>/", views.account_change, name="account_change"),
    path("s/<str:token>/", views.status_page, name="status"),
    path("s/<str:token>/confirm-name/", views.payee_confirm, name="payee_confirm"),
    path("s/<str:token>/account/", views.status_account, name="status_account"),
    path("v/<str:token>/", views.video_status, name="video_status"),
    path("w/<str:token>/", consent_views.consent_withdraw, name="consent_withdraw"),
    path("m/<str:token>/", consent_views.consent_confirm, name="consent_confirm"),
    path(campaign, views.campaign_page, name="campaign"),
    path(f"{campaign}tiktok/", views.tiktok_claim, name="tiktok"),
    # A platform's content step (pick an item, verified and re-checked by a job); TikTok's keeps its
    # first address.
    path(f"{campaign}videos/", views.content_claim, {"platform": "tiktok"}, name="videos"),
    path(f"{campaign}content/<slug:platform>/", views.content_claim, name="content"),
    path(f"{campaign}whatsapp/", views.whatsapp_start, name="whatsapp_start"),
    path(f"{campaign}whatsapp/<str:code>/", views.whatsapp_wait, name="whatsapp_wait"),
    path(f"{campaign}whatsapp/<str:code>/fake-send/", views.whatsapp_fake_send, name="whatsapp_fake_send"),
]
