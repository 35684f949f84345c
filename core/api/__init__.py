"""The partner API's shared machinery: API-key authentication and scopes (``auth``,
``permissions``), one error format (``errors``), Idempotency-Key handling (``idempotency``),
cursor pagination, per-key rate limits (``throttling``), the OpenAPI extensions (``schema``) and
the base view every endpoint derives from (``views``)."""
