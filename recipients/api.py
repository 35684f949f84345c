"""Partner API: people (register, read, add identifiers or a bank account), the account
requirements a local bank account must meet, and the brand's contacts (people who gave it
marketing consent)."""

import django_filters
from django.db import transaction
from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import status
from rest_framework.response import Response

from core.api.filters import DateTimeFilter, FilterSet, IdFilter
from core.api.views import BrandAPIView, BrandListAPIView
from recipients.accounts import account_normalise
from recipients.brand_people import brand_person_get, person_identifiers_add, person_public_view, person_register
from recipients.models_consent import ConsentChannel, MarketingConsent
from recipients.selectors import brand_contacts
from recipients.serializers import ContactSerializer, PersonSerializer, PersonWriteSerializer
from recipients.services import IdentityInput
from recipients.services.consent import contacts_export_record

_EXAMPLE = OpenApiExample(
    "Register by e-mail and IBAN",
    value={"name": "Giulia Rossi", "email": "giulia@example.com", "iban": "IT60 X054 2811 1010 0000 0123 456"},
    request_only=True,
)


def _identity(data: dict) -> IdentityInput:
    """Raises InvalidInput for an account its currency's requirements refuse."""
    account = data["account"]
    return IdentityInput(
        name=data["name"],
        email=data["email"],
        whatsapp=data["whatsapp"],
        iban=data["iban"],
        account=account_normalise(kind=account["type"], currency=account["currency"], details=account["details"])
        if account
        else None,
        social_provider=data["social_provider"],
        social_uid=data["social_uid"],
        phone_region=data["phone_region"],
        language=data["language"],
    )


class PersonCreateView(BrandAPIView):
    serializer_class = PersonWriteSerializer

    @extend_schema(
        operation_id="people_create",
        request=PersonWriteSerializer,
        responses={201: PersonSerializer, 200: PersonSerializer},
        examples=[_EXAMPLE],
        summary="Register a person (or find the one these identifiers belong to)",
    )
    def post(self, request):
        form = PersonWriteSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        person, created = person_register(brand=self.brand, identity=_identity(form.validated_data))
        return Response(
            PersonSerializer(person_public_view(person=person)).data,
            status=status.HTTP_201_CREATED if created else status.HTTP_200_OK,
        )


class PersonDetailView(BrandAPIView):
    serializer_class = PersonSerializer

    @extend_schema(operation_id="people_retrieve", responses=PersonSerializer)
    def get(self, request, pk: int):
        person = brand_person_get(brand=self.brand, person_id=pk)
        return Response(PersonSerializer(person_public_view(person=person)).data)

    @extend_schema(
        operation_id="people_update",
        request=PersonWriteSerializer,
        responses=PersonSerializer,
        summary="Add identifiers or set the IBAN",
    )
    def patch(self, request, pk: int):
        person = brand_person_get(brand=self.brand, person_id=pk)
        form = PersonWriteSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        person = person_identifiers_add(brand=self.brand, person=person, identity=_identity(form.validated_data))
        return Response(PersonSerializer(person_public_view(person=person)).data)


class ContactFilter(FilterSet):
    person = IdFilter(field_name="root_id")
    channel = django_filters.ChoiceFilter(choices=ConsentChannel.choices)
    given_after = DateTimeFilter(field_name="given_at", lookup_expr="gte")
    given_before = DateTimeFilter(field_name="given_at", lookup_expr="lt")

    class Meta:
        model = MarketingConsent
        fields = ["person", "channel", "given_after", "given_before"]


class ContactListView(BrandListAPIView):
    """People who gave the brand marketing consent, and only them, with their contact details.
    Each page served is an export of personal data: an audit row (``contacts.exported``, the key's
    prefix, the filters, the rows) is written before it is sent."""

    serializer_class = ContactSerializer
    filterset_class = ContactFilter

    def get_queryset(self):
        if self.brand is None:  # the schema generator
            return MarketingConsent.objects.none()
        return brand_contacts(brand_id=self.brand.pk)

    @extend_schema(
        operation_id="contacts_list",
        responses=ContactSerializer(many=True),
        summary="People who gave marketing consent, with their contact details",
    )
    def get(self, request):
        queryset = self.filter_queryset(self.get_queryset())
        page = self.paginate_queryset(queryset)
        filters = {k: v for k, v in request.query_params.items() if k in ContactFilter.base_filters}
        with transaction.atomic():
            contacts_export_record(
                brand=self.brand, channel="api", actor=request.user.actor, filters=filters, rows=len(page),
                api_key=request.user.key.prefix,
            )  # fmt: skip
        return self.get_paginated_response(self.get_serializer(page, many=True).data)
