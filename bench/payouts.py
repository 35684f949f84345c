"""Payouts benchmark, on PostgreSQL:

1. pain.001 for 10,000 payouts: the file alone (``build_pain001``: sepaxml, XSD validation,
   control-sum proof) and the whole ``payout_batch_create`` service (lock the payouts, build the
   file, post 10,000 ledger entries, move them to ``submitted``). Target: under 5 s.
2. End-to-end latency from ``event_ingest`` (no hold period, auto-approved) to ``settled`` on the
   sandbox rail, with a real ``qcluster`` doing the rest (maturing, payout creation, execution),
   over 1,000 events sent at a steady rate. p50 and p99; target p99 under 2 s.
3. The same on the instant rail: the Adyen Transfers API fake (``tests/fakes/adyen_server.py``,
   SCT Inst booked ``INSTANT_SETTLE_S`` after the transfer is made) with every payee checked
   by the EPC VoP fake first, both served from this process on 127.0.0.1. Target p99 under 2 s.

Run: ``make bench-payouts`` (``DATABASE_URL`` names the database; it is migrated, nothing is
truncated: each run uses its own brand and campaign). ``--events`` and ``--batch`` scale it down
for a smoke run (written to ``bench-results/payouts-smoke.json``).

Checks: every event paid by exactly one transfer (sandbox or Adyen fake), the instant ones
recorded as instant, in transit back to zero, the ledger verifies. The benchmark exits non-zero
only when a check fails. ``--only instant`` runs phase 3 alone.
"""

import argparse
import os
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import date, timedelta
from decimal import Decimal
from pathlib import Path

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.bench")
_STORE = Path(tempfile.mkdtemp(prefix="bench-payouts-")) / "sandbox.sqlite3"
os.environ["SANDBOX_STORE_PATH"] = str(_STORE)
django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402

from bench.common import (  # noqa: E402
    PROJECT_DIR,
    database_url,
    format_table,
    format_targets,
    iban,
    latency_ms,
    meta,
    stop_group,
    target,
    write_results,
)
from bench.common import start_qcluster as common_start_qcluster  # noqa: E402
from campaigns.models import Reward, RewardStatus  # noqa: E402
from campaigns.services import (  # noqa: E402
    EventInput,
    brand_create,
    brand_topup_record,
    campaign_allocate,
    campaign_create,
    campaign_launch,
    event_ingest,
    rule_create,
)
from payouts.models import Payout, PayoutStatus  # noqa: E402
from payouts.rails.base import RailPayment  # noqa: E402
from payouts.rails.sandbox import sandbox_store  # noqa: E402
from payouts.rails.sepa_file import DebtorAccount, build_pain001  # noqa: E402
from payouts.services import in_transit_account, payout_batch_create  # noqa: E402
from payouts.services.create import end_to_end_id_new  # noqa: E402
from recipients.services import IdentityInput, person_resolve  # noqa: E402
from reconciliation.models import AccountKind  # noqa: E402
from reconciliation.selectors import account_balance, ledger_verify_report  # noqa: E402
from reconciliation.services import Leg, account_get_or_create, ledger_entry_post  # noqa: E402
from reconciliation.services.statements import platform_bank_account_create  # noqa: E402
from tests.fakes.adyen_server import FakeAdyen  # noqa: E402
from tests.fakes.vop_server import FakeVop  # noqa: E402

EVENTS = 1_000
BATCH = 10_000
RATE = 2.0  # events per second: what this 2-CPU box sustains with 2 workers (see the report)
DEBTOR_IBAN = "NL91ABNA0417164300"
SETTLE_TIMEOUT_S = 300
# How long the Adyen fake takes to book an SCT Inst (a real one settles within the scheme's 10 s,
# typically in one or two).
INSTANT_SETTLE_S = 0.25


def amounts(n: int) -> list[int]:
    return [1 + (i * 7919) % 250_000 for i in range(n)]


