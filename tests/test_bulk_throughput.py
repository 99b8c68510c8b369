"""Bulk throughput (the issue "bulk five times faster than kubectl"), against the in-process sandbox:

- the API round trips each kind of change costs, counted by the sandbox per verb and resource, with
  the watcher keeping the snapshot as deployed (one call per change when nothing raced it);
- the sandbox overlaps concurrent requests (threaded, its latency a sleep without a lock);
- a bulk pushed by one task with threads (``bulkpush.apply_bulk``): 429 TooManyRequests with Retry-After
  slows the whole bulk and loses nothing; a namespace the cluster refuses mid-bulk fails with the
  cluster's reason while the others are applied; changes of one namespace stay in order.
"""

from __future__ import annotations

import threading
import time
import urllib.request
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from typing import Any

import pytest

from offloading import queue as work_queue
from offloading.changes import bulkpush
from offloading.changes.apply import apply_change
from offloading.changes.bulk import request_bulk
from offloading.choices import ChangeAction, ChangeState, Source
from offloading.cluster import kube
from offloading.context import Actor
from offloading.models import BulkRequest, ChangeRequest, Namespace
from offloading.snapshot.engine import KindWatcher
from offloading.snapshot.refresh import informer_alive, refresh
from tests.fixtures.waits import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

SPEC = {
    "namespaceMappingStrategy": "DefaultName",
    "podOffloadingStrategy": "LocalAndRemote",
    "clusterSelector": {"nodeSelectorTerms": []},
}
SYSTEM = Actor(None, "bench", Source.API, "req-throughput")
GROUP, VERSION, PLURAL = "offloading.liqo.io", "v1beta1", "namespaceoffloadings"


def _calls(sandbox: Any) -> dict[str, int]:
    """The requests every client made since the last reset, by verb and resource, watches and lists
    (the watcher's) left out."""
    merged: dict[str, int] = {}
    for per_client in sandbox.api.traffic.as_dict()["calls"].values():
        for key, n in per_client.items():
            if key.split(" ")[0] not in ("list", "watch"):
                merged[key] = merged.get(key, 0) + n
    return merged


def _counted(sandbox: Any, run: Any) -> dict[str, int]:
    sandbox.wait_idle()
    sandbox.api.traffic.reset()
    run()
    return _calls(sandbox)


def _change(namespace: str, action: str, **fields: Any) -> ChangeRequest:
    return ChangeRequest.objects.create(namespace=namespace, action=action, requester_name="bench", **fields)


def _based_on_snapshot(namespace: str, action: str, **fields: Any) -> ChangeRequest:
    ns = Namespace.objects.get(name=namespace)
    return _change(
        namespace,
        action,
        base_generation=ns.offloading_generation,
        base_uid=ns.offloading_uid,
        base_resource_version=ns.offloading_resource_version,
        **fields,
    )


@pytest.fixture
def watcher(sandbox: Any) -> Iterator[KindWatcher]:
    """The watcher of NamespaceOffloadings, keeping the snapshot as deployed (and saying so)."""
    refresh()
    stop = threading.Event()
    thread = KindWatcher("namespaceoffloadings", stop, timeout_seconds=5)
    thread.start()
    wait_until(lambda: thread.resource_version, 60, message="the watch to start")
    informer_alive(600)
    yield thread
    stop.set()
    thread.join(15)


def _in_snapshot(namespace: str, offloaded: bool = True) -> None:
    wait_until(
        lambda: Namespace.objects.filter(name=namespace, offloaded=offloaded).exists(),
        30,
        message=f"{namespace} offloaded={offloaded} in the snapshot",
    )


