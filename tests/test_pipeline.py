"""The change pipeline and the refresh, run eagerly in this process against the sandbox over HTTP."""

from __future__ import annotations

from typing import Any

import pytest

from offloading.audit.trail import verify
from offloading.changes.apply import apply_change
from offloading.changes.bulk import request_bulk
from offloading.changes.errors import ChangeRejected, Refusal
from offloading.changes.requests import request_offload, request_unoffload
from offloading.changes.sweep import sweep
from offloading.choices import AuditAction, ChangeState, Source
from offloading.cluster import breaker as apihealth
from offloading.context import Actor
from offloading.models import AuditEvent, ChangeRequest, Cluster, Namespace, SnapshotState, VirtualNode
from offloading.snapshot.refresh import refresh
from tests.fixtures.waits import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

ALICE = Actor(None, "alice", Source.WEB, "req-alice")
BOB = Actor(None, "bob", Source.API, "req-bob")
GROUP, VERSION, PLURAL = "offloading.liqo.io", "v1beta1", "namespaceoffloadings"


def _spec(**overrides: Any) -> dict[str, Any]:
    spec = {
        "namespaceMappingStrategy": "DefaultName",
        "podOffloadingStrategy": "LocalAndRemote",
        "clusterSelector": {"nodeSelectorTerms": []},
    }
    spec.update(overrides)
    return spec


def _make_namespace(k8s: Any, name: str) -> None:
    k8s.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    refresh()


def _settle(namespace: str, phases: tuple[str, ...] = ("Ready", "NoClusterSelected")) -> Namespace:
    def settled() -> Namespace | None:
        refresh()
        ns = Namespace.objects.get(name=namespace)
        return ns if ns.offloading_phase in phases and not ns.status_is_stale else None

    return wait_until(settled, 60, message=f"{namespace} to settle in {phases}")


def test_refresh_builds_the_snapshot_with_a_constant_number_of_list_calls(sandbox: Any) -> None:
    report = refresh()
    assert report.ok, report.error
    # one page each of foreignclusters, virtualnodes, nodes, namespaces, offloadings and namespacemaps
    assert report.list_calls == 6
    assert Cluster.objects.count() == report.clusters > 0
    assert VirtualNode.objects.filter(labels__has_key="liqo.io/remote-cluster-id").count() > 0
    assert Namespace.objects.count() == report.namespaces > 0
    state = SnapshotState.get()
    assert state.last_success_at is not None and not state.is_stale()


def test_refresh_failure_marks_the_snapshot_stale_and_keeps_the_data(sandbox: Any) -> None:
    refresh()
    before = Namespace.objects.count()
    sandbox.faults.set(outage=True)
    try:
        report = refresh()
    finally:
        sandbox.faults.clear()
    assert not report.ok and report.error
    assert Namespace.objects.count() == before
    assert SnapshotState.get().is_stale()


def test_offload_is_applied_and_converges_to_ready(sandbox: Any, k8s: Any) -> None:
    _make_namespace(k8s, "shop")
    change = request_offload("shop", _spec(), ALICE)
    change.refresh_from_db()
    assert change.state == ChangeState.APPLIED, change.message
    obj = k8s.custom.get_namespaced_custom_object(GROUP, VERSION, "shop", PLURAL, "offloading")
    assert obj["spec"]["podOffloadingStrategy"] == "LocalAndRemote"
    assert obj["metadata"]["annotations"]["liqo-dash.io/change-id"] == str(change.pk)
    namespace = _settle("shop", ("Ready",))
    assert namespace.cluster_states.filter(selected=True).count() == Cluster.objects.count()
    events = AuditEvent.objects.filter(change=change).order_by("id")
    assert [e.action for e in events] == [AuditAction.REQUESTED, AuditAction.APPLIED]
    assert events[0].user_name == "alice" and events[0].request_id == "req-alice"
    assert verify().ok


def test_an_invalid_spec_is_rejected_before_anything_is_recorded(sandbox: Any, k8s: Any) -> None:
    _make_namespace(k8s, "web")
    with pytest.raises(ChangeRejected) as err:
        request_offload("web", _spec(namespaceMappingStrategy="SelectedName"), ALICE)
    assert "remoteNamespaceName" in err.value.errors
    assert not ChangeRequest.objects.exists() and not AuditEvent.objects.exists()


