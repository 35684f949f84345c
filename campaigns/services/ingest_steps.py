"""The campaign an event is for, with its active rules, read once per call (the rest of the
evaluation is in ``ingest_batch``)."""

import functools

from django.db import connection

from campaigns.evaluation import fee_for
from campaigns.models import Brand, Campaign, RewardRule
from campaigns.services.ingest_types import CampaignContext
from core.bulk import model_columns, model_from_row
from core.exceptions import NotFound
from reconciliation.models import Account


def campaign_context(brand, slug: str) -> CampaignContext:
    """The campaign (with its brand and budget account) and its active rules, in one raw query.

    Raw, not the ORM: this runs for every event, and compiling the select_related query cost more
    than the database spent answering it. The rows become model instances exactly as the ORM makes
    them (``from_db`` after each field's converters)."""
    with connection.cursor() as cursor:
        cursor.execute(_context_sql(), [brand.pk, slug])
        rows = cursor.fetchall()
    if not rows:
        raise NotFound(f"No campaign {slug!r} for this brand.", code="campaign_not_found")
    campaign, brand_row, account, _ = _instances(rows[0])
    campaign.brand, campaign.budget_account = brand_row, account
    rules = []
    for row in rows:
        rule = _instances(row)[3]
        if rule is not None:
            rule.campaign = campaign
            rules.append(rule)
    smallest = min(
        (
            r.smallest_reward_minor
            + fee_for(brand=campaign.brand, amount_minor=r.smallest_reward_minor, currency=campaign.currency)
            for r in rules
        ),
        default=None,
    )
    return CampaignContext(campaign=campaign, rules=rules, smallest_reservation=smallest)


_CONTEXT_MODELS = ((Campaign, "c"), (Brand, "b"), (Account, "a"), (RewardRule, "r"))


@functools.cache
def _context_sql() -> str:
    columns = ", ".join(model_columns(model, alias) for model, alias in _CONTEXT_MODELS)
    return (
        f"SELECT {columns} FROM {Campaign._meta.db_table} c "  # noqa: S608 - names from the models
        f"JOIN {Brand._meta.db_table} b ON b.id = c.brand_id "
        f"JOIN {Account._meta.db_table} a ON a.id = c.budget_account_id "
        f"LEFT JOIN {RewardRule._meta.db_table} r ON r.campaign_id = c.id AND r.is_active "
        "WHERE c.brand_id = %s AND c.slug = %s ORDER BY r.id"
    )


def _instances(row: tuple) -> list:
    """The row's Campaign, Brand, Account and RewardRule (None when the campaign has no rule)."""
    out, start = [], 0
    for model, _ in _CONTEXT_MODELS:
        width = len(model._meta.concrete_fields)
        values = row[start : start + width]
        start += width
        out.append(None if values[0] is None else model_from_row(model, values))  # None: the LEFT JOIN found no rule
    return out
