"""The persona matrix: every mutating page and API endpoint refuses a viewer, a user without a role and
an operator outside their scopes; nothing reaches the cluster and nothing is queued.

The URL conf is enumerated: an endpoint that is in neither ``MUTATING`` nor ``READ_ONLY`` nor
``EXEMPT`` fails :func:`test_every_endpoint_has_a_case`, so a new endpoint cannot ship without one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from dataclasses import dataclass
from typing import Any

import pytest
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from rest_framework.test import APIClient

from access.models import ApiToken
from liqo_rules.constants import GROUP, PLURAL, VERSION
from offloading.choices import AuditAction, ChangeAction, ChangeState
from offloading.models import AuditEvent, BulkRequest, ChangeRequest, ManagedCluster
from offloading.snapshot.refresh import refresh

pytestmark = pytest.mark.django_db

IN_SCOPE = "team-a-web"
OUT_OF_SCOPE = "team-b-web"  # offloaded in the cluster before the test starts


@dataclass(frozen=True)
class Case:
    """One mutating request: how to send it (page or API) and to which URL."""

    api: bool
    method: str
    url: Callable[[dict[str, Any]], str]
    data: Callable[[dict[str, Any]], dict[str, Any]]


def _spec_form(world: dict[str, Any]) -> dict[str, Any]:
    return {
        "namespace_mapping_strategy": "DefaultName",
        "pod_offloading_strategy": "LocalAndRemote",
        "cluster_selector": "",
        "expected_generation": world["generation"],
    }


_SUBJECT = {"change": "conflict", "bulk": "failed_bulk"}
_API = {"change": "changes", "bulk": "bulk"}


def _DECISION(world: dict[str, Any]) -> dict[str, Any]:  # noqa: N802 - a constant-like case body
    return {"comment": "looks fine", "reason": "urgent"}


# url name -> {method: case}; every mutating method of every endpoint.
MUTATING: dict[str, dict[str, Case]] = {
    "offloading:namespace_offload": {
        "POST": Case(False, "post", lambda w: f"/namespaces/{OUT_OF_SCOPE}/offload/", _spec_form),
    },
    "offloading:namespace_unoffload": {
        "POST": Case(
            False,
            "post",
            lambda w: f"/namespaces/{OUT_OF_SCOPE}/unoffload/",
            lambda w: {"expected_generation": w["generation"], "confirm": OUT_OF_SCOPE},
        ),
    },
    "offloading:change_reapply": {
        "POST": Case(False, "post", lambda w: f"/changes/{w['conflict']}/reapply/", lambda w: {}),
    },
    "offloading:bulk": {
        "POST": Case(
            False,
            "post",
            lambda w: "/bulk/",
            lambda w: {**_spec_form(w), "action": ChangeAction.UNOFFLOAD, "namespace_selector": "team=b"},
        ),
    },
    "offloading:drift_accept": {
        "POST": Case(False, "post", lambda w: f"/namespaces/{OUT_OF_SCOPE}/drift/accept/", lambda w: {}),
    },
    "offloading:drift_reapply": {
        "POST": Case(False, "post", lambda w: f"/namespaces/{OUT_OF_SCOPE}/drift/reapply/", lambda w: {}),
    },
    "offloading:bulk_retry": {
        "POST": Case(False, "post", lambda w: f"/bulk/{w['failed_bulk']}/retry/", lambda w: {}),
    },
    "offloading:change_handoff": {
        "POST": Case(False, "post", lambda w: f"/changes/{w['conflict']}/handoff/", lambda w: {}),
    },
    "offloading:bulk_handoff": {
        "POST": Case(False, "post", lambda w: f"/bulk/{w['failed_bulk']}/handoff/", lambda w: {}),
    },
    "api:namespace-offload": {
        "PUT": Case(True, "put", lambda w: f"/api/v1/namespaces/{OUT_OF_SCOPE}/offloading/", lambda w: {}),
        "DELETE": Case(True, "delete", lambda w: f"/api/v1/namespaces/{OUT_OF_SCOPE}/offloading/", lambda w: {}),
    },
    "api:changerequest-reapply": {
        "POST": Case(True, "post", lambda w: f"/api/v1/changes/{w['conflict']}/reapply/", lambda w: {}),
    },
    "api:changerequest-handoff": {
        "POST": Case(True, "post", lambda w: f"/api/v1/changes/{w['conflict']}/handoff/", lambda w: {}),
    },
    "api:bulkrequest-handoff": {
        "POST": Case(True, "post", lambda w: f"/api/v1/bulk/{w['failed_bulk']}/handoff/", lambda w: {}),
    },
    # Change governance: deciding on a change or a bulk needs the rights on its namespaces (then: not its requester).
    **{
        f"offloading:governance_{kind}_{verb}": {
            "POST": Case(False, "post", lambda w, k=kind, v=verb: f"/{_API[k]}/{w[_SUBJECT[k]]}/{v}/", _DECISION)
        }
        for kind in ("change", "bulk")
        for verb in ("approve", "reject", "cancel", "break-glass")
    },
    **{
        f"api:{kind}-{verb}": {
            "POST": Case(True, "post", lambda w, k=kind, v=verb: f"/api/v1/{_API[k]}/{w[_SUBJECT[k]]}/{v}/", _DECISION)
        }
        for kind in ("change", "bulk")
        for verb in ("approve", "reject", "cancel", "break-glass")
    },
    "api:bulkrequest-list": {
        "POST": Case(
            True,
            "post",
            lambda w: "/api/v1/bulk/",
            lambda w: {"action": "unoffload", "namespaceSelector": "team=b"},
        ),
    },
}

# A managed cluster's copies of the pages and API resources (offloading/switcher.py): the same endpoints
# under m/<cluster name>/, with the case of the endpoint they copy. The matrix's world is the default
# cluster's; under its own prefix (/m/<its name>/) the scopes are judged for that cluster by name.
PER_CLUSTER = {"cluster": "offloading", "api-cluster": "api"}


def _in_cluster(case: Case) -> Case:
    def url(world: dict[str, Any]) -> str:
        name = ManagedCluster.objects.get(is_default=True).name
        path = case.url(world)
        return path.replace("/api/v1/", f"/api/v1/m/{name}/", 1) if case.api else f"/m/{name}{path}"

    return Case(case.api, case.method, url, case.data)


MUTATING.update(
    {
        f"{app}:{name.split(':', 1)[1]}": {method: _in_cluster(case) for method, case in MUTATING[name].items()}
        for app, name in (
            ("cluster", "offloading:namespace_offload"),
            ("cluster", "offloading:namespace_unoffload"),
            ("cluster", "offloading:drift_reapply"),
            ("cluster", "offloading:bulk"),
            ("api-cluster", "api:namespace-offload"),
            ("api-cluster", "api:bulkrequest-list"),
            # Governance and the hand-off in a cluster's path: judged with that cluster's scopes there too.
            ("cluster", "offloading:governance_change_approve"),
            ("cluster", "offloading:governance_bulk_break-glass"),
            ("cluster", "offloading:change_handoff"),
            ("api-cluster", "api:change-approve"),
            ("api-cluster", "api:bulk-reject"),
            ("api-cluster", "api:changerequest-handoff"),
        )
    }
)


def _copied(name: str) -> str:
    """The endpoint a managed cluster's copy copies (``cluster:bulk`` -> ``offloading:bulk``)."""
    app, _, rest = name.partition(":")
    return f"{PER_CLUSTER[app]}:{rest}" if app in PER_CLUSTER else name