def test_a_webhook_denial_fails_at_once_with_the_api_servers_message(sandbox: Any, k8s: Any) -> None:
    _make_namespace(k8s, "api")
    first = request_offload("api", _spec(namespaceMappingStrategy="EnforceSameName"), ALICE)
    first.refresh_from_db()
    assert first.state == ChangeState.APPLIED
    refresh()
    # Bypass our own validation to check that the cluster's answer is surfaced as it is.
    change = ChangeRequest.objects.create(
        namespace="api",
        action="update",
        desired_spec=_spec(),
        base_generation=Namespace.objects.get(name="api").offloading_generation,
        requester_name="mallory",
    )
    assert apply_change(change.pk) == ChangeState.FAILED
    change.refresh_from_db()
    assert change.attempts == 1
    assert "cannot be modified after creation" in change.message


def test_a_stale_edit_ends_in_conflict_and_keeps_both_versions(sandbox: Any, k8s: Any) -> None:
    _make_namespace(k8s, "data")
    request_offload("data", _spec(), ALICE)
    _settle("data", ("Ready",))
    generation = Namespace.objects.get(name="data").offloading_generation
    # Someone else changes the spec in the cluster; the snapshot has not seen it yet, so the edit based
    # on the old generation is accepted and queued, and the race is caught when it is applied.
    k8s.custom.patch_namespaced_custom_object(
        GROUP, VERSION, "data", PLURAL, "offloading", {"spec": {"podOffloadingStrategy": "Remote"}}
    )
    # LocalAndRemote to Local is destructive: confirmed, as every strategy change below.
    loser = request_offload(
        "data", _spec(podOffloadingStrategy="Local"), BOB, expected_generation=generation, confirmed=True
    )
    loser.refresh_from_db()
    assert loser.state == ChangeState.CONFLICT
    assert loser.conflict_spec["podOffloadingStrategy"] == "Remote"
    assert loser.desired_spec["podOffloadingStrategy"] == "Local"
    obj = k8s.custom.get_namespaced_custom_object(GROUP, VERSION, "data", PLURAL, "offloading")
    assert obj["spec"]["podOffloadingStrategy"] == "Remote"


def test_an_edit_the_snapshot_already_knows_is_stale_is_refused_and_not_recorded(sandbox: Any, k8s: Any) -> None:
    _make_namespace(k8s, "late")
    request_offload("late", _spec(), ALICE)
    _settle("late", ("Ready",))
    generation = Namespace.objects.get(name="late").offloading_generation
    winner = request_offload(
        "late", _spec(podOffloadingStrategy="Remote"), ALICE, expected_generation=generation, confirmed=True
    )
    winner.refresh_from_db()
    assert winner.state == ChangeState.APPLIED
    before = ChangeRequest.objects.count(), AuditEvent.objects.count()
    with pytest.raises(ChangeRejected) as refused:
        request_offload(
            "late", _spec(podOffloadingStrategy="Local"), BOB, expected_generation=generation, confirmed=True
        )
    assert refused.value.refusal is Refusal.STALE
    assert f"generation {generation} is now {generation + 1}" in refused.value.messages[0]
    assert (ChangeRequest.objects.count(), AuditEvent.objects.count()) == before


def test_a_status_only_change_is_not_a_conflict(sandbox: Any, k8s: Any) -> None:
    _make_namespace(k8s, "ops")
    first = request_offload("ops", _spec(), ALICE)
    first.refresh_from_db()  # what its requester saw: the object as created, before Liqo's status
    _settle("ops", ("Ready",))
    assert Namespace.objects.get(name="ops").offloading_resource_version != first.result_resource_version
    change = request_offload(
        "ops", _spec(podOffloadingStrategy="Remote"), BOB, expected_generation=first.result_generation, confirmed=True
    )
    change.refresh_from_db()
    assert change.state == ChangeState.APPLIED, change.message
    assert any("more restrictive" in w for w in change.warnings)


