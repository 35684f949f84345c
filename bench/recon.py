"""Reconciliation benchmark, on PostgreSQL: a generated camt.053 with N entries (default 100,000)
against N submitted payouts; time and peak memory of import + match.

Setup (untimed): N payouts owed to one person are created and sent in pain.001 batches of 10,000
(``payout_batch_create``: payable → in transit), and a camt.053.001.08 is written with one debit
line per payout (its EndToEndId and amount), streamed to disk by ``bench.camt_gen``.

Timed, in a fresh child process so its peak RSS is the import's alone: ``statement_import``
(stream-parse, all-or-nothing insert), then ``statement_lines_match`` in ``--match-workers``
processes (default: ``Q_CLUSTER["workers"]``, 2 unless ``Q_WORKERS`` says otherwise — the import
enqueues one match task per worker, and they share the chunks under SKIP LOCKED). Peak RSS is the
largest of the import process and each match worker, each read from its own ``VmHWM``: a spawned
process's ``ru_maxrss`` starts at its parent's RSS (Linux keeps it across exec), which would report
the seeding parent's memory instead. Targets: under 60 s, under 300 MB peak.

Checks: every line matched, every payout settled, in transit back to zero, ``ledger_verify`` ok.
Run: ``make bench-recon`` (``DATABASE_URL`` names the database: migrated, nothing truncated).
``--n`` scales it down (written to ``bench-results/recon-smoke.json``).
"""

import argparse
import multiprocessing
import os
import resource
import sys
import tempfile
import time
import uuid
from collections.abc import Sequence
from datetime import date
from decimal import Decimal
from pathlib import Path

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.bench")
django.setup()

from django.conf import settings  # noqa: E402
from django.contrib.auth import get_user_model  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection  # noqa: E402
from django.utils import timezone  # noqa: E402

from bench.camt_gen import GenLine, GenStatement, write_camt053  # noqa: E402
from bench.common import format_table, format_targets, meta, target, write_results  # noqa: E402
from campaigns.services import brand_create  # noqa: E402
from payouts.models import Payout, PayoutEvent, PayoutStatus  # noqa: E402
from payouts.services import in_transit_account, payout_batch_create  # noqa: E402
from payouts.services.create import end_to_end_id_new  # noqa: E402
from recipients.services import IdentityInput, person_resolve  # noqa: E402
from reconciliation.models import (  # noqa: E402
    Account,
    AccountKind,
    JournalEntry,
    Posting,
    StatementLine,
    StatementLineStatus,
)
from reconciliation.selectors import account_balance, ledger_verify_report  # noqa: E402
from reconciliation.services import Leg, account_get_or_create, ledger_entry_post  # noqa: E402
from reconciliation.services.statements import platform_bank_account_create  # noqa: E402

BATCH = 10_000
DEBTOR_IBAN = "NL91ABNA0417164300"


def seed_payouts(n: int, run: str) -> list[tuple[str, int]]:
    """N payouts sent to the rail (in transit), as (end_to_end_id, amount_minor)."""
    bank = platform_bank_account_create(name="Operating", iban=DEBTOR_IBAN, currency="EUR", bic="ABNANL2A")
    brand = brand_create(name=f"Recon bench {run}", slug=f"recon-bench-{run}")
    person = person_resolve(
        brand_id=brand.pk,
        identity=IdentityInput(name="Recon Bench", email=f"recon-{run}@example.com", iban="NL02ABNA0123456789"),
        source="api",
    )
    account = person.bank_accounts.get(is_current=True)
    amounts = [100 + (i * 37) % 9_000 for i in range(n)]
    payable = account_get_or_create(
        code=f"recipient:{person.pk}:payable:EUR", name="payable", kind=AccountKind.LIABILITY, currency="EUR"
    )
    seed = account_get_or_create(
        code="bench:seed:EUR", name="Bench seed", kind=AccountKind.EQUITY, currency="EUR", allow_overdraft=True
    )
    ledger_entry_post(
        idempotency_key=f"bench-recon:{run}:seed",
        kind="bench_seed",
        legs=[Leg.debit(seed, sum(amounts)), Leg.credit(payable, sum(amounts))],
    )
    user, _ = get_user_model().objects.get_or_create(username="bench-ops", defaults={"is_staff": True})
    now = timezone.now()
    out = []
    for start in range(0, n, BATCH):
        part = amounts[start : start + BATCH]
        created = Payout.objects.bulk_create(
            [
                Payout(
                    person=person,
                    amount_minor=v,
                    currency="EUR",
                    rail="sepa_file",
                    end_to_end_id=end_to_end_id_new(),
                    bank_account=account,
                    creditor_name="Recon Bench",
                    creditor_iban_masked=account.masked,
                    creditor_country=account.country,
                    debtor_account_code=bank.ledger_account.code,
                    # Checked as each payout's execution task checks it (no VoP service here).
                    vop_result="not_possible",
                    vop_action="pay",
                    vop_checked_at=now,
                    created_at=now,
                    updated_at=now,
                )
                for v in part
            ],
            batch_size=2000,
        )
        payout_batch_create(actor=user, payout_ids=[p.pk for p in created])
        out += [(p.end_to_end_id, p.amount_minor) for p in created]
    _analyze()
    return out


