"""The partner API survives hostile input: forged cursors, text PostgreSQL cannot store, deeply
nested JSON, odd paths and methods, and id filters that must not reveal other brands' ids.
Every refusal is problem+json and nothing is stored for the refused item."""

import base64
import json

import pytest

from campaigns.models import TriggerEvent
from tests.api.conftest import assert_problem, ingest
from tests.api.test_isolation import make_payout

LISTS = ["campaigns/", "campaigns/{campaign}/rules/", "events/", "rewards/", "payouts/", "webhook-endpoints/"]


def _b64(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


@pytest.mark.parametrize("path", LISTS)
@pytest.mark.parametrize(
    "cursor",
    [_b64("p=abc"), _b64("p=1.5"), _b64("p=-1"), _b64("p=" + "9" * 30), _b64("o=x"), "not base64!", "%C3%A9"],
)
def test_a_forged_cursor_is_400_invalid_cursor_on_every_list(api, campaign, path, cursor):
    url = "/api/v1/" + path.format(campaign=campaign.pk)
    assert_problem(api.get(url, {"cursor": cursor}), 400, "invalid_cursor")


def test_a_cursor_the_api_gave_out_still_pages(api, campaign):
    for _ in range(3):
        ingest(campaign)
    first = api.get("/api/v1/events/", {"limit": 2}).json()
    second = api.get(first["next"]).json()
    assert len(first["results"]) == 2 and len(second["results"]) == 1


@pytest.mark.parametrize("limit", ["0", "201", "²", "1.0", "-1"])
def test_a_limit_out_of_range_or_not_ascii_digits_is_400(api, campaign, limit):
    assert_problem(api.get("/api/v1/events/", {"limit": limit}), 400, "invalid_limit")


def _event(campaign, external_id: str, **fields) -> dict:
    return {"external_id": external_id, "campaign": campaign.slug, "type": "tiktok_login",
            "email": f"{external_id}@example.com", **fields}  # fmt: skip


def _post_json(api, path: str, body):
    # json.dumps writes a lone surrogate as the escape "\ud800", as a hostile client would send it.
    return api.post(path, json.dumps(body), content_type="application/json")


UNSTORABLE = [
    {"note": "a\u0000b"},
    {"a\u0000": 1},
    {"note": "\ud800"},
    {"deep": [{"x": ["ok", "\udfff"]}]},
]


@pytest.mark.parametrize("evidence", UNSTORABLE)
def test_unstorable_text_in_evidence_is_a_400_and_stores_nothing(api, campaign, evidence):
    response = _post_json(api, "/api/v1/events/", _event(campaign, "bad-1", evidence=evidence))
    body = assert_problem(response, 400, "validation_error")
    assert body["errors"] == [{"field": "evidence", "code": "invalid_text", "message": body["errors"][0]["message"]}]
    assert not TriggerEvent.objects.exists()


@pytest.mark.parametrize("value", ["a\u0000b", "\ud800"])
def test_unstorable_text_in_a_string_field_is_invalid_text(api, campaign, value):
    body = assert_problem(
        _post_json(api, "/api/v1/events/", _event(campaign, "bad-2", order_id=value)), 400, "validation_error"
    )
    assert [(e["field"], e["code"]) for e in body["errors"]] == [("order_id", "invalid_text")]
    assert not TriggerEvent.objects.exists()


def test_in_a_bulk_call_only_the_unstorable_item_is_refused(api, campaign):
    events = [
        _event(campaign, "good-1"),
        _event(campaign, "bad-nul", evidence={"note": "\u0000"}),
        _event(campaign, "bad-surrogate", evidence={"\udc00": "x"}),
        _event(campaign, "good-2"),
    ]
    response = _post_json(api, "/api/v1/events/bulk/", {"events": events})
    assert response.status_code == 200, response.content
    results = response.json()["results"]
    assert [r["outcome"] == "error" for r in results] == [False, True, True, False]
    for bad in results[1:3]:
        assert bad["error"]["code"] == "validation_error"
        assert [(e["field"], e["code"]) for e in bad["error"]["errors"]] == [("evidence", "invalid_text")]
    stored = set(TriggerEvent.objects.values_list("external_id", flat=True))
    assert stored == {"good-1", "good-2"}


def _deep_event(campaign, depth: int) -> str:
    """An event whose evidence holds ``depth`` nested arrays: the body nests depth + 2 levels."""
    head = json.dumps({"external_id": "deep", "campaign": campaign.slug, "type": "tiktok_login",
                       "email": "d@example.com"})  # fmt: skip
    return head[:-1] + ', "evidence": {"x": ' + "[" * depth + "]" * depth + "}}"


@pytest.mark.parametrize("depth", [31, 1_000, 100_000])
def test_json_nested_deeper_than_32_is_400_json_too_deep(api, campaign, depth):
    response = api.post("/api/v1/events/", _deep_event(campaign, depth), content_type="application/json")
    assert_problem(response, 400, "json_too_deep")
    assert not TriggerEvent.objects.exists()


def test_json_nested_32_deep_is_accepted(api, campaign):
    response = api.post("/api/v1/events/", _deep_event(campaign, 30), content_type="application/json")
    assert response.status_code == 201, response.content


@pytest.mark.parametrize(
    "path", ["/api/v1/people/1%0a/", "/api/v1/rewards/%0a/", "/api/v1/rewards/1%0a", "/api/v1/nothing/", "/api/x"]
)
@pytest.mark.parametrize("method", ["get", "post", "patch", "delete"])
def test_any_404_under_api_is_problem_json(api, path, method):
    assert_problem(getattr(api, method)(path), 404, "not_found")


@pytest.mark.parametrize(
    ("method", "path"),
    [("patch", "/api/v1/events/"), ("put", "/api/v1/events/bulk/"), ("delete", "/api/v1/rewards/"),
     ("post", "/api/v1/payouts/"), ("patch", "/api/v1/rewards/{reward}/approve/")],
)  # fmt: skip
def test_an_unsupported_method_is_405_problem_json(api, campaign, method, path):
    reward = ingest(campaign).reward
    response = getattr(api, method)(path.format(reward=reward.pk), {}, format="json")
    assert_problem(response, 405, "method_not_allowed")
    assert "Allow" in response


def test_person_filter_answers_the_same_for_another_brands_id_and_a_missing_one(api, campaign, rival_campaign):
    """Given a person of the rival brand with a reward and a payout, when the brand filters its
    rewards and payouts by that id and by an id nobody has, then both are an empty 200."""
    mine = ingest(campaign, email="mine@example.com")
    theirs = ingest(rival_campaign, email="theirs@example.com")
    make_payout([mine.reward])
    make_payout([theirs.reward])
    missing = theirs.event.person_id + 10_000
    for path in ("/api/v1/rewards/", "/api/v1/payouts/"):
        rival_answer = api.get(path, {"person": theirs.event.person_id})
        missing_answer = api.get(path, {"person": missing})
        assert rival_answer.status_code == missing_answer.status_code == 200
        assert rival_answer.json() == missing_answer.json() == {"next": None, "previous": None, "results": []}
        own = api.get(path, {"person": mine.event.person_id}).json()["results"]
        assert len(own) == 1


@pytest.mark.parametrize("value", ["abc", "1.5", "", "1e3", "0", "99999999999999999999"])
@pytest.mark.parametrize("path", ["/api/v1/rewards/", "/api/v1/payouts/"])
def test_a_person_filter_that_is_not_an_id_is_400(api, campaign, path, value):
    body = assert_problem(api.get(path, {"person": value}), 400, "validation_error")
    assert [e["field"] for e in body["errors"]] == ["person"]


@pytest.mark.parametrize("query", [{"status": ""}, {"outcome": ""}, {"received_after": ""}, {"type": "nope"}])
def test_a_filter_refuses_an_empty_or_unknown_value(api, campaign, query):
    """An empty enum or date is not "no filter": the schema does not allow it."""
    path = "/api/v1/rewards/" if "status" in query else "/api/v1/events/"
    body = assert_problem(api.get(path, query), 400, "validation_error")
    assert [e["field"] for e in body["errors"]] == list(query)


def test_a_date_filter_takes_an_offset_postgresql_cannot_store(api, campaign):
    """ISO 8601 allows +21:38; PostgreSQL does not (it was a 500): the filter compares in UTC."""
    ingest(campaign)
    response = api.get("/api/v1/events/", {"received_after": "0127-05-29T21:16:55+21:38"})
    assert response.status_code == 200 and len(response.json()["results"]) == 1
    assert_problem(api.get("/api/v1/events/", {"received_after": "0001-01-01T00:00:00+01:00"}), 400, "validation_error")