def test_a_redelivered_apply_is_recognised_and_not_applied_twice(sandbox: Any, k8s: Any) -> None:
    _make_namespace(k8s, "twice")
    change = ChangeRequest.objects.create(
        namespace="twice", action="offload", desired_spec=_spec(), requester_name="alice"
    )
    # A first attempt wrote the object, then its worker died before recording the outcome.
    written = k8s.custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        "twice",
        PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NamespaceOffloading",
            "metadata": {"name": "offloading", "annotations": {"liqo-dash.io/change-id": str(change.pk)}},
            "spec": _spec(),
        },
    )
    assert apply_change(change.pk) == ChangeState.APPLIED
    change.refresh_from_db()
    assert change.result_generation == written["metadata"]["generation"]
    obj = k8s.custom.get_namespaced_custom_object(GROUP, VERSION, "twice", PLURAL, "offloading")
    assert obj["metadata"]["generation"] == written["metadata"]["generation"], "no second write"
    assert AuditEvent.objects.filter(change=change, action=AuditAction.APPLIED).count() == 1
    assert apply_change(change.pk) == "skipped"


def test_unoffload_waits_until_the_object_is_gone(sandbox: Any, k8s: Any) -> None:
    _make_namespace(k8s, "tmp")
    request_offload("tmp", _spec(), ALICE)
    _settle("tmp", ("Ready",))
    change = request_unoffload("tmp", ALICE, confirmed=True)
    change.refresh_from_db()
    assert change.state == ChangeState.APPLIED, change.message
    items = k8s.custom.list_namespaced_custom_object(GROUP, VERSION, "tmp", PLURAL)["items"]
    assert items == []
    assert not Namespace.objects.get(name="tmp").offloaded


def test_transient_errors_are_retried_until_they_succeed(sandbox: Any, k8s: Any, settings: Any) -> None:
    settings.LIQO_DASH = {**settings.LIQO_DASH, "APPLY_RETRY_BASE": 0.0}
    _make_namespace(k8s, "flaky")
    sandbox.faults.set(error_rate=0.3)
    try:
        change = request_offload("flaky", _spec(), ALICE)
    finally:
        sandbox.faults.clear()
    change.refresh_from_db()
    assert change.state == ChangeState.APPLIED, change.message
    assert AuditEvent.objects.filter(change=change, action=AuditAction.APPLIED).count() == 1


def test_changes_made_with_another_client_are_recorded_as_drift(sandbox: Any, k8s: Any) -> None:
    _make_namespace(k8s, "gitops")
    k8s.custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        "gitops",
        PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NamespaceOffloading",
            "metadata": {"name": "offloading"},
            "spec": _spec(),
        },
        field_manager="argocd",
    )
    refresh()
    event = AuditEvent.objects.get(namespace="gitops")
    assert event.action == AuditAction.DRIFT_CREATED
    assert event.source == Source.EXTERNAL
    assert event.user_name == "argocd"
    assert event.after["namespaceMappingStrategy"] == "DefaultName"
    refresh()
    assert AuditEvent.objects.filter(namespace="gitops").count() == 1, "drift is recorded once"


def test_bulk_offload_applies_one_change_per_matching_namespace(sandbox: Any, k8s: Any) -> None:
    for name in ("team-a-1", "team-a-2", "team-b-1"):
        team = name.rsplit("-", 1)[0]
        k8s.core.create_namespace({"metadata": {"name": name, "labels": {"team": team}}})
    refresh()
    bulk = request_bulk("offload", "team=team-a", _spec(podOffloadingStrategy="Remote"), ALICE)
    assert bulk.total == 2
    progress = bulk.progress()
    assert progress["applied"] == 2 and progress["done"] == progress["total"] == 2
    for name in ("team-a-1", "team-a-2"):
        obj = k8s.custom.get_namespaced_custom_object(GROUP, VERSION, name, PLURAL, "offloading")
        assert obj["spec"]["podOffloadingStrategy"] == "Remote"
    assert k8s.custom.list_namespaced_custom_object(GROUP, VERSION, "team-b-1", PLURAL)["items"] == []
    requested = AuditEvent.objects.filter(change__bulk=bulk, action=AuditAction.REQUESTED)
    assert requested.count() == 2 and {e.source for e in requested} == {Source.BULK}
    assert bulk.source == Source.WEB and {c.source for c in bulk.changes.all()} == {Source.BULK}


