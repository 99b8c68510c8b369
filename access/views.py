"""The token page: users create (the token is shown once) and revoke their own; admins see all."""

from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import messages
from django.contrib.auth.decorators import login_required
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from access import roles
from access.models import ApiToken


class TokenForm(forms.Form):
    name = forms.CharField(max_length=100, help_text="what it is for, e.g. ci-pipeline")
    expires_in_days = forms.IntegerField(
        min_value=0, max_value=3650, initial=90, label="Expires in (days)", help_text="0: never"
    )


def _visible(user: Any) -> Any:
    tokens = ApiToken.objects.select_related("user")
    return tokens if roles.role_of(user) == roles.ADMIN else tokens.filter(user=user)


@login_required
def token_list(request: HttpRequest) -> HttpResponse:
    created: str | None = None
    form = TokenForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        row, created = ApiToken.issue(request.user, form.cleaned_data["name"], form.cleaned_data["expires_in_days"])
        form = TokenForm()
    context = {
        "form": form,
        "created": created,
        "tokens": _visible(request.user),
        "show_owner": roles.role_of(request.user) == roles.ADMIN,
    }
    response = render(request, "access/tokens.html", context)
    if created:
        response["Cache-Control"] = "no-store"  # the secret is in this page, once
    return response


@login_required
@require_POST
def token_revoke(request: HttpRequest, pk: int) -> HttpResponse:
    row = get_object_or_404(ApiToken, pk=pk)
    if row.user_id != request.user.pk and roles.role_of(request.user) != roles.ADMIN:
        raise Http404("no such token")
    row.revoke()
    messages.success(request, f'Token "{row.name}" revoked.')
    return redirect("access:tokens")
