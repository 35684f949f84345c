"""The audit trail across objects: every reward, payout, campaign and person event, the bank side's
staff actions and payout batches' (built, approved, downloaded, expired) in one list,
filtered by actor, object, kind and time, exported as CSV with the same filters. Read-only: the
rows are append-only in PostgreSQL and hash-chained (``core.audit_sql``)."""

import csv

from django.contrib import admin
from django.core.exceptions import PermissionDenied
from django.db.models import OuterRef, QuerySet, Subquery
from django.http import HttpRequest, StreamingHttpResponse
from django.urls import path
from django_q.admin import FailAdmin
from django_q.models import Failure, Success

from core.audit_models import AuditTrail
from core.replica import LagTolerantChangelist, lag_tolerant

CSV_COLUMNS = ["created_at", "object_type", "object_id", "kind", "actor", "reason", "data"]


class _Echo:
    def write(self, value: str) -> str:
        return value


@admin.register(AuditTrail)
class AuditTrailAdmin(LagTolerantChangelist, admin.ModelAdmin):
    list_display = ["created_at", "object_type", "object_id", "kind", "actor", "reason"]
    list_filter = ["object_type", "kind", ("actor", admin.RelatedOnlyFieldListFilter), "created_at"]
    search_fields = ["=object_id", "kind", "reason"]
    date_hierarchy = "created_at"
    list_select_related = ["actor"]
    show_full_result_count = False  # a count over the union of six tables on every page load
    readonly_fields = ["uid", *CSV_COLUMNS]
    actions = None

    def has_add_permission(self, request: HttpRequest) -> bool:
        return False

    def has_change_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def has_delete_permission(self, request: HttpRequest, obj=None) -> bool:
        return False

    def get_urls(self):
        export = path("export/", self.admin_site.admin_view(self.export_csv), name="core_audittrail_export")
        return [export, *super().get_urls()]

    def export_csv(self, request: HttpRequest) -> StreamingHttpResponse:
        """The rows the change list shows with the request's filters, all pages, as CSV."""
        if not self.has_view_permission(request):
            raise PermissionDenied
        rows = lag_tolerant(self.get_changelist_instance(request).get_queryset(request)).iterator(chunk_size=2000)
        writer = csv.writer(_Echo())

        def lines():
            yield writer.writerow(CSV_COLUMNS)
            for row in rows:
                actor = row.actor.get_username() if row.actor_id else ""
                values = [row.created_at.isoformat(), row.object_type, row.object_id, row.kind, actor, row.reason]
                yield writer.writerow([*values, row.data])

        response = StreamingHttpResponse(lines(), content_type="text/csv; charset=utf-8")
        response["Content-Disposition"] = 'attachment; filename="audit-trail.csv"'
        return response


admin.site.unregister(Failure)


@admin.register(Failure)
class FailedTaskAdmin(FailAdmin):
    """django-q2's failed tasks, saying for each whether a later run of the same task (same
    function, same arguments) succeeded: after a dropped connection the sweeps redo the work, and
    a failure with nothing left to do should not look like one that still needs a person."""

    list_display = [*FailAdmin.list_display, "since_then"]

    def get_queryset(self, request: HttpRequest) -> QuerySet:
        # One subquery for the page, not a query per row.
        later = Success.objects.filter(
            func=OuterRef("func"), args=OuterRef("args"), started__gt=OuterRef("started")
        ).order_by("started")
        return super().get_queryset(request).annotate(redone_at=Subquery(later.values("stopped")[:1]))

    @admin.display(description="since then")
    def since_then(self, obj: Failure) -> str:
        if obj.redone_at is None:
            return "not redone yet"
        return f"redone: succeeded at {obj.redone_at:%Y-%m-%d %H:%M:%S}"