def test_the_dry_run_puts_the_api_servers_refusal_on_the_form(
    sandbox: Any, k8s: Any, admin_client: Any, settings: Any
) -> None:
    from django.urls import reverse

    settings.LIQO_DASH = {**settings.LIQO_DASH, "DRY_RUN_ON_SUBMIT": True}
    _make_namespace(k8s, "vanishing")
    k8s.core.delete_namespace("vanishing")  # gone from the cluster, still in the snapshot
    response = admin_client.post(
        reverse("offloading:namespace_offload", args=["vanishing"]),
        {"namespace_mapping_strategy": "DefaultName", "pod_offloading_strategy": "LocalAndRemote"},
    )
    assert response.status_code == 200
    errors = " ".join(response.context["form"].non_field_errors())
    assert "The API server refused this change" in errors and "vanishing" in errors
    assert not ChangeRequest.objects.exists()

    _make_namespace(k8s, "present")
    response = admin_client.post(
        reverse("offloading:namespace_offload", args=["present"]),
        {"namespace_mapping_strategy": "DefaultName", "pod_offloading_strategy": "LocalAndRemote"},
    )
    assert response.status_code == 302
    assert k8s.custom.get_namespaced_custom_object(GROUP, VERSION, "present", PLURAL, "offloading")


def test_while_the_api_server_is_unreachable_a_change_waits_and_resumes_when_a_probe_gets_an_answer(
    sandbox: Any, k8s: Any
) -> None:
    _make_namespace(k8s, "down")
    _make_namespace(k8s, "down-too")
    sandbox.faults.set(outage=True)
    try:
        change = request_offload("down", _spec(), ALICE)
        change.refresh_from_db()
        assert change.state == ChangeState.QUEUED and change.waiting_reason == apihealth.WAITING_FOR_API
        outage = apihealth.outage()
        assert outage is not None and change.waiting_since == outage.since
        assert "unreachable since" in change.message and change.attempts == 1
        # Another change does not even try while the breaker is open, and spends no attempt.
        other = request_offload("down-too", _spec(podOffloadingStrategy="Remote"), BOB)
        other.refresh_from_db()
        assert other.state == ChangeState.QUEUED and other.attempts == 0
        assert apihealth.probe() is False  # still down: nothing resumes
        assert ChangeRequest.objects.filter(waiting_reason=apihealth.WAITING_FOR_API).count() == 2
    finally:
        sandbox.faults.clear()
    assert apihealth.probe() is True
    assert apihealth.outage() is None and apihealth.last_outage() is not None
    change.refresh_from_db()
    other.refresh_from_db()
    assert (change.state, other.state) == (ChangeState.APPLIED, ChangeState.APPLIED), (change.message, other.message)
    assert change.waiting_reason == "" and change.waiting_since is None
    assert AuditEvent.objects.filter(change=change, action=AuditAction.FAILED).count() == 0


def test_transient_errors_fail_a_change_only_when_its_retry_budget_is_spent(
    sandbox: Any, k8s: Any, settings: Any
) -> None:
    settings.LIQO_DASH = {**settings.LIQO_DASH, "APPLY_RETRY_FOR": 0.0}
    _make_namespace(k8s, "gone")
    sandbox.faults.set(outage=True)
    try:
        change = request_offload("gone", _spec(), ALICE)
    finally:
        sandbox.faults.clear()
    change.refresh_from_db()
    assert change.state == ChangeState.FAILED and change.attempts == 1
    assert "the API server was unreachable from" in change.message
    assert AuditEvent.objects.filter(change=change, action=AuditAction.FAILED).count() == 1


