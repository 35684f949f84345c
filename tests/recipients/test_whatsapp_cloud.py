"""The WhatsApp Cloud API sender against a local fake that follows the documented contract
(``tests/fakes/whatsapp_server.py``): the request it makes, and which refusals are worth
another try."""

import logging
import socket

import pytest
from django.core.exceptions import ImproperlyConfigured

from recipients.whatsapp_cloud import CloudApiSender, TemplateMessage, WhatsAppSendError
from tests.fakes.whatsapp_server import FakeWhatsAppCloud

PAID = TemplateMessage(
    to="+393471234567",
    template="payout_paid",
    language="it",
    parameters=("5,00\xa0€", "IT60 **** **** 3456"),
    button_suffix="s/token-123/",
)


@pytest.fixture
def cloud(settings):
    fake = FakeWhatsAppCloud().start()
    settings.WHATSAPP_API_BASE_URL = fake.base_url
    settings.WHATSAPP_API_VERSION = fake.version
    settings.WHATSAPP_PHONE_NUMBER_ID = fake.phone_number_id
    settings.WHATSAPP_ACCESS_TOKEN = fake.token
    settings.WHATSAPP_TIMEOUT_SECONDS = 2.0
    yield fake
    fake.stop()


def test_a_template_message_goes_out_with_its_parameters_and_link(cloud):
    message_id = CloudApiSender().send_template(PAID)

    (sent,) = cloud.messages
    assert message_id == sent["id"] and message_id.startswith("wamid.")
    assert (sent["to"], sent["type"], sent["messaging_product"]) == ("393471234567", "template", "whatsapp")
    template = sent["template"]
    assert (template["name"], template["language"]) == ("payout_paid", {"code": "it"})
    body, button = template["components"]
    assert [p["text"] for p in body["parameters"]] == ["5,00\xa0€", "IT60 **** **** 3456"]
    assert (button["sub_type"], button["index"], button["parameters"]) == (
        "url",
        "0",
        [{"type": "text", "text": "s/token-123/"}],
    )


@pytest.mark.parametrize(
    ("code", "status", "retryable"),
    [
        (130429, 400, True),  # throughput: later
        (131056, 400, True),  # pair rate limit: later
        (80007, 400, True),  # the account's rate limit: later
        (131000, 500, True),  # Meta's own failure
        (131026, 400, False),  # undeliverable: this person cannot get it
        (131047, 400, False),  # re-engagement
        (132000, 400, False),  # template parameters
        (132001, 404, False),  # template missing
    ],
)
def test_refusals_are_retryable_or_final_by_their_code(cloud, code, status, retryable):
    cloud.fail_next(code, status=status)
    with pytest.raises(WhatsAppSendError) as refused:
        CloudApiSender().send_template(PAID)
    assert (refused.value.code, refused.value.retryable) == (str(code), retryable)
    assert cloud.messages == []


def test_a_number_not_on_whatsapp_is_a_final_refusal(cloud):
    cloud.undeliverable.add("393471234567")
    with pytest.raises(WhatsAppSendError) as refused:
        CloudApiSender().send_template(PAID)
    assert (refused.value.code, refused.value.retryable) == ("131026", False)


def test_a_template_with_the_wrong_parameters_is_refused_by_the_contract(cloud):
    with pytest.raises(WhatsAppSendError) as refused:
        CloudApiSender().send_template(
            TemplateMessage(to="+393471234567", template="payout_paid", language="en", parameters=("€5.00",))
        )
    assert (refused.value.code, refused.value.retryable) == ("132000", False)


def test_an_expired_token_waits_for_an_operator_and_says_so(cloud, settings, caplog):
    settings.WHATSAPP_ACCESS_TOKEN = "expired"
    with caplog.at_level(logging.ERROR), pytest.raises(WhatsAppSendError) as refused:
        CloudApiSender().send_template(PAID)
    assert (refused.value.code, refused.value.retryable) == ("190", True)
    assert "WhatsApp refuses our requests (code 190)" in caplog.text


def test_no_answer_is_a_retryable_error(settings):
    with socket.socket() as closed:
        closed.bind(("127.0.0.1", 0))
        port = closed.getsockname()[1]
    settings.WHATSAPP_API_BASE_URL = f"http://127.0.0.1:{port}"
    settings.WHATSAPP_PHONE_NUMBER_ID, settings.WHATSAPP_ACCESS_TOKEN = "1", "t"
    with pytest.raises(WhatsAppSendError) as refused:
        CloudApiSender().send_template(PAID)
    assert (refused.value.code, refused.value.retryable) == ("connection", True)


def test_without_credentials_the_sender_cannot_be_built(settings):
    settings.WHATSAPP_ACCESS_TOKEN = ""
    with pytest.raises(ImproperlyConfigured):
        CloudApiSender()
