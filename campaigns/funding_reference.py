"""Brand funding references: the code a brand types into its bank transfer so a top-up finds it.

Format: ``JB`` + five random characters + one check character, e.g. ``JB7F3K9Q``. The alphabet is
Crockford-like without the look-alikes 0/O and 1/I (32 symbols: 2-9 and A-Z minus I and O), so a
reference read over the phone or copied by hand survives. The check character is Luhn mod 32 over
the five random characters: it catches every single-character typo and every swap of two adjacent
characters, so reconciliation can refuse a mistyped reference instead of crediting another brand.
32^5 (33 million) references; uniqueness is enforced by the database, a collision retries.
"""

import re
import secrets

ALPHABET = "23456789ABCDEFGHJKLMNPQRSTUVWXYZ"
PREFIX = "JB"
BODY_LENGTH = 5
LENGTH = len(PREFIX) + BODY_LENGTH + 1
_INDEX = {ch: i for i, ch in enumerate(ALPHABET)}
_N = len(ALPHABET)


def check_character(body: str) -> str:
    """Luhn mod N: double every second symbol from the right, fold the overflow, sum."""
    total = 0
    factor = 2
    for ch in reversed(body):
        addend = factor * _INDEX[ch]
        addend = addend // _N + addend % _N
        total += addend
        factor = 1 if factor == 2 else 2
    return ALPHABET[(_N - total % _N) % _N]


def funding_reference_generate() -> str:
    body = "".join(secrets.choice(ALPHABET) for _ in range(BODY_LENGTH))
    return f"{PREFIX}{body}{check_character(body)}"


def funding_reference_normalise(text: str) -> str:
    """Upper-case, without spaces or dashes (people type ``jb-7f3k 9q``)."""
    return re.sub(r"[\s\-]", "", text or "").upper()


def funding_reference_is_valid(text: str) -> bool:
    ref = funding_reference_normalise(text)
    if len(ref) != LENGTH or not ref.startswith(PREFIX):
        return False
    body, check = ref[len(PREFIX) : -1], ref[-1]
    if any(ch not in _INDEX for ch in body + check):
        return False
    return check_character(body) == check
