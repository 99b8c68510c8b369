"""The Django admin is for staff: a signed-in user who is not staff gets a 403 page saying so, not
the admin's login form (which would invite them to sign in again as someone else). Anonymous visitors
still get the admin's login page."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps
from typing import Any

from django.contrib.admin import AdminSite
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

REASON = "Admins only: the Django admin is for staff accounts, and yours is not one."


def refuse(request: HttpRequest) -> HttpResponse:
    context = {"reason": REASON, "action": "admin", "namespace": None}
    return render(request, "offloading/forbidden.html", context, status=403)


def _signed_in_not_staff(request: HttpRequest) -> bool:
    user: Any = getattr(request, "user", None)
    return bool(user is not None and user.is_authenticated and not (user.is_active and user.is_staff))


def _gate(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    @wraps(view)
    def gated(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        if _signed_in_not_staff(request):
            return refuse(request)
        return view(request, *args, **kwargs)

    return gated


def install(site: AdminSite) -> None:
    """Gate every view of ``site`` (its pages through ``admin_view``, and its login page); call it
    before ``site.urls`` is read."""
    if getattr(site, "_staff_gate", False):
        return
    admin_view = site.admin_view

    def gated_admin_view(view: Callable[..., HttpResponse], cacheable: bool = False) -> Callable[..., HttpResponse]:
        return _gate(admin_view(view, cacheable))

    site.admin_view = gated_admin_view  # type: ignore[method-assign, assignment]
    site.login = _gate(site.login)  # type: ignore[method-assign]
    site._staff_gate = True  # type: ignore[attr-defined]
