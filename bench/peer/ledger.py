"""The ledger benchmark's peer: django-hordak run through the workloads W1 (1, then 8 processes),
W3 (balance reads) and W2 (hot no-overdraft account) of LEDGER_WORKLOADS.md with the shapes,
barriers, timing and result shape of ``bench/ledger.py`` (both use ``bench/ledger_workloads.py``),
checked after each phase by SQL of its own over hordak's tables, on a PostgreSQL database of its
own next to ours (``bench/peer/settings.py``), written to ``bench-results/ledger-peer.json``.

Run in the peer's virtualenv, from the project folder: ``bench/ledger.py --peer`` (``make
bench-ledger PEER=1``) does it for each workload right after ours; alone:
``.venv-peer/bin/python -m bench.peer.ledger [--n 2000]`` (``DATABASE_URL`` as for ours).

What the peer does, through hordak's public API only (``method`` in the result file says it too):
- a transfer is ``Account.transfer_to()``: one database transaction that inserts a Transaction and
  its two Legs; hordak's deferred trigger checks that the legs balance. hordak has no idempotency
  key: the transfer's key goes into ``Transaction.description``, unique in fact but not enforced
  (a replay would post twice), and the checks count the distinct keys;
- W2: hordak keeps no balance and has no overdraft guard, so each attempt does what a hordak user
  must: in one transaction, lock F's account row (``select_for_update(no_key=True)``, so attempts
  on F run one at a time and none can overdraw it), read F's balance
  (``Account.objects.with_balances()``: a sum over F's legs), refuse below 1.00, else transfer;
- W3 reads each balance with ``Account.objects.with_balances()``, the way hordak's documentation
  recommends (one query);
- W4 is not run: hordak has no batch API.
"""

import argparse
import contextlib
import json
import os
import sys
import time
import uuid
from collections.abc import Sequence
from dataclasses import dataclass
from decimal import Decimal
from importlib.metadata import version

import django

# Its own settings always: an inherited DJANGO_SETTINGS_MODULE names the project's, which this
# virtualenv cannot load.
os.environ["DJANGO_SETTINGS_MODULE"] = "bench.peer.settings"
django.setup()

import psycopg  # noqa: E402
from django.apps import apps  # noqa: E402
from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.db import connection, transaction  # noqa: E402
from hordak.exceptions import AccountingEquationViolationError  # noqa: E402
from hordak.models import Account, AccountType, Leg, Transaction  # noqa: E402
from moneyed import Money  # noqa: E402
from psycopg import sql  # noqa: E402

from bench.common import (  # noqa: E402
    PROJECT_DIR,
    RESULTS_DIR,
    admin_sql,
    latency_ms,
    meta,
    pg_test_fsync_rate,
    with_database,
    write_results,
)
from bench.ledger_workloads import (  # noqa: E402
    ACCOUNTS,
    AMOUNT_MINOR,
    CURRENCY,
    OK,
    REFUSED,
    W1_FUNDING_MINOR,
    WORKERS,
    N,
    format_results,
    load_average,
    print_checks,
    results_name,
    run_transfers,
    w2_funding_minor,
)

PHASES = ("W1_single", "W1_concurrent", "W3", "W2")  # in the order bench/ledger.py runs them
PEER = f"django-hordak {version('django-hordak')}"
METHOD = {
    "transfer": "Account.transfer_to(): one database transaction, a Transaction and two Legs; hordak's deferred "
    "trigger checks the legs balance",
    "idempotency_key": "in Transaction.description: hordak has no key of its own, so uniqueness is not enforced "
    "(the checks count distinct keys)",
    "W2": "per attempt, one transaction: lock F's account row (SELECT … FOR NO KEY UPDATE), read F's balance "
    "(Account.objects.with_balances(), a sum over F's legs), refuse below 1.00, else transfer_to()",
    "W3": "Account.objects.with_balances().get(pk=…) per account: a sum over the account's legs",
    "W4": "not run: hordak has no batch API",
}


