"""The words of a brand's marketing-consent box, in English and Italian.

The brand chooses only what it will send (its purpose, per language, ``Brand.marketing_purpose_*``,
set in the portal); who asks (the brand's legal name), that the box is optional and how to
withdraw are fixed words around it, so no brand can leave them out. The exact text shown is what
a consent records, with its SHA-256 as the version (``recipients.services.consent``): changing the
purpose changes the version, and a person's "yes" stays tied to the words they saw.
"""

import hashlib
from dataclasses import dataclass

from django.utils import translation
from django.utils.translation import gettext as _

from campaigns.models import Brand
from core.exceptions import InvalidInput

LANGUAGES = ("en", "it")
PURPOSE_MAX = 300


@dataclass(frozen=True)
class ConsentText:
    text: str
    version: str  # SHA-256 (hex) of ``text``
    language: str


def text_version(text: str) -> str:
    return hashlib.sha256(text.encode()).hexdigest()


def brand_legal_name(brand: Brand) -> str:
    """Who asks: the company behind the brand (a test tenant's is its live brand's), or its name
    until going live gave one."""
    live = brand.test_of if brand.test_of_id else brand
    return (live.company_legal_name or "").strip() or live.name


def marketing_consent_text(*, brand: Brand, language: str) -> ConsentText:
    """The box's words in ``language`` (English for any other)."""
    language = language if language in LANGUAGES else "en"
    with translation.override(language):
        purpose = (getattr(brand, f"marketing_purpose_{language}") or "").strip() or _(
            "news and offers from %(brand)s by e-mail and WhatsApp"
        ) % {"brand": brand.name}
        text = _(
            "Yes, %(who)s may use my name and contact details (e-mail, WhatsApp number, social account) to send "
            "me %(purpose)s. This is optional, and I can withdraw at any time by writing to %(who)s, with the link "
            "in every message or by replying STOP on WhatsApp."
        ) % {"who": brand_legal_name(brand), "purpose": purpose}
    return ConsentText(text=text, version=text_version(text), language=language)


def brand_marketing_purpose_set(*, brand: Brand, purpose_en: str, purpose_it: str) -> Brand:
    """Set what the brand will send people who consent, per language (blank: the default). A
    consent already given keeps the words it was given to; new ones take the new words. Raises
    InvalidInput (``invalid_marketing_purpose``) for text too long or with control characters;
    nothing is saved then."""
    values = {"en": (purpose_en or "").strip(), "it": (purpose_it or "").strip()}
    for language, value in values.items():
        if len(value) > PURPOSE_MAX or any(ord(c) < 32 for c in value):
            raise InvalidInput(
                f"The {language} purpose must be one line of at most {PURPOSE_MAX} characters.",
                code="invalid_marketing_purpose",
            )
    Brand.objects.filter(pk=brand.pk).update(marketing_purpose_en=values["en"], marketing_purpose_it=values["it"])
    brand.marketing_purpose_en, brand.marketing_purpose_it = values["en"], values["it"]
    return brand
