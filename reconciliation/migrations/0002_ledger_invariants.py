"""Install the ledger's database-level invariants (triggers and guards) from reconciliation/sql/."""

import re
from pathlib import Path

from django.db import migrations

SQL_DIR = Path(__file__).resolve().parent.parent / "sql"


def install(apps, schema_editor):
    vendor = schema_editor.connection.vendor
    if vendor == "postgresql":
        schema_editor.execute((SQL_DIR / "postgresql.sql").read_text(), params=None)
    elif vendor == "sqlite":
        script = (SQL_DIR / "sqlite.sql").read_text()
        for statement in re.findall(r"CREATE TRIGGER.*?\bEND;", script, flags=re.S):
            schema_editor.execute(statement, params=None)


class Migration(migrations.Migration):
    dependencies = [("reconciliation", "0001_initial")]
    operations = [migrations.RunPython(install, migrations.RunPython.noop)]