def money(minor: int) -> Money:
    return Money(Decimal(minor).scaleb(-2), CURRENCY)


AMOUNT = money(AMOUNT_MINOR)


# --- setup (untimed) -----------------------------------------------------------------------------


def database_create() -> None:
    """Create the peer's database on first use (it lives next to ours, on the same server)."""
    name = connection.settings_dict["NAME"]
    with contextlib.suppress(psycopg.errors.DuplicateDatabase):
        admin_sql(
            with_database(settings.PEER_DATABASE_URL, "postgres"),
            sql.SQL("CREATE DATABASE {}").format(sql.Identifier(name)),
        )


def hordak_tables() -> list[str]:
    return [m._meta.db_table for m in apps.get_app_config("hordak").get_models() if m._meta.managed]


def reset_books() -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"TRUNCATE {', '.join(hordak_tables())} RESTART IDENTITY CASCADE")


def analyze_books() -> None:
    with connection.cursor() as cursor:
        cursor.execute(f"ANALYZE {', '.join(hordak_tables())}")


def create_accounts(prefix: str, count: int, *, kind: AccountType) -> list[Account]:
    """``count`` root accounts, one ``create`` each: hordak's accounts are an MPTT tree, which a
    bulk insert would not number."""
    with transaction.atomic():
        return [
            Account.objects.create(name=f"bench {prefix} {k}", type=kind, currencies=[CURRENCY]) for k in range(count)
        ]


@dataclass
class DisjointBooks:
    """W1 accounts: equity E funds every S[k]; transfer i moves S[k] → D[k]."""

    equity: Account
    sources: list[Account]
    destinations: list[Account]


def setup_disjoint(run: str, phase: str) -> DisjointBooks:
    reset_books()
    equity = create_accounts(f"{phase}:E", 1, kind=AccountType.equity)[0]
    sources = create_accounts(f"{phase}:S", ACCOUNTS, kind=AccountType.asset)
    destinations = create_accounts(f"{phase}:D", ACCOUNTS, kind=AccountType.asset)
    with transaction.atomic():
        for k, source in enumerate(sources):
            # transfer_to credits the account it is called on and debits its argument.
            equity.transfer_to(source, money(W1_FUNDING_MINOR), description=f"{run}:{phase}:fund:{k}")
    analyze_books()
    return DisjointBooks(equity=equity, sources=sources, destinations=destinations)


@dataclass
class HotBooks:
    """W2 accounts: equity E funds the budget F; attempt i moves F → R[k]."""

    equity: Account
    funding: Account
    recipients: list[Account]


def setup_hot(run: str, *, funded_minor: int) -> HotBooks:
    reset_books()
    equity = create_accounts("W2:E", 1, kind=AccountType.equity)[0]
    funding = create_accounts("W2:F", 1, kind=AccountType.liability)[0]
    recipients = create_accounts("W2:R", ACCOUNTS, kind=AccountType.liability)
    funding.transfer_to(equity, money(funded_minor), description=f"{run}:W2:fund")
    analyze_books()
    return HotBooks(equity=equity, funding=funding, recipients=recipients)


def balance_of(account_id: int) -> Money:
    """An account's balance the way hordak recommends reading it: one query summing its legs."""
    return Account.objects.with_balances().get(pk=account_id).balance[CURRENCY]


# --- checks --------------------------------------------------------------------------------------