# Endpoints that change nothing in the cluster or the change flow (previews compute, they do not queue).
READ_ONLY = {
    "offloading:home",
    "offloading:cluster_list",
    "offloading:cluster_detail",
    "offloading:namespace_list",
    "offloading:fleet_matrix",
    "offloading:namespace_detail",
    "offloading:namespace_status",
    "offloading:namespace_reflection",
    "offloading:namespace_twins",
    "offloading:namespace_offload_preview",
    "offloading:change_list",
    "offloading:change_detail",
    "offloading:change_status",
    "offloading:bulk_preview",
    "offloading:bulk_detail",
    "offloading:bulk_progress",
    "offloading:audit_list",
    "offloading:governance_approvals",
    "offloading:managed_cluster_list",
    "offloading:fleet_namespaces",
    "offloading:fleet_changes",
    "offloading:domain_map",
    "api:approvals",
    "offloading:freshness",
    "api:snapshot",
    "api:cluster-list",
    "api:cluster-detail",
    "api:namespace-list",
    "api:namespace-detail",
    "api:namespace-preview",
    "api:changerequest-list",
    "api:changerequest-detail",
    "api:changerequest-files",
    "api:bulkrequest-detail",
    "api:bulkrequest-files",
    "api:auditevent-list",
    "api:auditevent-detail",
    "api:auditevent-export",
    "api:api-root",
    "schema",
    "api_docs",
    "healthz",
    "readyz",
    "metrics",
}

