"""The cross-object audit view also lists the marketing-consent trail (recipients 0014): a consent
given or withdrawn is an event of the person (``person``, their id), so it shows in the person's
history with the other person events; an export of a brand's contacts names nobody and is an
event of the brand (``brand``). ``data`` carries the brand, the channel and the consent's id.

The selects of 0009 stay as they were, one more is appended (PostgreSQL replaces the view in
place; SQLite drops it first)."""

import importlib

from django.db import migrations

_0008 = importlib.import_module("core.migrations.0008_audit_trail_bank_actions")
_0009 = importlib.import_module("core.migrations.0009_audit_trail_payout_batches")

CONSENTS_POSTGRESQL = (
    "SELECT 'consent:' || e.id AS uid, CASE WHEN e.person_id IS NULL THEN 'brand' ELSE 'person' END AS object_type, "
    "coalesce(e.person_id, e.brand_id) AS object_id, e.kind::varchar AS kind, e.actor_id AS actor_id, "
    "''::varchar AS reason, e.data || jsonb_strip_nulls(jsonb_build_object('brand', e.brand_id, "
    "'channel', e.channel, 'consent', e.consent_id)) AS data, e.created_at AS created_at "
    "FROM recipients_consentevent e"
)
CONSENTS_SQLITE = (
    "SELECT 'consent:' || e.id AS uid, CASE WHEN e.person_id IS NULL THEN 'brand' ELSE 'person' END AS object_type, "
    "coalesce(e.person_id, e.brand_id) AS object_id, e.kind AS kind, e.actor_id AS actor_id, '' AS reason, "
    "json_patch(e.data, json_object('brand', e.brand_id, 'channel', e.channel, 'consent', e.consent_id)) AS data, "
    "e.created_at AS created_at FROM recipients_consentevent e"
)


def replace_view(with_consents: bool):
    def run(apps, schema_editor):
        postgresql = schema_editor.connection.vendor == "postgresql"
        cast = {"kind": "e.kind::varchar", "reason": "e.reason::varchar"} if postgresql else {}
        select = (
            _0008.EVENTS
            + " UNION ALL "
            + (_0008.BANK_POSTGRESQL if postgresql else _0008.BANK_SQLITE)
            + " UNION ALL "
            + _0009.BATCHES.format(kind=cast.get("kind", "e.kind"), reason=cast.get("reason", "e.reason"))
        )
        if with_consents:
            select += " UNION ALL " + (CONSENTS_POSTGRESQL if postgresql else CONSENTS_SQLITE)
        with schema_editor.connection.cursor() as cursor:
            if postgresql:
                cursor.execute(f"CREATE OR REPLACE VIEW core_audittrail AS {select}")
            else:
                cursor.execute("DROP VIEW IF EXISTS core_audittrail")
                cursor.execute(f"CREATE VIEW core_audittrail AS {select}")

    return run


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0013_inbound_provider_by_registry"),
        ("recipients", "0015_marketing_consent"),
    ]

    operations = [migrations.RunPython(replace_view(with_consents=True), replace_view(with_consents=False))]
