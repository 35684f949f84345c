"""The partner of ``deploy/cluster.py --check`` (issue 30): imported by it once Django is set up
against the cluster's database, directly (not through PgBouncer).

A live brand with a funded campaign and an API key, made straight in the database; N events sent
over HTTP to the two web nodes, each twice (the second time to the other node with the same
``Idempotency-Key`` and ``external_id``), a quarter of them in bulk calls sent twice the same way,
from a few threads at once; then a bounded wait until every reward is paid, every payout settled
and every queue empty, and the checks that nothing was doubled or lost: N events, N rewards, one
payout per person, one transfer per payout at the sandbox bank, nothing failed, the ledger
verifies, the queues drained.
"""

import json
import threading
import time
import urllib.error
import urllib.request
import uuid
from collections import Counter
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path

from django.utils import timezone
from django_q.models import OrmQ

from bench.common import iban
from campaigns.api_keys import api_key_create
from campaigns.models import Reward, RewardStatus, TriggerEvent
from campaigns.services import (
    brand_create,
    brand_topup_record,
    campaign_allocate,
    campaign_create,
    campaign_launch,
    rule_create,
)
from payouts.models import Payout, PayoutStatus
from payouts.rails.sandbox import sandbox_store
from reconciliation.selectors import ledger_verify_report
from reconciliation.services.statements import platform_bank_account_create
from web.demo_bank import PLATFORM_IBAN

REWARD_MINOR = 500
BULK_SHARE = 4  # one event in four comes through a bulk call
BULK_SIZE = 10
SENDERS = 4  # partner threads sending at once


def post(url: str, *, token: str, key: str, body: dict) -> tuple[int, dict, bool]:
    """Status, JSON body and whether the node answered with a stored response (``Idempotent-Replayed``)."""
    request = urllib.request.Request(  # noqa: S310 - our own node
        url,
        data=json.dumps(body).encode(),
        method="POST",
        headers={"Authorization": f"Bearer {token}", "Idempotency-Key": key, "Content-Type": "application/json"},
    )
    try:
        with urllib.request.urlopen(request, timeout=60) as response:  # noqa: S310 - our own node
            replayed = response.headers.get("Idempotent-Replayed") == "true"
            return response.status, json.loads(response.read() or b"{}"), replayed
    except urllib.error.HTTPError as exc:
        return exc.code, {"error": exc.read()[:500].decode(errors="replace")}, False


def partner_setup(run: str, n: int):
    """A live brand, a funded campaign (tiktok_login, a fixed reward, paid on the default rail: the
    sandbox in these settings) and an API key, made here straight in the database."""
    platform_bank_account_create(name="Operating account (demo bank)", iban=PLATFORM_IBAN, currency="EUR")
    brand = brand_create(name=f"Cluster check {run}", slug=f"cluster-check-{run}")
    campaign = campaign_create(
        brand=brand, name="Cluster check", slug="check", mode="joyback", starts_at=timezone.now()
    )
    # No hold, no review: every event is payable at once and paid by the money clusters.
    rule_create(campaign=campaign, trigger="tiktok_login", fixed_minor=REWARD_MINOR, verification="partner_attested")
    funds = 2 * n * REWARD_MINOR  # the reward and any fee
    brand_topup_record(
        brand=brand,
        amount_minor=funds,
        currency="EUR",
        bank_account_code="CLUSTER",
        idempotency_key=f"cluster-check:{run}:topup",
        reference=brand.funding_reference,
    )
    campaign_allocate(campaign=campaign, amount_minor=funds, idempotency_key=f"cluster-check:{run}:alloc")
    campaign_launch(campaign=campaign)
    token = api_key_create(brand=brand, name="cluster check", scopes=["read", "write", "events"]).token
    return brand, campaign, token


def partner_send(nodes: list[str], *, run: str, n: int, token: str) -> dict:
    """N events, each sent twice: to one node, then to the other with the same Idempotency-Key
    (and the same external_id). A quarter go in bulk calls of BULK_SIZE, each call sent twice the
    same way. Returns what the partner saw."""
    seed = int(run, 16) % 10**6 * 10**5

    def event(i: int) -> dict:
        return {
            "external_id": f"{run}-{i}",
            "campaign": "check",
            "type": "tiktok_login",
            "name": f"Person {i}",
            "email": f"person{i}.{run}@example.com",
            "iban": iban(seed + i),
        }

    bulk_from = n - n // BULK_SHARE
    jobs = [("single", [i]) for i in range(bulk_from)]
    jobs += [("bulk", list(range(c, min(n, c + BULK_SIZE)))) for c in range(bulk_from, n, BULK_SIZE)]
    lock = threading.Lock()
    seen = {"requests": 0, "unexpected": [], "not_replayed": [], "replay_differs": [], "not_rewarded": []}

    def send(k: int) -> None:
        kind, indices = jobs[k]
        first, second = nodes[k % 2], nodes[(k + 1) % 2]
        key = f"cluster-check-{run}-{kind}-{indices[0]}"
        if kind == "single":
            path, body = "/api/v1/events/", event(indices[0])
        else:
            path, body = "/api/v1/events/bulk/", {"events": [event(i) for i in indices]}
        answers = [post(f"{node}{path}", token=token, key=key, body=body) for node in (first, second)]
        with lock:
            seen["requests"] += 2
            for status, payload, _ in answers:
                if status not in (200, 201):
                    seen["unexpected"].append(f"{kind} {indices[0]}: HTTP {status} {payload}"[:300])
            if answers[0][2] or not answers[1][2]:  # the first ran, the second was the stored answer
                seen["not_replayed"].append(f"{kind} {indices[0]}")
            if answers[0][:2] != answers[1][:2]:
                seen["replay_differs"].append(f"{kind} {indices[0]}")
            status, payload, _ = answers[0]
            outcomes = (
                [payload.get("event", {}).get("outcome")]
                if kind == "single"
                else [r.get("outcome") for r in payload.get("results", [])]
            )
            if status in (200, 201) and any(o != "rewarded" for o in outcomes):
                seen["not_rewarded"].append(f"{kind} {indices[0]}: {outcomes}"[:300])

    began = time.monotonic()
    with ThreadPoolExecutor(SENDERS) as pool:
        list(pool.map(send, range(len(jobs))))
    seen["seconds"] = round(time.monotonic() - began, 2)
    seen["single_events"], seen["bulk_calls"] = bulk_from, len(jobs) - bulk_from
    for key in ("unexpected", "not_replayed", "replay_differs", "not_rewarded"):
        seen[key] = seen[key][:10] + ([f"... {len(seen[key]) - 10} more"] if len(seen[key]) > 10 else [])
    return seen


