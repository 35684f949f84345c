"""What people type, and what we keep. No database."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from core.exceptions import InvalidInput
from recipients.normalise import (
    email_mixed_script,
    email_normalise,
    iban_mask,
    iban_normalise,
    phone_normalise,
    social_normalise,
)
from tests.recipients.factories import iban


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("anna@example.com", "anna@example.com"),
        ("  Anna@Example.COM \n", "anna@example.com"),
        ("ANNA.B+promo@GMAIL.com", "anna.b+promo@gmail.com"),  # aliases are deliberately not folded
    ],
)
def test_email_is_trimmed_and_lower_cased(raw, expected):
    assert email_normalise(raw) == expected


@pytest.mark.parametrize(
    ("raw", "expected"),
    [
        ("ａｎｎａ＠ｅｘａｍｐｌｅ．ｃｏｍ", "anna@example.com"),  # full width
        ("an\u00adna@exam\u00adple.com", "anna@example.com"),  # soft hyphens
        ("\ufeffan\u200dna\u2060@example.com\u200e", "anna@example.com"),  # BOM, joiner, word joiner, LRM
        ("anna@Bücher.de", "anna@xn--bcher-kva.de"),  # IDNA 2008, ASCII form
        ("anna@xn--bcher-kva.de", "anna@xn--bcher-kva.de"),
        ("anna@faß.de", "anna@xn--fa-hia.de"),  # IDNA 2008 keeps ß (IDNA 2003 made it fass.de)
        ("anna@日本。jp", "anna@xn--wgv71a.jp"),
    ],
)
def test_every_spelling_of_an_address_is_one_string(raw, expected):
    assert email_normalise(raw) == expected


@pytest.mark.parametrize(
    ("address", "mixed"),
    [
        ("anna@example.com", False),
        ("anna@xn--bcher-kva.de", False),  # bücher: Latin only
        ("anna@xn--exmple-4nf.com", True),  # ex\u0430mple: a Cyrillic а among Latin letters
        ("anna@xn--80ak6aa92e.com", False),  # all Cyrillic: one script (no look-alike check here)
        ("anna@xn--wgv71a.jp", False),
    ],
)
def test_a_domain_label_mixing_scripts_is_flagged(address, mixed):
    assert email_mixed_script(address) is mixed


@pytest.mark.parametrize(
    "raw", ["anna@", "anna example.com", "@example.com", "anna@@example.com", "   ", "anna@xn--zz.com", "\u00ad"]
)
def test_bad_email_is_refused(raw):
    with pytest.raises(InvalidInput) as exc:
        email_normalise(raw)
    assert exc.value.code == "invalid_email"


@pytest.mark.parametrize(
    ("raw", "region", "expected"),
    [
        ("+39 333 123 4567", "", "+393331234567"),
        ("+393331234567", "", "+393331234567"),
        ("333 123 4567", "IT", "+393331234567"),
        ("333-1234567", "it", "+393331234567"),
        ("0039 333 123 4567", "IT", "+393331234567"),
        ("06 1234 5678", "IT", "+390612345678"),  # Italian landlines keep their leading 0
        ("+31 6 12345678", "IT", "+31612345678"),  # an explicit +31 beats the default region
        ("06-12345678", "NL", "+31612345678"),
    ],
)
def test_phone_numbers_become_e164(raw, region, expected):
    assert phone_normalise(raw, region=region) == expected


@pytest.mark.parametrize(
    ("raw", "region", "message"),
    [
        ("333 123 4567", "", "Add the country code"),
        ("+39 12", "", "not a valid phone number for IT"),
        ("hello", "IT", "not a phone number"),
        ("", "IT", "not a phone number"),
    ],
)
def test_bad_phone_number_is_refused_in_plain_words(raw, region, message):
    with pytest.raises(InvalidInput) as exc:
        phone_normalise(raw, region=region)
    assert exc.value.code == "invalid_phone"
    assert message in exc.value.message


@pytest.mark.parametrize(
    ("raw", "normalised", "country", "bic", "masked"),
    [
        ("NL91ABNA0417164300", "NL91ABNA0417164300", "NL", "ABNANL2A", "NL91 **** **** 4300"),
        ("nl91 abna 0417 1643 00", "NL91ABNA0417164300", "NL", "ABNANL2A", "NL91 **** **** 4300"),
        (" NL91-ABNA-0417-1643-00 ", "NL91ABNA0417164300", "NL", "ABNANL2A", "NL91 **** **** 4300"),
        ("DE89 3704 0044 0532 0130 00", "DE89370400440532013000", "DE", "COBADEFFXXX", "DE89 **** **** 3000"),
        ("it60x0542811101000000123456", "IT60X0542811101000000123456", "IT", "BLOPIT22", "IT60 **** **** 3456"),
    ],
)
def test_iban_is_normalised_with_bank_details(raw, normalised, country, bic, masked):
    info = iban_normalise(raw)
    assert (info.normalised, info.country, info.bic, info.masked) == (normalised, country, bic, masked)
    assert info.bank_name


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        ("NL91ABNA0417164301", "IBAN checksum is wrong"),
        ("NL91 ABNA 0417 1643 0", "NL IBANs have 18 characters; this one has 17."),
        ("DE89 3704 0044 0532 0130 000", "DE IBANs have 22 characters; this one has 23."),
        ("XX91ABNA0417164300", "'XX' is not a country that uses IBANs."),
        ("NL91ABNA04171643OO", "account part has the wrong format"),
        ("NL91 ABNA 0417 1643 0!", "only letters and digits"),
        ("1234567890", "starts with two letters"),
        ("", "empty"),
    ],
)
def test_bad_iban_is_refused_in_plain_words(raw, message):
    with pytest.raises(InvalidInput) as exc:
        iban_normalise(raw)
    assert exc.value.code == "invalid_iban"
    assert message in exc.value.message


def test_mask_keeps_country_check_digits_and_last_four_only():
    assert iban_mask("NL77ABNA0123458765") == "NL77 **** **** 8765"
    # Same shape whatever the length, so the mask does not leak the country's account format.
    assert len(iban_mask("NL77ABNA0123458765")) == len(iban_mask("MT84MALT011000012345MTLCAST001S"))


@given(
    account=st.integers(min_value=1, max_value=9_999_999_999),
    country=st.sampled_from(["NL", "DE"]),
    lower=st.booleans(),
    separator=st.sampled_from(["", " ", "  ", "-", "\t"]),
)
def test_any_human_spelling_of_an_iban_normalises_to_the_same(account, country, lower, separator):
    compact = iban(country, account)
    typed = separator.join(compact[i : i + 4] for i in range(0, len(compact), 4))
    typed = typed.lower() if lower else typed
    assert iban_normalise(typed).normalised == compact


def test_social_identity_lowercases_provider_and_keeps_uid_case():
    assert social_normalise(" TikTok ", " _000AbC-xyz ") == "tiktok:_000AbC-xyz"


@pytest.mark.parametrize(("provider", "uid"), [("tiktok", ""), ("", "abc"), ("tik tok", "abc")])
def test_incomplete_social_identity_is_refused(provider, uid):
    with pytest.raises(InvalidInput) as exc:
        social_normalise(provider, uid)
    assert exc.value.code == "invalid_social"
