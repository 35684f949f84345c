"""Reinstall the ledger's triggers: holds refuse inactive accounts, account ids are immutable."""

import importlib

from django.db import migrations


def reinstall(apps, schema_editor):
    importlib.import_module("reconciliation.migrations.0002_ledger_invariants").install(apps, schema_editor)


class Migration(migrations.Migration):
    dependencies = [("reconciliation", "0006_posting_account_checked_by_trigger")]
    operations = [migrations.RunPython(reinstall, migrations.RunPython.noop)]
