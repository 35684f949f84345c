"""Staff API: import a bank statement file (camt.053 / camt.054, or a bank's CSV export in a
registered format) — the same service as the admin upload and the ``statement_import`` command.

For ops tooling, not partners: it authenticates the Django session of a staff user (so in
production the admin's two-factor login), with CSRF, and needs ``reconciliation.reconcile_statement``.
No Idempotency-Key is needed: the file's SHA-256 is the key (the same bytes twice → ``replayed``,
nothing changes). Errors are the API's problem details; a refused file imports nothing.
"""

from allauth.mfa.utils import is_mfa_enabled
from django.conf import settings
from drf_spectacular.utils import OpenApiExample, extend_schema, inline_serializer
from rest_framework import exceptions as drf
from rest_framework import serializers
from rest_framework.authentication import SessionAuthentication
from rest_framework.parsers import MultiPartParser
from rest_framework.permissions import IsAuthenticated
from rest_framework.response import Response
from rest_framework.views import APIView

from core.api.errors import api_exception_handler
from core.api.schema import ProblemAutoSchema
from core.exceptions import InvalidInput, PermissionDenied
from reconciliation.admin.bank import RECONCILE
from reconciliation.services.statements import statement_import
from reconciliation.statements.errors import StatementParseError

_Result = inline_serializer(
    "StatementImportResult",
    {
        "import_id": serializers.IntegerField(),
        "replayed": serializers.BooleanField(),
        "statements": serializers.ListField(child=serializers.CharField()),
        "skipped_statements": serializers.ListField(child=serializers.CharField()),
        "new_lines": serializers.IntegerField(),
        "duplicate_lines": serializers.IntegerField(),
        "possible_duplicates": serializers.IntegerField(),
        "balance_mismatches": serializers.ListField(child=serializers.CharField()),
    },
)


class StatementImportView(APIView):
    authentication_classes = [SessionAuthentication]
    permission_classes = [IsAuthenticated]
    parser_classes = [MultiPartParser]
    schema = ProblemAutoSchema()

    def get_exception_handler(self):
        return api_exception_handler

    def handle_exception(self, exc):
        # DRF's own refusals map to the partner API's codes, which speak of API keys; this endpoint
        # takes a staff session, so say what is missing in its terms.
        if isinstance(exc, drf.NotAuthenticated | drf.AuthenticationFailed):
            exc = PermissionDenied(
                "Sign in to the admin as staff: this endpoint takes the admin session, not an API key.",
                code="login_required",
            )
        elif isinstance(exc, drf.PermissionDenied) and str(exc.detail).startswith("CSRF Failed"):
            exc = PermissionDenied(
                f"{exc.detail} Send the csrftoken cookie's value in the X-CSRFToken header.", code="csrf_failed"
            )
        return super().handle_exception(exc)

    @extend_schema(
        operation_id="staff_statement_import",
        tags=["staff"],
        summary="Import a bank statement file (staff)",
        request={
            "multipart/form-data": inline_serializer(
                "StatementUpload",
                {
                    "file": serializers.FileField(),
                    "format": serializers.CharField(
                        required=False,
                        help_text="A registered statement format (camt.053, camt.054, csv:wise, "
                        "csv:revolut-business …); default: the account's, else camt as the file says.",
                    ),
                    "bank_account": serializers.IntegerField(
                        required=False, help_text="The platform bank account's id; needed for a CSV export."
                    ),
                },
            )
        },
        responses={201: _Result, 200: _Result},
        examples=[
            OpenApiExample(
                "Imported",
                response_only=True,
                status_codes=["201"],
                value={
                    "import_id": 12,
                    "replayed": False,
                    "statements": ["STMT-2026-11-28"],
                    "skipped_statements": [],
                    "new_lines": 1840,
                    "duplicate_lines": 0,
                    "possible_duplicates": 0,
                    "balance_mismatches": [],
                },
            )
        ],
    )
    def post(self, request):
        """201 with what was imported (matching runs in the background), 200 for a file imported
        before. 400 ``file_missing`` / a parse code (``malformed_xml``, ``dtd_forbidden``,
        ``file_too_large``, ``invalid_row`` with its line, ``format_mismatch`` …) /
        ``unknown_statement_format`` / ``bank_account_required`` / ``account_mismatch`` /
        ``unknown_bank_account``; 403 ``login_required`` (no staff session),
        ``csrf_failed``, ``permission_denied`` or ``mfa_required``; 409 ``import_conflict`` when the
        same statement is being imported at this moment (upload again)."""
        user = request.user
        if not (user.is_staff and user.has_perm(RECONCILE)):
            raise PermissionDenied("Importing statements needs the reconcile_statement permission.")
        # The admin's rule (StaffTwoFactorMiddleware guards /admin/ only): no second factor, no import.
        if getattr(settings, "ADMIN_REQUIRES_TWO_FACTOR", False) and not is_mfa_enabled(user, types=["totp"]):
            raise PermissionDenied("Set up two-factor authentication before importing statements.", code="mfa_required")
        upload = request.FILES.get("file")
        if upload is None:
            raise InvalidInput("Send the bank file as the multipart field 'file'.", code="file_missing")
        if upload.size > settings.STATEMENT_MAX_BYTES:  # before hashing and parsing it
            raise StatementParseError(
                "file_too_large", f"the file has {upload.size} bytes; the limit is {settings.STATEMENT_MAX_BYTES} bytes"
            )
        account = str(request.data.get("bank_account", "")).strip()
        if account and not account.isdigit():
            raise InvalidInput("bank_account is the platform bank account's id.", code="invalid_bank_account")
        result = statement_import(
            source=upload,
            filename=upload.name,
            origin="api",
            actor=user,
            statement_format=str(request.data.get("format", "")),
            bank_account_id=int(account) if account else None,
        )
        body = {
            "import_id": result.statement_import.pk,
            "replayed": result.replayed,
            "statements": [s.statement_id for s in result.statements],
            "skipped_statements": result.skipped_statements,
            "new_lines": result.new_lines,
            "duplicate_lines": result.duplicate_lines,
            "possible_duplicates": result.possible_duplicates,
            "balance_mismatches": [s.statement_id for s in result.balance_mismatches],
        }
        return Response(body, status=200 if result.replayed else 201)
