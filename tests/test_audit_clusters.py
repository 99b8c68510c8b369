"""Audit events carry their managed cluster (issue 28, migration 0028): the rows sealed before keep
verifying (seal version 1: the cluster is not in their seal), the rows sealed since cover their cluster
(seal version 2), and 0028 gives the existing events and alerts the default cluster. The migration tests
run on SQLite and on PostgreSQL (scripts/with-postgres.sh)."""

from __future__ import annotations

import csv
import json
from collections.abc import Iterator
from datetime import timedelta
from io import StringIO
from pathlib import Path
from typing import Any

import pytest
from django.core.management import call_command
from django.core.management.base import CommandError
from django.core.management.sql import emit_post_migrate_signal
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from offloading.audit.events import record, sealed_together
from offloading.audit.trail import anchor, prune, verify
from offloading.choices import AuditAction, Source
from offloading.cluster.kube import CHANGE_ID_ANNOTATION
from offloading.context import Actor
from offloading.models import Alert, AuditEvent, ChangeRequest, ManagedCluster, Namespace, SnapshotState
from offloading.models import seal as auditseal
from offloading.models.fleet import default_managed_pk
from offloading.snapshot.drift import observe_offloading, open_drift
from offloading.views.managed import removal_of
from tests import migrating

BEFORE = ("offloading", "0026_scoped_reader_indexes")
ALICE = Actor(None, "alice", Source.WEB, "")


@pytest.fixture(autouse=True)
def _anchor_file(tmp_path: Path, settings: Any) -> Path:
    settings.AUDIT_ANCHOR = str(tmp_path / "anchor.jsonl")
    return Path(settings.AUDIT_ANCHOR)


def _sql(statement: str, *params: Any) -> None:
    with connection.cursor() as cursor:
        cursor.execute(statement, params)


def _verify_audit() -> tuple[int, str]:
    try:
        call_command("verify_audit", stdout=StringIO())
    except CommandError as exc:
        return exc.returncode, str(exc)
    return 0, ""


# --------------------------------------------------------------------------------------------------
# New rows: the seal covers the cluster


@pytest.mark.django_db
def test_a_new_rows_seal_covers_its_cluster() -> None:
    milan = ManagedCluster.objects.create(name="milan", context="milan")
    record(ALICE, AuditAction.REQUESTED, "shop", outcome="queued")
    moved = record(ALICE, AuditAction.REQUESTED, "shop", outcome="queued", managed=milan)
    record(ALICE, AuditAction.REQUESTED, "shop", outcome="queued")
    assert moved.seal_version == 2 and AuditEvent.objects.get(pk=moved.pk).managed_id == milan.pk
    assert verify().ok and verify().count == 3
    # Moved to the default cluster in the database: the seal no longer verifies.
    _sql("UPDATE offloading_auditevent SET managed_id = %s WHERE id = %s", default_managed_pk(), moved.pk)
    verdict = verify()
    assert verdict.problem == "event #2 was edited (or inserted): its seal does not verify"
    assert verdict.first_bad_id == moved.pk
    assert _verify_audit()[0] != 0
    # Back where it was sealed, then passed for a row sealed before clusters (version 1): found too.
    _sql("UPDATE offloading_auditevent SET managed_id = %s WHERE id = %s", milan.pk, moved.pk)
    assert verify().ok
    _sql("UPDATE offloading_auditevent SET seal_version = 1 WHERE id = %s", moved.pk)
    assert verify().first_bad_id == moved.pk


