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
