"""The database floor of bulk ingestion (PostgreSQL only): the rows one bulk-ingested event
writes, streamed with COPY in one transaction, every constraint and trigger on.

Per event (counted from a bulk phase's writes, pg_stat_user_tables before and after): a person,
three identifiers (e-mail, social id, IBAN fingerprint), a bank account, its ``iban_set`` person
event (audit, hash-chained), the trigger event, the ledger hold (its trigger adds the amount to
the budget account's held total and refuses an overdraft: one account UPDATE per hold; holds
post no journal entry), the reward and its ``reward.held`` reward event (audit, hash-chained):
ten rows and one UPDATE. Left out, as they are per call rather than per event (under 0.03 rows
an event together): the rule-counter upsert, the payout tasks (one per 50 people) and budget
alerts.

The values are those the engine would write for the same payloads: keyed IBAN fingerprints
and encrypted IBANs from ``recipients``, distinct idempotency keys and external ids, foreign keys
to the campaign's brand, rule and budget account. Everything a writer need not wait for is done
before the clock starts: the primary keys are reserved from the tables' sequences (as
``core.bulk`` does) and the COPY text is built. Timed: the transaction, from the first COPY to
the end of COMMIT, which runs the deferred foreign-key checks and flushes the WAL.
"""

import hashlib
import json
import time
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db import connection, transaction
from django.utils import timezone

from bench.common import CpuMeter
from campaigns.models import Campaign, Reward, RewardEvent, RewardRule, TriggerEvent
from campaigns.services import EventInput
from core.audit_sql import audited_tables
from recipients import crypto
from recipients.models import BankAccount, Identifier, Person, PersonEvent
from recipients.normalise import iban_normalise
from reconciliation.models import Hold

_AUDITED = {spec.table for spec in audited_tables()}
# Foreign keys point backwards in this order (the person-and-brand key of trigger events is not
# deferrable: the people must be there first).
_ORDER = (Person, Identifier, BankAccount, PersonEvent, TriggerEvent, Hold, Reward, RewardEvent)
_ESCAPES = str.maketrans({"\\": "\\\\", "\t": "\\t", "\n": "\\n", "\r": "\\r"})


@dataclass
class _Copy:
    table: str
    columns: list[str]
    rows: int
    data: bytes  # the rows in COPY's text format


def _text(value) -> str:
    """One value in COPY's text format."""
    if value is None:
        return "\\N"
    if isinstance(value, bool):
        return "t" if value else "f"
    if isinstance(value, datetime):
        return value.isoformat()
    if isinstance(value, dict | list):
        value = json.dumps(value)
    return str(value).translate(_ESCAPES)


def _reserve(cursor, model, count: int) -> list[int]:
    cursor.execute(
        "SELECT nextval(pg_get_serial_sequence(%s, 'id')) FROM generate_series(1, %s)", [model._meta.db_table, count]
    )
    return [row[0] for row in cursor.fetchall()]


