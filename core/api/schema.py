"""drf-spectacular: the API-key security scheme and the problem-details responses every
operation can give, documented once here instead of on each view."""

from drf_spectacular.extensions import OpenApiAuthenticationExtension
from drf_spectacular.openapi import AutoSchema
from drf_spectacular.utils import OpenApiParameter
from drf_spectacular.views import SpectacularAPIView

from core.api.errors import PROBLEM_CONTENT_TYPE, ProblemSerializer
from core.api.fields import MAX_JSON_DEPTH
from core.api.idempotency import KEY_PATTERN, MAX_KEY_LENGTH

_COMMON = ("400", "401", "403", "429")
_WRITES = ("404", "409", "413", "415", "422")
_DETAIL = ("404",)

IDEMPOTENCY_KEY_PARAMETER = OpenApiParameter(
    name="Idempotency-Key",
    location=OpenApiParameter.HEADER,
    required=False,
    # The server's own rule (core.api.idempotency.key_validate), so generated clients check it too.
    type={"type": "string", "minLength": 1, "maxLength": MAX_KEY_LENGTH, "pattern": KEY_PATTERN},
    description=(
        f"Optional. Any unique string of 1 to {MAX_KEY_LENGTH} visible ASCII characters, no spaces (a UUID "
        "is fine). Sending the same request again with the same key returns the first response again, "
        "with `Idempotent-Replayed: true`; the same key with another body gives 422, and while the first "
        "request runs, 409. Keys are kept 24 hours."
    ),
)


# For an operation that must never run twice for one request (a partial refund): the same header,
# required.
IDEMPOTENCY_KEY_REQUIRED = OpenApiParameter(
    name=IDEMPOTENCY_KEY_PARAMETER.name,
    location=OpenApiParameter.HEADER,
    required=True,
    type=IDEMPOTENCY_KEY_PARAMETER.type,
    description="Required here: the same key never acts twice, even after the replay is no longer stored.",
)


class ApiKeyAuthScheme(OpenApiAuthenticationExtension):
    target_class = "core.api.auth.ApiKeyAuthentication"
    name = "ApiKey"

    def get_security_definition(self, auto_schema):
        return {
            "type": "http",
            "scheme": "bearer",
            "bearerFormat": "jbk_<prefix>_<secret>",
            "description": "A brand's API key from the portal: `Authorization: Bearer jbk_…`.",
        }


class ProblemAutoSchema(AutoSchema):
    """Adds the error responses (problem+json) and the Idempotency-Key header."""

    def _get_response_bodies(self, direction="response"):
        responses = super()._get_response_bodies(direction)
        codes = list(_COMMON)
        if self.method in ("POST", "PATCH", "DELETE"):
            codes += _WRITES
        elif self.path_regex and "{" in self.path:
            codes += _DETAIL
        for code in codes:
            responses.setdefault(
                code, self._get_response_for_code(ProblemSerializer, code, media_types=[PROBLEM_CONTENT_TYPE])
            )
        return responses

    def get_override_parameters(self):
        params = super().get_override_parameters()
        declared = any(getattr(p, "name", None) == IDEMPOTENCY_KEY_PARAMETER.name for p in params)
        if self.method in ("POST", "PATCH") and not declared:  # an operation may require it
            params = [*params, IDEMPOTENCY_KEY_PARAMETER]
        return params