def pipeline_state(campaign) -> dict:
    """Where the campaign's rewards and payouts are, and how many tasks wait in every queue."""
    rewards = Reward.objects.filter(campaign=campaign)
    payouts = Payout.objects.filter(items__reward__campaign=campaign).distinct()
    return {
        "rewards": rewards.count(),
        "rewards_paid": rewards.filter(status=RewardStatus.PAID).count(),
        "payouts": payouts.count(),
        "payouts_settled": payouts.filter(status=PayoutStatus.SETTLED).count(),
        "queued_tasks": OrmQ.objects.count(),
    }


def partner_wait(campaign, *, n: int, limit_s: float, exited: Callable[[], dict]) -> tuple[dict, float | None]:
    """Poll until every reward is paid, every payout settled and every queue empty at one glance;
    the last state seen and the seconds it took (None when ``limit_s`` passed first)."""
    began = time.monotonic()
    while True:
        state = pipeline_state(campaign)
        done = (
            state["rewards"] == state["rewards_paid"] == n
            and state["payouts"] == state["payouts_settled"] > 0
            and state["queued_tasks"] == 0
        )
        if done:
            return state, round(time.monotonic() - began, 1)
        if time.monotonic() - began > limit_s or exited():
            return state, None
        time.sleep(1)


def partner_checks(brand, campaign, *, n: int, seen: dict, state: dict, store: Path) -> dict[str, bool]:
    """Nothing doubled or lost: each check by name, True when it passed."""
    events = TriggerEvent.objects.filter(brand=brand)
    rewards = list(Reward.objects.filter(campaign=campaign).values_list("person_id", "status"))
    people = {p for p, _ in rewards}
    payouts = list(Payout.objects.filter(person_id__in=people).values_list("person_id", "status", "end_to_end_id"))
    per_person = Counter(p for p, _, _ in payouts)
    bank = sandbox_store(str(store))
    transfers = {e2e: bank.transfers(e2e) for _, _, e2e in payouts}
    return {
        "every_request_accepted": not seen["unexpected"],
        "every_second_send_replayed": not seen["not_replayed"],
        "every_replay_answered_the_same": not seen["replay_differs"],
        "every_event_rewarded_at_once": not seen["not_rewarded"],
        "exactly_n_events": events.count() == n and events.values("external_id").distinct().count() == n,
        "exactly_n_rewards": len(rewards) == n,
        "one_reward_per_person": len(people) == n,
        "every_reward_paid": all(s == RewardStatus.PAID for _, s in rewards),
        "one_payout_per_person": set(per_person) == people and all(c == 1 for c in per_person.values()),
        "every_payout_settled": bool(payouts) and all(s == PayoutStatus.SETTLED for _, s, _ in payouts),
        "one_sandbox_transfer_each": all(len(t) == 1 for t in transfers.values()),
        "every_transfer_settled_at_the_bank": all(t and t[-1]["status"] == "settled" for t in transfers.values()),
        "ledger_verifies": ledger_verify_report().ok,
        "queues_drained": state["queued_tasks"] == 0,
    }


def check(*, nodes: list[str], store: Path, n: int, wait_s: float, exited: Callable[[], dict]) -> dict:
    """The whole check against the web nodes at ``nodes`` (base URLs) whose sandbox bank is
    ``store``; ``exited`` names the cluster's processes that have exited (none, while it runs)."""
    run = uuid.uuid4().hex[:8]
    brand, campaign, token = partner_setup(run, n)
    print(f"  check {run}: {n} events, each sent twice, to {' and '.join(nodes)} …", flush=True)
    seen = partner_send(nodes, run=run, n=n, token=token)
    print(f"  sent in {seen['seconds']} s; waiting for the payouts (at most {wait_s:.0f} s) …", flush=True)
    state, paid_in = partner_wait(campaign, n=n, limit_s=wait_s, exited=exited)
    checks = partner_checks(brand, campaign, n=n, seen=seen, state=state, store=store)
    gone = exited()
    checks["no_process_exited"] = not gone
    checks["paid_within_the_wait"] = paid_in is not None
    return {
        "run": run,
        "events": n,
        "web_nodes": nodes,
        "partner": seen,
        "state": state,
        "seconds_to_all_paid": paid_in,
        "exited": gone,
        "checks": checks,
        "ok": all(checks.values()),
    }
