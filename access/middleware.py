"""Gatekeeping for signed-in users without a role, and for features that are not configured.

* A session user without a role sees only the "your account has no role" page (403), and the API
  answers them 403 JSON; login, logout and static files stay reachable.
* Password reset answers 404 unless email is configured; the OIDC URLs answer 404 unless SSO is.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render

from access import roles
from liqo_dash.statusbody import status_data  # the API's error body, a Kubernetes-style Status

OPEN_PREFIXES = ("/accounts/login/", "/accounts/logout/", "/healthz", "/readyz", "/metrics", "/oidc/")
PASSWORD_RESET_PREFIXES = ("/accounts/password_reset/", "/accounts/reset/")


class AccessMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        path = request.path_info
        if path.startswith(PASSWORD_RESET_PREFIXES) and not settings.PASSWORD_RESET_ENABLED:
            raise Http404("password reset needs email (EMAIL_HOST)")
        if path.startswith("/oidc/") and not settings.OIDC_ENABLED:
            raise Http404("single sign-on is not configured (OIDC_*)")
        refusal = self._no_role(request, path)
        return refusal if refusal is not None else self.get_response(request)

    @staticmethod
    def _no_role(request: HttpRequest, path: str) -> HttpResponse | None:
        user: Any = getattr(request, "user", None)
        if user is None or not user.is_authenticated or roles.role_of(user) is not None:
            return None
        static_url = "/" + settings.STATIC_URL.lstrip("/")
        if path.startswith(OPEN_PREFIXES) or path.startswith(static_url):
            return None
        if path.startswith("/api/"):
            return JsonResponse(status_data(403, "your account has no role: ask an admin to grant you one"), status=403)
        return render(request, "access/no_role.html", status=403)
