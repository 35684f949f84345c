"""Partner API keys: created with a secret shown once, found by their visible prefix, revoked.

A key reads ``jbk_<prefix>_<secret>``: the prefix is 12 random lower-case hex characters (unique,
shown in lists and logs), the secret 43 URL-safe characters (32 random bytes). Only the secret's
sha256 is stored (see ``ApiKey``); comparison is constant-time. A test tenant's key reads
``jbk_test_<prefix>_<secret>`` (issue 28): the mode shows in the key itself, and a key presented
with the other mode's form names no key.
"""

import hashlib
import hmac
import secrets
from dataclasses import dataclass
from datetime import timedelta

from django.db import IntegrityError, transaction
from django.utils import timezone

from campaigns.entitlements import entitlement_channel_check
from campaigns.models import ApiKey, ApiScope, Brand, BrandStatus
from campaigns.models.plans import Channel
from core.bulk import joined_models
from core.exceptions import InvalidInput, PermissionDenied

TOKEN_PREFIX = "jbk_"  # noqa: S105 - the public part of every key, not a secret
TEST_TOKEN_PREFIX = "jbk_test_"  # noqa: S105 - the public part of a test mode key
# Writing last_used_at on every request would turn every read into a write; a minute is precise
# enough to tell an unused key from a used one.
LAST_USED_RESOLUTION = timedelta(minutes=1)


@dataclass(frozen=True)
class CreatedKey:
    key: ApiKey
    token: str  # shown once: only its hash is stored


def _hash(secret: str) -> str:
    return hashlib.sha256(secret.encode()).hexdigest()


def token_prefix(brand: Brand) -> str:
    return TOKEN_PREFIX if brand.livemode else TEST_TOKEN_PREFIX


def api_key_create(*, brand: Brand, name: str, scopes: list[str], created_by=None) -> CreatedKey:
    """Create a key for ``brand`` with ``scopes`` (read, write, events). Returns the key and its
    token, which is never shown again. Raises PlanRefused (the brand's plan has no API),
    InvalidInput (``invalid_scopes``, ``invalid_name``)."""
    entitlement_channel_check(brand=brand, channel=Channel.API)
    name = (name or "").strip()
    if not name or len(name) > 100:
        raise InvalidInput("A key needs a name of 1 to 100 characters.", code="invalid_name")
    if not scopes or any(s not in ApiScope.values for s in scopes):
        raise InvalidInput(f"Scopes are some of {', '.join(ApiScope.values)}.", code="invalid_scopes")
    for _ in range(3):
        prefix, secret = secrets.token_hex(6), secrets.token_urlsafe(32)
        try:
            with transaction.atomic():
                key = ApiKey.objects.create(
                    brand=brand,
                    name=name,
                    prefix=prefix,
                    secret_hash=_hash(secret),
                    scopes=sorted(set(scopes)),
                    created_by=created_by,
                )
        except IntegrityError:  # a prefix collision (1 in 2^48 per key): draw again
            continue
        return CreatedKey(key=key, token=f"{token_prefix(brand)}{prefix}_{secret}")
    raise InvalidInput("Could not draw a unique key prefix.", code="key_prefix_exhausted")


def api_key_revoke(*, key: ApiKey) -> ApiKey:
    """Revoke ``key`` at once (idempotent: a revoked key keeps its first revocation time)."""
    ApiKey.objects.filter(pk=key.pk, revoked_at__isnull=True).update(revoked_at=timezone.now())
    key.refresh_from_db()
    return key


def api_key_authenticate(*, token: str) -> ApiKey | None:
    """The active key ``token`` names, with its brand loaded, or None (malformed, unknown, wrong
    secret, revoked). Raises PermissionDenied(``brand_suspended``) for a suspended brand's key.
    Records the use (at most one write per key and minute)."""
    test = token.startswith(TEST_TOKEN_PREFIX)
    if not token.startswith(TOKEN_PREFIX):
        return None
    prefix, sep, secret = token[len(TEST_TOKEN_PREFIX if test else TOKEN_PREFIX) :].partition("_")
    if not sep or not prefix or not secret or len(prefix) > 16:
        return None
    found = joined_models(
        ((ApiKey, "k"), (Brand, "b")),
        f"FROM {ApiKey._meta.db_table} k JOIN {Brand._meta.db_table} b ON b.id = k.brand_id WHERE k.prefix = %s",  # noqa: S608
        [prefix],
    )
    key = None
    if found:
        key, brand = found[0]
        key.brand = brand
    if key is None or key.revoked_at is not None or key.brand.livemode == test:
        return None
    if not hmac.compare_digest(key.secret_hash, _hash(secret)):
        return None
    if key.brand.status != BrandStatus.ACTIVE:
        raise PermissionDenied("This brand is suspended.", code="brand_suspended")
    now = timezone.now()
    if key.last_used_at is None or key.last_used_at < now - LAST_USED_RESOLUTION:
        ApiKey.objects.filter(pk=key.pk).exclude(last_used_at__gte=now - LAST_USED_RESOLUTION).update(last_used_at=now)
    return key
