"""Issue 28, changes and bulks carry their managed cluster: the migration moves existing changes and bulks to
the default cluster; the per-namespace order and lock are per (cluster, namespace), so the same name in
two clusters never blocks the other; the API-health breaker, the 429 pacing and the Celery queue are per
cluster (the default keeps the keys of single-cluster versions). Fast, with eager Celery; the cluster's
own client is stood in for by recording what the push is bound to. tests/test_fleet_changes_sandbox.py
runs the same against two sandbox API servers over HTTP."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core.cache import cache
from django.core.management.sql import emit_post_migrate_signal
from django.db import connection
from django.db.migrations.executor import MigrationExecutor

from access import roles
from access.models import Scope
from offloading import queue
from offloading.changes import apply, bulkpush
from offloading.changes.bulk import request_bulk
from offloading.changes.errors import ChangeRejected
from offloading.changes.requests import request_offload
from offloading.choices import AuditAction, ChangeAction, ChangeState, Source
from offloading.cluster import breaker as apihealth
from offloading.cluster import kube, pace
from offloading.context import Actor
from offloading.governance import approvals
from offloading.models import (
    ApprovalDecision,
    AuditEvent,
    BulkRequest,
    ChangeRequest,
    ClusterOffloading,
    ManagedCluster,
    Namespace,
)
from offloading.models.managed import ensure_configured
from offloading.views.managed import removal_of
from offloading.whatif.destructive import destructive_changes
from offloading.whatif.impact import bulk_impact
from tests import migrating

SPEC = {"namespaceMappingStrategy": "DefaultName", "podOffloadingStrategy": "LocalAndRemote"}
DASHBOARD = Actor(None, "dashboard", Source.API, "req-1")


@pytest.fixture
def clusters(db: Any) -> tuple[ManagedCluster, ManagedCluster]:
    """The default cluster and milan-eu, each with a namespace "orders" in its snapshot."""
    (default,) = ensure_configured([])
    milan = ManagedCluster.objects.create(name="milan-eu", context="milan")
    for managed in (default, milan):
        Namespace.objects.create(managed=managed, name="orders")
    return default, milan


@pytest.fixture
def pushes(monkeypatch: Any) -> list[tuple[int, str, str]]:
    """Every push as (change, the cluster it was bound to, the pacer it went through), answered as the
    API server would; nothing reaches a network."""
    seen: list[tuple[int, str, str]] = []
    bound: list[str] = []

    @contextlib.contextmanager
    def talking_to(cluster: Any, *, paced: bool = False) -> Iterator[None]:
        bound.append(cluster.name)
        with kube.paced(apply.pace_key(cluster)) if paced else contextlib.nullcontext():
            yield
        bound.pop()

    def push_spec(change: ChangeRequest) -> tuple[dict[str, Any], list[str]]:
        seen.append((change.pk, bound[-1], pace.current_pacer().backoff_key))
        return {"metadata": {"resourceVersion": "7", "generation": 1, "uid": f"uid-{change.pk}"}}, []

    monkeypatch.setattr(apply, "talking_to", talking_to)
    monkeypatch.setattr(apply, "push_spec", push_spec)
    return seen


def _change(managed: ManagedCluster, state: str = ChangeState.QUEUED, **fields: Any) -> ChangeRequest:
    return ChangeRequest.objects.create(
        managed=managed,
        namespace="orders",
        action=ChangeAction.OFFLOAD,
        desired_spec=SPEC,
        requester_name="dashboard",
        state=state,
        **fields,
    )


def test_a_change_written_without_a_cluster_is_the_default_clusters(clusters: Any) -> None:
    default, _ = clusters
    change = ChangeRequest.objects.create(namespace="orders", action=ChangeAction.OFFLOAD, requester_name="x")
    bulk = BulkRequest.objects.create(action=ChangeAction.OFFLOAD, namespace_selector="a=b", requester_name="x")
    assert change.managed_id == default.pk and bulk.managed_id == default.pk


def test_a_bulk_of_one_cluster_changes_only_that_clusters_namespaces(clusters: Any, pushes: list[Any]) -> None:
    default, milan = clusters
    for managed in (default, milan):
        Namespace.objects.create(managed=managed, name="billing", labels={"team": "a"})
    bulk = request_bulk(ChangeAction.OFFLOAD, "team=a", SPEC, DASHBOARD, managed=milan.pk)
    assert bulk.managed_id == milan.pk and bulk.total == 1
    (child,) = bulk.changes.all()
    assert (child.managed_id, child.namespace) == (milan.pk, "billing")
    assert not ChangeRequest.objects.filter(managed=default).exists()
    bulkpush.apply_bulk(bulk.pk)
    assert [(pk, cluster) for pk, cluster, _ in pushes] == [(child.pk, "milan-eu")]
    # A cluster with changes is not removed with them (their sealed audit events name them).
    assert any("change requests still belong to it" in blocker for blocker in removal_of(milan).blockers)


def test_the_same_namespace_in_two_clusters_gets_its_own_change_and_neither_blocks_the_other(
    clusters: Any, pushes: list[tuple[int, str, str]]
) -> None:
    default, milan = clusters
    # The default cluster's "orders" has a change being written by another worker (fresh lease, its lock held).
    busy = _change(default, ChangeState.APPLYING, attempts=1)
    cache.add(apply._lock_key("orders"), "another-worker", timeout=60)

    change = request_offload("orders", SPEC, DASHBOARD, managed=milan.pk)
    assert change.managed_id == milan.pk and change.state == ChangeState.QUEUED
    assert apply.apply_change(change.pk) == ChangeState.APPLIED  # not behind the default's "orders"
    assert pushes == [(change.pk, "milan-eu", f"liqo-dash:kube-backoff-until:{milan.pk}")]
    busy.refresh_from_db()
    assert busy.state == ChangeState.APPLYING

    # And the other way: milan's "orders" busy, the default's next change goes (the default's pacer).
    cache.delete(apply._lock_key("orders"))
    ChangeRequest.objects.filter(pk=busy.pk).update(state=ChangeState.FAILED)
    _change(milan, ChangeState.APPLYING, attempts=1)
    cache.add(apply._lock_key("orders", milan.pk), "another-worker", timeout=60)
    mine = request_offload("orders", SPEC, DASHBOARD)  # names no cluster: the default's
    assert mine.managed_id == default.pk
    assert apply.apply_change(mine.pk) == ChangeState.APPLIED
    assert pushes[-1] == (mine.pk, default.name, "liqo-dash:kube-backoff-until")


def test_within_one_cluster_a_namespaces_changes_stay_in_order(clusters: Any, pushes: list[Any]) -> None:
    _, milan = clusters
    older = _change(milan, ChangeState.APPLYING, attempts=1)
    newer = _change(milan)
    assert apply.apply_change(newer.pk) == "skipped"  # behind the older change of milan's "orders"
    assert pushes == []
    sent: list[tuple[int, int | None]] = []
    original = apply.enqueue_apply
    apply.enqueue_apply = lambda pk, countdown=0, managed=None: sent.append((pk, managed))  # type: ignore[assignment]
    try:
        _change(clusters[0])  # the default's "orders" is not milan's next change
        ChangeRequest.objects.filter(pk=older.pk).update(state=ChangeState.APPLIED)
        apply.start_next("orders", milan)
        apply.start_next_of([(milan.pk, "orders")])
    finally:
        apply.enqueue_apply = original  # type: ignore[assignment]
    assert sent == [(newer.pk, milan.pk), (newer.pk, milan.pk)]


def test_an_unreachable_cluster_delays_only_its_own_changes(clusters: Any, pushes: list[Any]) -> None:
    default, milan = clusters
    down = kube.KubeError("transient", "cannot reach the Kubernetes API: connection refused", unreachable=True)
    apihealth.report_failure(down, milan)
    assert apihealth.outage(milan) is not None and apihealth.outage() is None
    assert cache.get("liqo-dash:api-outage") is None  # the default's key, as single-cluster versions have it
    assert cache.get(f"liqo-dash:api-outage:{milan.pk}") is not None

    waits = request_offload("orders", SPEC, DASHBOARD, managed=milan.pk)
    goes = request_offload("orders", SPEC, DASHBOARD, managed=default.pk)
    assert apply.apply_change(waits.pk) == ChangeState.QUEUED
    assert apply.apply_change(goes.pk) == ChangeState.APPLIED
    waits.refresh_from_db()
    assert waits.waiting_reason == apihealth.WAITING_FOR_API and waits.attempts == 0
    assert list(apihealth.waiting_changes(milan)) == [waits] and not apihealth.waiting_changes().exists()
    assert [pk for pk, *_ in pushes] == [goes.pk]

    # milan answers again: its own waiting changes are sent, and only those.
    assert apihealth.report_success(milan)
    assert apihealth.resume_waiting(milan) == 1
    waits.refresh_from_db()
    assert waits.state == ChangeState.APPLIED and [pk for pk, *_ in pushes] == [goes.pk, waits.pk]


def test_a_429_from_one_clusters_api_server_holds_only_its_pushes(clusters: Any) -> None:
    _, milan = clusters
    theirs, ours = pace.pacer_for(milan.pk), pace.pacer_for(None)
    assert ours is kube.pacer and theirs is pace.pacer_for(str(milan.pk)) and theirs is not ours
    ours.reset()
    theirs.throttle(30)
    assert cache.get(f"liqo-dash:kube-backoff-until:{milan.pk}") is not None
    assert cache.get("liqo-dash:kube-backoff-until") is None
    with ours.slot():  # not held by milan's Retry-After
        pass
    assert ours.allowed == ours.maximum() and theirs.allowed < theirs.maximum()
    theirs.reset()


def test_celery_routes_a_clusters_changes_to_its_queue_when_configured(
    clusters: Any, settings: Any, monkeypatch: Any
) -> None:
    _, milan = clusters
    assert queue.cluster_queue(milan.pk) is None  # no prefix: one queue, as before
    settings.LIQO_DASH = {**settings.LIQO_DASH, "CLUSTER_QUEUE_PREFIX": "liqo-dash-cluster-"}
    assert queue.cluster_queue(milan.pk) == f"liqo-dash-cluster-{milan.pk}"
    assert queue.cluster_queue(None) is None  # the default cluster's changes stay in the default queue
    sent: list[tuple[str, tuple[int, ...], str | None]] = []
    monkeypatch.setattr(queue, "send", lambda name, *args, queue=None, **_: sent.append((name, args, queue)))
    change = _change(milan)
    apply.start_next("orders", milan)
    assert sent == [(queue.APPLY_CHANGE, (change.pk,), f"liqo-dash-cluster-{milan.pk}")]


def test_an_apply_message_of_the_previous_version_applies_a_change_on_its_cluster(
    clusters: Any, pushes: list[Any]
) -> None:
    """The task keeps its name and its one argument: a message queued before the upgrade (or consumed from
    the default queue) is applied on the change's own cluster, read from the change."""
    _, milan = clusters
    change = _change(milan)
    queue.send(queue.APPLY_CHANGE, change.pk)
    change.refresh_from_db()
    assert change.state == ChangeState.APPLIED and pushes[0][1] == "milan-eu"