def pain001_file_only(n: int) -> dict:
    payments = [
        RailPayment(
            end_to_end_id=f"JBPBENCH{i:012d}",
            amount_minor=amount,
            currency="EUR",
            creditor_name=f"Person {i}",
            creditor_country="IT",
            creditor_iban=iban(i + 1),
            remittance="JoyBack reward",
            debtor_account_code="platform:bank:bench:EUR",
        )
        for i, amount in enumerate(amounts(n))
    ]
    start = time.perf_counter()
    xml = build_pain001(
        batch_id="JBBBENCH0001",
        debtor=DebtorAccount(name="JoyBack Payouts B.V.", iban=DEBTOR_IBAN),
        payments=payments,
        execution_date=date.today(),
    )
    seconds = time.perf_counter() - start
    return {"payouts": n, "seconds": round(seconds, 3), "bytes": len(xml)}


def pain001_batch_service(n: int, run: str, debtor) -> dict:
    """10,000 payouts owed to one person (seeded directly, payees checked: the payout pipeline is
    phase 2), then the batch service, timed."""
    brand = brand_create(name=f"Bench batch {run}", slug=f"bench-batch-{run}")
    person = person_resolve(
        brand_id=brand.pk,
        identity=IdentityInput(name="Bench Person", email=f"batch-{run}@example.com", iban=iban(9_000_000)),
        source="api",
    )
    bank = person.bank_accounts.get(is_current=True)
    values = amounts(n)
    payable = account_get_or_create(
        code=f"recipient:{person.pk}:payable:EUR", name="payable", kind=AccountKind.LIABILITY, currency="EUR"
    )
    seed = account_get_or_create(
        code="bench:seed:EUR", name="Bench seed", kind=AccountKind.EQUITY, currency="EUR", allow_overdraft=True
    )
    ledger_entry_post(
        idempotency_key=f"bench-payouts:{run}:seed",
        kind="bench_seed",
        legs=[Leg.debit(seed, sum(values)), Leg.credit(payable, sum(values))],
    )
    now = timezone.now()
    created = Payout.objects.bulk_create(
        [
            Payout(
                person=person,
                amount_minor=v,
                currency="EUR",
                rail="sepa_file",
                end_to_end_id=end_to_end_id_new(),
                bank_account=bank,
                creditor_name="Bench Person",
                creditor_iban_masked=bank.masked,
                creditor_country=bank.country,
                debtor_account_code=debtor.ledger_account.code,
                # Checked as each payout's execution task checks it (no VoP service here).
                vop_result="not_possible",
                vop_action="pay",
                vop_checked_at=now,
                created_at=now,
                updated_at=now,
            )
            for v in values
        ],
        batch_size=2000,
    )
    user, _ = get_user_model().objects.get_or_create(username="bench-ops", defaults={"is_staff": True})
    start = time.perf_counter()
    batch = payout_batch_create(actor=user, payout_ids=[p.pk for p in created])
    seconds = time.perf_counter() - start
    checks = {
        "count": batch.count == n,
        "control_sum_exact": batch.control_sum_minor == sum(values)
        and Decimal(batch.control_sum_minor).scaleb(-2) == sum(Decimal(v).scaleb(-2) for v in values),
        "all_submitted": Payout.objects.filter(batch=batch, status=PayoutStatus.SUBMITTED).count() == n,
    }
    return {"payouts": n, "seconds": round(seconds, 3), "checks": checks}


def start_qcluster(workers: int, extra_env: dict[str, str] | None = None) -> subprocess.Popen:
    env = {
        **os.environ,
        "DATABASE_URL": database_url(connection.settings_dict),
        "SANDBOX_STORE_PATH": str(_STORE),
        "Q_WORKERS": str(workers),
        **(extra_env or {}),
    }
    return common_start_qcluster(env=env, log=_STORE.parent / "qcluster.log")


def stop_qcluster(proc: subprocess.Popen) -> None:
    stop_group(proc, limit_s=15)


@dataclass
class InstantFakes:
    """The instant rail's providers, faked in this process, and the worker's settings for them."""

    adyen: FakeAdyen
    vop: FakeVop

    def env(self) -> dict[str, str]:
        return {
            "PAYOUT_DEFAULT_RAIL": "psp_instant",
            "ADYEN_BASE_URL": self.adyen.api_url,
            "ADYEN_API_KEY": self.adyen.api_key,
            "ADYEN_BALANCE_ACCOUNT_ID": self.adyen.balance_account_id,
            "VOP_BASE_URL": self.vop.base_url,
            "VOP_REQUESTER_BIC": "ABNANL2A",
            "VOP_API_TOKEN": self.vop.token,
        }


