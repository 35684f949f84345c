from rest_framework import serializers

from core.api import fields
from recipients.models import Language


class AccountWriteSerializer(serializers.Serializer):
    """A bank account beyond a bare IBAN: its type and fields as the currency's account
    requirements name them (the PSP's contract, ``recipients.accounts``)."""

    type = fields.CharField(
        max_length=32, help_text="`iban`, or a local type such as `sort_code` (GBP) or `aba` (USD)."
    )
    currency = fields.CharField(
        max_length=3, required=False, allow_blank=True, default="", help_text="The currency paid into a local account."
    )
    details = serializers.DictField(
        child=fields.CharField(max_length=200, allow_blank=True),
        help_text='The fields by key, e.g. {"sortCode": "04-00-75", "accountNumber": "37778842"};'
        ' an IBAN as {"iban": …}.',
    )


class PersonWriteSerializer(serializers.Serializer):
    """Identifiers in any human format: they are validated and normalised by the service."""

    name = fields.CharField(max_length=200, required=False, allow_blank=True, default="")
    email = fields.CharField(max_length=254, required=False, allow_blank=True, default="")
    whatsapp = fields.CharField(max_length=40, required=False, allow_blank=True, default="")
    phone_region = fields.CharField(max_length=2, required=False, allow_blank=True, default="")
    iban = fields.CharField(max_length=42, required=False, allow_blank=True, default="")
    account = AccountWriteSerializer(
        required=False, allow_null=True, default=None, help_text="A local bank account, instead of `iban`."
    )
    social_provider = fields.CharField(max_length=20, required=False, allow_blank=True, default="")
    social_uid = fields.CharField(max_length=200, required=False, allow_blank=True, default="")
    language = fields.ChoiceField(choices=Language.choices, required=False, allow_blank=True, default="")

    def validate(self, data):
        if data["iban"].strip() and data["account"]:
            raise serializers.ValidationError({"account": "Give either `iban` or `account`, not both."})
        return data


class IdentifierSerializer(serializers.Serializer):
    kind = serializers.ChoiceField(choices=["email", "whatsapp", "social"])
    value = serializers.CharField(help_text="Masked: the API never shows a full e-mail address or number.")


class PersonSerializer(serializers.Serializer):
    id = serializers.IntegerField()
    display_name = serializers.CharField()
    preferred_language = serializers.CharField()
    identifiers = IdentifierSerializer(many=True)
    iban_masked = serializers.CharField(help_text="The current bank account (IBAN or local), masked; empty when none.")
    iban_country = serializers.CharField()
    account_type = serializers.CharField(help_text="`iban`, or the local type of the current account; empty when none.")
    created_at = fields.DateTimeField()


class ContactSerializer(serializers.Serializer):
    """A person who gave the brand marketing consent, with their contact details in full (only
    these people's: everyone else stays masked)."""

    id = serializers.IntegerField(source="pk", help_text="The consent's id.")
    person = serializers.IntegerField(source="root_id", help_text="The person (their root, if merged since).")
    name = serializers.CharField(source="person.display_name")
    email = serializers.CharField(allow_null=True, help_text="The newest e-mail address; null when none.")
    whatsapp = serializers.CharField(allow_null=True, help_text="The newest WhatsApp number (E.164); null when none.")
    social = serializers.CharField(allow_null=True, help_text="`provider:uid` of the newest social account.")
    consent_channel = serializers.CharField(source="channel")
    consent_language = serializers.CharField(source="language")
    consent_version = serializers.CharField(source="text_version", help_text="SHA-256 of the words agreed to.")
    consent_text = serializers.CharField(source="text", help_text="The exact words the person agreed to.")
    given_at = fields.DateTimeField()