# Not about one namespace: only an admin may do them, whatever the scopes (each tested where it lives:
# registering a managed cluster in tests/test_managed_clusters.py::test_non_admins_are_refused, editing and
# removing one in tests/test_managed_lifecycle.py::test_non_admins_can_neither_edit_nor_remove, its access in
# tests/test_managed_access.py::test_only_admins_see_or_change_a_clusters_access).
ADMIN_ONLY = {
    "offloading:managed_cluster_register",
    "offloading:managed_cluster_edit",
    "offloading:managed_cluster_remove",
    "offloading:managed_cluster_access",
}

# Not about the cluster: signing in and out, one's own password and API tokens (tested in
# test_pages.py / test_api_auth.py), single sign-on, and the Django admin (staff only).
EXEMPT_PREFIXES = ("admin:", "access:", "login", "logout", "password_")


def _names(patterns: list[Any], namespace: str = "") -> Iterator[str]:
    for pattern in patterns:
        if isinstance(pattern, URLResolver):
            inner = f"{namespace}:{pattern.namespace}".strip(":") if pattern.namespace else namespace
            yield from _names(pattern.url_patterns, inner)
        elif isinstance(pattern, URLPattern) and pattern.name:
            yield f"{namespace}:{pattern.name}" if namespace else pattern.name


def test_every_endpoint_has_a_case() -> None:
    names = set(_names(get_resolver().url_patterns))
    copies = {name for name in names if _copied(name) != name}
    assert copies and {_copied(name) for name in copies} <= names, "every per-cluster copy copies an endpoint"
    missing = sorted(
        name
        for name in {_copied(name) for name in names}
        if name not in MUTATING
        and name not in READ_ONLY
        and name not in ADMIN_ONLY
        and not name.startswith(EXEMPT_PREFIXES)
    )
    assert missing == [], f"endpoints without a persona case (add them to MUTATING or READ_ONLY): {missing}"
    stale = sorted((set(MUTATING) | READ_ONLY | ADMIN_ONLY) - names)
    assert not any(_copied(name) in ADMIN_ONLY for name in copies), "a managed cluster's admin page has a copy"
    assert stale == [], f"cases for endpoints that no longer exist: {stale}"


@pytest.fixture
def world(sandbox: Any, k8s: Any, make_user: Any, settings: Any) -> dict[str, Any]:
    """Two namespaces (one offloaded in the cluster), a change in conflict on the offloaded one, and
    the personas."""
    settings.KUBE_IMPERSONATE = True
    settings.LIQO_DASH = {**settings.LIQO_DASH, "DRY_RUN_ON_SUBMIT": True}
    for name, team in ((IN_SCOPE, "a"), (OUT_OF_SCOPE, "b")):
        k8s.core.create_namespace(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": {"team": team}}}
        )
    k8s.custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        OUT_OF_SCOPE,
        PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NamespaceOffloading",
            "metadata": {"name": "offloading"},
            "spec": {"namespaceMappingStrategy": "DefaultName"},
        },
    )
    refresh()
    obj = k8s.custom.get_namespaced_custom_object(GROUP, VERSION, OUT_OF_SCOPE, PLURAL, "offloading")
    conflict = ChangeRequest.objects.create(
        namespace=OUT_OF_SCOPE,
        action=ChangeAction.UPDATE,
        desired_spec={"namespaceMappingStrategy": "DefaultName", "podOffloadingStrategy": "Local"},
        state=ChangeState.CONFLICT,
        requester_name="someone",
        source="web",
    )
    failed_bulk = BulkRequest.objects.create(
        action="unoffload", namespace_selector="team=b", requester_name="someone", source="web", total=1
    )
    ChangeRequest.objects.create(
        namespace=OUT_OF_SCOPE,
        action=ChangeAction.UNOFFLOAD,
        state=ChangeState.FAILED,
        requester_name="someone",
        source="bulk",
        bulk=failed_bulk,
    )
    users = {
        "viewer": make_user("vera", "viewer"),
        "no role": make_user("nora"),
        "operator outside scope": make_user("otto", "operator", globs=["team-a-*"]),
    }
    return {
        "k8s": k8s,
        "users": users,
        "conflict": conflict.pk,
        "failed_bulk": failed_bulk.pk,
        "generation": obj["metadata"]["generation"],
        "resource_version": obj["metadata"]["resourceVersion"],
        "operator": users["operator outside scope"],
    }