def test_calls_per_change_kind(sandbox: Any, k8s: Any, watcher: KindWatcher) -> None:
    for name in ("c-create", "c-label"):
        k8s.core.create_namespace({"metadata": {"name": name}})
    refresh()
    create = _change("c-create", ChangeAction.OFFLOAD, desired_spec=SPEC)
    assert _counted(sandbox, lambda: apply_change(create.pk)) == {"create namespaceoffloadings": 1}
    label = _change("c-label", ChangeAction.OFFLOAD, desired_spec=SPEC, label_namespace=True)
    assert _counted(sandbox, lambda: apply_change(label.pk)) == {
        "patch namespaces": 1,
        "create namespaceoffloadings": 1,
    }
    _in_snapshot("c-create")
    sandbox.wait_idle()
    # Liqo wrote the status since the snapshot's version: the update's preconditions are the uid and
    # generation the requester saw, so it is still one call.
    update = _based_on_snapshot(
        "c-create", ChangeAction.UPDATE, desired_spec={**SPEC, "podOffloadingStrategy": "Remote"}
    )
    assert _counted(sandbox, lambda: apply_change(update.pk)) == {"patch namespaceoffloadings": 1}
    wait_until(lambda: Namespace.objects.get(name="c-create").offloading_generation == 2, 30, message="generation 2")
    sandbox.wait_idle()

    def caught_up() -> bool:
        live = k8s.custom.get_namespaced_custom_object(GROUP, VERSION, "c-create", PLURAL, "offloading")
        return Namespace.objects.get(name="c-create").offloading_resource_version == live["metadata"]["resourceVersion"]

    # The watcher brings Liqo's last status write into the snapshot (never skipped: waited for).
    wait_until(caught_up, 30, message="the snapshot to catch up with the cluster")
    delete = _based_on_snapshot("c-create", ChangeAction.UNOFFLOAD)
    # The DELETE, then the wait for Liqo's finalizer on the snapshot the watcher keeps: no read.
    assert _counted(sandbox, lambda: apply_change(delete.pk)) == {"delete namespaceoffloadings": 1}
    for change in (create, label, update, delete):
        change.refresh_from_db()
        assert change.state == ChangeState.APPLIED, change.message


def test_a_write_that_meets_another_object_reads_it_and_decides_as_before(
    sandbox: Any, k8s: Any, watcher: KindWatcher
) -> None:
    k8s.core.create_namespace({"metadata": {"name": "c-moved"}})
    refresh()
    first = _change("c-moved", ChangeAction.OFFLOAD, desired_spec=SPEC)
    apply_change(first.pk)
    _in_snapshot("c-moved")
    sandbox.wait_idle()
    stale = _based_on_snapshot("c-moved", ChangeAction.UPDATE, desired_spec={**SPEC, "podOffloadingStrategy": "Local"})
    k8s.custom.patch_namespaced_custom_object(
        GROUP, VERSION, "c-moved", PLURAL, "offloading", {"spec": {"podOffloadingStrategy": "Remote"}}
    )
    # The patch's generation test fails (422), the object is read: someone else's spec, a conflict.
    assert _counted(sandbox, lambda: apply_change(stale.pk)) == {
        "patch namespaceoffloadings": 1,
        "get namespaceoffloadings": 1,
    }
    stale.refresh_from_db()
    assert stale.state == ChangeState.CONFLICT and stale.conflict_spec["podOffloadingStrategy"] == "Remote"
    # A redelivered create (its first attempt wrote the object): AlreadyExists, read, ours: no second write.
    again = ChangeRequest.objects.get(pk=first.pk)
    ChangeRequest.objects.filter(pk=first.pk).update(state=ChangeState.QUEUED, finished_at=None)
    assert _counted(sandbox, lambda: apply_change(again.pk)) == {
        "create namespaceoffloadings": 1,
        "get namespaceoffloadings": 1,
    }


