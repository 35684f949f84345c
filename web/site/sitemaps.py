"""sitemap.xml: every page of the site in each language, each entry naming its translations."""

from django.contrib.sitemaps import Sitemap
from django.urls import reverse

from web.site.pages import PAGES, Page


class SiteSitemap(Sitemap):
    i18n = True
    alternates = True
    x_default = True
    changefreq = "weekly"

    def items(self) -> list[Page]:
        return list(PAGES)

    def location(self, item: Page) -> str:
        return reverse(f"site:{item.name}")

    def priority(self, item: Page) -> str:
        return item.priority


SITEMAPS = {"site": SiteSitemap}