def test_an_object_deleted_and_created_again_is_a_conflict_even_at_the_same_generation(sandbox: Any, k8s: Any) -> None:
    _make_namespace(k8s, "reborn")
    request_offload("reborn", _spec(), ALICE)
    _settle("reborn", ("Ready",))
    seen = Namespace.objects.get(name="reborn")
    k8s.custom.delete_namespaced_custom_object(GROUP, VERSION, "reborn", PLURAL, "offloading")
    wait_until(
        lambda: not k8s.custom.list_namespaced_custom_object(GROUP, VERSION, "reborn", PLURAL)["items"],
        60,
        message="gone",
    )
    k8s.custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        "reborn",
        PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NamespaceOffloading",
            "metadata": {"name": "offloading"},
            "spec": _spec(podOffloadingStrategy="Local"),
        },
    )
    change = ChangeRequest.objects.create(
        namespace="reborn",
        action="update",
        desired_spec=_spec(podOffloadingStrategy="Remote"),
        base_generation=seen.offloading_generation,
        base_uid=seen.offloading_uid,
        requester_name="alice",
    )
    assert apply_change(change.pk) == ChangeState.CONFLICT
    change.refresh_from_db()
    assert "deleted and created again" in change.message
    obj = k8s.custom.get_namespaced_custom_object(GROUP, VERSION, "reborn", PLURAL, "offloading")
    assert obj["spec"]["podOffloadingStrategy"] == "Local"


def test_a_conflicting_offload_leaves_the_namespace_unlabelled(sandbox: Any, k8s: Any) -> None:
    _make_namespace(k8s, "racey")
    # Someone else offloads it (Local: Liqo does not label the namespace) before our change runs.
    k8s.custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        "racey",
        PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NamespaceOffloading",
            "metadata": {"name": "offloading"},
            "spec": _spec(podOffloadingStrategy="Local"),
        },
    )
    change = request_offload("racey", _spec(), ALICE, label_namespace=True)
    change.refresh_from_db()
    assert change.state == ChangeState.CONFLICT
    labels = k8s.core.read_namespace("racey").metadata.labels or {}
    assert labels.get("liqo.io/scheduling-enabled") != "true"


def test_an_offload_with_the_label_option_labels_the_namespace(sandbox: Any, k8s: Any) -> None:
    _make_namespace(k8s, "labelled")
    change = request_offload("labelled", _spec(), ALICE, label_namespace=True)
    change.refresh_from_db()
    assert change.state == ChangeState.APPLIED
    namespace = k8s.core.read_namespace("labelled").metadata
    assert (namespace.labels or {}).get("liqo.io/scheduling-enabled") == "true"
    # Liqo's controller sets the label too (LocalAndRemote): ours is the write by our field manager.
    assert "liqo-dash" in {entry.manager for entry in namespace.managed_fields or []}


def test_a_broker_failure_after_commit_loses_nothing_and_does_not_fail_the_request(
    sandbox: Any, k8s: Any, settings: Any
) -> None:
    from liqo_dash.celery import app
    from tests.fixtures.celery import reset_producers
    from tests.fixtures.waits import free_port

    _make_namespace(k8s, "nobroker")
    saved = (app.conf.task_always_eager, app.conf.broker_url, app.conf.broker_connection_max_retries)
    app.conf.update(task_always_eager=False, broker_url=f"redis://127.0.0.1:{free_port()}/0")
    reset_producers(app)
    try:
        change = request_offload("nobroker", _spec(), ALICE)
    finally:
        app.conf.update(task_always_eager=saved[0], broker_url=saved[1])
        reset_producers(app)
    change.refresh_from_db()
    assert change.state == ChangeState.QUEUED
    assert AuditEvent.objects.filter(change=change, action=AuditAction.REQUESTED).count() == 1
    settings.LIQO_DASH = {**settings.LIQO_DASH, "STUCK_AFTER": 0}
    assert sweep() == 1  # the outbox sweeper sends it again (run eagerly here)
    change.refresh_from_db()
    assert change.state == ChangeState.APPLIED


