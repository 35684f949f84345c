"""Brands, their team and their money before it is allocated to a campaign."""

from django.conf import settings
from django.db import IntegrityError, transaction
from django.db.models import Q
from django.utils import timezone
from django.utils.text import slugify

from campaigns.funding_reference import funding_reference_generate
from campaigns.models import Brand, BrandEvent, BrandMembership, BrandRole, Plan
from campaigns.selectors import plan_default
from campaigns.services.plans import brand_plan_change
from core.exceptions import InvalidInput
from core.hooks import AUDIT_ROWS_WRITTEN, hook_fire
from core.money import validate_currency
from reconciliation.models import Account, AccountKind
from reconciliation.services import Leg, account_get_or_create, ledger_entry_post


def brand_create(
    *, name: str, slug: str = "", default_currency: str = "EUR", plan: Plan | None = None, live: bool = True
) -> Brand:
    """Create a brand with a fresh funding reference (a collision, 1 in 33 million per existing
    brand, simply draws again), on ``plan`` or else the default plan (``plan_default``), whose
    fees it pays. A brand made by ops is ``live`` at once; ``live=False`` (a brand that signed up
    itself) launches live campaigns only once its go-live checklist is done
    (``campaigns.services.test_mode``). Raises InvalidInput for a bad currency, or when the
    default plan is missing."""
    currency = validate_currency(default_currency)
    for _ in range(5):
        try:
            with transaction.atomic():
                brand = Brand.objects.create(
                    name=name,
                    slug=slug or slugify(name),
                    default_currency=currency,
                    funding_reference=funding_reference_generate(),
                    live_since=timezone.now() if live else None,
                )
                brand_plan_change(brand=brand, plan=plan or plan_default(), reason="Signed up")
                return brand
        except IntegrityError as exc:
            # Which unique column refused is read from the table, not from the error's text: the
            # slug taken is the caller's mistake; otherwise the drawn reference collided.
            if Brand.objects.filter(slug=slug or slugify(name)).exists():
                raise InvalidInput(
                    f"A brand with slug {slug or slugify(name)!r} exists.", code="duplicate_slug"
                ) from exc
    raise InvalidInput("Could not draw a unique funding reference.", code="funding_reference_exhausted")


def brand_membership_set(*, brand: Brand, user, role: str) -> BrandMembership:
    """Give ``user`` ``role`` in ``brand`` (creating or changing the one membership)."""
    if role not in BrandRole.values:
        raise InvalidInput(f"Unknown role {role!r}.", code="invalid_role")
    membership, _ = BrandMembership.objects.update_or_create(brand=brand, user=user, defaults={"role": role})
    return membership


def brand_language_set(*, brand: Brand, language: str, actor, channel: str = "portal") -> Brand:
    """Set the language of the e-mails we send ``brand``'s team (budget alerts, automatic
    pauses): one of ``settings.LANGUAGES``. A test tenant's team is its live brand's, so the
    live brand and its test tenants change together, whichever of them is given. Writes a
    ``brand.language_changed`` audit row (``BrandEvent``: actor, channel, before and after) in
    the same transaction; the same language again changes and records nothing. Raises
    InvalidInput (``invalid_language``) before writing. Who may call it (a brand admin or owner,
    on their own brand) is the interface's check."""
    if language not in {code for code, _name in settings.LANGUAGES}:
        raise InvalidInput(f"Unknown language {language!r}.", code="invalid_language")
    live_id = brand.test_of_id or brand.pk
    with transaction.atomic(durable=True):
        live = Brand.objects.select_for_update().get(pk=live_id)
        before = live.language
        if before != language:
            Brand.objects.filter(Q(pk=live_id) | Q(test_of_id=live_id)).update(language=language)
            BrandEvent.objects.create(
                brand=live,
                kind="brand.language_changed",
                actor=actor,
                channel=channel,
                data={"from": before, "to": language},
                created_at=timezone.now(),
            )
    brand.language = language
    return brand


def brand_funds_account(*, brand: Brand, currency: str) -> Account:
    """The brand's prepaid, unallocated money: ``brand:<id>:funds:<CUR>`` (liability, no overdraft)."""
    currency = validate_currency(currency)
    return account_get_or_create(
        code=f"brand:{brand.pk}:funds:{currency}",
        name=f"{brand.name} funds {currency}",
        kind=AccountKind.LIABILITY,
        currency=currency,
        owner_type="brand",
        owner_id=str(brand.pk),
    )


def platform_bank_account(*, bank_account_code: str, currency: str) -> Account:
    """The platform's operating bank account ``platform:bank:<iban>:<CUR>`` (asset)."""
    currency = validate_currency(currency)
    return account_get_or_create(
        code=f"platform:bank:{bank_account_code}:{currency}",
        name=f"Bank {bank_account_code} {currency}",
        kind=AccountKind.ASSET,
        currency=currency,
        allow_overdraft=True,
    )


def brand_topup_record(
    *,
    brand: Brand,
    amount_minor: int,
    currency: str,
    bank_account_code: str,
    idempotency_key: str,
    reference: str = "",
):
    """Book money the brand wired to us: bank (asset) → brand funds (liability).

    Reconciliation calls this when a statement line carries the brand's funding reference; tests
    and the demo call it directly. Idempotent by ``idempotency_key`` (the statement line's id).
    Raises InvalidInput for a non-positive amount, IdempotencyConflict. Durable transaction."""
    if type(amount_minor) is not int or amount_minor <= 0:
        raise InvalidInput("A top-up is a positive amount in minor units.", code="invalid_amount")
    with transaction.atomic(durable=True):
        funds = brand_funds_account(brand=brand, currency=currency)
        bank = platform_bank_account(bank_account_code=bank_account_code, currency=currency)
        hook_fire(AUDIT_ROWS_WRITTEN)  # the entry is a topup.received webhook's source
        return ledger_entry_post(
            idempotency_key=idempotency_key,
            kind="brand_topup",
            legs=[Leg.debit(bank, amount_minor), Leg.credit(funds, amount_minor)],
            memo=f"Top-up {reference}".strip(),
            reference_type="brand",
            reference_id=str(brand.pk),
        )
