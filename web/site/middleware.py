"""Django's LocaleMiddleware, with the public site's language prefixes kept to the site.

Once ``i18n_patterns(prefix_default_language=False)`` is in the URLs, Django's middleware serves
every address without a prefix in LANGUAGE_CODE, ignoring the language cookie and the browser's
Accept-Language: the portal, whose Italian is chosen by that cookie, would turn English. Here only
the site's own pages (and any address with a language prefix) follow the prefix; everything else
keeps choosing as before."""

from django.middleware.locale import LocaleMiddleware as DjangoLocaleMiddleware
from django.urls import Resolver404, get_resolver
from django.utils import translation

SITE_URLCONF = "web.site.urls"


def is_site_page(path: str) -> bool:
    """True for an unprefixed (default language) address of a site page."""
    try:
        get_resolver(SITE_URLCONF).resolve(path)
    except Resolver404:
        return False
    return True


class LocaleMiddleware(DjangoLocaleMiddleware):
    def process_request(self, request):
        if translation.get_language_from_path(request.path_info) or is_site_page(request.path_info):
            return super().process_request(request)
        translation.activate(translation.get_language_from_request(request))
        request.LANGUAGE_CODE = translation.get_language()
        return None