def test_a_conflict_is_resolved_by_applying_the_same_change_over_the_current_version(
    sandbox: Any, k8s: Any, admin_client: Any
) -> None:
    from django.urls import reverse

    _make_namespace(k8s, "contested")
    request_offload("contested", _spec(), ALICE)
    _settle("contested", ("Ready",))
    generation = Namespace.objects.get(name="contested").offloading_generation
    k8s.custom.patch_namespaced_custom_object(
        GROUP, VERSION, "contested", PLURAL, "offloading", {"spec": {"podOffloadingStrategy": "Remote"}}
    )
    loser = request_offload(
        "contested", _spec(podOffloadingStrategy="Local"), BOB, expected_generation=generation, confirmed=True
    )
    loser.refresh_from_db()
    assert loser.state == ChangeState.CONFLICT
    page = admin_client.get(reverse("offloading:change_status", args=[loser.pk])).content.decode()
    # Both changed the pod strategy: the three-way view asks which one to keep.
    assert "Both changed it" in page and 'name="choice_podOffloadingStrategy"' in page
    _settle("contested", ("Ready",))
    undecided = admin_client.post(reverse("offloading:change_reapply", args=[loser.pk]))
    assert undecided.status_code == 302 and ChangeRequest.objects.order_by("-id").first().pk == loser.pk
    response = admin_client.post(
        # Mine turns their Remote into Local: destructive, so confirmed.
        reverse("offloading:change_reapply", args=[loser.pk]),
        {"choice_podOffloadingStrategy": "mine", "confirm": "on"},
    )
    again = ChangeRequest.objects.order_by("-id").first()
    assert response.status_code == 302 and again.pk != loser.pk
    again.refresh_from_db()
    assert again.state == ChangeState.APPLIED, again.message
    obj = k8s.custom.get_namespaced_custom_object(GROUP, VERSION, "contested", PLURAL, "offloading")
    assert obj["spec"]["podOffloadingStrategy"] == "Local"
    # Only a change in conflict can be applied again.
    assert admin_client.post(reverse("offloading:change_reapply", args=[again.pk])).status_code == 302
    assert ChangeRequest.objects.order_by("-id").first().pk == again.pk


def test_a_recreated_offloading_with_a_copied_change_id_is_drift(sandbox: Any, k8s: Any) -> None:
    """Drift is decided from what the dashboard wrote (uid and generation, kept server-side), never
    from the change-id annotation, which any client can copy."""
    from liqo_rules.constants import GROUP, PLURAL, VERSION
    from offloading.cluster import kube

    _make_namespace(k8s, "copied")
    change = request_offload("copied", _spec(), ALICE)
    change.refresh_from_db()
    assert change.state == ChangeState.APPLIED and change.result_uid
    _settle("copied")
    ours = k8s.custom.get_namespaced_custom_object(GROUP, VERSION, "copied", PLURAL, "offloading")
    annotations = ours["metadata"]["annotations"]
    assert annotations[kube.CHANGE_ID_ANNOTATION] == str(change.pk)
    k8s.custom.delete_namespaced_custom_object(GROUP, VERSION, "copied", PLURAL, "offloading")
    wait_until(lambda: kube.get_offloading("copied") is None, 60, message="the offloading is gone")
    refresh()
    k8s.custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        "copied",
        PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NamespaceOffloading",
            "metadata": {"name": "offloading", "annotations": annotations},
            "spec": _spec(podOffloadingStrategy="Remote"),
        },
        field_manager="sneaky",
    )
    refresh()
    drift = AuditEvent.objects.filter(namespace="copied", action=AuditAction.DRIFT_CREATED).get()
    assert drift.user_name == "sneaky" and drift.source == Source.EXTERNAL
    assert "unknown unless the cluster's audit log says more" in drift.message


@pytest.mark.django_db
def test_an_eager_requeue_loop_stops_and_leaves_the_change_queued(monkeypatch: pytest.MonkeyPatch) -> None:
    """Eager Celery (the tests) runs a requeued change inside the apply that requeued it: while another
    apply holds the namespace's lock that nested until RecursionError (CI saw it, through logging, as an
    unraisable exception). It now stops EAGER_NESTING_LIMIT deep and the change waits for the sweeper."""
    from django.core.cache import cache

    from offloading import queue
    from offloading.changes import apply as apply_module

    change = ChangeRequest.objects.create(namespace="held", action="offload", desired_spec=_spec(), requester_name="a")
    cache.add(apply_module._lock_key("held"), "another-worker", timeout=60)
    runs: list[int] = []
    real = apply_module.apply_change

    def counted(change_id: int) -> str:
        runs.append(change_id)
        return real(change_id)

    monkeypatch.setattr(apply_module, "apply_change", counted)
    try:
        queue.enqueue_apply(change.pk)
    finally:
        cache.delete(apply_module._lock_key("held"))
    assert runs == [change.pk] * queue.EAGER_NESTING_LIMIT
    change.refresh_from_db()
    assert change.state == ChangeState.QUEUED and "another worker is writing this namespace" in change.message
    assert change.attempts == 0  # waiting for a lock spends no attempt
