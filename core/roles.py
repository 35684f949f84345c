"""Ops roles: the staff groups and exactly the permissions each job needs (issue 16). A data
migration creates them (``core/migrations``) and calls ``ops_roles_sync`` again whenever this
table changes; ``seed_demo`` gives the demo ``ops`` user every role. Moving money stays
four-eyes whatever roles one person holds: the services refuse an approval by its requester."""

from django.contrib.auth.management import create_permissions

_SEE_PEOPLE_AND_MONEY = [
    "campaigns.view_brand",
    "campaigns.view_campaign",
    "campaigns.view_reward",
    "campaigns.view_rewardevent",
    "campaigns.view_triggerevent",
    "payouts.view_payout",
    "payouts.view_payoutevent",
    "payouts.view_payoutattempt",
    "recipients.view_person",
    "recipients.view_personevent",
]
_SEE_THE_BOOKS = [
    "reconciliation.view_account",
    "reconciliation.view_journalentry",
    "reconciliation.view_posting",
    "reconciliation.view_hold",
    "reconciliation.view_ledger_reports",
    "reconciliation.view_platformbankaccount",
    "reconciliation.view_statementimport",
    "reconciliation.view_bankstatement",
    "reconciliation.view_statementline",
    "reconciliation.view_match",
    "reconciliation.view_suggestion",
    "reconciliation.view_reconciliationaction",
]

ROLES: dict[str, list[str]] = {
    # Decides rewards held for review (fraud signals, large amounts).
    "Reviewer": [
        *_SEE_PEOPLE_AND_MONEY,
        "campaigns.view_rewardinreview",
        "campaigns.change_rewardinreview",
        "campaigns.change_reward",
    ],
    # The second pair of eyes on large payouts and pain.001 batches.
    "Payout approver": [
        *_SEE_PEOPLE_AND_MONEY,
        "payouts.approve_payout",
        "payouts.view_payoutbatch",
        "payouts.approve_payoutbatch",
    ],
    # Imports bank statements and explains their lines.
    "Reconciler": [*_SEE_PEOPLE_AND_MONEY, *_SEE_THE_BOOKS, "reconciliation.reconcile_statement"],
    # Answers people and brands: retries or stops a payout, exports or erases a person on request;
    # reads what people were told (notices) and who did what (the audit trail).
    "Support": [
        *_SEE_PEOPLE_AND_MONEY,
        "recipients.view_notice",
        "recipients.view_noticedelivery",
        "core.view_audittrail",
        "payouts.retry_payout",
        "payouts.cancel_payout",
        "recipients.erase_person",
        "recipients.export_person",
        "campaigns.view_videosubmission",
    ],
    # Sends the money out and signs off what cannot be explained, and answers the auditors.
    "Finance admin": [
        *_SEE_PEOPLE_AND_MONEY,
        *_SEE_THE_BOOKS,
        "core.view_audittrail",
        "payouts.view_payoutbatch",
        "payouts.download_payoutbatch",
        "payouts.view_routerule",
        "reconciliation.approve_write_off",
    ],
}


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


def ops_roles_migrate(apps, schema_editor) -> None:
    """The ``RunPython`` of every migration that (re)syncs the roles: permissions are created
    after migrations by default, so they are created here first, then the groups are synced with
    the historical models (``missing_ok``: a later model's permissions may not exist yet)."""
    for app_config in apps.get_app_configs():
        app_config.models_module = True
        create_permissions(app_config, apps=apps, verbosity=0)
        app_config.models_module = None
    ops_roles_sync(
        group_model=apps.get_model("auth", "Group"),
        permission_model=apps.get_model("auth", "Permission"),
        missing_ok=True,
    )
