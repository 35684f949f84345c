"""Ops roles: the staff groups and exactly the permissions each job needs (issue 16). A data
migration creates them (``core/migrations``, through ``core/migrations/_roles.py``) and calls
``ops_roles_sync`` again whenever a role's permissions change; ``seed_demo`` gives the demo
``ops`` user every role. Moving money stays four-eyes whatever roles one person holds: the
services refuse an approval by its requester."""

from collections.abc import Iterable, Mapping

# The role registry: role → the permissions it holds. Core's own are here; every app grants its
# own from its ``AppConfig.ready`` (``role_permissions_grant``, its ``roles`` module), so this
# table names no permission of an app above core.
ROLES: dict[str, list[str]] = {
    # Decides rewards held for review (fraud signals, large amounts).
    "Reviewer": [],
    # The second pair of eyes on large payouts and pain.001 batches.
    "Payout approver": [],
    # Imports bank statements and explains their lines.
    "Reconciler": [],
    # Answers people and brands: retries or stops a payout, exports or erases a person on request;
    # reads what people were told (notices) and who did what (the audit trail).
    "Support": ["core.view_audittrail"],
    # Sends the money out and signs off what cannot be explained, and answers the auditors.
    "Finance admin": ["core.view_audittrail"],
}


def role_permissions_grant(grants: Mapping[str, Iterable[str]]) -> None:
    """Add an app's permissions (``app_label.codename``) to the roles named. Granting one twice
    is harmless. Raises KeyError for a role that does not exist: an app does not invent roles."""
    for role, permissions in grants.items():
        held = ROLES[role]
        held.extend(p for p in permissions if p not in held)


def ops_roles_sync(*, group_model, permission_model, missing_ok: bool = False) -> None:
    """Make each role's group hold exactly its permissions (models given by the caller, so a
    migration passes its historical ones). Raises LookupError naming a permission that does not
    exist, rather than granting less than the table says — except with ``missing_ok``, for a
    migration that runs before a later model's permissions exist (the later migration that
    grants them syncs again; ``tests/core/test_roles.py`` checks the end result)."""
    for name, perms in ROLES.items():
        wanted = []
        for perm in perms:
            app_label, codename = perm.split(".")
            found = permission_model.objects.filter(content_type__app_label=app_label, codename=codename).first()
            if found is None and not missing_ok:
                raise LookupError(f"role {name!r}: no permission {perm}")
            if found is not None:
                wanted.append(found)
        group, _ = group_model.objects.get_or_create(name=name)
        group.permissions.set(wanted)