@pytest.mark.django_db
def test_events_sealed_together_seal_the_cluster_they_are_written_with() -> None:
    """append_all seals before bulk_create: a row that names no cluster gets the default's pk before its
    seal is computed (the key's pre_save would fill it in only after)."""
    milan = ManagedCluster.objects.create(name="milan", context="milan")
    with sealed_together():
        record(ALICE, AuditAction.REQUESTED, "a", outcome="queued")
        record(ALICE, AuditAction.REQUESTED, "b", outcome="queued", managed=milan.pk)
        AuditEvent(user_name="bob", source=Source.WEB, action=AuditAction.REQUESTED, namespace="c")
    plain = AuditEvent(user_name="bob", source=Source.WEB, action=AuditAction.REQUESTED, namespace="c")
    plain.save()  # the model's own save names the default too
    rows = list(AuditEvent.objects.order_by("seq").values_list("namespace", "managed_id", "seal_version"))
    default = default_managed_pk()
    assert rows == [("a", default, 2), ("b", milan.pk, 2), ("c", default, 2)]
    assert verify().ok


@pytest.mark.django_db
def test_a_cluster_with_audit_events_cannot_be_removed() -> None:
    """The trail is append-only: a cluster's events keep it (PROTECT), the removal page says so."""
    milan = ManagedCluster.objects.create(name="milan", context="milan")
    assert not removal_of(milan).blockers
    record(ALICE, AuditAction.DRIFT_UPDATED, "shop", outcome="observed", managed=milan)
    assert removal_of(milan).blockers == ["1 audit events belong to it: the audit trail is append-only"]


# --------------------------------------------------------------------------------------------------
# Rows sealed before 0028, and the migration


def _old_seal(row: Any, seq: int, prev: str) -> str:
    """The seal as the code before 0028 computed it: the payload had no cluster."""
    payload = {
        "time": row.time.isoformat(),
        "user_name": row.user_name,
        "source": row.source,
        "request_id": row.request_id,
        "action": row.action,
        "namespace": row.namespace,
        "change": row.change_id,
        "before": row.before,
        "after": row.after,
        "outcome": row.outcome,
        "message": row.message,
    }
    return auditseal.seal(seq, prev, payload)


@pytest.fixture
def before_the_trail_clusters(transactional_db: Any) -> Iterator[Any]:
    yield from migrating.back_to(BEFORE)


def _old_trail(apps: Any, count: int) -> None:
    """``count`` events sealed and chained as the previous version wrote them, and their head."""
    events = apps.get_model("offloading", "AuditEvent")
    prev, start = "", timezone.now() - timedelta(days=10)
    for seq in range(1, count + 1):
        row = events(
            seq=seq,
            time=start + timedelta(days=seq),
            user_name="alice",
            source="web",
            action="requested",
            namespace=f"ns-{seq}",
            after={"podOffloadingStrategy": "Remote"},
            outcome="queued",
            prev_hash=prev,
            key_id=auditseal.key_id(),
        )
        row.hash = prev = _old_seal(row, seq, prev)
        row.save()
    apps.get_model("offloading", "AuditChainHead").objects.update_or_create(
        pk=1, defaults={"last_hash": prev, "last_seq": count}
    )


def _migrate_forward() -> None:
    executor = MigrationExecutor(connection)
    executor.migrate(executor.loader.graph.leaf_nodes("offloading"))
    emit_post_migrate_signal(0, False, connection.alias)


def test_0028_keeps_the_old_trail_verifying_and_gives_it_the_default_cluster(before_the_trail_clusters: Any) -> None:
    apps = before_the_trail_clusters
    clusters = apps.get_model("offloading", "ManagedCluster")
    default, _ = clusters.objects.get_or_create(is_default=True, defaults={"name": "default"})
    _old_trail(apps, 5)
    apps.get_model("offloading", "Alert").objects.create(key="stuck:shop:looping", kind="stuck", title="shop")
    _migrate_forward()
    # The old trail verifies as it did, with a checkpoint (pruned before the upgrade's rows) and an anchor.
    assert prune(timezone.now() - timedelta(days=7.5)) is not None  # #1 and #2 go
    anchor()
    verdict = verify()
    assert verdict.ok and verdict.count == 3, verdict.problem
    assert set(AuditEvent.objects.values_list("managed_id", "seal_version")) == {(default.pk, 1)}
    assert list(Alert.objects.values_list("key", "managed_id")) == [("stuck:shop:looping", default.pk)]
    # New rows follow on the same chain, sealed with their cluster; the head and the anchor still agree.
    milan = ManagedCluster.objects.create(name="milan", context="milan")
    new = record(ALICE, AuditAction.DRIFT_UPDATED, "shop", outcome="observed", managed=milan)
    assert new.seq == 6 and new.seal_version == 2
    assert verify().ok and _verify_audit() == (0, "")
    _sql("UPDATE offloading_auditevent SET managed_id = %s WHERE id = %s", default.pk, new.pk)
    assert verify().first_bad_id == new.pk


