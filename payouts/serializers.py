from rest_framework import serializers

from core.api import fields
from payouts.models import Payout


class PayoutItemSerializer(serializers.Serializer):
    reward = fields.IntegerField(source="reward_id")
    amount_minor = fields.IntegerField()


class PayoutSerializer(fields.ModelSerializer):
    """A payout as one brand sees it: ``amount_minor`` and ``items`` count only that brand's
    rewards (a person's payout may also carry rewards from other brands)."""

    amount_minor = fields.IntegerField(source="brand_amount_minor")
    items = PayoutItemSerializer(source="brand_items", many=True)

    class Meta:
        model = Payout
        fields = [
            "id", "person", "status", "currency", "amount_minor", "items", "end_to_end_id", "creditor_iban_masked",
            "reason_code", "reason_text", "created_at", "submitted_at", "settled_at", "failed_at", "returned_at",
        ]  # fmt: skip