def _cluster_unchanged(world: dict[str, Any]) -> None:
    k8s = world["k8s"]
    obj = k8s.custom.get_namespaced_custom_object(GROUP, VERSION, OUT_OF_SCOPE, PLURAL, "offloading")
    assert obj["metadata"]["resourceVersion"] == world["resource_version"], "the cluster was changed"
    assert obj["metadata"].get("deletionTimestamp") is None
    found = k8s.custom.list_namespaced_custom_object(GROUP, VERSION, IN_SCOPE, PLURAL)["items"]
    assert found == []


def _send(case: Case, world: dict[str, Any], user: Any) -> Any:
    if case.api:
        client = APIClient()
        _, token = ApiToken.issue(user, "matrix")
        client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
        return getattr(client, case.method)(case.url(world), case.data(world), format="json")
    client = Client()
    client.force_login(user)
    return getattr(client, case.method)(case.url(world), case.data(world))


CASES = [(name, method) for name, methods in MUTATING.items() for method in methods]


@pytest.mark.parametrize("persona", ["viewer", "no role", "operator outside scope"])
@pytest.mark.parametrize(("name", "method"), CASES, ids=[f"{n} {m}" for n, m in CASES])
def test_a_persona_without_the_right_is_refused(world: dict[str, Any], persona: str, name: str, method: str) -> None:
    changes_before = set(ChangeRequest.objects.values_list("pk", flat=True))
    case = MUTATING[name][method]

    response = _send(case, world, world["users"][persona])

    assert response.status_code == 403, (name, method, persona, response.status_code)
    body = response.content.decode()
    if persona == "operator outside scope":
        assert "out of scope" in body and "team-a-*" in body, "the refusal names the operator's scopes"
    elif persona == "no role":
        assert "no role" in body
    else:
        assert "viewer" in body
    if case.api:
        assert response["Content-Type"].startswith("application/json")
    assert set(ChangeRequest.objects.values_list("pk", flat=True)) == changes_before, "a change was queued"
    assert BulkRequest.objects.count() == 1, "a bulk request was recorded"
    assert not AuditEvent.objects.filter(action__in=[AuditAction.REQUESTED, AuditAction.APPLIED]).exists()
    _cluster_unchanged(world)


def test_the_refusal_of_an_operator_is_in_the_audit_trail(world: dict[str, Any]) -> None:
    response = _send(MUTATING["api:namespace-offload"]["DELETE"], world, world["operator"])
    assert response.status_code == 403
    status = response.json()
    assert status["kind"] == "Status" and status["code"] == 403 and status["reason"] == "Forbidden"
    refused = AuditEvent.objects.get(action=AuditAction.REFUSED)
    assert refused.user_name == "otto" and refused.namespace == OUT_OF_SCOPE
    assert "out of scope" in refused.message


def test_the_same_operator_may_change_a_namespace_in_scope(world: dict[str, Any]) -> None:
    """The control: the matrix's refusals are about scope and role, not a broken endpoint."""
    client = APIClient()
    _, token = ApiToken.issue(world["operator"], "matrix")
    client.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    response = client.put(f"/api/v1/namespaces/{IN_SCOPE}/offloading/", {}, format="json")
    assert response.status_code == 202, response.content
    change = ChangeRequest.objects.get(namespace=IN_SCOPE)
    assert change.requester_name == "otto" and change.state == ChangeState.QUEUED


def test_bulk_leaves_out_of_scope_namespaces_out_and_says_why(world: dict[str, Any]) -> None:
    client = Client()
    client.force_login(world["operator"])
    response = client.post(
        "/bulk/preview/", {**_spec_form(world), "action": ChangeAction.OFFLOAD, "namespace_selector": "team"}
    )
    assert response.status_code == 200
    body = response.content.decode()
    assert IN_SCOPE in body and OUT_OF_SCOPE in body
    assert f"namespace &quot;{OUT_OF_SCOPE}&quot; is out of scope (your scopes: team-a-*)" in body
    assert not ChangeRequest.objects.filter(namespace=OUT_OF_SCOPE, state=ChangeState.QUEUED).exists()
