# Support answers access requests: the role table gained recipients.export_person, so the
# groups are synced again once that permission exists.

from django.db import migrations

from core.migrations._roles import ops_roles_migrate


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0004_audit_trail"),
        ("recipients", "0005_person_export"),
    ]
    operations = [migrations.RunPython(ops_roles_migrate, migrations.RunPython.noop)]
