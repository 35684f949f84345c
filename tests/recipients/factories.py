import factory
import schwifty

from campaigns.models import Brand
from campaigns.services import brand_create
from recipients.models import Person


def people_brand() -> Brand:
    """The brand the people of a recipients test belong to (people are scoped per brand)."""
    return Brand.objects.filter(slug="people-test-brand").first() or brand_create(
        name="People test brand", slug="people-test-brand"
    )


def iban(country: str = "NL", n: int = 1) -> str:
    """A valid IBAN (correct check digits), different for each ``n``."""
    if country == "NL":
        return str(schwifty.IBAN.generate("NL", bank_code="ABNA", account_code=f"{n:010d}"))
    if country == "DE":
        return str(schwifty.IBAN.generate("DE", bank_code="37040044", account_code=f"{n:010d}"))
    if country == "IT":
        return str(schwifty.IBAN.generate("IT", bank_code="05428", branch_code="11101", account_code=f"{n:012d}"))
    raise ValueError(country)


class PersonFactory(factory.django.DjangoModelFactory):
    class Meta:
        model = Person

    brand = factory.LazyFunction(people_brand)
    display_name = factory.Sequence(lambda n: f"Person {n}")
    created_source = "test"