def books_figures() -> tuple[dict, dict[int, Decimal]]:
    """Independent SQL over hordak's tables (not hordak's own balance function): counts, distinct
    keys, debits vs credits, transactions that do not balance per currency; and each account's
    signed sum of legs, against which hordak's balances are compared."""
    leg, txn, acc = Leg._meta.db_table, Transaction._meta.db_table, Account._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT COUNT(*), COUNT(DISTINCT description) FROM {txn}")
        transactions, distinct_keys = cursor.fetchone()
        cursor.execute(f"SELECT COUNT(*), COALESCE(SUM(debit), 0), COALESCE(SUM(credit), 0) FROM {leg}")
        legs, debits, credits = cursor.fetchone()
        cursor.execute(
            f"SELECT COUNT(*) FROM (SELECT transaction_id FROM {leg} GROUP BY transaction_id, currency "
            f"HAVING SUM(COALESCE(debit, 0) - COALESCE(credit, 0)) <> 0) AS bad"
        )
        unbalanced = cursor.fetchone()[0]
        cursor.execute(
            f"""SELECT a.id, CASE WHEN a.type IN ('AS', 'EX') THEN -1 ELSE 1 END
                             * COALESCE(SUM(COALESCE(l.credit, 0) - COALESCE(l.debit, 0)), 0)
                  FROM {acc} a LEFT JOIN {leg} l ON l.account_id = a.id
                 GROUP BY a.id, a.type"""
        )
        sums = dict(cursor.fetchall())
    hordak = {a.pk: a.balance[CURRENCY].amount for a in Account.objects.with_balances()}
    figures = {
        "transactions": transactions,
        "distinct_keys": distinct_keys,
        "legs": legs,
        "debits": str(debits),
        "credits": str(credits),
        "debits_equal_credits": debits == credits,
        "unbalanced_transactions": unbalanced,
        "hordak_balances_differing_from_sums_of_legs": sum(1 for pk, total in sums.items() if hordak.get(pk) != total),
    }
    return figures, sums


def accounting_equation_holds() -> bool:
    try:
        Account.validate_accounting_equation()
    except AccountingEquationViolationError:
        return False
    return True


def common_checks(figures: dict, *, transactions: int) -> dict:
    return {
        f"transactions_{transactions}": figures["transactions"] == transactions,
        f"legs_{2 * transactions}": figures["legs"] == 2 * transactions,
        "idempotency_keys_distinct": figures["distinct_keys"] == transactions,
        "debits_equal_credits": figures["debits_equal_credits"],
        "no_transaction_unbalanced_per_currency": figures["unbalanced_transactions"] == 0,
        "hordak_balances_equal_sums_of_legs": figures["hordak_balances_differing_from_sums_of_legs"] == 0,
        "hordak_accounting_equation_ok": accounting_equation_holds(),
    }


def with_checks(result: dict, figures: dict, checks: dict) -> dict:
    result["observed"] = figures
    result["checks"] = {**checks, "all_passed": all(checks.values())}
    return result


def check_disjoint(result: dict, books: DisjointBooks, *, n: int) -> dict:
    per_account = n // ACCOUNTS
    figures, sums = books_figures()
    checks = {
        f"ok_{n}_refused_0_errors_0": (result["ok"], result["refused"], result["errors"]) == (n, 0, 0),
        **common_checks(figures, transactions=n + ACCOUNTS),
        "every_D_holds_its_transfers": all(
            sums[d.pk] == money(per_account * AMOUNT_MINOR).amount for d in books.destinations
        ),
        "every_S_holds_the_rest": all(
            sums[s.pk] == money(W1_FUNDING_MINOR - per_account * AMOUNT_MINOR).amount for s in books.sources
        ),
    }
    return with_checks(result, figures, checks)