API_GUIDE = """
Send trigger events, register people, read rewards, payouts and balances, receive signed webhooks.

## Authentication
Every call carries a brand's API key: `Authorization: Bearer jbk_<prefix>_<secret>`. Keys have
scopes: `read` (GET), `write` (campaigns, rules, people, reward decisions, webhook endpoints) and
`events` (POST trigger events). Objects of other brands are never visible: their ids answer 404.

## Test mode
A test mode key (`jbk_test_<prefix>_<secret>`, made in the portal's test mode) works on the brand's
test tenant: test campaigns, people, rewards and payouts, paid on the sandbox rail with test money;
its webhooks carry `"livemode": false`. Test and live objects never mix: a test key asking for a
live object's id gets 404, and so does a live key asking for a test one.

## Types, text and time
Amounts are integers in minor units of the named currency (`4999` EUR = €49.99). Every field takes
exactly the JSON type the schema declares: a number where a string is declared (or a string where
an integer is) answers 400 `validation_error`; nothing is coerced. Text may not contain NUL
(`\\u0000`) or an unpaired surrogate (`\\ud800`), also inside `evidence`: the field error's code is
`invalid_text` (in a bulk call, that item's error; the others are stored). A body may nest objects
and arrays at most {depth} levels deep (`json_too_deep`). Datetimes are RFC 3339; the API answers
them in UTC (`Z`).

## Idempotency
Send `Idempotency-Key: <unique string>` (1 to 255 visible ASCII characters) with every POST and
PATCH. A retry with the same key and the same body returns the first response again with
`Idempotent-Replayed: true`; the same key with a different body answers 422
`idempotency_key_reused`; while the first request is still running, 409 `idempotency_in_flight`.
Keys are kept for 24 hours. A method a path does not have answers 405 and leaves the key unused.
A replay never shows a secret again: a webhook endpoint's `secret` is `null` in it. Trigger events
are also idempotent by their `external_id`, forever.

## Pagination, filters, rate limits
Lists are newest first with opaque cursors: follow `next` (a cursor this API did not give out
answers 400 `invalid_cursor`). `limit` is 1–200. A filter on an id (`person`) takes an integer;
an id that is not yours matches nothing, like one that does not exist. Each key may make
a limited number of requests per minute; past it, 429 with `Retry-After` (seconds).

## Errors
Every error is `application/problem+json` (RFC 9457) with a stable `code`; field errors are in
`errors` as `{field, code, message}`. Codes:

{codes}

Services add their own codes with the same shape, e.g. `invalid_iban`, `invalid_phone`,
`no_identifier`, `person_shared`, `invalid_webhook_url`, `campaign_not_found`.

## Webhooks
Register an endpoint (`POST /api/v1/webhook-endpoints/`) and keep the `secret` it returns. The URL
must be https on a public internet address (private, loopback and link-local addresses, also behind
a name, answer 400 `invalid_webhook_url`). Each
delivery is `POST {"id", "type", "created", "livemode", "data"}` with
`JoyBack-Signature: t=<unix seconds>,v1=<hex>`, where `v1` is HMAC-SHA256 of `"<t>.<raw body>"`
keyed with the secret. Verify it before trusting the body:

1. split the header on `,`; take `t` and every `v1`;
2. compute the HMAC over the exact bytes you received, prefixed with `t` and a dot;
3. accept if it equals any `v1` (constant-time compare) and `t` is within 5 minutes of your clock.

After a secret rotation the header carries two `v1` values (new and old secret) for 24 hours.
Deliveries retry with exponential backoff for up to 72 hours; answer 2xx quickly and
de-duplicate by `id`. An endpoint failing for 72 hours is disabled and the brand's owners are
e-mailed; after fixing the receiver, `POST /api/v1/webhook-endpoints/{id}/enable/` turns it back on
and sends again the deliveries of the last 72 hours. Types: `reward.held`, `reward.payable`, `reward.voided`,
`reward.expired`, `payout.submitted`, `payout.settled`, `payout.failed`, `payout.returned`, `campaign.paused`,
`campaign.budget_threshold`, `topup.received`.

`reward.expired`: the person gave no bank account within the campaign's `claim_window_days` (they were
reminded after a third and two thirds of it), so the reward's amount went back to the campaign budget,
or to the brand's funds once the campaign is closed (`data.returned_to`: `campaign_budget` or
`brand_funds`); the fee is not returned.
"""


def describe_api(result, generator, request, public):
    """Postprocessing hook: the partner's guide (auth, idempotency, errors, webhooks) as the
    schema's description, with the error-code table generated from ``ERROR_CODES``."""
    from core.api.errors import ERROR_CODES

    codes = "\n".join(f"- `{code}`: {text}" for code, text in ERROR_CODES.items())
    result["info"]["description"] = API_GUIDE.replace("{codes}", codes).replace("{depth}", str(MAX_JSON_DEPTH)).strip()
    return result


class SchemaView(SpectacularAPIView):
    """The OpenAPI document. A browser asking for a page gets the YAML shown as text instead of
    a file download (the OpenAPI media type makes browsers save it); tools keep the OpenAPI
    media type, and ``?format=json`` the JSON."""

    def dispatch(self, request, *args, **kwargs):
        response = super().dispatch(request, *args, **kwargs)
        if (
            response.status_code == 200
            and "text/html" in request.headers.get("Accept", "")
            and "format" not in request.GET
        ):
            response.render()
            response["Content-Type"] = "text/plain; charset=utf-8"
            response.headers.pop("Content-Disposition", None)
        return response
