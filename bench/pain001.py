"""pain.001 benchmark: build and validate one SEPA credit-transfer file for N payouts (default
10,000) with ``payouts.rails.sepa_file.build_pain001`` — sepaxml build, XSD validation against
pain.001.001.09 and the exact control-sum/amount self-check, i.e. everything that happens before
ops can download a batch file. Target (issue 4): under 5 s for 10,000 payouts.

Run: ``python -m bench.pain001 [--n 10000] [--runs 3]``. Prints each run's seconds and the
median. ``measure(n=..., runs=...)`` returns the figures and the ``targets`` entry for
``bench-results/payouts.json`` (``make bench-payouts`` writes that file).

It is a benchmark, not a test: it never fails on a time, only when a file does not check out.
"""

import argparse
import os
import statistics
import sys
import time
from datetime import date
from decimal import Decimal

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.bench")
django.setup()

from lxml import etree  # noqa: E402

from bench.common import format_table, format_targets, target  # noqa: E402
from payouts.rails.base import RailPayment  # noqa: E402
from payouts.rails.sepa_file import PAIN001_NAMESPACE, DebtorAccount, build_pain001  # noqa: E402

DEBTOR = DebtorAccount(name="JoyBack Bench S.r.l.", iban="DE89370400440532013000", bic="COBADEFFXXX")
TARGET_SECONDS = 5.0


def _payments(n: int) -> list[RailPayment]:
    return [
        RailPayment(
            end_to_end_id=f"PO-BENCH-{i:010d}",
            amount_minor=1 + (i * 7919) % 250_000,
            currency="EUR",
            creditor_name=f"Person Nummer {i} Müller",
            creditor_country="IT",
            creditor_iban="IT60X0542811101000000123456",
            remittance=f"JoyBack reward {i}",
            debtor_account_code="platform:bank:DE89370400440532013000:EUR",
        )
        for i in range(n)
    ]


def _check(xml: bytes, payments: list[RailPayment]) -> None:
    """Independent of the builder's own check: count and total read back from the file."""
    doc = etree.fromstring(xml, etree.XMLParser(huge_tree=True, resolve_entities=False, no_network=True))
    ns = {"p": PAIN001_NAMESPACE}
    expected = sum((Decimal(p.amount_minor).scaleb(-2) for p in payments), Decimal(0))
    total = Decimal(doc.findtext("p:CstmrCdtTrfInitn/p:GrpHdr/p:CtrlSum", namespaces=ns))
    count = int(doc.findtext("p:CstmrCdtTrfInitn/p:GrpHdr/p:NbOfTxs", namespaces=ns))
    if (count, total) != (len(payments), expected):
        raise SystemExit(f"pain.001 check failed: {count}/{total}, expected {len(payments)}/{expected}")


def measure(*, n: int = 10_000, runs: int = 3) -> dict:
    payments = _payments(n)
    seconds, size = [], 0
    for run in range(runs):
        started = time.perf_counter()
        xml = build_pain001(batch_id=f"BENCH-{run}", debtor=DEBTOR, payments=payments, execution_date=date.today())
        seconds.append(time.perf_counter() - started)
        size = len(xml)
        _check(xml, payments)
    median = statistics.median(seconds)
    return {
        "payouts": n,
        "runs_s": [round(s, 3) for s in seconds],
        "median_s": round(median, 3),
        "file_bytes": size,
        "checks": "XSD valid, control sums and amounts exact (builder self-check + independent read-back)",
        "targets": [
            target(f"pain001_{n}_build_validate_s", round(median, 3), unit="s", target=TARGET_SECONDS, op="<=")
        ],
    }


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=10_000)
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args(argv)
    result = measure(n=args.n, runs=args.runs)
    rows = [(f"run {i + 1}", s) for i, s in enumerate(result["runs_s"])] + [("median", result["median_s"])]
    print(f"pain.001.001.09 build + validate, {result['payouts']:,} payouts, {result['file_bytes']:,} bytes")
    print(format_table(["run", "seconds"], rows))
    print(result["checks"])
    print(format_targets(result["targets"]))
    return 0


if __name__ == "__main__":
    sys.exit(main())
