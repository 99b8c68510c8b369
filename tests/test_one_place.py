"""One rule, one place (issue 26): the pages' gate is the request contract's access check and only
``authorize.refuse`` writes a refused row; every audit row goes through one constructor; a POST is
validated once (by the request contract, the form maps its refusal onto the field); the page and
request-contract modules import the project at the top (no import hidden in a function)."""

from __future__ import annotations

import ast
import re
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse

from access import roles
from offloading.changes import authorize, checks
from offloading.changes.drift import accept_drift
from offloading.changes.errors import ChangeRejected, Refusal
from offloading.choices import AuditAction, ChangeAction, ChangeState, Source
from offloading.context import Actor
from offloading.models import AuditEvent, BulkRequest, ChangeRequest

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def viewer(django_user_model: Any) -> Client:
    user = django_user_model.objects.create_user("vera", password="vera-password-123")
    user.groups.add(Group.objects.get_or_create(name=roles.VIEWER)[0])
    client = Client()
    client.force_login(user)
    return client


def _gated_posts(fleet: Any) -> list[str]:
    conflicted = ChangeRequest.objects.create(
        namespace="shop", action=ChangeAction.UPDATE, state=ChangeState.CONFLICT, requester_name="a", source="web"
    )
    failed = BulkRequest.objects.create(action="unoffload", namespace_selector="env=prod", total=1)
    return [
        reverse("offloading:namespace_offload", args=["shop"]),
        reverse("offloading:namespace_unoffload", args=["shop"]),
        reverse("offloading:change_reapply", args=[conflicted.pk]),
        reverse("offloading:drift_accept", args=["shop"]),
        reverse("offloading:drift_reapply", args=["shop"]),
        reverse("offloading:bulk"),
        reverse("offloading:bulk_preview"),
        reverse("offloading:bulk_retry", args=[failed.pk]),
    ]


def test_every_gated_page_refuses_through_the_request_contract_and_audits_once(
    viewer: Client, fleet: Any, monkeypatch: Any
) -> None:
    writes: list[str] = []
    real = authorize.record_refused

    def spy(actor: Any, namespace: str, action: str, reason: str, **kwargs: Any) -> Any:
        writes.append(action)
        return real(actor, namespace, action, reason, **kwargs)

    monkeypatch.setattr(authorize, "record_refused", spy)
    urls = _gated_posts(fleet)
    assert len(urls) == 8
    for number, url in enumerate(urls, start=1):
        response = viewer.post(url, {})
        assert response.status_code == 403, url
        assert "viewers may not" in response.content.decode().lower(), url
        assert len(writes) == number, f"{url}: the refusal is written once, by authorize.refuse"
    assert AuditEvent.objects.filter(action=AuditAction.REFUSED).count() == 8
    assert not ChangeRequest.objects.exclude(state=ChangeState.CONFLICT).exists()
    # Showing the form is refused the same way, and not written to the trail.
    assert viewer.get(reverse("offloading:namespace_offload", args=["shop"])).status_code == 403
    assert len(writes) == 8


def _product_sources() -> list[Path]:
    return [p for top in ("offloading", "access") for p in (ROOT / top).rglob("*.py") if "migrations" not in p.parts]


def test_no_page_asks_the_policy_itself() -> None:
    for path in (ROOT / "offloading" / "views").glob("*.py"):
        text = path.read_text()
        assert "page_refusal" not in text, path
        if path.name in ("changes.py", "drift.py", "bulk.py", "common.py"):
            assert "policy.can_change" not in text and "has_role" not in text, path


def test_every_audit_row_goes_through_one_constructor() -> None:
    writers = {}
    for path in _product_sources():
        found = re.findall(r"AuditEvent\.objects\.create\(|AuditEvent\(\s*\w+=", path.read_text())
        if found:
            writers[str(path.relative_to(ROOT))] = len(found)
    assert writers == {"offloading/audit/events.py": 1}


def _count_validations(monkeypatch: Any) -> list[str]:
    calls: list[str] = []
    real = checks.validate_spec

    def spy(namespace: str, *args: Any, **kwargs: Any) -> Any:
        calls.append(namespace)
        return real(namespace, *args, **kwargs)

    monkeypatch.setattr(checks, "validate_spec", spy)
    return calls


