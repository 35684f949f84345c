from django.conf.urls.i18n import i18n_patterns
from django.contrib import admin
from django.contrib.sitemaps.views import sitemap
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from reconciliation.admin.bank import dashboard_view
from web.demo_views import demo_statement_import_view, demo_webhook_receiver
from web.site.sitemaps import SITEMAPS
from web.site.views import robots_txt

urlpatterns = [
    # The reconciliation dashboard is an admin page; it sits before the admin's catch-all routes.
    path("admin/reconciliation/dashboard/", admin.site.admin_view(dashboard_view), name="reconciliation_dashboard"),
    path("admin/demo/statement/", admin.site.admin_view(demo_statement_import_view), name="demo_statement_import"),
    path("admin/", admin.site.urls),
    path("api/", include("config.api_urls")),
    path("accounts/", include("allauth.urls")),
    path("portal/", include("config.portal_urls")),
    path("c/", include("config.claim_urls")),
    path("fake/tiktok/", include("web.fake_tiktok")),
    path("fake/webhooks/", demo_webhook_receiver, name="demo_webhook_receiver"),
    # Browsers ask for /favicon.ico whatever the page says.
    path("favicon.ico", RedirectView.as_view(url=static("favicon.svg"), permanent=True)),
    # The public site (web.site): sitemap, robots.txt, the language switch, and its pages in
    # English at / and Italian at /it/ (only these URLs carry a language prefix).
    path("sitemap.xml", sitemap, {"sitemaps": SITEMAPS}, name="sitemap"),
    path("robots.txt", robots_txt, name="robots_txt"),
    path("i18n/", include("django.conf.urls.i18n")),
]
urlpatterns += i18n_patterns(path("", include("web.site.urls")), prefix_default_language=False)
