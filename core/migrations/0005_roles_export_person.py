# Support answers access requests: the role table gained recipients.export_person, so the
# groups are synced again once that permission exists.

from django.contrib.auth.management import create_permissions
from django.db import migrations

from core.roles import ops_roles_sync


def roles_sync(apps, schema_editor):
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    ops_roles_sync(
        group_model=apps.get_model("auth", "Group"),
        permission_model=apps.get_model("auth", "Permission"),
        missing_ok=True,
    )


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0004_audit_trail"),
        ("recipients", "0005_person_export"),
    ]
    operations = [migrations.RunPython(roles_sync, migrations.RunPython.noop)]
