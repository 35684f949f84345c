# People belong to one brand (issue 14: a shared e-mail let one brand repoint another's payouts).
#
# Nothing is re-pointed: every reward, payout, event and ledger account keeps the person row it
# had. A row that one brand knew (its own events, rewards, video submissions, WhatsApp codes, API
# registrations) gets that brand; a row nobody knew takes its cluster's brand. A cluster that
# merged rows of different brands is split along brands: each other brand's rows get their own
# root (its oldest row), so their rewards are paid into the account given to that brand.
# A row that several brands knew (the old resolver gave one row to a human both brands rewarded)
# cannot be split without moving money, so its whole cluster keeps no brand: no brand can find,
# read or repoint it, its rewards are paid where they were, and only the person, through their
# own claim link, can give it a new account. Events stored before this change may still point at
# a person of another brand; the composite key below checks every new one.

from collections import defaultdict

import django.db.models.deletion
from django.db import migrations, models
from django.db.models import Q
from django.utils import timezone

_CONSTRAINTS = [
    ("recipients_person", "person_id_brand_key", "UNIQUE (id, brand_id)"),
    (
        "recipients_identifier",
        "identifier_person_same_brand",
        "FOREIGN KEY (person_id, brand_id) REFERENCES recipients_person (id, brand_id) DEFERRABLE INITIALLY DEFERRED",
    ),
    (
        "recipients_person",
        "person_merged_same_brand",
        "FOREIGN KEY (merged_into_id, brand_id) REFERENCES recipients_person (id, brand_id) "
        "DEFERRABLE INITIALLY DEFERRED",
    ),
    (
        "campaigns_triggerevent",
        "trigger_event_person_same_brand",
        "FOREIGN KEY (person_id, brand_id) REFERENCES recipients_person (id, brand_id) NOT VALID",
    ),
]


def _brands_knowing(apps) -> dict[int, set[int]]:
    """person id → every brand that knew that row."""
    known: dict[int, set[int]] = defaultdict(set)
    TriggerEvent = apps.get_model("campaigns", "TriggerEvent")
    Reward = apps.get_model("campaigns", "Reward")
    VideoSubmission = apps.get_model("campaigns", "VideoSubmission")
    WhatsAppOptInCode = apps.get_model("recipients", "WhatsAppOptInCode")
    BrandPerson = apps.get_model("recipients", "BrandPerson")
    pairs = [
        TriggerEvent.objects.filter(person__isnull=False).values_list("person_id", "brand_id").distinct(),
        BrandPerson.objects.values_list("person_id", "brand_id").distinct(),
    ]
    for model in (Reward, VideoSubmission, WhatsAppOptInCode):
        rows = model.objects.filter(person__isnull=False).values_list("person_id", "campaign__brand_id")
        pairs.append(rows.distinct())
    for rows in pairs:
        for person_id, brand_id in rows:
            known[person_id].add(brand_id)
    return known


def people_assign_brands(apps, schema_editor):
    Person = apps.get_model("recipients", "Person")
    PersonEvent = apps.get_model("recipients", "PersonEvent")
    Identifier = apps.get_model("recipients", "Identifier")
    known = _brands_knowing(apps)
    brand_of = {person_id: next(iter(brands)) for person_id, brands in known.items() if len(brands) == 1}
    shared = {person_id for person_id, brands in known.items() if len(brands) > 1}
    clusters: dict[int, list] = defaultdict(list)
    for person in Person.objects.order_by("created_at", "id"):
        clusters[person.merged_into_id or person.id].append(person)
    now = timezone.now()
    for root_id, rows in clusters.items():
        if any(p.id in shared for p in rows):
            continue  # brand stays NULL for the whole cluster (module comment)
        brands_in_order = [brand_of[p.id] for p in rows if p.id in brand_of]
        cluster_brand = brand_of.get(root_id) or (brands_in_order[0] if brands_in_order else None)
        by_brand: dict[int | None, list] = defaultdict(list)
        for person in rows:
            by_brand[brand_of.get(person.id, cluster_brand)].append(person)
        for brand_id, members in by_brand.items():
            Person.objects.filter(id__in=[p.id for p in members]).update(brand_id=brand_id)
            if brand_id == cluster_brand:
                continue
            new_root = members[0]  # rows are in age order: the brand's oldest is its root
            others = [p.id for p in members[1:]]
            Person.objects.filter(id=new_root.id).update(merged_into=None, merged_at=None)
            Person.objects.filter(id__in=others).update(merged_into_id=new_root.id)
            PersonEvent.objects.create(
                person_id=new_root.id,
                kind="merged",
                source="migration",
                detail={"split_from": root_id, "members": others, "reason": "people_per_brand"},
                created_at=now,
            )
    for brand_id in set(Person.objects.exclude(brand_id=None).values_list("brand_id", flat=True)):
        Identifier.objects.filter(person__brand_id=brand_id).update(brand_id=brand_id)


def _constraints_add(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table, name, definition in _CONSTRAINTS:
        schema_editor.execute(f"ALTER TABLE {table} ADD CONSTRAINT {name} {definition}")


def _constraints_drop(apps, schema_editor):
    if schema_editor.connection.vendor != "postgresql":
        return
    for table, name, _ in reversed(_CONSTRAINTS):
        schema_editor.execute(f"ALTER TABLE {table} DROP CONSTRAINT IF EXISTS {name}")


class Migration(migrations.Migration):
    dependencies = [
        ("recipients", "0003_lean_indexes"),
        ("campaigns", "0012_partial_entry_uniques"),
    ]

    operations = [
        migrations.AddField(
            model_name="person",
            name="brand",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="campaigns.brand",
            ),
        ),
        migrations.AddField(
            model_name="identifier",
            name="brand",
            field=models.ForeignKey(
                blank=True,
                db_index=False,
                null=True,
                on_delete=django.db.models.deletion.PROTECT,
                related_name="+",
                to="campaigns.brand",
            ),
        ),
        migrations.RunPython(people_assign_brands, migrations.RunPython.noop),
        migrations.RemoveConstraint(model_name="identifier", name="identifier_active_unique"),
        migrations.AddConstraint(
            model_name="identifier",
            constraint=models.UniqueConstraint(
                condition=Q(is_active=True), fields=("brand", "kind", "value"), name="identifier_active_unique"
            ),
        ),
        migrations.AddIndex(
            model_name="identifier", index=models.Index(fields=["kind", "value"], name="identifier_kind_value_idx")
        ),
        migrations.AddIndex(model_name="person", index=models.Index(fields=["brand", "id"], name="person_brand_idx")),
        migrations.AlterField(
            model_name="personevent",
            name="kind",
            field=models.CharField(
                choices=[
                    ("merged", "Merged"),
                    ("iban_set", "IBAN set"),
                    ("link_refused", "Link refused (identifier not proven)"),
                    ("erased", "Erased"),
                ],
                max_length=16,
            ),
        ),
        migrations.DeleteModel(name="BrandPerson"),
        migrations.RunPython(_constraints_add, _constraints_drop),
    ]
