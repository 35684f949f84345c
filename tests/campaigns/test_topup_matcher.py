"""A bank credit carrying a brand's funding reference becomes that brand's top-up."""

from decimal import Decimal

import pytest
from django.core import mail

from bench.camt_gen import GenLine, GenStatement, write_camt053
from campaigns import webhook_kick
from campaigns.matchers import funding_references_in
from campaigns.services.brands import brand_create, brand_funds_account, brand_membership_set
from reconciliation.models import Match, StatementLine, StatementLineStatus
from reconciliation.selectors import account_balance, ledger_verify_report
from reconciliation.services.matching import match_undo, statement_line_match_manual, statement_lines_match
from reconciliation.services.statements import platform_bank_account_create, statement_import

pytestmark = pytest.mark.django_db
IBAN = "NL91ABNA0417164300"


@pytest.fixture
def brand(django_user_model):
    brand = brand_create(name="Gelato Bros")
    owner = django_user_model.objects.create_user("owner", email="owner@gelato.example", password="pw-owner-1")
    brand_membership_set(brand=brand, user=owner, role="owner")
    platform_bank_account_create(name="Operating", iban=IBAN, currency="EUR")
    return brand


def import_lines(tmp_path, lines):
    path = tmp_path / "s.xml"
    write_camt053(
        path,
        [GenStatement(statement_id="S1", account_iban=IBAN, currency="EUR", opening_balance=Decimal(0), lines=lines)],
    )
    statement_import(source=path, filename="s.xml", origin="command", match=False)


def funds(brand) -> int:
    return account_balance(account_id=brand_funds_account(brand=brand, currency="EUR").pk).posted_minor


def test_reference_is_found_however_the_bank_spaced_it(brand):
    ref = brand.funding_reference
    spaced = f"{ref[:4].lower()} {ref[4:]}"
    assert funding_references_in(f"Invoice 12 / {spaced} thanks") == [ref]
    typo = ref[:-1] + ("A" if ref[-1] != "A" else "B")
    assert funding_references_in(f"payment {typo}") == []


def test_credit_with_reference_tops_up_the_brand(
    tmp_path, brand, settings, monkeypatch, django_capture_on_commit_callbacks
):
    settings.WEBHOOK_COLLECT_ON_COMMIT = True  # the topup.received webhook follows the commit
    kicks: list[int] = []
    monkeypatch.setattr(webhook_kick, "collect_kick", lambda: kicks.append(1))
    import_lines(
        tmp_path,
        [
            GenLine(
                amount=Decimal("5000.00"),
                credit_debit="CRDT",
                remittance=f"Top-up {brand.funding_reference}",
                counterparty_name="Gelato Bros",
            )
        ],
    )
    with django_capture_on_commit_callbacks(execute=True):
        result = statement_lines_match()
    assert dict(result.matched) == {"brand_topup": 1}
    assert kicks == [1]
    assert funds(brand) == 500_000
    assert Match.objects.get().target_id == str(brand.pk)
    assert [m.to for m in mail.outbox] == [["owner@gelato.example"]]
    assert ledger_verify_report().ok

    again = statement_lines_match()
    assert again.lines_seen == 0 and funds(brand) == 500_000


def test_mistyped_reference_stays_unmatched_then_staff_match_it(tmp_path, brand, admin_user):
    ref = brand.funding_reference
    typo = ref[:-1] + ("A" if ref[-1] != "A" else "B")
    import_lines(tmp_path, [GenLine(amount=Decimal("20.00"), credit_debit="CRDT", remittance=f"Top-up {typo}")])
    statement_lines_match()
    line = StatementLine.objects.get()
    assert line.status == StatementLineStatus.UNMATCHED and funds(brand) == 0

    match = statement_line_match_manual(
        line_id=line.pk, target_type="brand_topup", target_id=ref, actor=admin_user, note="brand confirmed by phone"
    )
    assert funds(brand) == 2_000

    match_undo(match_id=match.pk, actor=admin_user, reason="wrong brand after all")
    assert funds(brand) == 0
    assert ledger_verify_report().ok


def test_a_debit_is_never_a_top_up(tmp_path, brand):
    import_lines(
        tmp_path,
        [GenLine(amount=Decimal("20.00"), credit_debit="DBIT", remittance=f"refund {brand.funding_reference}")],
    )
    statement_lines_match()
    assert StatementLine.objects.get().status == StatementLineStatus.UNMATCHED
    assert funds(brand) == 0
