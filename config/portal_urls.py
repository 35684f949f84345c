"""The brand portal (/portal/). Every brand page is under /portal/<brand slug>/."""

from django.urls import path

from web.portal.views import (
    analytics,
    budget,
    campaigns,
    contacts,
    dashboard,
    funding,
    home,
    integrations,
    plan,
    review,
    tables,
    team,
    test_mode,
    withdrawals,
)

app_name = "portal"

brand = "<slug:brand_slug>/"
campaign = f"{brand}campaigns/<int:campaign_id>/"

urlpatterns = [
    path("", home.portal_home, name="home"),
    path("invitations/<str:token>/", home.invitation_accept_view, name="invitation_accept"),
    path(brand, dashboard.dashboard, name="dashboard"),
    path(f"{brand}campaigns/", campaigns.campaign_list, name="campaigns"),
    path(f"{brand}analytics/", analytics.brand_analytics, name="analytics"),
    path(f"{brand}campaigns/new/", campaigns.campaign_new, name="campaign_new"),
    path(campaign, campaigns.campaign_detail, name="campaign"),
    path(f"{campaign}edit/", campaigns.campaign_edit, name="campaign_edit"),
    path(f"{campaign}analytics/", analytics.campaign_analytics, name="campaign_analytics"),
    path(f"{campaign}analytics.csv", analytics.campaign_analytics_csv, name="campaign_analytics_csv"),
    path(f"{campaign}allocate/", campaigns.campaign_allocate_view, name="campaign_allocate"),
    path(f"{campaign}rules/new/", campaigns.rule_new, name="rule_new"),
    path(f"{campaign}rules/<int:rule_id>/edit/", campaigns.rule_edit, name="rule_edit"),
    path(f"{campaign}rules/<int:rule_id>/retire/", campaigns.rule_retire_view, name="rule_retire"),
    path(f"{campaign}close/", budget.campaign_close_view, name="campaign_close"),
    path(f"{campaign}release/", budget.campaign_release_view, name="campaign_release"),
    path(f"{campaign}<str:action>/", campaigns.campaign_transition, name="campaign_transition"),
    path(f"{brand}funding/", funding.funding, name="funding"),
    path(f"{brand}withdraw/", withdrawals.withdraw, name="withdraw"),
    path(f"{brand}withdraw/bank-accounts/", withdrawals.bank_account_add, name="bank_account_add"),
    path(f"{brand}review/", review.review_list, name="review"),
    path(f"{brand}review/<int:reward_id>/approve/", review.review_approve, name="review_approve"),
    path(f"{brand}review/<int:reward_id>/reject/", review.review_reject, name="review_reject"),
    path(f"{brand}plan/", plan.plan, name="plan"),
    path(f"{brand}rewards/", tables.rewards, name="rewards"),
    path(f"{brand}payouts/", tables.payouts, name="payouts"),
    path(f"{brand}contacts/", contacts.contacts, name="contacts"),
    path(f"{brand}contacts/wording/", contacts.contacts_wording, name="contacts_wording"),
    path(f"{brand}team/", team.team, name="team"),
    path(f"{brand}team/invite/", team.team_invite, name="team_invite"),
    path(f"{brand}team/language/", team.team_language, name="team_language"),
    path(f"{brand}team/invitations/<int:invitation_id>/revoke/", team.team_invitation_revoke, name="team_revoke"),
    path(f"{brand}team/members/<int:membership_id>/", team.team_member_change, name="team_member"),
    path(f"{brand}api-keys/", integrations.api_keys, name="api_keys"),
    path(f"{brand}api-keys/<int:key_id>/revoke/", integrations.api_key_revoke_view, name="api_key_revoke"),
    path(f"{brand}webhooks/", integrations.webhooks, name="webhooks"),
    path(f"{brand}webhooks/<int:endpoint_id>/", integrations.webhook_detail, name="webhook"),
    path(f"{brand}webhooks/<int:endpoint_id>/<str:action>/", integrations.webhook_action, name="webhook_action"),
    path(f"{brand}test-mode/", test_mode.test_mode, name="test_mode"),
    path(f"{brand}test-mode/transfer/", test_mode.test_transfer, name="test_transfer"),
    path(f"{brand}test-mode/reset/", test_mode.test_reset, name="test_reset"),
    path(f"{brand}test-mode/inbox/<int:notice_id>/", test_mode.test_inbox_message, name="test_inbox_message"),
    path(f"{brand}go-live/", test_mode.go_live, name="go_live"),
]
