"""Scopes: ``read`` for GET, ``write`` for changes, ``events`` for sending trigger events. A view
says which scope each method needs in ``required_scopes``."""

from rest_framework.permissions import BasePermission

DEFAULT_SCOPES = {
    "GET": "read",
    "HEAD": "read",
    "OPTIONS": "read",
    "POST": "write",
    "PATCH": "write",
    "DELETE": "write",
}


class HasScope(BasePermission):
    code = "insufficient_scope"

    def has_permission(self, request, view) -> bool:
        client = request.user
        if not getattr(client, "is_authenticated", False):
            return False
        needed = {**DEFAULT_SCOPES, **getattr(view, "required_scopes", {})}.get(request.method, "write")
        if needed in client.scopes:
            return True
        self.message = f"This API key lacks the '{needed}' scope."
        return False