def test_the_sandbox_overlaps_concurrent_requests(sandbox: Any) -> None:
    sandbox.faults.set(latency=0.1)
    token = sandbox.policy.token_for("sandbox-admin")

    def get(_: int) -> None:
        request = urllib.request.Request(
            f"{sandbox.url}/api/v1/namespaces/default", headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()

    with ThreadPoolExecutor(32) as pool:
        started = time.monotonic()
        list(pool.map(get, range(32)))
        elapsed = time.monotonic() - started
    # 32 x 0.1 s one after the other would be 3.2 s; overlapped, about one latency.
    assert elapsed < 1.0, f"32 requests at once took {elapsed:.2f} s"


@pytest.fixture
def threaded(monkeypatch: pytest.MonkeyPatch) -> list[tuple[str, tuple[Any, ...]]]:
    """apply_bulk with its threads, as on a worker (the tests run Celery eagerly, one after the other);
    what it would send to the broker is recorded instead."""
    sent: list[tuple[str, tuple[Any, ...]]] = []
    monkeypatch.setattr(bulkpush, "runs_eagerly", lambda: False)
    monkeypatch.setattr(work_queue, "send", lambda name, *args, **_: sent.append((name, args)))
    kube.pacer.reset()
    yield sent
    kube.pacer.reset()


def _push(bulk: BulkRequest) -> int:
    """Every part of the bulk at once, as the worker's processes would (each part's threads its own)."""
    parts = 2  # as on PostgreSQL with two cores (on SQLite one process pushes a bulk)
    with ThreadPoolExecutor(parts) as pool:
        return sum(pool.map(lambda part: bulkpush.apply_bulk(bulk.pk, 0, part, parts), range(parts)))


def _namespaces(k8s: Any, prefix: str, count: int) -> list[str]:
    names = [f"{prefix}-{i:02d}" for i in range(count)]
    for name in names:
        k8s.core.create_namespace({"metadata": {"name": name, "labels": {"bulk": prefix}}})
    refresh()
    return names


def _bulk(selector: str, count: int) -> BulkRequest:
    bulk = request_bulk(ChangeAction.OFFLOAD, selector, dict(SPEC), SYSTEM)
    assert bulk.total == count
    return bulk


def test_429_with_retry_after_slows_the_whole_bulk_and_loses_nothing(
    sandbox: Any, k8s: Any, threaded: list[Any], settings: Any
) -> None:
    _namespaces(k8s, "throttled", 40)
    bulk = _bulk("bulk=throttled", 40)
    assert threaded == [(work_queue.APPLY_BULK, (bulk.pk, 0))]  # one task for the whole bulk
    settings.LIQO_DASH = {**settings.LIQO_DASH, "KUBE_MAX_INFLIGHT": 16}
    sandbox.faults.set(latency=0.1, max_inflight=4)  # the API server takes 4 at once, 429 beyond
    started = time.monotonic()
    assert _push(bulk) == 40
    elapsed = time.monotonic() - started
    sandbox.faults.clear()
    changes = ChangeRequest.objects.filter(bulk=bulk)
    assert changes.filter(state=ChangeState.APPLIED).count() == 40, list(changes.values_list("state", "message"))
    # Retried in place after Retry-After: no change went back to the queue nor spent a second attempt.
    assert set(changes.values_list("attempts", flat=True)) == {1}
    assert not [name for name, _ in threaded if name == work_queue.APPLY_CHANGE]
    refused = sandbox.faults.throttled
    assert refused > 0 and kube.pacer.throttled == refused
    # The whole bulk waited (Retry-After is 1 s) and slowed down: the bound was halved, so far fewer
    # requests were refused than a change each would retry on its own (16 in flight, 12 refused a round).
    assert elapsed >= 1.0
    assert kube.pacer.allowed < 16
    assert refused < 40, f"{refused} requests answered 429"
    for name in changes.values_list("namespace", flat=True):
        obj = k8s.custom.get_namespaced_custom_object(GROUP, VERSION, name, PLURAL, "offloading")
        assert obj["metadata"]["generation"] == 1  # written once


def test_a_namespace_refused_by_the_cluster_mid_bulk_fails_with_its_reason(
    sandbox: Any, k8s: Any, threaded: list[Any]
) -> None:
    names = _namespaces(k8s, "midway", 6)
    bulk = _bulk("bulk=midway", 6)
    # After the request's checks, before the push: the namespace goes away (its offloading cannot be
    # created any more), and another one gets an offloading from someone else.
    k8s.core.delete_namespace(names[1])
    k8s.custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        names[4],
        PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NamespaceOffloading",
            "metadata": {"name": "offloading"},
            "spec": {**SPEC, "podOffloadingStrategy": "Local"},
        },
    )
    _push(bulk)
    states = dict(ChangeRequest.objects.filter(bulk=bulk).values_list("namespace", "state"))
    assert states == {
        names[0]: ChangeState.APPLIED,
        names[1]: ChangeState.FAILED,
        names[2]: ChangeState.APPLIED,
        names[3]: ChangeState.APPLIED,
        names[4]: ChangeState.CONFLICT,
        names[5]: ChangeState.APPLIED,
    }
    refused = ChangeRequest.objects.get(bulk=bulk, namespace=names[1])
    assert names[1] in refused.message and refused.attempts == 1
    conflict = ChangeRequest.objects.get(bulk=bulk, namespace=names[4])
    assert "offloaded by someone else" in conflict.message
    progress = BulkRequest.objects.get(pk=bulk.pk).progress()
    assert (progress["applied"], progress["failed"], progress["conflict"], progress["done"]) == (4, 1, 1, 6)