def _analyze() -> None:
    """Planner statistics for what the setup wrote. A deployment's autovacuum keeps them; this
    server may run without it (``autovacuum = off``), and plans made on no statistics at all are
    not the ones production gets. The statement lines arrive in the timed part with none, as they
    do in production, where no analyze runs between an import and its matching."""
    with connection.cursor() as cursor:
        for model in (Payout, PayoutEvent, JournalEntry, Posting, Account):
            cursor.execute(f"ANALYZE {model._meta.db_table}")


def write_statement(path: Path, payouts: list[tuple[str, int]], run: str) -> None:
    def lines():
        for e2e, amount in payouts:
            yield GenLine(
                amount=Decimal(amount).scaleb(-2),
                credit_debit="DBIT",
                end_to_end_id=e2e,
                counterparty_name="Recon Bench",
                remittance="Reward payout",
                booking_date=date.today(),
            )

    total = Decimal(sum(a for _, a in payouts)).scaleb(-2)
    write_camt053(
        path,
        [
            GenStatement(
                statement_id=f"RECON-{run}",
                account_iban=DEBTOR_IBAN,
                currency="EUR",
                opening_balance=total,
                lines=lines,
                booking_date=date.today(),
            )
        ],
        message_id=f"RECON-{run}",
    )


def _match_worker(ids: list[int], queue) -> None:
    """One of the match workers: the engine takes chunks under SKIP LOCKED, so workers running
    over the same lines split them without coordination, as django-q2 workers do in production."""
    import django as dj

    dj.setup()
    from django.db import connection as conn

    from reconciliation.services.matching import statement_lines_match

    run = statement_lines_match(line_ids=ids)
    conn.close()
    queue.put((dict(run.matched), run.unmatched, _peak_rss_mb()))


def _peak_rss_mb() -> float:
    """This process's own peak resident memory: ``VmHWM`` belongs to the address space made at exec,
    unlike ``ru_maxrss``, which a spawned child inherits from the parent it was forked from."""
    try:
        with open("/proc/self/status") as status:
            for row in status:
                if row.startswith("VmHWM:"):
                    return int(row.split()[1]) / 1024
    except OSError:
        pass
    return resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024


