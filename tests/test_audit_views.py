"""The audit page and API: filters, diffs, drift marked, and the admin-only streaming export whose CSV
opens in a spreadsheet without running anything."""

from __future__ import annotations

import csv
import io
import json
from typing import Any

import pytest
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from offloading.choices import AuditAction, Source
from offloading.models import AuditEvent

pytestmark = pytest.mark.django_db

HOSTILE = ['=HYPERLINK("http://x")', "+1+1", "-2", "@SUM(A1)", "\tTAB", "\rCR", "plain"]


def _events() -> None:
    AuditEvent(
        user_name="alice",
        source=Source.WEB,
        action=AuditAction.REQUESTED,
        namespace="shop",
        before={"podOffloadingStrategy": "LocalAndRemote"},
        after={"podOffloadingStrategy": "Remote"},
    ).save()
    AuditEvent(
        user_name="argocd", source=Source.EXTERNAL, action=AuditAction.DRIFT_UPDATED, namespace="shop", after={}
    ).save()
    for text in HOSTILE:
        AuditEvent(user_name=text, source=Source.API, action=AuditAction.REFUSED, namespace="pay", message=text).save()


def test_the_page_filters_shows_diffs_and_marks_drift(admin_client: Any) -> None:
    _events()
    page = admin_client.get("/audit/").content.decode()
    assert "9 events" in page
    assert "<strong>podOffloadingStrategy</strong>: <del>LocalAndRemote</del> → <ins>Remote</ins>" in page
    assert '<span class="badge warn">drift</span>' in page
    assert "data-local>" in page and " UTC</time>" in page
    filtered = admin_client.get("/audit/?actor=argo&action=drift_updated").content.decode()
    assert "1 event" in filtered and "argocd" in filtered and "alice" not in filtered
    bad = admin_client.get("/audit/?since=yesterday")
    assert bad.status_code == 200 and "Enter a valid date/time" in bad.content.decode()


def test_the_api_lists_with_the_same_filters(admin_user: Any) -> None:
    _events()
    api = APIClient()
    api.force_authenticate(admin_user)
    body = api.get("/api/v1/audit/?namespace=shop&source=external").json()
    assert [e["userName"] for e in body["results"]] == ["argocd"]
    assert body["results"][0]["seq"] == 2


def test_the_csv_export_streams_and_neutralises_formulas(admin_user: Any) -> None:
    _events()
    api = APIClient()
    api.force_authenticate(admin_user)
    response = api.get("/api/v1/audit/export/?format=csv&namespace=pay")
    assert response.status_code == 200 and response.streaming
    assert response["Content-Type"].startswith("text/csv")
    rows = list(csv.reader(io.StringIO(b"".join(response.streaming_content).decode())))
    header, data = rows[0], rows[1:]
    users = [row[header.index("userName")] for row in data]
    assert users == ["'" + t if t[0] in "=+-@\t\r" else t for t in HOSTILE]
    assert all(not cell.startswith(("=", "+", "-", "@", "\t", "\r")) for row in data for cell in row)


def test_the_json_export_is_every_match_in_order(admin_user: Any) -> None:
    _events()
    api = APIClient()
    api.force_authenticate(admin_user)
    response = api.get("/api/v1/audit/export/?format=json")
    events = json.loads(b"".join(response.streaming_content))
    assert [e["seq"] for e in events] == list(range(1, 10))


def test_only_admins_export(django_user_model: Any) -> None:
    viewer = django_user_model.objects.create_user("vera", password="x-password-123")
    viewer.groups.add(Group.objects.get(name="viewer"))
    api = APIClient()
    api.force_authenticate(viewer)
    assert api.get("/api/v1/audit/").status_code == 200
    refused = api.get("/api/v1/audit/export/?format=csv")
    assert refused.status_code == 403 and "admin" in refused.json()["message"]