def test_a_bulks_destructive_check_reads_its_clusters_snapshot(clusters: Any) -> None:
    """A bulk edit of milan's "billing" that loses the peer milan's status says it is on needs confirming,
    although the default cluster's "billing" is on no peer."""
    default, milan = clusters
    for managed in (default, milan):
        Namespace.objects.create(managed=managed, name="billing", offloaded=True, offloading_spec=SPEC)
    ClusterOffloading.objects.create(
        managed=milan,
        namespace=Namespace.objects.get(managed=milan, name="billing"),
        cluster_id="naples",
        selected=True,
    )
    narrower = {
        **SPEC,
        "clusterSelector": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "z", "operator": "In", "values": ["a"]}]}]
        },
    }
    edit = ChangeRequest(
        managed=milan, namespace="billing", action=ChangeAction.UPDATE, base_spec=SPEC, desired_spec=narrower
    )
    assert "no longer selects naples" in destructive_changes([edit])["billing"]
    assert bulk_impact([edit]).rows[0].losses == ["naples"]
    edit.managed = default
    assert destructive_changes([edit]) == {} and bulk_impact([edit]).rows[0].losses == []


def test_an_approver_is_judged_by_the_scopes_of_the_changes_cluster(
    clusters: Any, pushes: list[Any], settings: Any, django_user_model: Any
) -> None:
    """Governance reads the change's cluster: an operator whose scope covers the default cluster's "orders"
    only may not approve milan's "orders" (the same name), and may approve the default's."""
    _, milan = clusters
    settings.LIQO_DASH = {**settings.LIQO_DASH, "APPROVAL_POLICY": "all"}

    def person(name: str, role: str, *globs: str) -> Actor:
        user = django_user_model.objects.create_user(name, password=f"{name}-password-123")
        user.groups.add(Group.objects.get_or_create(name=role)[0])
        for glob in globs:
            Scope.objects.create(user=user, kind="glob", value=glob)
        roles.forget(user)
        return Actor(user.pk, name, Source.WEB, f"req-{name}")

    ada, otto = person("ada", roles.ADMIN), person("otto", roles.OPERATOR, "orders")
    theirs = request_offload("orders", SPEC, ada, managed=milan.pk)
    ours = request_offload("orders", SPEC, ada)
    assert {theirs.state, ours.state} == {ChangeState.AWAITING_APPROVAL}
    with pytest.raises(approvals.Refused) as refused:
        approvals.approve(otto, change_id=theirs.pk)
    assert refused.value.code == 403
    assert approvals.approve(otto, change_id=ours.pk).decision == ApprovalDecision.APPROVED