def test_0028_makes_the_default_cluster_when_events_have_none(before_the_trail_clusters: Any) -> None:
    apps = before_the_trail_clusters
    apps.get_model("offloading", "ManagedCluster").objects.all().delete()
    _old_trail(apps, 2)
    _migrate_forward()
    made = ManagedCluster.objects.get(is_default=True)
    assert made.name == "default"
    assert set(AuditEvent.objects.values_list("managed_id", flat=True)) == {made.pk}
    assert verify().ok


# --------------------------------------------------------------------------------------------------
# Drift, for every managed cluster


def _offloading(strategy: str, change_id: int) -> dict[str, Any]:
    return {
        "apiVersion": "offloading.liqo.io/v1beta1",
        "kind": "NamespaceOffloading",
        "metadata": {
            "name": "offloading",
            "namespace": "orders",
            "uid": "u-1",
            "generation": 1,
            "resourceVersion": "7",
            "annotations": {CHANGE_ID_ANNOTATION: str(change_id)},
            "managedFields": [{"manager": "kubectl", "operation": "Apply", "time": "2026-01-01T00:00:00Z"}],
        },
        "spec": {"podOffloadingStrategy": strategy},
    }


@pytest.mark.django_db
def test_drift_in_another_cluster_is_recorded_under_it_and_no_default_change_passes_for_it() -> None:
    milan = ManagedCluster.objects.create(name="milan", context="milan")
    now = timezone.now()
    for managed in (None, milan):
        Namespace.objects.create(managed_id=managed and managed.pk, name="orders")
        SnapshotState.touch(managed, last_success_at=now)
    # The default cluster's change of its own "orders", still being applied: the same id annotated on
    # milan's object (copied by hand, say) does not make milan's create ours.
    pending = ChangeRequest.objects.create(namespace="orders", action="offload", requester_name="alice")
    assert observe_offloading("orders", _offloading("Remote", pending.pk), managed=milan)
    (event,) = AuditEvent.objects.filter(action=AuditAction.DRIFT_CREATED)
    assert (event.managed_id, event.namespace, event.source) == (milan.pk, "orders", Source.EXTERNAL)
    assert event.after["podOffloadingStrategy"] == "Remote"
    # Open on milan's namespace only; the default's "orders" has no drift of milan's.
    assert open_drift(Namespace.objects.get(managed=milan, name="orders"))["drift"] == event
    assert open_drift(Namespace.objects.of().get(name="orders")) == {}
    # In the default cluster the pending change is ours, as before.
    assert observe_offloading("orders", _offloading("Remote", pending.pk))
    assert AuditEvent.objects.filter(action__startswith="drift_").count() == 1
    assert verify().ok


# --------------------------------------------------------------------------------------------------
# The page, the API, the export and the schema: filtered by cluster, each event with its cluster's name


def _two_clusters_trail() -> ManagedCluster:
    milan = ManagedCluster.objects.create(name="milan", context="milan")
    record(ALICE, AuditAction.REQUESTED, "shop", outcome="queued")
    record(Actor(None, "kubectl", Source.EXTERNAL, ""), AuditAction.DRIFT_UPDATED, "orders", outcome="observed",
           managed=milan)  # fmt: off
    return milan


