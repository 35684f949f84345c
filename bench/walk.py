"""The walk of one trigger event, from the partner's POST to the bank match: which of the
project's files run, phase by phase.

A structure measure, not a speed one: the fewer files one event passes, the fewer places a new
engineer reads to follow it. The event is real (PostgreSQL, the API through Django's test
client, the sandbox rail, a generated camt.053 imported and matched), and a profile hook records
the file of every project function called. Tests, the benchmarks, migrations and settings are
not counted; Django and the libraries are not the project's.

Phases: ``api`` (the POST, ingestion included), ``ingestion`` (inside ``event_ingest`` alone),
``payout`` (maturing, payout creation and execution), ``bank`` (statement import and matching);
``reactions`` are the other apps' hook receivers that run after a phase's commits
(``core.hooks``), counted apart from the phase; ``total`` is every file of the walk once.
Crossings are calls from one app's file into another app's (core counts as an app here).

Run: ``python -m bench.walk`` (``DATABASE_URL`` names the database; it is migrated, nothing is
truncated: the run uses its own brand). ``--list`` prints the files of each phase. Writes
``bench-results/walk.json``.
"""

import argparse
import os
import sys
import tempfile
import uuid
from collections.abc import Sequence
from datetime import timedelta
from decimal import Decimal
from pathlib import Path

import django

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "config.settings.bench")
os.environ["SANDBOX_STORE_PATH"] = str(Path(tempfile.mkdtemp(prefix="bench-walk-")) / "sandbox.sqlite3")
django.setup()

from django.conf import settings  # noqa: E402
from django.core.management import call_command  # noqa: E402
from django.test import Client  # noqa: E402
from django.utils import timezone  # noqa: E402

from bench.camt_gen import GenLine, GenStatement, write_camt053  # noqa: E402
from bench.common import PROJECT_DIR, format_table, write_results  # noqa: E402
from campaigns.api_keys import api_key_create  # noqa: E402
from campaigns.services import (  # noqa: E402
    brand_create,
    brand_topup_record,
    campaign_allocate,
    campaign_create,
    campaign_launch,
    event_ingest,
    rewards_mature,
    rule_create,
)
from core import hooks  # noqa: E402
from payouts.models import Payout, PayoutStatus  # noqa: E402
from payouts.services import payout_execute, payouts_create_for_payable  # noqa: E402
from reconciliation.models import PlatformBankAccount  # noqa: E402
from reconciliation.services.matching import statement_lines_match  # noqa: E402
from reconciliation.services.statements import platform_bank_account_create, statement_import  # noqa: E402

DEBTOR_IBAN = "NL91ABNA0417164300"
APPS = ("config", "core", "campaigns", "recipients", "payouts", "reconciliation")
_SKIPPED_PARTS = {"tests", "bench", "migrations", "settings", ".venv"}


def iban(n: int) -> str:
    """A valid Italian IBAN of its own for each run (a shared one would trip a fraud signal)."""
    bban = f"X0542811101{n % 10**12:012d}"
    digits = "".join(str(int(ch, 36)) for ch in f"{bban}IT00")
    return f"IT{98 - int(digits) % 97:02d}{bban}"


class Walk:
    """Records, per phase, the project files whose functions are called and the calls that
    cross from one app into another."""

    def __init__(self):
        self.phases: dict[str, set[str]] = {}
        self.crossings: dict[str, set[tuple[str, str]]] = {}
        self._phase = ""
        self._inside: list[str] = []  # phases opened by a function's call
        self._watch = {event_ingest.__code__: "ingestion", hooks._deliver.__code__: "reactions"}
        self._known: dict[str, str | None] = {}

    def _file(self, filename: str) -> str | None:
        known = self._known.get(filename, "")
        if known != "":
            return known
        path = Path(filename)
        try:
            relative = path.resolve().relative_to(PROJECT_DIR)
        except ValueError:
            relative = None
        if relative is None or relative.parts[0] not in APPS or _SKIPPED_PARTS & set(relative.parts):
            self._known[filename] = None
        else:
            self._known[filename] = str(relative)
        return self._known[filename]

    def _hook(self, frame, event, arg):
        if event == "return" and frame.f_code in self._watch and self._inside:
            self._inside.pop()
            return
        if event != "call" or frame.f_code.co_name == "<module>":  # an import is no step of the walk
            return
        here = self._file(frame.f_code.co_filename)
        if frame.f_code in self._watch:
            self._inside.append(self._watch[frame.f_code])
        if here is None:
            return
        caller = frame.f_back
        while caller is not None and self._file(caller.f_code.co_filename) is None:
            caller = caller.f_back
        there = self._file(caller.f_code.co_filename) if caller is not None else None
        reacting = self._inside and self._inside[-1] == "reactions"
        for phase in {"reactions"} if reacting else {self._phase, *self._inside}:
            self.phases.setdefault(phase, set()).add(here)
            if there is not None and there.split("/")[0] != here.split("/")[0]:
                self.crossings.setdefault(phase, set()).add((there, here))

    def run(self, phase: str, action):
        self._phase = phase
        sys.setprofile(self._hook)
        try:
            return action()
        finally:
            sys.setprofile(None)


