"""Rewards and payouts of one brand: filtered lists (GET parameters) and the same filter as a
streaming CSV, so an export of a million rows never sits in memory. The CSV is lag-tolerant: with a
replica configured it reads there (``core.replica``), outside this browser's own writes."""

import csv
from collections.abc import Iterator

from django.core.paginator import Paginator
from django.http import StreamingHttpResponse
from django.shortcuts import render

from campaigns.models import RewardStatus, Trigger
from core.money import minor_to_decimal
from core.replica import lag_tolerant
from payouts.models import PayoutStatus
from web.portal.access import brand_view
from web.portal.filters import PayoutTableFilter, RewardTableFilter
from web.portal.selectors import brand_payout_items, brand_rewards

PAGE_SIZE = 50


class _Echo:
    def write(self, value: str) -> str:
        return value


def _stream_csv(filename: str, header: list[str], rows: Iterator[list]) -> StreamingHttpResponse:
    writer = csv.writer(_Echo())

    def lines():
        yield writer.writerow(header)
        for row in rows:
            yield writer.writerow(row)

    response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    return response


def _campaign_choices(access):
    return list(access.brand.campaigns.order_by("name").values_list("slug", "name"))


@brand_view()
def rewards(request, access):
    table = RewardTableFilter(request.GET, queryset=brand_rewards(brand=access.brand))
    qs = table.qs.order_by("-id")
    if request.GET.get("format") == "csv":
        rows = (
            [
                r.pk,
                r.created_at.isoformat(),
                r.campaign.slug,
                r.rule.trigger,
                r.status,
                minor_to_decimal(r.amount_minor, r.currency),
                minor_to_decimal(r.fee_minor, r.currency),
                r.currency,
                r.matures_at.isoformat(),
                r.person_id,
                r.event.external_id,
                r.payout_ref,
            ]
            for r in lag_tolerant(qs).iterator(chunk_size=2000)
        )
        header = [
            "id",
            "created_at",
            "campaign",
            "trigger",
            "status",
            "amount",
            "fee",
            "currency",
            "matures_at",
            "person_id",
            "event_external_id",
            "payout_ref",
        ]
        return _stream_csv(f"{access.brand.slug}-rewards.csv", header, rows)
    page = Paginator(qs, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "portal/rewards.html",
        {
            "access": access,
            "brand": access.brand,
            "form": table.form,
            "page": page,
            "campaigns": _campaign_choices(access),
            "statuses": RewardStatus.choices,
            "triggers": Trigger.choices,
            "query": request.GET.copy(),
        },
    )


@brand_view()
def payouts(request, access):
    table = PayoutTableFilter(request.GET, queryset=brand_payout_items(brand=access.brand))
    qs = table.qs.order_by("-payout_id", "-id")
    if request.GET.get("format") == "csv":
        rows = (
            [
                i.payout_id,
                i.payout.created_at.isoformat(),
                i.reward.campaign.slug,
                i.reward_id,
                i.payout.status,
                minor_to_decimal(i.amount_minor, i.payout.currency),
                i.payout.currency,
                i.payout.end_to_end_id,
                i.payout.creditor_iban_masked,
                i.payout.settled_at.isoformat() if i.payout.settled_at else "",
                i.payout.reason_code,
            ]
            for i in lag_tolerant(qs).iterator(chunk_size=2000)
        )
        header = [
            "payout_id",
            "created_at",
            "campaign",
            "reward_id",
            "status",
            "amount",
            "currency",
            "end_to_end_id",
            "iban",
            "settled_at",
            "reason_code",
        ]
        return _stream_csv(f"{access.brand.slug}-payouts.csv", header, rows)
    page = Paginator(qs, PAGE_SIZE).get_page(request.GET.get("page"))
    return render(
        request,
        "portal/payouts.html",
        {
            "access": access,
            "brand": access.brand,
            "form": table.form,
            "page": page,
            "campaigns": _campaign_choices(access),
            "statuses": PayoutStatus.choices,
            "triggers": Trigger.choices,
            "query": request.GET.copy(),
        },
    )
