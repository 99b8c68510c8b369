"""Template context: the signed-in user's role and scopes (for the user menu), and which optional
login features are on."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.http import HttpRequest

from access import roles, scopes


def access(request: HttpRequest) -> dict[str, Any]:
    user: Any = getattr(request, "user", None)
    context: dict[str, Any] = {
        "oidc_enabled": settings.OIDC_ENABLED,
        "password_reset_enabled": settings.PASSWORD_RESET_ENABLED,
    }
    if user is not None and user.is_authenticated:
        role = roles.role_of(user)
        context["access_role"] = role or "none"
        context["access_scopes"] = scopes.describe(roles.scopes_of(user)) if role == roles.OPERATOR else ""
        context["access_can_change"] = roles.rank(role) >= roles.rank(roles.OPERATOR)
        context["access_is_admin"] = role == roles.ADMIN
    return context