def test_a_refusal_is_audited_under_the_cluster_it_was_asked_of(clusters: Any, django_user_model: Any) -> None:
    """An operator scoped to the default cluster's "orders" asks for milan's "orders": refused, and the
    REFUSED event is milan's (the trail of the default cluster says nothing of it)."""
    default, milan = clusters
    user = django_user_model.objects.create_user("otto", password="otto-password-123")
    user.groups.add(Group.objects.get_or_create(name=roles.OPERATOR)[0])
    Scope.objects.create(user=user, kind="glob", value="orders")
    roles.forget(user)
    otto = Actor(user.pk, "otto", Source.WEB, "req-otto")
    with pytest.raises(ChangeRejected):
        request_offload("orders", SPEC, otto, managed=milan.pk)
    refused = AuditEvent.objects.filter(action=AuditAction.REFUSED, namespace="orders")
    assert [event.managed_id for event in refused] == [milan.pk]
    assert request_offload("orders", SPEC, otto).managed_id == default.pk  # in scope where it was granted


# --------------------------------------------------------------------------------------------------
# The migration

BEFORE = ("offloading", "0026_scoped_reader_indexes")


@pytest.fixture
def before_0027(transactional_db: Any) -> Iterator[Any]:
    yield from migrating.back_to(BEFORE)


