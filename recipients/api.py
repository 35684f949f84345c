"""Partner API: people (register, read, add identifiers or a bank account) and the account
requirements a local bank account must meet."""

from drf_spectacular.utils import OpenApiExample, extend_schema
from rest_framework import status
from rest_framework.response import Response

from core.api.views import BrandAPIView
from recipients.accounts import account_normalise
from recipients.brand_people import brand_person_get, person_identifiers_add, person_public_view, person_register
from recipients.serializers import PersonSerializer, PersonWriteSerializer
from recipients.services import IdentityInput

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
