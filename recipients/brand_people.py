"""People as a brand's partner API sees them.

Visibility: a brand sees a person when anyone in that person's cluster (root + merged) sent it an
event, got a reward from it, or was registered by it through the API (``BrandPerson``). Anything
else is "not found" — the same answer as for an id that does not exist.

Writes here are the API's: register a person (``person_register``), add identifiers
(``person_identifiers_add``) and set the IBAN (``person_iban_set_for_brand``). A brand may change
the IBAN only of a person no other brand knows: the IBAN is where *every* brand's rewards for
that human are paid, so one brand must not redirect another's money.
"""

from dataclasses import replace

from django.db import transaction

from campaigns.models import Reward, TriggerEvent
from core.exceptions import Conflict, NotFound
from recipients.models import BankAccount, Identifier, Person
from recipients.models_brand import BrandPerson
from recipients.selectors import person_cluster_ids, person_current_bank_account, person_root
from recipients.services import (
    IdentityInput,
    _identity_normalise,
    _resolve_once,
    _run_with_retries,
    person_resolve,
    person_set_iban,
)

SOURCE = "api"


def brand_linked_brands(*, cluster: list[int]) -> set[int]:
    """Ids of every brand that knows someone in ``cluster``."""
    brands = set(BrandPerson.objects.filter(person_id__in=cluster).values_list("brand_id", flat=True))
    brands |= set(TriggerEvent.objects.filter(person_id__in=cluster).values_list("brand_id", flat=True).distinct())
    brands |= set(Reward.objects.filter(person_id__in=cluster).values_list("campaign__brand_id", flat=True).distinct())
    return brands


def brand_person_get(*, brand, person_id: int) -> Person:
    """The root of person ``person_id`` if ``brand`` may see them. Raises NotFound otherwise."""
    person = Person.objects.filter(pk=person_id).first()
    if person is None:
        raise NotFound("Not found.")
    cluster = person_cluster_ids(person=person)
    visible = (
        BrandPerson.objects.filter(brand=brand, person_id__in=cluster).exists()
        or TriggerEvent.objects.filter(brand=brand, person_id__in=cluster).exists()
        or Reward.objects.filter(campaign__brand=brand, person_id__in=cluster).exists()
    )
    if not visible:
        raise NotFound("Not found.")
    root = person_root(person=person)
    if root.erased_at:
        raise NotFound("Not found.")
    return root


def person_register(*, brand, identity: IdentityInput) -> tuple[Person, bool]:
    """Find or create the person with these identifiers (``person_resolve``) and link it to
    ``brand``. Returns (root person, created link). Raises InvalidInput (bad identifiers), and
    Conflict(``person_shared``) when an IBAN is given for a person another brand knows too."""
    with transaction.atomic(durable=True):
        iban = identity.iban
        person = person_resolve(identity=replace(identity, iban=""), source=SOURCE)
        _, created = BrandPerson.objects.get_or_create(brand=brand, person=person)
        if iban.strip():
            _iban_set_exclusive(brand=brand, person=person, iban=iban)
    return person_root(person=person), created


def person_identifiers_add(*, brand, person: Person, identity: IdentityInput) -> Person:
    """Attach the given identifiers (email, WhatsApp, social, IBAN) to ``person`` (the same
    merging rules as ``person_resolve``: identifiers of someone else mean the same human).
    Raises InvalidInput, Conflict(``person_shared``) for an IBAN change of a shared person."""
    with transaction.atomic(durable=True):
        iban = identity.iban
        rest = replace(identity, iban="")
        if rest.email.strip() or rest.whatsapp.strip() or rest.social_uid.strip() or rest.social_provider.strip():
            normalised = _identity_normalise(rest)
            _run_with_retries(
                lambda: _resolve_once(normalised, source=SOURCE, anchor=person, iban_always_current=False)
            )
        if iban.strip():
            _iban_set_exclusive(brand=brand, person=person, iban=iban)
    return person_root(person=person)


def _iban_set_exclusive(*, brand, person: Person, iban: str) -> BankAccount:
    others = brand_linked_brands(cluster=person_cluster_ids(person=person)) - {brand.pk}
    if others:
        raise Conflict(
            "This person is known to other brands too; they change their IBAN on the claim page.",
            code="person_shared",
        )
    return person_set_iban(person=person, iban=iban, source=SOURCE)


def person_public_view(*, person: Person) -> dict:
    """What the API shows of a person: ids, name, language, masked identifiers and the masked
    current IBAN — never a clear IBAN, e-mail or phone number of someone the partner may only
    partly know."""
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