@pytest.mark.django_db
def test_the_audit_page_filters_by_cluster_and_says_each_events_cluster(admin_client: Any) -> None:
    single = admin_client.get("/audit/").content.decode()
    assert 'name="cluster"' not in single and '<th scope="col">Cluster</th>' not in single  # one cluster
    _two_clusters_trail()
    page = admin_client.get("/audit/").content.decode()
    assert '<th scope="col">Cluster</th>' in page and 'name="cluster"' in page
    assert '<td class="cluster">milan</td>' in page and "/namespaces/shop/" in page
    # milan's namespace links to milan's rows (the namespace pages are the default cluster's).
    assert "/fleet/namespaces/?cluster=milan&amp;q=orders" in page and "/namespaces/orders/" not in page
    only = admin_client.get("/audit/?cluster=milan").content.decode()
    assert ">orders</a>" in only and ">shop</a>" not in only and "1 event<" in only
    assert admin_client.get("/audit/?cluster=rome").status_code == 200  # an unknown name: an error, no rows
    assert "No events match." in admin_client.get("/audit/?cluster=rome").content.decode()
    managed = admin_client.get("/managed-clusters/").content.decode()
    assert 'href="/audit/?cluster=milan"' in managed and 'id="fleet-audit"' in managed


@pytest.mark.django_db
def test_the_api_and_the_export_filter_by_cluster_and_name_it(api: Any) -> None:
    _two_clusters_trail()
    default = ManagedCluster.objects.get(is_default=True).name
    listed = api.get("/api/v1/audit/").json()["results"]
    assert [(e["namespace"], e["managedCluster"]) for e in listed] == [("orders", "milan"), ("shop", default)]
    only = api.get("/api/v1/audit/", {"cluster": "milan"}).json()["results"]
    assert [e["namespace"] for e in only] == ["orders"]
    bad = api.get("/api/v1/audit/", {"cluster": "rome"})
    assert bad.status_code == 400 and "cluster" in json.dumps(bad.json())
    lines = api.get("/api/v1/audit/export/", {"format": "csv", "cluster": "milan"}).getvalue().decode().splitlines()
    header, *rows = list(csv.reader(lines))
    assert header[:2] == ["seq", "managedCluster"] and [row[1] for row in rows] == ["milan"]
    exported = json.loads(api.get("/api/v1/audit/export/", {"format": "json"}).getvalue())
    assert [e["managedCluster"] for e in exported] == [default, "milan"]


@pytest.mark.django_db
def test_the_schema_says_the_audit_has_a_cluster(api: Any) -> None:
    schema = api.get("/api/schema/", {"format": "json"}).json()
    for path in ("/api/v1/audit/", "/api/v1/audit/export/"):
        (cluster,) = [p for p in schema["paths"][path]["get"]["parameters"] if p["name"] == "cluster"]
        assert cluster["schema"]["type"] == "string" and "managed cluster" in cluster["description"]
    event = schema["components"]["schemas"]["AuditEvent"]["properties"]["managedCluster"]
    assert event["type"] == "string" and event["readOnly"]


@pytest.mark.django_db
def test_a_changes_events_are_its_clusters() -> None:
    """record() names the change's cluster when the caller names none (approvals, holds and hand-offs
    call it with their change). A ChangeRequest has no cluster on this branch: its events are the
    default's, and once it has one (set here by hand) they are that cluster's."""
    milan = ManagedCluster.objects.create(name="milan", context="milan")
    change = ChangeRequest.objects.create(namespace="orders", action="offload", requester_name="alice")
    assert record(ALICE, AuditAction.APPROVED, "orders", outcome="approved", change=change).managed_id == (
        default_managed_pk()
    )
    change.managed_id = milan.pk  # what the stage "changes carry their cluster" gives every change
    assert record(ALICE, AuditAction.APPROVED, "orders", outcome="approved", change=change).managed_id == milan.pk
    assert verify().ok