def _copies(*, campaign: Campaign, rule: RewardRule, payloads: list[EventInput], amount: int, fee: int) -> list[_Copy]:
    brand_id = campaign.brand_id
    n = len(payloads)
    with connection.cursor() as cursor:
        ids = {m: _reserve(cursor, m, n * (3 if m is Identifier else 1)) for m in _ORDER}
    now = timezone.now()
    rows: dict[type, list[dict]] = {m: [] for m in _ORDER}
    for i, p in enumerate(payloads):
        person, account, event, hold, reward = (ids[m][i] for m in (Person, BankAccount, TriggerEvent, Hold, Reward))
        iban = iban_normalise(p.iban)
        iban_fp = crypto.iban_fingerprint(iban.normalised)
        rows[Person].append(
            dict(
                id=person,
                display_name=p.name,
                preferred_language="",
                created_source=p.source,
                created_at=now,
                brand_id=brand_id,
            )
        )
        identifiers = (("email", p.email), ("social", f"{p.social_provider}:{p.social_uid}"), ("iban", iban_fp))
        for k, (kind, value) in enumerate(identifiers):
            rows[Identifier].append(
                dict(
                    id=ids[Identifier][3 * i + k],
                    kind=kind,
                    value=value,
                    is_active=True,
                    source=p.source,
                    created_at=now,
                    person_id=person,
                    brand_id=brand_id,
                )
            )
        rows[BankAccount].append(
            dict(
                id=account,
                kind=iban.kind,
                currency=iban.currency,
                ciphertext=crypto.encrypt(iban.secret),
                iban_fingerprint=iban_fp,
                masked=iban.masked,
                country=iban.country,
                bic=iban.bic,
                bank_name=iban.bank_name,
                is_current=True,
                source=p.source,
                created_at=now,
                payee_check_result="",
                payee_check_name="",
                holder_name="",
                person_id=person,
            )
        )
        detail = {"reused": False, "country": iban.country, "bank_account": account, "previous_bank_account": None}
        rows[PersonEvent].append(
            dict(
                id=ids[PersonEvent][i],
                kind="iban_set",
                source=p.source,
                detail=detail,
                created_at=now,
                person_id=person,
            )
        )
        rows[TriggerEvent].append(
            dict(
                id=event,
                type=p.type,
                custom_name="",
                external_id=p.external_id,
                occurred_at=now,
                received_at=now,
                email=p.email,
                whatsapp="",
                social_provider=p.social_provider,
                social_uid=p.social_uid,
                iban_fingerprint=iban_fp,
                iban_country=iban.country,
                evidence={},
                source=p.source,
                ip=p.ip,
                device_fingerprint=p.device_fingerprint,
                purchase_currency="",
                order_id="",
                code="",
                outcome="rewarded",
                reason="",
                review_reasons=[],
                request_hash=hashlib.sha256(p.external_id.encode()).hexdigest(),
                brand_id=brand_id,
                campaign_id=campaign.pk,
                person_id=person,
                rule_id=rule.pk,
            )
        )
        rows[Hold].append(
            dict(
                id=hold,
                idempotency_key=f"reward:{brand_id}:{p.external_id}",
                amount_minor=amount + fee,
                currency=campaign.currency,
                status="pending",
                memo=f"Reward for {p.type} {p.external_id}",
                reference_type="trigger_event",
                reference_id=f"{brand_id}:{p.external_id}"[:64],
                created_at=now,
                account_id=campaign.budget_account_id,
            )
        )
        rows[Reward].append(
            dict(
                id=reward,
                amount_minor=amount,
                fee_minor=fee,
                currency=campaign.currency,
                status="held",
                occurred_at=now,
                matures_at=now + timedelta(days=rule.hold_days),
                iban_fingerprint=iban_fp,
                review_reasons=[],
                decision_reason="",
                payout_ref="",
                undone_reason="",
                recheck_failures=0,
                created_at=now,
                updated_at=now,
                campaign_id=campaign.pk,
                hold_id=hold,
                person_id=person,
                rule_id=rule.pk,
                event_id=event,
            )
        )
        rows[RewardEvent].append(
            dict(
                id=ids[RewardEvent][i],
                kind="reward.held",
                from_status="",
                to_status="held",
                reason="",
                data={"amount_minor": amount, "fee_minor": fee, "hold_id": hold},
                created_at=now,
                reward_id=reward,
            )
        )
    copies = []
    for model in _ORDER:
        columns = list(rows[model][0])
        # A column the engine now fills and the floor leaves out would fail the COPY half-way:
        # say which, before anything is timed.
        unset = sorted({f.column for f in model._meta.concrete_fields if not f.null} - set(columns))
        if unset:
            raise RuntimeError(f"the floor writes no {', '.join(unset)} into {model._meta.db_table}: add them")
        data = "".join("\t".join(_text(row[c]) for c in columns) + "\n" for row in rows[model])
        copies.append(_Copy(model._meta.db_table, columns, len(rows[model]), data.encode()))
    return copies


def floor_write(*, campaign: Campaign, payloads: list[EventInput], amount: int, fee: int) -> dict:
    """Write every row ``payloads`` would make as rewarded events of ``campaign`` (one launched
    rule, funded for them) by COPY in one durable transaction; returns the figures. PostgreSQL
    only: raises RuntimeError elsewhere."""
    if connection.vendor != "postgresql":
        raise RuntimeError("The ingest floor is PostgreSQL COPY: it needs PostgreSQL.")
    rule = RewardRule.objects.get(campaign=campaign)
    copies = _copies(campaign=campaign, rule=rule, payloads=payloads, amount=amount, fee=fee)
    n = len(payloads)
    tables = {}
    meter = CpuMeter()
    meter.start()
    start = time.monotonic()
    with transaction.atomic(durable=True):
        with connection.cursor() as cursor:
            for c in copies:
                began = time.monotonic()
                columns = ", ".join(c.columns)
                # The raw driver cursor (psycopg's COPY); errors wrapped as Django's.
                with (
                    connection.wrap_database_errors,
                    cursor.cursor.copy(f"COPY {c.table} ({columns}) FROM STDIN") as cp,
                ):
                    cp.write(c.data)
                tables[c.table] = (c.rows, time.monotonic() - began)
        committing = time.monotonic()
    end = time.monotonic()
    cpu = meter.stop(per=n)
    wall = end - start
    return {
        "events": n,
        "rows_per_event": round(sum(rows for rows, _ in tables.values()) / n, 2),
        "wall_s": round(wall, 3),
        "events_per_s": round(n / wall, 1),
        "cpu_ms_per_event": None if cpu is None else {"python": cpu["self"], "postgres": cpu["postgres"]},
        "tables": {
            table: {
                "rows": rows,
                "ms": round(seconds * 1000, 1),
                "us_per_row": round(seconds * 1e6 / rows, 1),
                "audit_chain": table in _AUDITED,
            }
            for table, (rows, seconds) in tables.items()
        },
        "commit_ms": round((end - committing) * 1000, 1),
    }
