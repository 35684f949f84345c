# The ops roles of core/roles.py as groups. Permissions are created after migrations by default;
# they are created here first so the groups can hold them on a new database.

from django.db import migrations

from core.migrations._roles import ops_roles_migrate
from core.roles import ROLES


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
    operations = [migrations.RunPython(ops_roles_migrate, roles_remove)]
