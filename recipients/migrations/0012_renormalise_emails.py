"""E-mail identifiers stored before ``email_normalise`` folded full-width letters, invisible
characters and Unicode domains into one spelling are rewritten in today's spelling, so the
next look-up with any spelling finds them.

Only values outside plain ASCII, or with an ``xn--`` label, can change: the others were already
in today's form, so only those rows are read. A value whose new spelling another active
identifier of the brand already holds stays as it is: two people of the brand then hold one
address in two spellings, and joining them is a merge, which is the resolver's to make (with its
locks and audit rows) when the next event names both — not a migration's. A value today's rules
refuse also stays: it still names its person for history."""

from django.db import migrations
from django.db.models import Q

from core.exceptions import InvalidInput
from recipients.normalise import email_normalise


def forward(apps, schema_editor):
    Identifier = apps.get_model("recipients", "Identifier")
    candidates = (
        Identifier.objects.filter(kind="email", is_active=True)
        .filter(Q(value__regex=r"[^\x01-\x7f]") | Q(value__contains="xn--"))
        .order_by("id")
        .values_list("id", "brand_id", "value")
    )
    for identifier_id, brand_id, value in candidates.iterator(chunk_size=2000):
        try:
            spelled = email_normalise(value)
        except InvalidInput:
            continue
        if spelled == value:
            continue
        taken = Identifier.objects.filter(brand_id=brand_id, kind="email", value=spelled, is_active=True)
        if not taken.exists():
            Identifier.objects.filter(pk=identifier_id).update(value=spelled)


class Migration(migrations.Migration):
    dependencies = [("recipients", "0011_claim_links_and_account_changes")]

    operations = [migrations.RunPython(forward, migrations.RunPython.noop, elidable=True)]