def test_a_post_of_the_offload_form_is_validated_once(admin_client: Any, fleet: Any, monkeypatch: Any) -> None:
    calls = _count_validations(monkeypatch)
    form = {
        "namespace_mapping_strategy": "DefaultName",
        "pod_offloading_strategy": "LocalAndRemote",
        "expected_generation": "0",
    }
    response = admin_client.post(reverse("offloading:namespace_offload", args=["payments"]), form)
    assert response.status_code == 302
    assert calls == ["payments"]


def test_a_refused_spec_is_validated_once_and_lands_on_its_field(
    admin_client: Any, fleet: Any, monkeypatch: Any
) -> None:
    calls = _count_validations(monkeypatch)
    form = {
        "namespace_mapping_strategy": "SelectedName",
        "pod_offloading_strategy": "Local",
        "expected_generation": "0",
    }
    response = admin_client.post(reverse("offloading:namespace_offload", args=["payments"]), form)
    assert response.status_code == 200 and calls == ["payments"]
    errors = response.context["form"].errors
    assert errors.get("remote_namespace_name"), errors
    assert not ChangeRequest.objects.exists()


def test_a_put_of_the_api_is_validated_once(api: Any, fleet: Any, monkeypatch: Any) -> None:
    calls = _count_validations(monkeypatch)
    assert api.put("/api/v1/namespaces/payments/offloading/", {}, format="json").status_code == 202
    assert calls == ["payments"]


OWNED = [
    "offloading/views/common.py",
    "offloading/views/rows.py",
    "offloading/views/insight.py",
    "offloading/views/audit.py",
    "offloading/views/changes.py",
    "offloading/views/drift.py",
    "offloading/views/bulk.py",
    "offloading/forms.py",
    "offloading/api/serializers.py",
    "offloading/api/views.py",
    "offloading/api/changes.py",
    "offloading/changes/bulk.py",
    "offloading/changes/requests.py",
    "offloading/changes/checks.py",
    "offloading/changes/authorize.py",
    "offloading/changes/drift.py",
    "offloading/audit/events.py",
    "offloading/snapshot/drift.py",
    "offloading/whatif/destructive.py",
]


@pytest.mark.parametrize("name", OWNED)
def test_no_project_module_is_imported_inside_a_function(name: str) -> None:
    tree = ast.parse((ROOT / name).read_text())
    hidden = []
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            for inner in ast.walk(node):
                if isinstance(inner, ast.ImportFrom) and (inner.module or "").split(".")[0] in (
                    "offloading",
                    "access",
                    "liqo_rules",
                    "liqo_dash",
                ):
                    hidden.append(f"{node.name}: from {inner.module}")
                elif isinstance(inner, ast.Import):
                    hidden += [f"{node.name}: import {a.name}" for a in inner.names]
    assert hidden == []


def test_accepting_drift_is_a_use_case_with_the_right_of_an_edit(fleet: Any, django_user_model: Any) -> None:
    assert accept_drift("shop", Actor(None, "system", Source.WEB, "r0")) is None  # no drift open: nothing written
    drift = AuditEvent(user_name="kubectl", source=Source.EXTERNAL, action=AuditAction.DRIFT_UPDATED, namespace="shop")
    drift.save()
    vera = django_user_model.objects.create_user("vera", password="vera-password-123")
    vera.groups.add(Group.objects.get_or_create(name=roles.VIEWER)[0])
    with pytest.raises(ChangeRejected) as refused:
        accept_drift("shop", Actor(vera.pk, "vera", Source.WEB, "r1"))
    assert refused.value.refusal is Refusal.FORBIDDEN
    accepted = accept_drift("shop", Actor(None, "system", Source.WEB, "r2"))
    assert accepted is not None and accepted.action == AuditAction.DRIFT_ACCEPTED
    assert f"audit event #{drift.seq}" in accepted.message and accepted.after == fleet["shop"].offloading_spec
    assert accept_drift("shop", Actor(None, "system", Source.WEB, "r3")) is None  # answered: not twice
