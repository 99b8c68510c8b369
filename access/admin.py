from __future__ import annotations

from typing import Any

from django import forms
from django.contrib import admin
from django.http import HttpRequest

from access.models import ApiToken, OidcIdentity, Scope


class ScopeForm(forms.ModelForm):
    """The scope's value with the cluster grammar spelled out. Validation is the model's (``Scope.clean``
    through ``access.scopes.validate``): a bad cluster part is reported on the value field."""

    class Meta:
        model = Scope
        fields = ("user", "group", "kind", "value")
        help_texts = {
            "value": (
                "Glob: team-a-* (the default managed cluster), prod-eu/team-a-* (clusters whose name matches "
                "prod-eu), */team-a-* (every managed cluster). Label selector: team=a (the default cluster), "
                "prod-eu: team=a or *: example.com/team=a (a cluster glob, then ':')."
            )
        }


@admin.register(Scope)
class ScopeAdmin(admin.ModelAdmin):
    form = ScopeForm
    list_display = ("__str__", "user", "group", "kind", "value", "created")
    list_filter = ("kind",)
    search_fields = ("value", "user__username", "group__name")
    autocomplete_fields = ("user", "group")


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are created by their owners (/tokens/) or `manage.py create_api_token`: the secret exists
    only at creation. Admins can see them, change the expiry and revoke them."""

    list_display = ("name", "user", "prefix", "created", "expires", "last_used", "revoked")
    list_filter = ("revoked",)
    search_fields = ("name", "user__username", "prefix")
    readonly_fields = ("user", "name", "prefix", "salt", "digest", "created", "last_used")
    fields = ("user", "name", "prefix", "salt", "digest", "created", "expires", "last_used", "revoked")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False


@admin.register(OidcIdentity)
class OidcIdentityAdmin(admin.ModelAdmin):
    """Which provider account is which dashboard user. Created by the first SSO sign-in only; an admin
    may delete one (the next sign-in of that account then makes a new user), never re-point it."""

    list_display = ("user", "issuer", "subject", "created", "last_login")
    search_fields = ("user__username", "issuer", "subject")
    readonly_fields = ("user", "issuer", "subject", "created", "last_login")

    def has_add_permission(self, request: HttpRequest, obj: Any = None) -> bool:
        return False
