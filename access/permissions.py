"""DRF permissions by role. Anonymous requests get 401 (DRF: NotAuthenticated), users without the role
403, both as JSON bodies ``{"detail": ...}``."""

from __future__ import annotations

from typing import Any

from rest_framework.permissions import SAFE_METHODS, BasePermission

from access import roles


class _RolePermission(BasePermission):
    minimum = roles.VIEWER

    def required(self, request: Any) -> str:
        return self.minimum

    def has_permission(self, request: Any, view: Any) -> bool:
        user = request.user
        if not (user and user.is_authenticated):
            return False
        role = roles.role_of(user)
        needed = self.required(request)
        if roles.rank(role) >= roles.rank(needed):
            return True
        if role is None:
            self.message = "your account has no role: ask an admin to grant you one"
        else:
            self.message = f"your role ({role}) may not do this: it needs the {needed} role"
        return False


class IsViewer(_RolePermission):
    minimum = roles.VIEWER


class IsOperator(_RolePermission):
    minimum = roles.OPERATOR


class IsAdmin(_RolePermission):
    minimum = roles.ADMIN


class HasRoleForMethod(_RolePermission):
    """Reads need viewer, writes operator (scopes are checked per namespace by access.policy)."""

    def required(self, request: Any) -> str:
        return roles.VIEWER if request.method in SAFE_METHODS else roles.OPERATOR