def setup(run: str):
    brand = brand_create(name=f"Walk {run}", slug=f"walk-{run}")
    campaign = campaign_create(
        brand=brand,
        name="Walk",
        slug="walk",
        mode="joyback",
        starts_at=timezone.now() - timedelta(days=1),
        timezone="Europe/Rome",
    )
    rule_create(campaign=campaign, trigger="tiktok_login", fixed_minor=500, verification="partner_attested")
    brand_topup_record(
        brand=brand,
        amount_minor=100_000,
        currency="EUR",
        bank_account_code="NL00WALK0000000001",
        idempotency_key=f"walk-topup:{run}",
        reference=brand.funding_reference,
    )
    campaign_allocate(campaign=campaign, amount_minor=100_000, idempotency_key=f"walk-allocate:{run}")
    campaign_launch(campaign=campaign)
    token = api_key_create(brand=brand, name="walk", scopes=["events", "read"]).token
    debtor = PlatformBankAccount.objects.filter(iban=DEBTOR_IBAN, currency="EUR").first()
    if debtor is None:
        debtor = platform_bank_account_create(name="Operating", iban=DEBTOR_IBAN, currency="EUR")
    return brand, token, debtor


def statement(payout: Payout, folder: Path, run: str) -> Path:
    path = folder / f"walk-{run}.xml"
    write_camt053(
        path,
        [
            GenStatement(
                statement_id=f"WALK-{run}",
                account_iban=DEBTOR_IBAN,
                currency="EUR",
                opening_balance=Decimal(0),
                lines=[
                    GenLine(
                        amount=Decimal(payout.amount_minor).scaleb(-2),
                        credit_debit="DBIT",
                        end_to_end_id=payout.end_to_end_id,
                    )
                ],
                booking_date=timezone.localdate(),
            )
        ],
        message_id=f"WALK-{run}",
    )
    return path


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--list", action="store_true", help="print the files of each phase")
    args = parser.parse_args(argv)
    call_command("migrate", verbosity=0)
    settings.PAYOUT_ENQUEUE_ON_PAYABLE = False
    settings.PAYOUT_DEFAULT_RAIL = "sandbox"
    run = uuid.uuid4().hex[:8]
    _, token, _ = setup(run)
    walk = Walk()
    client = Client(HTTP_AUTHORIZATION=f"Bearer {token}", HTTP_HOST="127.0.0.1")
    client.get("/api/v1/events/")  # loads the URLs and every view module: the walk is the event's, not the imports'
    body = {
        "external_id": f"walk-{run}",
        "campaign": "walk",
        "type": "tiktok_login",
        "name": "Giulia Rossi",
        "email": f"giulia-{run}@example.com",
        "iban": iban(int(run, 16)),
        "social_provider": "tiktok",
        "social_uid": f"walk-{run}",
    }
    response = walk.run(
        "api",
        lambda: client.post(
            "/api/v1/events/", body, content_type="application/json", HTTP_IDEMPOTENCY_KEY=f"walk-{run}"
        ),
    )
    if response.status_code != 201 or response.json()["event"].get("outcome") not in ("rewarded", "held"):
        print(f"the event was not rewarded: {response.status_code} {response.content[:300]!r}", file=sys.stderr)
        return 1

    def pay() -> Payout:
        rewards_mature()
        (payout_id,) = payouts_create_for_payable(enqueue=False).created
        payout_execute(payout_id=payout_id)
        return Payout.objects.get(pk=payout_id)

    payout = walk.run("payout", pay)
    if payout.status != PayoutStatus.SETTLED:
        print(f"the payout did not settle: {payout.status}", file=sys.stderr)
        return 1
    path = statement(payout, Path(tempfile.mkdtemp(prefix="bench-walk-")), run)

    def bank():
        statement_import(source=path, filename=path.name, origin="command", match=False)
        return statement_lines_match()

    matched = walk.run("bank", bank)
    if sum(matched.matched.values()) != 1:
        print(f"the bank line was not matched: {matched}", file=sys.stderr)
        return 1
    order = ["api", "ingestion", "payout", "bank", "reactions"]
    walk.phases["total"] = set().union(*(walk.phases.get(p, set()) for p in ("api", "payout", "bank", "reactions")))
    walk.crossings["total"] = set().union(
        *(walk.crossings.get(p, set()) for p in ("api", "payout", "bank", "reactions"))
    )
    rows, figures = [], {}
    for phase in [*order, "total"]:
        files = sorted(walk.phases.get(phase, ()))
        by_app = {app: sum(1 for f in files if f.split("/")[0] == app) for app in APPS}
        app_pairs = {(a.split("/")[0], b.split("/")[0]) for a, b in walk.crossings.get(phase, ())}
        figures[phase] = {"files": len(files), "by_app": by_app, "app_crossings": len(app_pairs), "list": files}
        rows.append([phase, len(files), len(app_pairs), *(by_app[a] for a in APPS)])
    print(format_table(["phase", "files", "app pairs crossed", *APPS], rows))
    if args.list:
        for phase in [*order, "total"]:
            print(f"\n{phase}:")
            for name in figures[phase]["list"]:
                print(f"  {name}")
    write_results("walk", {"phases": figures})
    return 0


if __name__ == "__main__":
    sys.exit(main())
