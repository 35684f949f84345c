"""People as a brand's partner API sees them.

Visibility: a brand sees exactly its own people (``Person.brand``); anything else is "not found" —
the same answer as for an id that does not exist, so no answer tells whether another brand knows
someone. Writes here are the API's, and the brand vouches for what it sends about its own people
(``recipients.services.identity``): register a person (``person_register``), add identifiers or
set the IBAN (``person_identifiers_add``).
"""

from django.db import transaction
from django.utils import timezone

from core.exceptions import NotFound
from recipients.models import Identifier, Person
from recipients.selectors import person_cluster_ids, person_current_bank_account, person_root
from recipients.services import IdentityInput, person_resolve

SOURCE = "api"


def brand_person_get(*, brand, person_id: int) -> Person:
    """The root of person ``person_id`` if it is one of ``brand``'s people. Raises NotFound
    otherwise (also for an erased person)."""
    person = Person.objects.filter(pk=person_id, brand=brand).first()
    if person is None:
        raise NotFound("Not found.")
    root = person_root(person=person)
    if root.erased_at:
        raise NotFound("Not found.")
    return root


def person_register(*, brand, identity: IdentityInput) -> tuple[Person, bool]:
    """Find or create the brand's person with these identifiers; a given IBAN becomes the current
    account. Returns (root person, created). Raises InvalidInput (bad identifiers)."""
    with transaction.atomic(durable=True):
        started = timezone.now()
        person = person_resolve(brand_id=brand.pk, identity=identity, source=SOURCE)
    return person_root(person=person), person.created_at >= started


def person_identifiers_add(*, brand, person: Person, identity: IdentityInput) -> Person:
    """Attach the given identifiers (email, WhatsApp, social, IBAN) to the brand's ``person``;
    another of the brand's people holding one of them is the same human and is merged. A given
    IBAN becomes the current account. Raises InvalidInput, InvalidTransition (``person_erased``)."""
    with transaction.atomic(durable=True):
        person_resolve(brand_id=brand.pk, identity=identity, source=SOURCE, anchor=person)
    return person_root(person=person)


def person_public_view(*, person: Person) -> dict:
    """What the API shows of a person: ids, name, language, masked identifiers and the masked
    current IBAN — never a clear IBAN, e-mail or phone number."""
    cluster = person_cluster_ids(person=person)
    identifiers = (
        Identifier.objects.filter(person_id__in=cluster, is_active=True)
        .exclude(kind="iban")
        .order_by("kind", "id")
        .values_list("kind", "value")
    )
    account = person_current_bank_account(person=person)
    return {
        "id": person.pk,
        "display_name": person.display_name,
        "preferred_language": person.preferred_language,
        "identifiers": [{"kind": kind, "value": mask(kind, value)} for kind, value in identifiers],
        "iban_masked": account.masked if account else "",
        "iban_country": account.country if account else "",
        "account_type": account.kind if account else "",
        "created_at": person.created_at,
    }


def mask(kind: str, value: str) -> str:
    if kind == "email":
        local, _, domain = value.partition("@")
        return f"{local[:1]}***@{domain}"
    if kind == "whatsapp":
        return f"{value[:3]}****{value[-3:]}"
    provider, _, uid = value.partition(":")
    return f"{provider}:{uid[:3]}***"