def _timed_child(path: str, queue, import_only: bool, match_workers: int) -> None:
    """Runs in a fresh process: import + match, reporting seconds and this process's peak RSS."""
    import django as dj

    dj.setup()
    from django.db import connection as conn

    from reconciliation.services.statements import statement_import

    base_rss = _peak_rss_mb()
    start = time.perf_counter()
    result = statement_import(source=path, filename=os.path.basename(path), origin="command", match=False)
    imported = time.perf_counter()
    ids = list(
        StatementLine.objects.filter(statement__in=result.statements, status=StatementLineStatus.NEW).values_list(
            "pk", flat=True
        )
    )
    matched: dict[str, int] = {}
    unmatched = 0
    worker_rss = 0.0
    if not import_only and match_workers == 1:
        from reconciliation.services.matching import statement_lines_match

        run = statement_lines_match(line_ids=ids)
        matched, unmatched = dict(run.matched), run.unmatched
    elif not import_only:
        conn.close()
        ctx = multiprocessing.get_context("spawn")
        results = ctx.Queue()
        workers = [ctx.Process(target=_match_worker, args=(ids, results)) for _ in range(match_workers)]
        for worker in workers:
            worker.start()
        for _ in workers:
            part, left, rss = results.get()
            unmatched += left
            worker_rss = max(worker_rss, rss)
            for name, count in part.items():
                matched[name] = matched.get(name, 0) + count
        for worker in workers:
            worker.join()
    done = time.perf_counter()
    conn.close()
    queue.put(
        {
            "import_s": round(imported - start, 2),
            "match_s": round(done - imported, 2),
            "total_s": round(done - start, 2),
            "new_lines": result.new_lines,
            "matched": matched,
            "unmatched": unmatched,
            "match_workers": 0 if import_only else match_workers,
            "peak_rss_mb": round(max(_peak_rss_mb(), worker_rss), 1),
            "rss_at_start_mb": round(base_rss, 1),
        }
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=100_000, help="entries and payouts (100000: full)")
    parser.add_argument("--import-only", action="store_true", help="time the import alone (no matching)")
    # What a deployment runs by default: the import enqueues one match task per worker of the
    # cluster (``Q_CLUSTER["workers"]``, Q_WORKERS, 2 unless set), and they share the chunks.
    parser.add_argument(
        "--match-workers",
        type=int,
        default=max(1, int(settings.Q_CLUSTER.get("workers", 1))),
        help="processes matching in parallel (default: the cluster's workers, as the import enqueues)",
    )
    args = parser.parse_args(argv)
    n = args.n
    call_command("migrate", verbosity=0)
    run = uuid.uuid4().hex[:8]
    print(f"Seeding {n:,} payouts in transit …", flush=True)
    t0 = time.perf_counter()
    payouts = seed_payouts(n, run)
    in_transit = in_transit_account("EUR")
    before = account_balance(account_id=in_transit.pk).posted_minor
    with tempfile.TemporaryDirectory(prefix="bench-recon-") as tmp:
        path = Path(tmp) / f"camt053-{run}.xml"
        write_statement(path, payouts, run)
        size_mb = path.stat().st_size / 1e6
        print(f"  setup {time.perf_counter() - t0:.1f} s; statement {size_mb:.1f} MB", flush=True)
        connection.close()
        ctx = multiprocessing.get_context("spawn")
        queue = ctx.Queue()
        child = ctx.Process(target=_timed_child, args=(str(path), queue, args.import_only, args.match_workers))
        print("Import + match (timed, fresh process) …", flush=True)
        child.start()
        figures = queue.get()
        child.join()
    settled = Payout.objects.filter(end_to_end_id__in=[e for e, _ in payouts], status=PayoutStatus.SETTLED).count()
    after = account_balance(account_id=in_transit.pk).posted_minor
    checks = {
        f"lines_imported_{n}": figures["new_lines"] == n,
        "every_line_matched": sum(figures["matched"].values()) == n and figures["unmatched"] == 0,
        "every_payout_settled": settled == n,
        "in_transit_down_by_the_total": before - after == sum(a for _, a in payouts),
        "ledger_verify_ok": ledger_verify_report().ok,
    }
    targets = [
        target("import_and_match_seconds", figures["total_s"], unit="s", target=60, op="<="),
        target("peak_rss_mb", figures["peak_rss_mb"], unit="MB", target=300, op="<="),
    ]
    print()
    print(
        format_table(
            ["entries", "file MB", "import s", "match s", "total s", "peak RSS MB", "matched"],
            [
                [
                    f"{n:,}",
                    f"{size_mb:.1f}",
                    figures["import_s"],
                    figures["match_s"],
                    figures["total_s"],
                    figures["peak_rss_mb"],
                    figures["matched"],
                ]
            ],
        )
    )
    print("checks: " + ", ".join(f"{k} {'ok' if v else 'FAILED'}" for k, v in checks.items()))
    print(format_targets(targets))
    payload = {
        "n": n,
        "meta": meta(postgres_version=_pg_version()),
        "results": {**figures, "file_mb": round(size_mb, 1), "checks": {**checks, "all_passed": all(checks.values())}},
        "targets": targets,
    }
    name = "recon" if n == 100_000 and not args.import_only else "recon-smoke"
    print(f"Written {write_results(name, payload)}")
    return 0 if all(checks.values()) else 1


def _pg_version() -> str:
    with connection.cursor() as cursor:
        cursor.execute("SELECT version()")
        return cursor.fetchone()[0].split(" on ")[0]


if __name__ == "__main__":
    sys.exit(main())
