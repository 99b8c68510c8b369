"""Every 404 of the API names what was not found, as the Kubernetes API server does: the message
``namespaces "shopx" not found``, and ``details.name`` and ``details.kind`` in the Status."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from access.models import ApiToken

pytestmark = pytest.mark.django_db


@pytest.fixture
def api(admin_user: Any) -> APIClient:
    client = APIClient()
    _row, text = ApiToken.issue(admin_user, "404")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {text}")
    return client


@pytest.mark.parametrize(
    ("method", "url", "kind", "name"),
    [
        ("get", "/api/v1/namespaces/shopx/", "namespaces", "shopx"),
        ("put", "/api/v1/namespaces/shopx/offloading/", "namespaces", "shopx"),
        ("delete", "/api/v1/namespaces/shopx/offloading/", "namespaces", "shopx"),
        ("post", "/api/v1/namespaces/shopx/preview/", "namespaces", "shopx"),
        ("get", "/api/v1/clusters/paris/", "clusters", "paris"),
        ("get", "/api/v1/changes/424242/", "changerequests", "424242"),
        ("get", "/api/v1/changes/abc/", "changerequests", "abc"),
        ("post", "/api/v1/changes/424242/reapply/", "changerequests", "424242"),
        ("get", "/api/v1/bulk/77/", "bulkrequests", "77"),
        ("get", "/api/v1/audit/99999/", "auditevents", "99999"),
    ],
)
def test_a_404_names_the_object_and_its_kind(
    api: APIClient,
    fleet: Any,
    method: str,
    url: str,
    kind: str,
    name: str,
) -> None:
    response = getattr(api, method)(url, {}, format="json") if method in ("put", "post") else getattr(api, method)(url)
    assert response.status_code == 404, response.content
    body = response.json()
    assert body["kind"] == "Status" and body["reason"] == "NotFound" and body["code"] == 404
    assert body["message"] == f'{kind} "{name}" not found'
    assert body["details"]["name"] == name and body["details"]["kind"] == kind


def test_the_objects_that_exist_are_found(api: APIClient, fleet: Any) -> None:
    assert api.get("/api/v1/namespaces/shop/").status_code == 200
    assert api.get("/api/v1/clusters/milan/").status_code == 200
