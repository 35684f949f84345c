"""Recipients' audit table (``core.audit_sql``): person events, one stream per person.
Registered by ``RecipientsConfig.ready``."""

from core.audit_sql import AuditTable


def _themselves(people: list[int]) -> list[int]:
    return list(people)


PERSON_EVENTS = AuditTable(
    "recipients_personevent",
    "person_id",
    "person",
    ("id", "person_id", "kind", "actor_id", "source", "created_at"),
    None,
    "detail",
    add_stream_index=True,
    person_streams=_themselves,
)


# Marketing consent's trail: one stream per person (a consent's events are written under the
# person's root lock); an export's row names nobody and is a chain of its own.
CONSENT_EVENTS = AuditTable(
    "recipients_consentevent",
    "person_id",
    "consent",
    ("id", "brand_id", "person_id", "consent_id", "kind", "channel", "actor_id", "created_at"),
    None,
    "data",
    add_stream_index=True,
    nullable_stream=True,
    person_streams=_themselves,
)
