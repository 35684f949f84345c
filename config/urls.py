from django.contrib import admin
from django.templatetags.static import static
from django.urls import include, path
from django.views.generic import RedirectView

from reconciliation.admin.bank import dashboard_view
from web.demo_views import demo_statement_import_view, demo_webhook_receiver

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
    path("", RedirectView.as_view(url="/admin/", permanent=False)),
]