def end_to_end(n: int, rate: float, run: str, workers: int, *, instant: InstantFakes | None = None) -> dict:
    kind = "instant" if instant else "payouts"
    brand = brand_create(name=f"Bench {kind} {run}", slug=f"bench-{kind}-{run}")
    campaign = campaign_create(
        brand=brand, name="Bench", slug="bench", mode="joyback", starts_at=timezone.now() - timedelta(days=1)
    )
    rule_create(campaign=campaign, trigger="tiktok_login", fixed_minor=500)
    brand_topup_record(
        brand=brand,
        amount_minor=n * 500,
        currency="EUR",
        bank_account_code="BENCH",
        idempotency_key=f"bench-{kind}:{run}:topup",
        reference=brand.funding_reference,
    )
    campaign_allocate(campaign=campaign, amount_minor=n * 500, idempotency_key=f"bench-{kind}:{run}:alloc")
    campaign_launch(campaign=campaign)
    # Each phase pays its own accounts and numbers: people of two brands sharing an IBAN would
    # count for the fraud signal.
    offset = 5_000 if instant else 0
    ibans = [iban(int(run, 16) % 10**6 * 10**4 + offset + i) for i in range(n)]
    if instant:
        for i, account in enumerate(ibans):
            instant.vop.holder(account, f"Person {i}")
    cluster = start_qcluster(workers, instant.env() if instant else None)
    try:
        time.sleep(5)  # the cluster's start-up is not part of any event's latency
        started: dict[int, float] = {}
        t0 = time.time()
        for i in range(n):
            due = t0 + i / rate
            if (pause := due - time.time()) > 0:
                time.sleep(pause)
            sent_at = time.time()
            result = event_ingest(
                brand=brand,
                payload=EventInput(
                    external_id=f"{run}-{i}",
                    campaign="bench",
                    type="tiktok_login",
                    source="tiktok",
                    name=f"Person {i}",
                    # WhatsApp, not email: the bench settings send mail over SMTP, and there is none.
                    whatsapp=f"+39347{int(run, 16) % 1000 * 10_000 + offset + i:07d}",
                    iban=ibans[i],
                ),
            )
            started[result.reward.person_id] = sent_at
        send_seconds = time.time() - t0
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        people = list(started)
        while time.monotonic() < deadline:
            done = Payout.objects.filter(person_id__in=people, status=PayoutStatus.SETTLED).count()
            if done == n and not Reward.objects.filter(campaign=campaign).exclude(status=RewardStatus.PAID).exists():
                break
            if cluster.poll() is not None:
                break
            time.sleep(0.5)
    finally:
        stop_qcluster(cluster)
    settled = dict(
        Payout.objects.filter(person_id__in=people, status=PayoutStatus.SETTLED).values_list("person_id", "settled_at")
    )
    latencies = [settled[p].timestamp() - started[p] for p in people if p in settled]
    payouts = list(Payout.objects.filter(person_id__in=people).values_list("end_to_end_id", "service_level"))
    if instant:
        transfers = {e2e: len(instant.adyen.transfers_for(e2e)) for e2e, _ in payouts}
    else:
        store = sandbox_store(str(_STORE))
        transfers = {e2e: store.transfer_count(e2e) for e2e, _ in payouts}
    checks = {
        "all_settled": len(latencies) == n,
        "one_payout_per_event": len(payouts) == n,
        "one_transfer_each": all(count == 1 for count in transfers.values()),
        "recorded_instant": all(level == "instant" for _, level in payouts),
        "rewards_paid": Reward.objects.filter(campaign=campaign, status=RewardStatus.PAID).count() == n,
    }
    if instant:
        checks["payees_checked_once_each"] = instant.vop.calls("POST") == n
    return {
        "rail": "psp_instant (Adyen fake, EPC VoP fake)" if instant else "sandbox",
        "events": n,
        "rate_per_s": rate,
        "workers": workers,
        "send_seconds": round(send_seconds, 2),
        "latency": latency_ms(latencies),
        "max_ms": round(max(latencies) * 1000, 3) if latencies else None,
        "checks": checks,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, default=EVENTS)
    parser.add_argument("--batch", type=int, default=BATCH)
    parser.add_argument("--rate", type=float, default=RATE, help="events per second sent to event_ingest")
    parser.add_argument("--workers", type=int, default=int(settings.Q_CLUSTER["workers"]))
    parser.add_argument("--only", choices=["instant"], help="run only this phase")
    args = parser.parse_args(argv)
    run = uuid.uuid4().hex[:8]
    call_command("migrate", verbosity=0)
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        postgres = cursor.fetchone()[0]
    debtor = platform_bank_account_create(name="Operating", iban=DEBTOR_IBAN, currency="EUR")
    transit_before = account_balance(account_id=in_transit_account("EUR").pk).posted_minor
    payload: dict = {}
    checks: dict = {}
    targets = []
    rows = []
    if args.only is None:
        print(f"pain.001 file for {args.batch:,} payouts …", flush=True)
        file_only = pain001_file_only(args.batch)
        print(f"payout_batch_create for {args.batch:,} payouts …", flush=True)
        service = pain001_batch_service(args.batch, run, debtor)
        print(f"event_ingest → settled over {args.events:,} events at {args.rate:g}/s with a qcluster …", flush=True)
        e2e = end_to_end(args.events, args.rate, run, args.workers)
        payload |= {"pain001_file": file_only, "pain001_batch_service": service, "end_to_end": e2e}
        checks |= {f"batch_{k}": v for k, v in service["checks"].items()}
        checks |= {f"e2e_{k}": v for k, v in e2e["checks"].items()}
        targets += [
            target("pain.001 file, 10,000 payouts", file_only["seconds"], unit="s", target=5.0, op="<="),
            target("payout_batch_create, 10,000 payouts", service["seconds"], unit="s", target=5.0, op="<="),
            target("event → settled p99", e2e["latency"]["p99_ms"], unit="ms", target=2000.0, op="<="),
        ]
        rows += [
            ["pain.001 file only (s)", file_only["seconds"]],
            ["payout_batch_create (s)", service["seconds"]],
            ["event → settled p50 (ms)", e2e["latency"]["p50_ms"]],
            ["event → settled p99 (ms)", e2e["latency"]["p99_ms"]],
            ["event → settled max (ms)", e2e["max_ms"]],
        ]
    print(f"event_ingest → settled on the instant rail (Adyen and VoP fakes) over {args.events:,} events …", flush=True)
    fakes = InstantFakes(FakeAdyen(instant_settle_seconds=INSTANT_SETTLE_S).start(), FakeVop().start())
    try:
        instant = end_to_end(args.events, args.rate, run, args.workers, instant=fakes)
    finally:
        fakes.adyen.stop()
        fakes.vop.stop()
    payload["end_to_end_instant"] = instant
    checks |= {f"instant_{k}": v for k, v in instant["checks"].items()}
    targets.append(
        target("event → settled p99, instant rail", instant["latency"]["p99_ms"], unit="ms", target=2000.0, op="<=")
    )
    rows += [
        ["instant rail: event → settled p50 (ms)", instant["latency"]["p50_ms"]],
        ["instant rail: event → settled p99 (ms)", instant["latency"]["p99_ms"]],
        ["instant rail: event → settled max (ms)", instant["max_ms"]],
    ]
    transit = account_balance(account_id=in_transit_account("EUR").pk).posted_minor
    open_batch = sum(amounts(args.batch)) if args.only is None else 0
    checks["in_transit_grew_by_the_open_batch_only"] = transit - transit_before == open_batch
    checks["ledger_verifies"] = ledger_verify_report().ok
    payload = {
        "meta": meta(postgres_version=postgres, database=connection.settings_dict["NAME"], run_id=run),
        **payload,
        "checks": checks,
        "all_checks_passed": all(checks.values()),
        "targets": targets,
    }
    full = args.events == EVENTS and args.batch == BATCH and args.only is None
    path = write_results("payouts" if full else "payouts-smoke", payload)
    print(format_table(["measure", "value"], rows))
    print(format_targets(targets))
    print(f"checks: {checks}")
    print(f"\nWritten {path.relative_to(PROJECT_DIR)}", flush=True)
    if not payload["all_checks_passed"]:
        print("SOME CHECKS FAILED: the figures above are not valid.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
