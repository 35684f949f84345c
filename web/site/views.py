"""The public site: the pages of ``web.site.pages``, the pricing read from the packages ops edit
in the admin (``campaigns.selectors.plans_for_sale``), robots.txt and the error pages."""

from django.conf import settings
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.templatetags.static import static
from django.urls import reverse, translate_url
from django.utils import translation
from django.utils.cache import patch_vary_headers
from django.views.decorators.http import require_safe

from campaigns.selectors import plans_for_sale
from web.site.pages import BY_NAME, PAGES, Page
from web.site.pricing import plan_cards

# Open Graph names a language and a territory.
OG_LOCALES = {"en": "en_GB", "it": "it_IT"}


@require_safe
def page_view(request: HttpRequest, page_name: str) -> HttpResponse:
    page = BY_NAME[page_name]
    language = translation.get_language()
    chosen = request.COOKIES.get(settings.LANGUAGE_COOKIE_NAME)
    # A language picked with the switcher is remembered (its cookie): an address without a
    # language prefix (the English one, the address people type) takes them to their language.
    # Addresses with a prefix are a choice in themselves and are served as asked, and crawlers
    # send no cookie, so each address keeps one language for the search engines.
    if language == settings.LANGUAGE_CODE and chosen in dict(settings.LANGUAGES) and chosen != language:
        response = HttpResponseRedirect(translate_url(request.get_full_path(), chosen))
        patch_vary_headers(response, ("Cookie",))
        return response
    context = {**page_meta(request, page), "page": page}
    if page.name == "pricing":
        context["plans"] = plan_cards(plans_for_sale())
    if page.name == "cashback_api":
        context["api_base"] = request.build_absolute_uri("/api/v1/")
    response = render(request, f"site/{page.name}.html", context)
    patch_vary_headers(response, ("Cookie",))
    return response


def page_meta(request: HttpRequest, page: Page) -> dict:
    """Canonical address, its translations (hreflang) and the link-preview tags of a page."""
    alternates = []
    for code, _name in settings.LANGUAGES:
        with translation.override(code):
            alternates.append((code, request.build_absolute_uri(reverse(f"site:{page.name}"))))
    urls = dict(alternates)
    language = translation.get_language()
    return {
        "title": page.title,
        "description": page.description,
        "canonical": urls[language],
        "alternates": alternates,
        "x_default": urls[settings.LANGUAGE_CODE],
        "og_locale": OG_LOCALES.get(language, OG_LOCALES["en"]),
        "og_locale_alternates": [OG_LOCALES[code] for code, _url in alternates if code != language],
        "og_image": request.build_absolute_uri(static("site/og-image.jpg")),
        "site_pages": PAGES,
    }


@require_safe
def robots_txt(request: HttpRequest) -> HttpResponse:
    """Everything public may be crawled; the portal, the claim links, the API and the back office
    are nobody's search result."""
    lines = [
        "User-agent: *",
        "Disallow: /admin/",
        "Disallow: /portal/",
        "Disallow: /accounts/",
        "Disallow: /c/",
        "Allow: /api/docs/",
        "Disallow: /api/",
        "Disallow: /fake/",
        "Allow: /",
        f"Sitemap: {request.build_absolute_uri(reverse('sitemap'))}",
    ]
    return HttpResponse("\n".join(lines) + "\n", content_type="text/plain; charset=utf-8")
