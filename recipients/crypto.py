"""Field encryption and keyed fingerprints for personal data (IBANs).

Two independent secrets, both read here and nowhere else:

- ``FIELD_ENCRYPTION_KEY`` encrypts (Fernet: AES-128-CBC + HMAC-SHA256, authenticated). It may be a
  comma-separated list to rotate keys: the first encrypts, all of them decrypt.
- ``FIELD_FINGERPRINT_KEY`` keys the HMAC-SHA256 fingerprints used for look-ups and uniqueness. It
  must never change: a fingerprint is kept after a person is erased (so per-IBAN caps and fraud
  signals keep working) and cannot be recomputed once the clear value is gone.

Each is taken from Django settings, else from the environment. Outside production, a missing secret
is derived from ``SECRET_KEY`` with HKDF so the demo and the tests work out of the box; under
``config.settings.production`` a missing secret stops the process instead, because rotating
``SECRET_KEY`` would otherwise make every stored IBAN unreadable.
"""

import base64
import hashlib
import hmac
import os
from functools import lru_cache

from cryptography.fernet import Fernet, InvalidToken, MultiFernet
from cryptography.hazmat.primitives import hashes
from cryptography.hazmat.primitives.kdf.hkdf import HKDF
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.core.signals import setting_changed
from django.dispatch import receiver

PRODUCTION_SETTINGS = "config.settings.production"
_ENCRYPTION_INFO = b"joyback.recipients.field-encryption.v1"
_FINGERPRINT_INFO = b"joyback.recipients.fingerprint.v1"


def _hkdf(material: str, info: bytes) -> bytes:
    return HKDF(algorithm=hashes.SHA256(), length=32, salt=None, info=info).derive(material.encode())


# name → key material, read once per process: every ingested IBAN is encrypted and fingerprinted,
# and reading settings and the environment each time was a visible share of a bulk call. Any
# settings change (override_settings in tests) empties it.
_materials: dict[str, str] = {}


@receiver(setting_changed)
def _forget_materials(**kwargs) -> None:
    _materials.clear()


def _secret(name: str) -> str:
    material = _materials.get(name)
    if material is None:
        material = _materials[name] = _secret_read(name)
    return material


def _secret_read(name: str) -> str:
    value = getattr(settings, name, "") or os.environ.get(name, "")
    if value:
        return value
    if getattr(settings, "SETTINGS_MODULE", "") == PRODUCTION_SETTINGS:
        raise ImproperlyConfigured(f"{name} must be set in production (see recipients/crypto.py)")
    if not settings.SECRET_KEY:
        raise ImproperlyConfigured(f"{name} or SECRET_KEY must be set")
    return f"derived-from-secret-key:{name}:{settings.SECRET_KEY}"


@lru_cache(maxsize=8)
def _fernet(material: str) -> MultiFernet:
    keys = [item.strip() for item in material.split(",") if item.strip()]
    return MultiFernet([Fernet(base64.urlsafe_b64encode(_hkdf(key, _ENCRYPTION_INFO))) for key in keys])


@lru_cache(maxsize=8)
def _fingerprint_key(material: str) -> bytes:
    return _hkdf(material, _FINGERPRINT_INFO)


def encrypt(plaintext: str) -> str:
    """An authenticated, randomised token (a different one on every call) for ``plaintext``."""
    return _fernet(_secret("FIELD_ENCRYPTION_KEY")).encrypt(plaintext.encode()).decode("ascii")


def decrypt(token: str) -> str:
    """The plaintext of ``token``. Raises ``cryptography.fernet.InvalidToken`` if no configured key
    opens it or it was tampered with."""
    return _fernet(_secret("FIELD_ENCRYPTION_KEY")).decrypt(token.encode("ascii")).decode()


def fingerprint(purpose: str, value: str) -> str:
    """Keyed HMAC-SHA256 (hex) of an already-normalised ``value``. ``purpose`` separates domains, so
    the same string as an IBAN and as something else never shares a fingerprint."""
    key = _fingerprint_key(_secret("FIELD_FINGERPRINT_KEY"))
    return hmac.new(key, f"{purpose}\x00{value}".encode(), hashlib.sha256).hexdigest()


def iban_fingerprint(normalised_iban: str) -> str:
    return fingerprint("iban", normalised_iban)


__all__ = ["InvalidToken", "decrypt", "encrypt", "fingerprint", "iban_fingerprint"]
