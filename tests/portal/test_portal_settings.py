"""The brand's own settings on the portal (the Team page): the language of our e-mails to the team
(budget alerts, automatic pauses). Brand admins and owners change it for their own brand only,
each change audited; an analyst, another brand's owner or a bad value changes nothing."""

import pytest
from django.core import mail
from django.test import Client

from campaigns.models import Brand, BrandEvent, BrandRole
from campaigns.services import event_ingest
from campaigns.services.alerts import brand_alerts_send_due
from campaigns.services.test_mode import trial_tenant_open
from tests.campaigns.conftest import event
from tests.campaigns.factories import funded_campaign
from tests.portal.conftest import member

pytestmark = [pytest.mark.django_db, pytest.mark.postgres]


def signed_in(user) -> Client:
    client = Client()
    client.force_login(user)
    return client


def language_of(brand) -> str:
    return Brand.objects.values_list("language", flat=True).get(pk=brand.pk)


@pytest.mark.parametrize("role", [BrandRole.ADMIN, BrandRole.OWNER])
def test_an_admin_or_owner_changes_the_language_and_it_is_audited(brand_a, role):
    user = member(brand_a, role)
    client = signed_in(user)
    page = client.get("/portal/alpha/team/")
    assert page.status_code == 200 and 'data-testid="brand-language"' in page.content.decode()
    assert 'action="/portal/alpha/team/language/"' in page.content.decode()

    done = client.post("/portal/alpha/team/language/", {"language": "it"})

    assert done.status_code == 302 and done["Location"] == "/portal/alpha/team/"
    assert language_of(brand_a) == "it"
    audit = BrandEvent.objects.get()
    assert (audit.brand_id, audit.kind, audit.actor_id, audit.channel) == (
        brand_a.pk,
        "brand.language_changed",
        user.pk,
        "portal",
    )
    assert audit.data == {"from": "en", "to": "it"}


def test_the_same_language_again_records_nothing(brand_a):
    client = signed_in(member(brand_a, BrandRole.ADMIN))

    client.post("/portal/alpha/team/language/", {"language": "en"})

    assert language_of(brand_a) == "en" and not BrandEvent.objects.exists()


def test_an_analyst_sees_the_language_but_cannot_change_it(brand_a):
    client = signed_in(member(brand_a, BrandRole.ANALYST))

    page = client.get("/portal/alpha/team/").content.decode()
    refused = client.post("/portal/alpha/team/language/", {"language": "it"})

    assert 'data-testid="brand-language"' in page and "/team/language/" not in page
    assert refused.status_code == 404
    assert language_of(brand_a) == "en" and not BrandEvent.objects.exists()


def test_another_brands_owner_cannot_change_it(brand_a, owner_b):
    refused = signed_in(owner_b).post("/portal/alpha/team/language/", {"language": "it"})

    assert refused.status_code == 404
    assert language_of(brand_a) == "en" and not BrandEvent.objects.exists()


def test_a_language_we_do_not_write_in_is_refused_and_nothing_changes(brand_a):
    client = signed_in(member(brand_a, BrandRole.OWNER))

    page = client.post("/portal/alpha/team/language/", {"language": "de"}, follow=True)

    assert "Choose English or Italian." in page.content.decode()
    assert language_of(brand_a) == "en" and not BrandEvent.objects.exists()


def test_an_anonymous_visitor_is_sent_to_log_in(brand_a):
    page = Client().post("/portal/alpha/team/language/", {"language": "it"})

    assert page.status_code == 302 and "login" in page["Location"]
    assert language_of(brand_a) == "en"


def test_changed_from_test_mode_it_is_the_live_brands_and_its_tenants(brand_a):
    owner = member(brand_a, BrandRole.OWNER)
    tenant = trial_tenant_open(brand=brand_a)

    signed_in(owner).post(f"/portal/{tenant.slug}/team/language/", {"language": "it"})

    assert language_of(brand_a) == language_of(tenant) == "it"
    assert BrandEvent.objects.get().brand_id == brand_a.pk


def test_the_next_alert_is_in_the_language_chosen(brand_a, settings):
    settings.BRAND_BUDGET_ALERT_MIN_PCT = 100
    owner = member(brand_a, BrandRole.OWNER, "owner@alpha.example")
    signed_in(owner).post("/portal/alpha/team/language/", {"language": "it"})
    funded_campaign(brand=brand_a, amount_minor=500, rules=[{"trigger": "tiktok_login", "fixed_minor": 500}])

    event_ingest(brand=brand_a, payload=event())
    brand_alerts_send_due()

    assert any("ha speso il 100%" in m.subject for m in mail.outbox), [m.subject for m in mail.outbox]
