"""A withdrawal's payee check now follows the fixed ``WITHDRAWAL_POLICY`` (anything but a match
waits for ops' review). Until now it took a person's default policy, so a close match waited for
the brand's payee to confirm the bank's name on a page it does not have: such a payout waited
forever. Each one still waiting is handed to ops' review as the policy now does — the same
columns and the same ``payout.review`` audit event ``payee_check_record`` writes — so it shows in
the admin's review queue. Nothing else changes: no money moves, the answer stays as recorded."""

from django.db import migrations
from django.utils import timezone

REVIEW_REASON = "Verification of Payee: {result}; staff review before paying."


def forward(apps, schema_editor):
    Payout = apps.get_model("payouts", "Payout")
    PayoutEvent = apps.get_model("payouts", "PayoutEvent")
    now = timezone.now()
    stuck = Payout.objects.filter(
        status="created", needs_review=True, vop_action__in=["ask", "block"], withdrawal__isnull=False
    ).order_by("id")
    for payout in stuck.iterator():
        was = payout.vop_action
        payout.vop_action = "review"
        payout.review_reason = REVIEW_REASON.format(result=payout.vop_result.replace("_", " "))[:200]
        payout.updated_at = now
        payout.save(update_fields=["vop_action", "review_reason", "updated_at"])
        PayoutEvent.objects.create(
            payout=payout,
            kind="payout.review",
            from_status=payout.status,
            to_status=payout.status,
            data={
                "vop_result": payout.vop_result,
                "action": "review",
                "suggested": payout.vop_suggested_name,
                "action_was": was,
            },
            created_at=now,
        )


class Migration(migrations.Migration):
    dependencies = [
        ("payouts", "0014_brand_withdrawals"),
    ]

    operations = [migrations.RunPython(forward, migrations.RunPython.noop)]
