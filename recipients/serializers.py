from rest_framework import serializers

from core.api import fields
from recipients.models import Language


class PersonWriteSerializer(serializers.Serializer):
    """Identifiers in any human format: they are validated and normalised by the service."""

    name = fields.CharField(max_length=200, required=False, allow_blank=True, default="")
    email = fields.CharField(max_length=254, required=False, allow_blank=True, default="")
    whatsapp = fields.CharField(max_length=40, required=False, allow_blank=True, default="")
    phone_region = fields.CharField(max_length=2, required=False, allow_blank=True, default="")
    iban = fields.CharField(max_length=42, required=False, allow_blank=True, default="")
    social_provider = fields.CharField(max_length=20, required=False, allow_blank=True, default="")
    social_uid = fields.CharField(max_length=200, required=False, allow_blank=True, default="")
    language = fields.ChoiceField(choices=Language.choices, required=False, allow_blank=True, default="")


class IdentifierSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["email", "whatsapp", "social"])
    value = serializers.CharField(help_text="Masked: the API never shows a full e-mail address or number.")


class PersonSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    display_name = serializers.CharField()
    preferred_language = serializers.CharField()
    identifiers = IdentifierSerializer(many=True)
    iban_masked = serializers.CharField(help_text="The current IBAN, masked; empty when none.")
    iban_country = serializers.CharField()
    created_at = fields.DateTimeField()
