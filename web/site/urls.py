"""The public site's pages, mounted by config.urls under ``i18n_patterns`` (English at /,
Italian at /it/)."""

from django.urls import path

from web.site import views
from web.site.pages import PAGES

app_name = "site"

urlpatterns = [path(page.path, views.page_view, {"page_name": page.name}, name=page.name) for page in PAGES]
