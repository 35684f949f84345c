"""The audit trail's tables on the Django side (``core.audit_sql`` has the database side).

``AuditSeal``: what ``audit_verify --seal`` proved, per audit table, appended daily and chained.
``AuditTrail``: a read-only view over every audit table (reward, payout, campaign and person
events, the bank side's staff actions: imports, matches by hand, write-off requests and their
four-eyes decisions, and payout batches' staff actions: a pain.001 file built, approved, downloaded
or expired, and marketing consents given or withdrawn and exports of a brand's contacts), one row
per event with the object it is about: the admin's cross-object view (core migrations 0004, 0008,
0009 and 0013 define it).
"""

from django.conf import settings
from django.db import models


class AuditSeal(models.Model):
    created_at = models.DateTimeField()
    tables = models.JSONField(help_text="table → {max_id, count, digest}: every row up to max_id, as sealed.")
    prev_hash = models.CharField(max_length=64, blank=True, default="")
    seal_hash = models.CharField(max_length=64, unique=True)

    def __str__(self) -> str:
        return f"audit seal #{self.pk} {self.seal_hash[:12]}…"


class AuditTrail(models.Model):
    uid = models.CharField(max_length=40, primary_key=True)
    object_type = models.CharField(max_length=10)
    object_id = models.BigIntegerField()
    kind = models.CharField(max_length=40)
    actor = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, on_delete=models.DO_NOTHING, db_constraint=False, related_name="+"
    )
    reason = models.TextField()
    data = models.JSONField()
    created_at = models.DateTimeField()

    class Meta:
        managed = False
        db_table = "core_audittrail"
        ordering = ["-created_at", "-uid"]
        verbose_name = "audit event"
        verbose_name_plural = "audit trail"

    def __str__(self) -> str:
        return f"{self.kind} {self.object_type} #{self.object_id}"
