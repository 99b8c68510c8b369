"""Admins see which provider account is which user, and cannot forge one by hand."""

from __future__ import annotations

from typing import Any

import pytest

from access.models import OidcIdentity

pytestmark = pytest.mark.django_db


def test_admins_list_sso_identities_but_cannot_add_one(admin_client: Any, django_user_model: Any) -> None:
    user = django_user_model.objects.create_user("sam-2")
    OidcIdentity.objects.create(issuer="https://id.example.com", subject="sub-17", user=user)
    listing = admin_client.get("/admin/access/oidcidentity/")
    assert listing.status_code == 200
    assert b"sub-17" in listing.content and b"https://id.example.com" in listing.content
    assert admin_client.get("/admin/access/oidcidentity/add/").status_code == 403
