"""Tenant isolation for the portal: every view resolves its brand through the signed-in user's
membership, and every object it touches through that brand. Anything else is a 404 (not a 403:
a member of brand A must not learn that brand B's campaign 7 exists)."""

from dataclasses import dataclass
from functools import wraps

from django.contrib.auth.decorators import login_required
from django.http import Http404

from campaigns.models import Brand, BrandMembership, BrandRole, BrandStatus

# What each role may do, from least to most.
_RANK = {BrandRole.ANALYST: 0, BrandRole.ADMIN: 1, BrandRole.OWNER: 2}


@dataclass(frozen=True)
class Access:
    brand: Brand  # the tenant the page works on: the live brand, or its test tenant in test mode
    role: str
    live: Brand | None = None  # the live brand (the membership's); None means ``brand`` itself

    @property
    def live_brand(self) -> Brand:
        return self.live or self.brand

    def can(self, role: str) -> bool:
        return _RANK[self.role] >= _RANK[role]

    @property
    def can_edit(self) -> bool:
        return self.can(BrandRole.ADMIN)

    @property
    def is_owner(self) -> bool:
        return self.can(BrandRole.OWNER)


def brand_member(*, user, brand_slug: str, min_role: str = BrandRole.ANALYST) -> Access:
    """The user's access to the brand, or Http404 when they are not a member or their role is too
    low for a write (the same answer as a brand that does not exist)."""
    membership = (
        BrandMembership.objects.select_related("brand").filter(user=user, brand__slug=brand_slug).first()
        if user.is_authenticated
        else None
    )
    if membership is not None:
        access = Access(brand=membership.brand, role=membership.role)
    else:
        # Test mode: the active test tenant opens to the members of its live brand, with their role.
        tenant = (
            Brand.objects.select_related("test_of")
            .filter(slug=brand_slug, livemode=False, status=BrandStatus.ACTIVE)
            .first()
            if user.is_authenticated
            else None
        )
        membership = tenant and BrandMembership.objects.filter(user=user, brand_id=tenant.test_of_id).first()
        if not membership:
            raise Http404("No such brand.")
        access = Access(brand=tenant, role=membership.role, live=tenant.test_of)
    if not access.can(min_role):
        raise Http404("No such page.")
    return access


def brand_view(min_role: str = BrandRole.ANALYST):
    """Decorate a view taking ``brand_slug``: it receives ``access`` instead."""

    def decorator(view):
        @login_required
        @wraps(view)
        def wrapper(request, brand_slug: str, *args, **kwargs):
            access = brand_member(user=request.user, brand_slug=brand_slug, min_role=min_role)
            request.brand_access = access
            return view(request, access, *args, **kwargs)

        return wrapper

    return decorator
