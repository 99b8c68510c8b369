"""Kubernetes API semantics of the sandbox, driven with the official Python client (and raw HTTP)."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from typing import Any

import pytest
from kubernetes import client, watch
from kubernetes.client.rest import ApiException

from tests.sandbox.conftest import GROUP, NSOFF, VERSION, Clients

Json = dict[str, Any]


def raw(
    kube: Clients,
    method: str,
    path: str,
    body: Any = None,
    content_type: str = "application/json",
    headers: dict[str, str] | None = None,
    token: str | None = "sandbox-admin-token",
) -> tuple[int, Any, Any]:
    data = None if body is None else (body if isinstance(body, bytes) else json.dumps(body).encode())
    request = urllib.request.Request(kube.sb.url + path, data=data, method=method)
    request.add_header("Content-Type", content_type)
    if token:
        request.add_header("Authorization", f"Bearer {token}")
    for key, value in (headers or {}).items():
        request.add_header(key, value)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read() or b"null"), response.headers
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read() or b"null"), err.headers


def status_of(err: ApiException) -> Json:
    return json.loads(err.body)


# -- discovery ---------------------------------------------------------------------------------------
def test_discovery_lists_groups_resources_verbs_and_short_names(kube: Clients) -> None:
    code, groups, _ = raw(kube, "GET", "/apis")
    assert code == 200
    names = {g["name"] for g in groups["groups"]}
    assert {"offloading.liqo.io", "core.liqo.io", "authorization.k8s.io"} <= names
    code, resources, _ = raw(kube, "GET", "/apis/offloading.liqo.io/v1beta1")
    by_name = {r["name"]: r for r in resources["resources"]}
    nsoff = by_name["namespaceoffloadings"]
    assert nsoff["namespaced"] is True and nsoff["kind"] == "NamespaceOffloading"
    assert set(nsoff["shortNames"]) == {"nso", "nsof", "nsoff", "nsoffloading"}
    assert nsoff["categories"] == ["liqo"]
    assert "watch" in nsoff["verbs"] and "patch" in nsoff["verbs"]
    assert by_name["namespaceoffloadings/status"]["verbs"] == ["get", "patch", "update"]
    _, core, _ = raw(kube, "GET", "/api/v1")
    assert {"namespaces", "nodes", "pods", "events"} <= {r["name"] for r in core["resources"]}
    _, fcs, _ = raw(kube, "GET", "/apis/core.liqo.io/v1beta1")
    assert fcs["resources"][0]["namespaced"] is False
    version = client.VersionApi(kube.api_client).get_code()
    assert version.major == "1"


def test_unknown_paths_answer_a_404_status(kube: Clients) -> None:
    code, body, _ = raw(kube, "GET", "/apis/nope.io/v1/things")
    assert code == 404 and body["kind"] == "Status" and body["reason"] == "NotFound"


# -- CRUD and errors -----------------------------------------------------------------------------------
def test_namespace_crud_with_status_bodies(kube: Clients) -> None:
    created = kube.core.create_namespace(
        client.V1Namespace(metadata=client.V1ObjectMeta(name="crud", labels={"a": "1"}))
    )
    assert created.status.phase == "Active"
    assert created.metadata.labels["kubernetes.io/metadata.name"] == "crud"
    with pytest.raises(ApiException) as exc:
        kube.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="crud")))
    assert exc.value.status == 409
    assert status_of(exc.value)["reason"] == "AlreadyExists"
    assert status_of(exc.value)["message"] == 'namespaces "crud" already exists'
    with pytest.raises(ApiException) as exc:
        kube.core.read_namespace("missing")
    body = status_of(exc.value)
    assert (exc.value.status, body["reason"], body["details"]) == (
        404,
        "NotFound",
        {"name": "missing", "kind": "namespaces"},
    )
    with pytest.raises(ApiException) as exc:
        kube.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="Bad_Name")))
    assert exc.value.status == 422 and status_of(exc.value)["details"]["causes"][0]["field"] == "metadata.name"


def test_a_stale_resource_version_is_a_409_conflict(kube: Clients) -> None:
    kube.create_nsoff("alpha")
    kube.sb.wait_idle(10)  # the simulated controller's own writes (finalizer, status) are done
    first = kube.get_nsoff("alpha")
    first["spec"]["podOffloadingStrategy"] = "Local"
    kube.custom.replace_namespaced_custom_object(GROUP, VERSION, "alpha", NSOFF, "offloading", first)
    first["spec"]["podOffloadingStrategy"] = "Remote"
    with pytest.raises(ApiException) as exc:
        kube.custom.replace_namespaced_custom_object(GROUP, VERSION, "alpha", NSOFF, "offloading", first)
    body = status_of(exc.value)
    assert exc.value.status == 409 and body["reason"] == "Conflict"
    assert body["message"] == (
        'Operation cannot be fulfilled on namespaceoffloadings.offloading.liqo.io "offloading": '
        "the object has been modified; please apply your changes to the latest version and "
        "try again"
    )
    assert kube.get_nsoff("alpha")["spec"]["podOffloadingStrategy"] == "Local"


def test_resource_versions_are_monotonic_and_generation_moves_on_spec_changes_only(kube: Clients) -> None:
    created = kube.create_nsoff("alpha")
    assert created["metadata"]["generation"] == 1
    kube.sb.wait_idle(10)
    after_controller = kube.get_nsoff("alpha")
    assert int(after_controller["metadata"]["resourceVersion"]) > int(created["metadata"]["resourceVersion"])
    assert after_controller["metadata"]["generation"] == 1  # finalizer + status: no spec change
    patched = kube.custom.patch_namespaced_custom_object(
        GROUP, VERSION, "alpha", NSOFF, "offloading", {"metadata": {"labels": {"x": "y"}}}
    )
    assert patched["metadata"]["generation"] == 1
    patched = kube.custom.patch_namespaced_custom_object(
        GROUP, VERSION, "alpha", NSOFF, "offloading", {"spec": {"podOffloadingStrategy": "Remote"}}
    )
    assert patched["metadata"]["generation"] == 2


def test_the_status_subresource_is_separate_from_the_main_resource(kube: Clients) -> None:
    # named "other" (and skipping the webhook) so that the simulated controller leaves it alone
    kube.create_nsoff("alpha", name="other", labels={"liqo.io/webhook-skip": "true"})
    obj = kube.get_nsoff("alpha", "other")
    obj["status"] = {"offloadingPhase": "AllFailed"}
    obj["metadata"]["labels"]["sneaky"] = "true"
    updated = kube.custom.replace_namespaced_custom_object_status(GROUP, VERSION, "alpha", NSOFF, "other", obj)
    assert updated["status"]["offloadingPhase"] == "AllFailed"
    assert "sneaky" not in updated["metadata"]["labels"]
    assert updated["metadata"]["generation"] == 1
    assert int(updated["metadata"]["resourceVersion"]) > int(obj["metadata"]["resourceVersion"])
    main = kube.get_nsoff("alpha", "other")
    main["status"] = {"offloadingPhase": "Ready"}
    main["spec"]["podOffloadingStrategy"] = "Remote"
    replaced = kube.custom.replace_namespaced_custom_object(GROUP, VERSION, "alpha", NSOFF, "other", main)
    assert replaced["status"]["offloadingPhase"] == "AllFailed"  # status changes ignored on the main resource
    assert replaced["metadata"]["generation"] == 2


def test_label_and_field_selectors_filter_lists(kube: Clients) -> None:
    names = {n.metadata.name for n in kube.core.list_namespace(label_selector="team in (payments,search)").items}
    assert names == {"alpha", "beta"}
    names = {n.metadata.name for n in kube.core.list_namespace(label_selector="env!=prod,team").items}
    assert names == {"gamma", "delta"}
    only = kube.core.list_namespace(field_selector="metadata.name=gamma").items
    assert [n.metadata.name for n in only] == ["gamma"]
    with pytest.raises(ApiException) as exc:
        kube.core.list_namespace(label_selector="a in (b")
    assert exc.value.status == 400
    with pytest.raises(ApiException) as exc:
        kube.core.list_namespace(field_selector="spec.nope=1")
    assert exc.value.status == 400
    pods = kube.core.list_pod_for_all_namespaces(field_selector="metadata.namespace=delta").items
    assert len(pods) == 2 and all(p.metadata.namespace == "delta" for p in pods)
    nodes = kube.core.list_node(label_selector="liqo.io/type=virtual-node").items
    assert {n.metadata.name for n in nodes} == {"milan", "florence"}


def test_pagination_is_a_consistent_snapshot_and_expired_tokens_answer_410(kube: Clients) -> None:
    for i in range(7):
        kube.core.create_namespace(
            client.V1Namespace(metadata=client.V1ObjectMeta(name=f"page-{i}", labels={"page": "yes"}))
        )
    first = kube.core.list_namespace(label_selector="page=yes", limit=3)
    assert [n.metadata.name for n in first.items] == ["page-0", "page-1", "page-2"]
    assert first.metadata._continue
    kube.core.delete_namespace("page-4")  # after the first page: still listed (snapshot)
    kube.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="page-9", labels={"page": "yes"})))
    seen = [n.metadata.name for n in first.items]
    token = first.metadata._continue
    while token:
        page = kube.core.list_namespace(label_selector="page=yes", limit=3, _continue=token)
        assert page.metadata.resource_version == first.metadata.resource_version
        seen += [n.metadata.name for n in page.items]
        token = page.metadata._continue
    assert seen == [f"page-{i}" for i in range(7)]
    unfiltered = kube.core.list_namespace(limit=2)
    assert unfiltered.metadata.remaining_item_count == len(kube.core.list_namespace().items) - 2
    kube.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="later")))
    kube.sb.compact()
    with pytest.raises(ApiException) as exc:
        kube.core.list_namespace(limit=2, _continue=unfiltered.metadata._continue)
    assert exc.value.status == 410 and status_of(exc.value)["reason"] == "Expired"


def test_custom_objects_list_with_selector_limit_and_continue(kube: Clients) -> None:
    for ns in ("alpha", "beta", "gamma", "delta"):
        kube.create_nsoff(ns, labels={"kind": "test"})
    page = kube.custom.list_cluster_custom_object(GROUP, VERSION, NSOFF, label_selector="kind=test", limit=3)
    assert [i["metadata"]["namespace"] for i in page["items"]] == ["alpha", "beta", "delta"]
    assert page["items"][0]["kind"] == "NamespaceOffloading"
    rest = kube.custom.list_cluster_custom_object(
        GROUP, VERSION, NSOFF, label_selector="kind=test", limit=3, _continue=page["metadata"]["continue"]
    )
    assert [i["metadata"]["namespace"] for i in rest["items"]] == ["gamma"]
    assert not rest["metadata"].get("continue")


# -- patches -----------------------------------------------------------------------------------------
def test_merge_json_and_strategic_patches(kube: Clients) -> None:
    kube.create_nsoff("alpha")
    merged = kube.custom.patch_namespaced_custom_object(
        GROUP,
        VERSION,
        "alpha",
        NSOFF,
        "offloading",
        {
            "spec": {
                "clusterSelector": {
                    "nodeSelectorTerms": [
                        {"matchExpressions": [{"key": "liqo.io/provider", "operator": "In", "values": ["eks"]}]}
                    ]
                }
            }
        },
    )
    assert merged["spec"]["clusterSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"] == ["eks"]
    ops = [
        {"op": "test", "path": "/spec/podOffloadingStrategy", "value": "LocalAndRemote"},
        {"op": "replace", "path": "/spec/podOffloadingStrategy", "value": "Remote"},
    ]
    jsoned = kube.custom.patch_namespaced_custom_object(
        GROUP, VERSION, "alpha", NSOFF, "offloading", ops, _content_type="application/json-patch+json"
    )
    assert jsoned["spec"]["podOffloadingStrategy"] == "Remote"
    with pytest.raises(ApiException) as exc:
        kube.custom.patch_namespaced_custom_object(
            GROUP, VERSION, "alpha", NSOFF, "offloading", ops, _content_type="application/json-patch+json"
        )
    assert exc.value.status == 422  # the test op fails now
    ns = kube.core.patch_namespace("beta", {"metadata": {"labels": {"owner": "carol", "team": None}}})
    assert ns.metadata.labels["owner"] == "carol" and "team" not in ns.metadata.labels
    code, body, _ = raw(
        kube,
        "PATCH",
        "/apis/offloading.liqo.io/v1beta1/namespaces/alpha/namespaceoffloadings/offloading",
        {"spec": {}},
        content_type="application/strategic-merge-patch+json",
    )
    assert code == 415 and body["reason"] == "UnsupportedMediaType"


def test_server_side_apply_with_managers_conflicts_and_force(kube: Clients) -> None:
    path = "/apis/offloading.liqo.io/v1beta1/namespaces/alpha/namespaceoffloadings/offloading"
    manifest = {
        "apiVersion": "offloading.liqo.io/v1beta1",
        "kind": "NamespaceOffloading",
        "metadata": {"name": "offloading", "namespace": "alpha"},
        "spec": {"podOffloadingStrategy": "Remote", "clusterSelector": {"nodeSelectorTerms": []}},
    }
    code, created, _ = raw(
        kube, "PATCH", path + "?fieldManager=liqo-dash", manifest, content_type="application/apply-patch+yaml"
    )
    assert code == 201 and created["spec"]["podOffloadingStrategy"] == "Remote"
    apply_entry = next(m for m in created["metadata"]["managedFields"] if m["manager"] == "liqo-dash")
    assert apply_entry["operation"] == "Apply"
    assert "f:podOffloadingStrategy" in apply_entry["fieldsV1"]["f:spec"]
    other = dict(manifest, spec={"podOffloadingStrategy": "Local"})
    code, body, _ = raw(
        kube, "PATCH", path + "?fieldManager=someone-else", other, content_type="application/apply-patch+yaml"
    )
    assert code == 409 and body["reason"] == "Conflict"
    assert 'conflict with "liqo-dash"' in body["message"] and ".spec.podOffloadingStrategy" in body["message"]
    code, body, _ = raw(
        kube,
        "PATCH",
        path + "?fieldManager=someone-else&force=true",
        other,
        content_type="application/apply-patch+yaml",
    )
    assert code == 200 and body["spec"]["podOffloadingStrategy"] == "Local"
    owners = {m["manager"]: m for m in body["metadata"]["managedFields"]}
    assert "f:podOffloadingStrategy" in owners["someone-else"]["fieldsV1"]["f:spec"]
    assert "f:podOffloadingStrategy" not in owners["liqo-dash"]["fieldsV1"].get("f:spec", {})
    code, body, _ = raw(kube, "PATCH", path, manifest, content_type="application/apply-patch+yaml")
    assert code == 400  # fieldManager is required for apply


def test_dry_run_validates_but_does_not_persist(kube: Clients) -> None:
    before = kube.sb.store.revision
    obj = kube.create_nsoff("alpha", dry_run="All")
    assert obj["spec"]["namespaceMappingStrategy"] == "DefaultName"
    with pytest.raises(ApiException) as exc:
        kube.get_nsoff("alpha")
    assert exc.value.status == 404
    with pytest.raises(ApiException) as exc:
        kube.create_nsoff("alpha", {"podOffloadingStrategy": "Sometimes"}, dry_run="All")
    assert exc.value.status == 422
    kube.core.delete_namespace("beta", dry_run="All")
    assert kube.core.read_namespace("beta").metadata.deletion_timestamp is None
    assert kube.sb.store.revision == before


def test_finalizers_keep_a_deleted_object_until_they_are_removed(kube: Clients) -> None:
    kube.create_nsoff("alpha", labels={"liqo.io/webhook-skip": "true"}, name="other")  # not reconciled
    kube.custom.patch_namespaced_custom_object(
        GROUP, VERSION, "alpha", NSOFF, "other", {"metadata": {"finalizers": ["example.com/hold"]}}
    )
    kube.custom.delete_namespaced_custom_object(GROUP, VERSION, "alpha", NSOFF, "other")
    held = kube.get_nsoff("alpha", "other")
    assert held["metadata"]["deletionTimestamp"]
    with pytest.raises(ApiException) as exc:
        kube.custom.patch_namespaced_custom_object(
            GROUP, VERSION, "alpha", NSOFF, "other", {"metadata": {"finalizers": ["example.com/hold", "more"]}}
        )
    assert exc.value.status == 422
    kube.custom.patch_namespaced_custom_object(
        GROUP, VERSION, "alpha", NSOFF, "other", {"metadata": {"finalizers": None}}
    )
    with pytest.raises(ApiException) as exc:
        kube.get_nsoff("alpha", "other")
    assert exc.value.status == 404


def test_creating_in_a_missing_or_terminating_namespace_fails(kube: Clients) -> None:
    with pytest.raises(ApiException) as exc:
        kube.create_nsoff("nowhere")
    assert exc.value.status == 404 and status_of(exc.value)["message"] == 'namespaces "nowhere" not found'
    # An object with a finalizer nobody removes keeps gamma Terminating.
    kube.create_nsoff("gamma", name="held", labels={"liqo.io/webhook-skip": "true"})  # not reconciled
    kube.custom.patch_namespaced_custom_object(
        GROUP, VERSION, "gamma", NSOFF, "held", {"metadata": {"finalizers": ["example.com/hold"]}}
    )
    kube.core.delete_namespace("gamma")
    assert kube.core.read_namespace("gamma").status.phase == "Terminating"
    with pytest.raises(ApiException) as exc:
        kube.create_nsoff("gamma")
    assert exc.value.status == 403 and status_of(exc.value)["message"] == (
        'namespaceoffloadings.offloading.liqo.io "offloading" is forbidden: '
        "unable to create new content in namespace gamma because it is being terminated"
    )
    assert status_of(exc.value)["details"]["causes"][0]["reason"] == "NamespaceTerminating"
    # Once the finalizer is gone, the namespace finishes terminating.
    kube.custom.patch_namespaced_custom_object(
        GROUP, VERSION, "gamma", NSOFF, "held", {"metadata": {"finalizers": None}}
    )
    kube.sb.wait_idle(10)
    with pytest.raises(ApiException) as exc:
        kube.core.read_namespace("gamma")
    assert exc.value.status == 404


# -- watch ------------------------------------------------------------------------------------------------
def test_watch_from_a_resource_version_streams_later_events(kube: Clients) -> None:
    listed = kube.core.list_namespace()
    rv = listed.metadata.resource_version
    kube.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="watched")))
    kube.core.patch_namespace("watched", {"metadata": {"labels": {"x": "1"}}})
    kube.core.delete_namespace("watched")
    events = []
    for event in watch.Watch().stream(
        kube.core.list_namespace, resource_version=rv, timeout_seconds=2, field_selector="metadata.name=watched"
    ):
        events.append((event["type"], event["object"].metadata.name))
        if len(events) >= 3:
            break
    assert events[:3] == [("ADDED", "watched"), ("MODIFIED", "watched"), ("MODIFIED", "watched")]


def test_watch_without_a_version_starts_with_the_current_objects_and_sees_live_changes(kube: Clients) -> None:
    kube.create_nsoff("beta")
    kube.sb.wait_idle(10)  # beta settled: no status update of it can arrive as a live event
    events = watch.Watch().stream(kube.custom.list_cluster_custom_object, GROUP, VERSION, NSOFF, timeout_seconds=10)
    seen: list[tuple[str, str]] = []
    try:
        for event in events:
            seen.append((event["type"], event["object"]["metadata"]["namespace"]))
            if seen == [("ADDED", "beta")]:
                # The current object arrived, so the watch is established: a change made now is live.
                kube.create_nsoff("alpha")
            elif event["type"] == "ADDED":
                break
    finally:
        events.close()  # closes the watch's HTTP response
    assert seen == [("ADDED", "beta"), ("ADDED", "alpha")]


def test_a_too_old_watch_gets_410_gone_and_bookmarks_carry_the_version(kube: Clients) -> None:
    rv = kube.core.list_namespace().metadata.resource_version
    kube.core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name="after")))
    kube.sb.compact()
    with pytest.raises(ApiException) as exc:
        for _ in watch.Watch().stream(kube.core.list_namespace, resource_version=rv, timeout_seconds=2):
            pass
    assert exc.value.status == 410
    kube.sb.api.bookmark_interval = 0.2
    current = kube.core.list_namespace().metadata.resource_version
    request = urllib.request.Request(
        kube.sb.url + f"/api/v1/namespaces?watch=true&resourceVersion={current}&allowWatchBookmarks=true"
        "&timeoutSeconds=1"
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        lines = [json.loads(line) for line in response.read().splitlines() if line.strip()]
    bookmarks = [e for e in lines if e["type"] == "BOOKMARK"]
    assert bookmarks and int(bookmarks[-1]["object"]["metadata"]["resourceVersion"]) >= int(current)


def test_send_initial_events_ends_with_an_annotated_bookmark(kube: Clients) -> None:
    request = urllib.request.Request(
        kube.sb.url + "/api/v1/namespaces?watch=1&sendInitialEvents=true&resourceVersionMatch=NotOlderThan"
        "&allowWatchBookmarks=true&timeoutSeconds=1"
    )
    with urllib.request.urlopen(request, timeout=5) as response:
        lines = [json.loads(line) for line in response.read().splitlines() if line.strip()]
    types = [e["type"] for e in lines]
    assert types.count("ADDED") == len(kube.core.list_namespace().items)
    end = lines[types.index("BOOKMARK")]
    assert end["object"]["metadata"]["annotations"] == {"k8s.io/initial-events-end": "true"}


# -- access control -------------------------------------------------------------------------------------
def test_rbac_tokens_impersonation_and_access_reviews(kube: Clients) -> None:
    path = "/apis/offloading.liqo.io/v1beta1/namespaces/alpha/namespaceoffloadings"
    body = {
        "apiVersion": "offloading.liqo.io/v1beta1",
        "kind": "NamespaceOffloading",
        "metadata": {"name": "offloading"},
        "spec": {},
    }
    code, status, _ = raw(kube, "POST", path, body, token="viewer-token")
    assert code == 403
    assert status["message"] == (
        'namespaceoffloadings.offloading.liqo.io is forbidden: User "viewer" cannot create '
        'resource "namespaceoffloadings" in API group "offloading.liqo.io" in the namespace '
        '"alpha"'
    )
    code, _, _ = raw(kube, "GET", "/api/v1/namespaces", token="viewer-token")
    assert code == 200
    code, _, _ = raw(kube, "GET", "/api/v1/namespaces", token="wrong-token")
    assert code == 401
    code, _, _ = raw(kube, "POST", path, body, token="liqo-dash-token", headers={"Impersonate-User": "viewer"})
    assert code == 403
    code, _, _ = raw(
        kube,
        "POST",
        path,
        body,
        token="liqo-dash-token",
        headers={"Impersonate-User": "operator", "Impersonate-Group": "liqo-dash:operators"},
    )
    assert code == 201
    code, _, _ = raw(kube, "GET", "/api/v1/namespaces", token="viewer-token", headers={"Impersonate-User": "admin"})
    assert code == 403  # viewers may not impersonate
    # The dashboard's own identity impersonates only the groups its roles map to, never a system: group.
    for group in ("system:masters", "liqo-dash:service", "cluster-admins"):
        headers = {"Impersonate-User": "liqo-dash:mallory", "Impersonate-Group": group}
        code, status, _ = raw(kube, "GET", "/api/v1/namespaces", token="liqo-dash-token", headers=headers)
        assert code == 403, group
        assert f'groups "{group}" is forbidden' in status["message"]
    review = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {
            "resourceAttributes": {
                "verb": "delete",
                "group": "offloading.liqo.io",
                "resource": "namespaceoffloadings",
                "namespace": "alpha",
            }
        },
    }
    code, answer, _ = raw(
        kube, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review, token="viewer-token"
    )
    assert code == 201 and answer["status"]["allowed"] is False
    code, answer, _ = raw(
        kube, "POST", "/apis/authorization.k8s.io/v1/selfsubjectaccessreviews", review, token="operator-token"
    )
    assert answer["status"]["allowed"] is True
    sar = client.V1SubjectAccessReview(
        spec=client.V1SubjectAccessReviewSpec(
            user="viewer",
            groups=["liqo-dash:viewers"],
            resource_attributes=client.V1ResourceAttributes(verb="list", resource="namespaces"),
        )
    )
    assert kube.authz.create_subject_access_review(sar).status.allowed is True


def test_warning_headers_reach_the_client(kube: Clients) -> None:
    kube.create_nsoff("alpha")
    kube.sb.wait_idle(10)
    obj = kube.get_nsoff("alpha")
    obj["spec"]["podOffloadingStrategy"] = "Local"
    code, _, headers = raw(
        kube, "PUT", "/apis/offloading.liqo.io/v1beta1/namespaces/alpha/namespaceoffloadings/offloading", obj
    )
    assert code == 200
    assert headers.get_all("Warning") == [
        '299 - "The PodOffloadingStrategy was mutated to a more restrictive setting: existing pods violating this '
        'policy might still be running"'
    ]
