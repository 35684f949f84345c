"""The ``RunPython`` of every migration that (re)syncs the ops roles (``core.roles``). Not a
migration (the leading underscore keeps the loader away)."""

from django.contrib.auth.management import create_permissions

from core.roles import ops_roles_sync


def ops_roles_migrate(apps, schema_editor) -> None:
    """Permissions are created after migrations by default, so they are created here first, then
    the groups are synced with the historical models (``missing_ok``: a later model's permissions
    may not exist yet)."""
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    ops_roles_sync(
        group_model=apps.get_model("auth", "Group"),
        permission_model=apps.get_model("auth", "Permission"),
        missing_ok=True,
    )
