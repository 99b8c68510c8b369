from __future__ import annotations

from typing import Any

from django.contrib import admin
from django.http import HttpRequest

from access.models import ApiToken, Scope


@admin.register(Scope)
class ScopeAdmin(admin.ModelAdmin):
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