def test_a_namespace_the_request_checks_refuse_is_reported_with_the_reason(
    sandbox: Any, k8s: Any, threaded: list[Any], settings: Any
) -> None:
    names = _namespaces(k8s, "checked", 4)
    settings.LIQO_DASH = {**settings.LIQO_DASH, "DRY_RUN_ON_SUBMIT": True, "BULK_CHECKS": "request"}
    # Someone else offloads one with EnforceSameName after our snapshot: the dry-run meets their object,
    # and Liqo's webhook refuses to change its mapping strategy.
    k8s.custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        names[2],
        PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NamespaceOffloading",
            "metadata": {"name": "offloading"},
            "spec": {**SPEC, "namespaceMappingStrategy": "EnforceSameName"},
        },
    )
    bulk = request_bulk(ChangeAction.OFFLOAD, "bulk=checked", dict(SPEC), SYSTEM)
    assert bulk.total == 3
    assert [s["namespace"] for s in bulk.skipped] == [names[2]]
    assert "The API server refused this change" in bulk.skipped[0]["reason"]
    _push(bulk)
    assert ChangeRequest.objects.filter(bulk=bulk, state=ChangeState.APPLIED).count() == 3


def test_changes_of_one_namespace_stay_in_order_under_concurrency(
    sandbox: Any, k8s: Any, threaded: list[Any], settings: Any
) -> None:
    names = _namespaces(k8s, "ordered", 10)
    settings.LIQO_DASH = {**settings.LIQO_DASH, "KUBE_MAX_INFLIGHT": 8}
    sandbox.faults.set(latency=0.05)
    # Half the namespaces already have a change waiting (queued before the bulk: it goes first).
    older = {name: _change(name, ChangeAction.OFFLOAD, desired_spec=SPEC) for name in names[:5]}
    bulk = BulkRequest.objects.create(action="offload", namespace_selector="bulk=ordered", total=10)
    spec = {**SPEC, "podOffloadingStrategy": "Remote"}
    children = {name: _change(name, ChangeAction.OFFLOAD, desired_spec=spec, bulk=bulk) for name in names}
    assert _push(bulk) == 10
    for name in names[:5]:
        assert ChangeRequest.objects.get(pk=children[name].pk).state == ChangeState.QUEUED  # behind the older
    for name in names[5:]:
        assert ChangeRequest.objects.get(pk=children[name].pk).state == ChangeState.APPLIED
    # The older changes run at once, on threads; each starts the next change of its namespace when done.
    threaded.clear()
    with ThreadPoolExecutor(5) as pool:
        list(pool.map(lambda c: apply_change(c.pk), older.values()))
    assert sorted(args[0] for name, args in threaded if name == work_queue.APPLY_CHANGE) == sorted(
        children[name].pk for name in names[:5]
    )
    with ThreadPoolExecutor(5) as pool:
        list(pool.map(lambda name: apply_change(children[name].pk), names[:5]))
    for name in names[:5]:
        first, then = ChangeRequest.objects.get(pk=older[name].pk), ChangeRequest.objects.get(pk=children[name].pk)
        assert first.state == ChangeState.APPLIED
        assert first.finished_at is not None and then.claimed_at is not None
        assert first.finished_at <= then.claimed_at
        # The bulk's child, asked for when the namespace was not offloaded, met the older change's
        # offloading: the same conflict as for one change asked for alone.
        assert then.state == ChangeState.CONFLICT and "offloaded by someone else" in then.message


def test_the_bulk_task_shares_the_bulk_with_other_processes(
    sandbox: Any, k8s: Any, threaded: list[Any], monkeypatch: pytest.MonkeyPatch
) -> None:
    _namespaces(k8s, "shared", 6)
    bulk = _bulk("bulk=shared", 6)
    monkeypatch.setattr(bulkpush, "processes_for_a_bulk", lambda: 3)
    threaded.clear()
    # The first task (the one message the request sends) sends the other parts and pushes its own.
    assert bulkpush.apply_bulk(bulk.pk) == 2
    bulks = [message for message in threaded if message[0] == work_queue.APPLY_BULK]
    assert bulks == [(work_queue.APPLY_BULK, (bulk.pk, 0, 1, 3)), (work_queue.APPLY_BULK, (bulk.pk, 0, 2, 3))]
    assert sum(bulkpush.apply_bulk(bulk.pk, 0, part, 3) for part in (1, 2)) == 4
    assert ChangeRequest.objects.filter(bulk=bulk, state=ChangeState.APPLIED).count() == 6
