# The ops roles of core/roles.py as groups. Permissions are created after migrations by default;
# they are created here first so the groups can hold them on a new database.

from django.contrib.auth.management import create_permissions
from django.db import migrations

from core.roles import ROLES, ops_roles_sync


def roles_create(apps, schema_editor):
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    ops_roles_sync(
        group_model=apps.get_model("auth", "Group"),
        permission_model=apps.get_model("auth", "Permission"),
        missing_ok=True,
    )


def roles_remove(apps, schema_editor):
    apps.get_model("auth", "Group").objects.filter(name__in=list(ROLES)).delete()


class Migration(migrations.Migration):
    dependencies = [
        ("core", "0002_schedules"),
        ("auth", "0012_alter_user_first_name_max_length"),
        ("contenttypes", "0002_remove_content_type_name"),
        ("campaigns", "0013_webhook_delivery_queued"),
        ("payouts", "0002_payouts_tick_schedule"),
        ("recipients", "0004_people_per_brand"),
        ("reconciliation", "0010_partial_entry_uniques"),
    ]
    operations = [migrations.RunPython(roles_create, roles_remove)]