def check_hot(result: dict, books: HotBooks, *, n: int, funded_minor: int) -> dict:
    expected_ok = min(n, funded_minor // AMOUNT_MINOR)
    figures, sums = books_figures()
    recipients_total = sum(sums[r.pk] for r in books.recipients)
    checks = {
        f"ok_{expected_ok}": result["ok"] == expected_ok,
        f"refused_{n - expected_ok}": result["refused"] == n - expected_ok,
        "errors_0": result["errors"] == 0,
        "F_at_0.00": sums[books.funding.pk] == money(funded_minor - expected_ok * AMOUNT_MINOR).amount,
        "recipients_hold_the_successes": recipients_total == money(expected_ok * AMOUNT_MINOR).amount,
        # A refusal writes nothing: no transaction, no leg beyond the successes and the funding.
        **common_checks(figures, transactions=expected_ok + 1),
    }
    figures |= {"F_balance": str(sums[books.funding.pk]), "recipients_total": str(recipients_total)}
    return with_checks(result, figures, checks)


# --- workloads -----------------------------------------------------------------------------------


def peer_transfers(*, workers: int, n: int, pairs: Sequence[tuple[int, int]], key_prefix: str) -> dict:
    """Transfer i moves 1.00 EUR from ``pairs[i mod len(pairs)]`` = (credited id, debited id)
    with ``Account.transfer_to()``, one transaction each, keyed ``key_prefix:i``."""

    def prepare() -> list[tuple[Account, Account]]:
        accounts = Account.objects.in_bulk({account_id for pair in pairs for account_id in pair})
        return [(accounts[cr], accounts[dr]) for cr, dr in pairs]

    def attempt(accounts_by_k: list[tuple[Account, Account]], i: int) -> str:
        credited, debited = accounts_by_k[i % len(pairs)]
        credited.transfer_to(debited, AMOUNT, description=f"{key_prefix}:{i}")
        return OK

    return run_transfers(workers=workers, n=n, prepare=prepare, attempt=attempt)


def workload_w1(run: str, *, phase: str, workers: int, n: int) -> tuple[dict, DisjointBooks]:
    books = setup_disjoint(run, phase)
    # S and D are assets: money leaving S credits it, money arriving in D debits it.
    pairs = [(s.pk, d.pk) for s, d in zip(books.sources, books.destinations, strict=True)]
    result = peer_transfers(workers=workers, n=n, pairs=pairs, key_prefix=f"{run}:{phase}")
    return check_disjoint(result, books, n=n), books


def workload_w2(run: str, *, n: int) -> dict:
    funded = w2_funding_minor(n)
    books = setup_hot(run, funded_minor=funded)
    funding_id = books.funding.pk
    recipient_ids = [r.pk for r in books.recipients]

    def prepare() -> list[Account]:
        by_id = Account.objects.in_bulk(recipient_ids)
        return [by_id[pk] for pk in recipient_ids]

    def attempt(recipients: list[Account], i: int) -> str:
        with transaction.atomic():
            # hordak has no overdraft guard: the lock on F makes check-then-transfer one step at a time.
            funding = Account.objects.select_for_update(no_key=True).get(pk=funding_id)
            if balance_of(funding_id) < AMOUNT:
                return REFUSED
            # F and R are liabilities: money leaving F debits it, money arriving in R credits it.
            recipients[i % ACCOUNTS].transfer_to(funding, AMOUNT, description=f"{run}:W2:{i}")
        return OK

    result = run_transfers(workers=WORKERS, n=n, prepare=prepare, attempt=attempt)
    return check_hot(result, books, n=n, funded_minor=funded)


def workload_w3(books: DisjointBooks, *, n: int) -> dict:
    """Read each D[k] once, one call at a time, through hordak's balance query."""
    expected = money((n // ACCOUNTS) * AMOUNT_MINOR)
    connection.ensure_connection()
    latencies: list[float] = []
    wrong = 0
    start = time.monotonic()
    for account in books.destinations:
        began = time.monotonic()
        balance = balance_of(account.pk)
        latencies.append(time.monotonic() - began)
        if balance != expected:
            wrong += 1
    wall = time.monotonic() - start
    checks = {"reads_1000": len(latencies) == ACCOUNTS, "wrong_balances_0": wrong == 0}
    return {
        "workers": 1,
        "reads": len(latencies),
        "wall_s": round(wall, 4),
        "reads_per_s": round(len(latencies) / wall, 1),
        "latency": latency_ms(latencies),
        "wrong_balances": wrong,
        "checks": {**checks, "all_passed": all(checks.values())},
    }


# --- run -----------------------------------------------------------------------------------------


def run_meta(run: str) -> dict:
    print("Measuring pg_test_fsync (fdatasync, 1 s) …", flush=True)
    fsync = pg_test_fsync_rate()
    with connection.cursor() as cursor:
        cursor.execute("SHOW server_version")
        postgres = cursor.fetchone()[0]
        cursor.execute("SHOW synchronous_commit")
        synchronous_commit = cursor.fetchone()[0]
        cursor.execute("SHOW fsync")
        fsync_setting = cursor.fetchone()[0]
    return meta(
        postgres_version=postgres,
        fsync_rate=fsync,
        database=connection.settings_dict["NAME"],
        synchronous_commit=synchronous_commit,
        fsync=fsync_setting,
        run_id=run,
        peer=PEER,
        django=django.get_version(),
        load_average_by_phase={},
    )


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n", type=int, default=N, help="transfers per workload (the spec's is 20000; less: smoke)")
    parser.add_argument(
        "--phase",
        action="append",
        choices=PHASES,
        help="run only this workload (repeatable; default all); W3 reads W1_concurrent's books, so needs it too",
    )
    parser.add_argument(
        "--run-id",
        help="the run this belongs to: results are added to the result file when it holds the same run "
        "(bench/ledger.py --peer runs the workloads one by one); otherwise the file starts afresh",
    )
    args = parser.parse_args(argv)
    n = args.n
    if n <= 0 or n % ACCOUNTS:
        parser.error(f"--n must be a positive multiple of {ACCOUNTS}")
    phases = [p for p in PHASES if p in (args.phase or PHASES)]
    if "W3" in phases and "W1_concurrent" not in phases:
        parser.error("W3 reads the balances W1_concurrent leaves: ask for both")
    run = args.run_id or uuid.uuid4().hex[:8]
    database_create()
    call_command("migrate", verbosity=0)

    path = RESULTS_DIR / f"{results_name('ledger-peer', n)}.json"
    previous = json.loads(path.read_text()) if args.run_id and path.exists() else {}
    if previous.get("meta", {}).get("run_id") == run and previous.get("n") == n:
        payload = previous
    else:
        payload = {"n": n, "meta": run_meta(run), "method": METHOD, "results": {}}
    results, loads = payload["results"], payload["meta"]["load_average_by_phase"]

    if "W1_single" in phases:
        print(f"peer {PEER}: W1 single process …", flush=True)
        loads["W1_single"] = load_average()
        results["W1_single"], _ = workload_w1(run, phase="W1s", workers=1, n=n)
        print_checks("peer W1_single", results["W1_single"]["checks"])
    if "W1_concurrent" in phases:
        print(f"peer {PEER}: W1 {WORKERS} processes …", flush=True)
        loads["W1_concurrent"] = load_average()
        results["W1_concurrent"], w1_books = workload_w1(run, phase="W1c", workers=WORKERS, n=n)
        print_checks("peer W1_concurrent", results["W1_concurrent"]["checks"])
    if "W3" in phases:
        print(f"peer {PEER}: W3 balance reads …", flush=True)
        loads["W3"] = load_average()
        results["W3"] = workload_w3(w1_books, n=n)
        print_checks("peer W3", results["W3"]["checks"])
    if "W2" in phases:
        print(f"peer {PEER}: W2 hot account, lock then check then transfer, {WORKERS} processes …", flush=True)
        loads["W2"] = load_average()
        results["W2"] = workload_w2(run, n=n)
        print_checks("peer W2", results["W2"]["checks"])
    payload["meta"]["load_average_at_end"] = load_average()
    payload["all_checks_passed"] = all(x["checks"]["all_passed"] for x in results.values())

    write_results(path.stem, payload)
    print(f"\npeer {PEER}  n={n:,}  run {run}")
    now = {p: results[p] for p in phases}
    print(format_results(now, transfers=[p for p in phases if p != "W3"]))
    print(f"Written {path.relative_to(PROJECT_DIR)}", flush=True)
    if not all(results[p]["checks"]["all_passed"] for p in phases):
        print("SOME PEER CHECKS FAILED: the peer's figures above are not valid.", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