def _migrate_forward() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes("offloading"))
    emit_post_migrate_signal(0, False, connection.alias)


def _old_rows(apps: Any) -> None:
    bulk = apps.get_model("offloading", "BulkRequest").objects.create(
        action="offload", namespace_selector="team=a", requester_name="alice"
    )
    change = apps.get_model("offloading", "ChangeRequest")
    change.objects.create(namespace="shop", action="offload", requester_name="alice", bulk=bulk)
    change.objects.create(namespace="web", action="unoffload", requester_name="bob", state="applied")


def test_the_migration_moves_existing_changes_and_bulks_to_the_default_cluster(before_0027: Any) -> None:
    clusters = before_0027.get_model("offloading", "ManagedCluster")
    old_default, _ = clusters.objects.get_or_create(is_default=True, defaults={"name": "default"})
    clusters.objects.get_or_create(name="milan-eu", defaults={"context": "milan"})
    _old_rows(before_0027)
    _migrate_forward()
    assert set(ChangeRequest.objects.values_list("managed", flat=True)) == {old_default.pk}
    assert list(BulkRequest.objects.values_list("managed", flat=True)) == [old_default.pk]
    assert not ChangeRequest._meta.get_field("managed").null and not BulkRequest._meta.get_field("managed").null
    with connection.cursor() as cursor:
        indexes = connection.introspection.get_constraints(cursor, ChangeRequest._meta.db_table)
    assert indexes["change_cluster_ns_state"]["columns"] == ["managed_id", "namespace", "state"]
    assert "change_ns_state" not in indexes


def test_the_migration_makes_the_default_cluster_when_changes_have_none(before_0027: Any) -> None:
    clusters = before_0027.get_model("offloading", "ManagedCluster")
    clusters.objects.all().delete()
    _old_rows(before_0027)
    _migrate_forward()
    made = ManagedCluster.objects.get(is_default=True)
    assert (made.name, made.context) == ("default", "")
    assert set(ChangeRequest.objects.values_list("managed", flat=True)) == {made.pk}
