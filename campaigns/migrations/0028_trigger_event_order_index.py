"""The refunds' look-up of an order's purchases (``trigger_event_order_idx``), built without
blocking ingestion: the events table takes writes all day (``core.migration_ops``)."""

from django.db import migrations, models

from core.migration_ops import AddIndexOnline


class Migration(migrations.Migration):
    atomic = False

    dependencies = [("campaigns", "0027_plan_charges_schedule")]

    operations = [
        AddIndexOnline(
            model_name="triggerevent",
            index=models.Index(
                condition=~models.Q(order_id=""), fields=["brand", "order_id"], name="trigger_event_order_idx"
            ),
        ),
    ]
