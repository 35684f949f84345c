"""allauth's e-mails to brand users (sign-up confirmation, password reset) speak as JoyBack.

Without ``django.contrib.sites`` allauth names the site after the request's host, so a sign-up
e-mail greeted from "127.0.0.1:8651". The name and domain come from settings instead
(``SITE_NAME``; ``SITE_DOMAIN``, by default the host of ``CLAIM_BASE_URL``)."""

from dataclasses import dataclass
from urllib.parse import urlsplit

from allauth.account.adapter import DefaultAccountAdapter
from django.conf import settings


@dataclass(frozen=True)
class Site:
    """What allauth's templates read of a site (``current_site.name``, ``.domain``)."""

    name: str
    domain: str


def joyback_site() -> Site:
    return Site(name=settings.SITE_NAME, domain=settings.SITE_DOMAIN or urlsplit(settings.CLAIM_BASE_URL).netloc)


class PortalAccountAdapter(DefaultAccountAdapter):
    def send_mail(self, template_prefix: str, email: str, context: dict) -> None:
        super().send_mail(template_prefix, email, {**context, "current_site": joyback_site()})
