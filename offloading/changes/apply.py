"""Applying a change on the worker: claim it (conditional UPDATE with a lease), push it, record the outcome,
retry transient errors with backoff, start the next change of the namespace.

Per managed cluster (issue 28): a change is pushed through its cluster's client (``managed.talking_to``)
and pacer; the order of a namespace's changes, its lock and "the namespace's next change" are per
(cluster, namespace), so the same name in two clusters never waits for the other; the API-health breaker
is the change's cluster's, so a change of an unreachable cluster waits while the others go on."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from liqo_rules.spec import normalize_spec
from offloading.alerts import rules as alerts
from offloading.audit.events import record_outcome, sealed_together
from offloading.changes.authorize import identity_of_change
from offloading.changes.push import Conflict, Waiting, push_delete, push_spec
from offloading.choices import REFUSED_BY_CLUSTER, ChangeAction, ChangeState
from offloading.cluster import breaker as apihealth
from offloading.cluster import kube
from offloading.cluster.identity import Identity, acting_as
from offloading.cluster.managed import pace_key, talking_to
from offloading.models import (
    ChangeRequest,
    Namespace,
)
from offloading.queue import enqueue_apply, enqueue_await_deletion
from offloading.snapshot.refresh import trigger_refresh, watcher_keeps_snapshot
from offloading.snapshot.store import mark_namespace_unoffloaded, store_offloading

log = logging.getLogger(__name__)


def finish(change_id: int, state: str, message: str, **fields: Any) -> bool:
    """Move an applying change to a terminal state and audit it, exactly once."""
    now = timezone.now()
    with transaction.atomic():
        done = ChangeRequest.objects.filter(pk=change_id, state=ChangeState.APPLYING).update(
            state=state, message=message, finished_at=now, updated_at=now, **fields
        )
        if not done:
            return False
        change = ChangeRequest.objects.get(pk=change_id)
        record_outcome(change, state, message)
        if state == ChangeState.FAILED:
            alerts.change_failed(change)  # the webhook's outbox row, in this transaction
    return True


def _lock_key(namespace: str, cluster: int | None = None) -> str:
    """The cache key of the lock on ``namespace`` in managed cluster ``cluster`` (pk; None: the default
    cluster, which keeps the key of single-cluster versions: an old worker during a rolling upgrade
    takes the same lock)."""
    return f"liqo-dash:ns-lock:{namespace}" if cluster is None else f"liqo-dash:ns-lock:{cluster}:{namespace}"


def _lock_of(change: ChangeRequest) -> str:
    return _lock_key(change.namespace, pace_key(change.managed))


def route(change: ChangeRequest) -> int | None:
    """What ``enqueue_apply`` is told of the change's cluster: None for the default one, else its pk."""
    return pace_key(change.managed)


def claim(change_id: int) -> ChangeRequest | None:
    """Claim a queued change for this worker (conditional UPDATE). Returns None when another worker
    has it, it is finished, or an older change of the same namespace of its cluster must go first."""
    change = ChangeRequest.objects.filter(pk=change_id).first()
    if change is None or change.is_terminal:
        return None
    older = ChangeRequest.objects.filter(
        managed_id=change.managed_id, namespace=change.namespace, state__in=ChangeState.pending(), id__lt=change.pk
    ).exists()
    if older:
        # Per-namespace order: this one waits for the older change of the same namespace. No polling:
        # the older change enqueues it when it finishes (start_next), and the sweeper is the safety
        # net if that message is lost.
        return None
    return _claim(change_id)


def _claim(change_id: int) -> ChangeRequest | None:
    if not _take(change_id, timezone.now()):
        return None
    return ChangeRequest.objects.select_related("managed").get(pk=change_id)


def _take(change_id: int, now: Any) -> bool:
    """The conditional UPDATE of a claim: a queued change, or one whose claim's lease expired."""
    lease_expired = now - timedelta(seconds=settings.LIQO_DASH["STUCK_AFTER"])
    return bool(
        ChangeRequest.objects.filter(pk=change_id, state=ChangeState.QUEUED).update(
            state=ChangeState.APPLYING,
            claimed_at=now,
            updated_at=now,
            attempts=F("attempts") + 1,
            waiting_reason="",
            waiting_since=None,
        )
        or ChangeRequest.objects.filter(pk=change_id, state=ChangeState.APPLYING, updated_at__lt=lease_expired).update(
            claimed_at=now, updated_at=now, attempts=F("attempts") + 1
        )
    )


def apply_change(change_id: int) -> str:
    """Push one change to the cluster. Idempotent: the object carries the id of the change that last
    wrote it, so a redelivered task recognises its own earlier write. Returns the resulting state."""
    change = claim(change_id)
    if change is None:
        return "skipped"
    owner = f"{change.pk}:{random.random()}"
    # Why: the sweeper may re-enqueue a change whose worker is only slow; the per-namespace lock keeps
    # two workers from writing the same namespace at once. Only its owner releases it. It lasts as
    # long as the claim's lease, so a killed worker's lock is gone when its claim can be taken over
    # (writes stay safe without it: they are resourceVersion-checked and carry the change id).
    current_outage = apihealth.outage(change.managed)
    if current_outage is not None:
        # Its cluster's API server is known to be unreachable: wait for it without spending the retry budget.
        for recheck in _park(change, current_outage, count_attempt=False):
            recheck()
        return ChangeState.QUEUED
    lease = max(1, int(settings.LIQO_DASH["STUCK_AFTER"]))
    if not cache.add(_lock_of(change), owner, timeout=lease):
        _requeue(change, "another worker is writing this namespace", countdown=1.0, count_attempt=False)
        return ChangeState.QUEUED
    followups: list[Callable[[], None]] = []
    try:
        state = _apply_claimed(change, followups)
    finally:
        if cache.get(_lock_of(change)) == owner:
            cache.delete(_lock_of(change))
    # Enqueue follow-up tasks only once the lock is released (an eager run executes them at once).
    for followup in followups:
        followup()
    if state in ChangeState.terminal():
        start_next(change.namespace, change.managed)
    return state


def start_next(namespace: str, managed: Any = None) -> None:
    """Enqueue the next queued change of ``namespace`` in cluster ``managed`` (a ManagedCluster, its pk,
    None: the default) now that the one before it finished (changes waiting behind an older one do not
    poll; see :func:`claim`)."""
    first = (
        ChangeRequest.objects.of(managed)
        .filter(namespace=namespace, state__in=ChangeState.pending())
        .order_by("id")
        .values_list("pk", "state", "managed__is_default", "managed_id")
        .first()
    )
    if first is not None and first[1] == ChangeState.QUEUED:
        enqueue_apply(first[0], managed=None if first[2] else first[3])


def _park(
    change: ChangeRequest,
    outage: apihealth.Outage,
    *,
    retrying_since: Any = None,
    count_attempt: bool = True,
) -> list[Callable[[], None]]:
    """Put an applying change back to wait for the API server: no message is queued for it; the probe
    that sees the API server answer again sends it (and the sweeper is the safety net). Returns what to
    run once the namespace lock is released."""
    fields: dict[str, Any] = {
        "state": ChangeState.QUEUED,
        "message": f"waiting: {outage.describe()}",
        "waiting_reason": apihealth.WAITING_FOR_API,
        "waiting_since": outage.since,
        "updated_at": timezone.now(),
    }
    if retrying_since is not None:
        fields["retrying_since"] = retrying_since
    if not count_attempt:
        fields["attempts"] = F("attempts") - 1
    ChangeRequest.objects.filter(pk=change.pk, state=ChangeState.APPLYING).update(**fields)

    def recheck() -> None:
        # The breaker may have closed between our check and the park: then nobody would send it.
        if apihealth.outage(change.managed) is None:
            apihealth.resume_waiting(change.managed)
        else:
            apihealth.schedule_probe(managed=change.managed)

    return [recheck]


def _requeue(
    change: ChangeRequest,
    message: str,
    countdown: float,
    count_attempt: bool = True,
    followups: list[Callable[[], None]] | None = None,
    retrying_since: Any = None,
) -> None:
    # updated_at is when the change is next due: the sweeper leaves it alone during its backoff.
    due = timezone.now() + timedelta(seconds=countdown)
    fields: dict[str, Any] = {"state": ChangeState.QUEUED, "message": message, "updated_at": due}
    if retrying_since is not None:
        fields["retrying_since"] = retrying_since
    if not count_attempt:
        fields["attempts"] = F("attempts") - 1
    if ChangeRequest.objects.filter(pk=change.pk, state=ChangeState.APPLYING).update(**fields):
        enqueue = lambda: enqueue_apply(change.pk, countdown=countdown, managed=route(change))  # noqa: E731
        if followups is None:
            enqueue()
        else:
            followups.append(enqueue)


def _backoff(attempt: int) -> float:
    """Capped exponential backoff with jitter (the cap keeps recovery quick once errors stop)."""
    base = float(settings.LIQO_DASH["APPLY_RETRY_BASE"])
    cap = float(settings.LIQO_DASH["APPLY_RETRY_CAP"])
    return min(cap, base * (2 ** max(0, attempt - 1))) * random.uniform(0.5, 1.5)


def _resume_waiting(change: ChangeRequest) -> Callable[[], None]:
    """This change got an answer after an outage: send the changes of its cluster that waited for it."""

    def resume() -> None:
        apihealth.resume_waiting(change.managed)

    return resume


def _gave_up(first: Any, now: Any, exc: kube.KubeError) -> str:
    """Why a change failed after its retry budget, in words a person reads."""
    minutes = max(1, round((now - first).total_seconds() / 60))
    if exc.unreachable:
        return f"Gave up after {minutes} min: {apihealth.Outage(first, '', now).describe()} ({exc.message})"
    since = timezone.localtime(first).strftime("%H:%M:%S")
    until = timezone.localtime(now).strftime("%H:%M:%S")
    return f"Gave up after {minutes} min: the API server kept failing from {since} to {until} ({exc.message})"


@dataclass
class Pushed:
    """What one push brought back: the object written and the API server's warnings, or the error."""

    result: tuple[dict[str, Any] | None, list[str]] | None = None
    error: BaseException | None = None


def push(change: ChangeRequest, identity: Identity | None) -> Pushed:
    """The network part of applying a claimed change, and nothing else (no database write, no cache):
    on its cluster's API server (its client, no query: the claim read the cluster's row with the change),
    as the user who asked (Kubernetes impersonation, on every attempt: the cluster decides), paced
    (bounded in flight in the worker, a 429 holds every push to that API server until its Retry-After).
    A bulk's threads run only this; :func:`settle` records what it brought back."""
    try:
        with acting_as(identity), talking_to(change.managed, paced=True):
            if change.action == ChangeAction.UNOFFLOAD:
                return Pushed(result=push_delete(change))
            return Pushed(result=push_spec(change))
    except (Waiting, Conflict, kube.KubeError) as exc:
        return Pushed(error=exc)


def _apply_claimed(change: ChangeRequest, followups: list[Callable[[], None]]) -> str:
    return settle(change, push(change, identity_of_change(change)), followups)


@dataclass(frozen=True)
class Facts:
    """What :func:`settle` reads from the cache for an applied change, read once for a batch of them:
    whether the breaker was open and whether the watcher keeps the snapshot. Neither needs to be fresher
    than the batch (a breaker that opened meanwhile is closed by the next success; the watcher brings
    what was written either way)."""

    outage_open: bool
    watcher_keeps: bool
    managed_id: int | None = None  # the cluster they were read of: a change of another reads its own

    @classmethod
    def now(cls, change: ChangeRequest | None = None) -> Facts:
        cluster = None if change is None else change.managed
        return cls(
            apihealth.outage(cluster) is not None,
            watcher_keeps_snapshot(cluster),
            None if change is None else change.managed_id,
        )


def settle(
    change: ChangeRequest, pushed: Pushed, followups: list[Callable[[], None]], facts: Facts | None = None
) -> str:
    """Record the outcome of a push: applied, a conflict, failed, or back in the queue to retry or to
    wait for the API server or for Liqo's finalizer. Returns the change's state. ``facts``: the batch's
    (:class:`Facts`), else read for this change."""
    if facts is not None and facts.managed_id is not None and facts.managed_id != change.managed_id:
        facts = None  # read of another cluster
    cluster = change.managed
    exc = pushed.error
    if isinstance(exc, Waiting):
        ChangeRequest.objects.filter(pk=change.pk).update(
            message="Waiting for Liqo to remove the remote namespaces", updated_at=timezone.now()
        )
        followups.append(lambda: enqueue_await_deletion(change.pk, countdown=1.0, managed=route(change)))
        return ChangeState.APPLYING
    if isinstance(exc, Conflict):
        found = normalize_spec(exc.found["spec"]) if exc.found and "spec" in exc.found else None
        finish(change.pk, ChangeState.CONFLICT, str(exc), conflict_spec=found)
        trigger_refresh(cluster)
        return ChangeState.CONFLICT
    if isinstance(exc, kube.KubeError):
        # A retry budget, not a retry count: transient errors are retried for APPLY_RETRY_FOR seconds
        # from the first one; a permanent error (4xx other than 409/429) fails at once.
        now = timezone.now()
        first = change.retrying_since or now
        if exc.transient:
            current_outage = apihealth.report_failure(exc, cluster)
            if (now - first).total_seconds() < settings.LIQO_DASH["APPLY_RETRY_FOR"]:
                if current_outage is not None:
                    followups.extend(_park(change, current_outage, retrying_since=first))
                else:
                    _requeue(
                        change,
                        f"retrying after a transient error: {exc.message}",
                        exc.retry_after if exc.retry_after is not None else _backoff(change.attempts),
                        followups=followups,
                        retrying_since=first,
                    )
                return ChangeState.QUEUED
            finish(change.pk, ChangeState.FAILED, _gave_up(first, now, exc))
        else:
            finish(change.pk, ChangeState.FAILED, _permanent_failure(exc))
        trigger_refresh(cluster)
        return ChangeState.FAILED
    if exc is not None:
        raise exc
    assert pushed.result is not None
    if (facts is None or facts.outage_open) and apihealth.report_success(cluster):
        followups.append(_resume_waiting(change))
    obj, warnings = pushed.result
    fields: dict[str, Any] = {"warnings": list(dict.fromkeys([*change.warnings, *warnings]))}
    # What was written goes into the snapshot now, unless the watcher keeps it: then the watch brings
    # the same object within a second, and writing it here too would double the snapshot's writes.
    keeps = watcher_keeps_snapshot(cluster) if facts is None else facts.watcher_keeps
    if change.action == ChangeAction.UNOFFLOAD:
        if not keeps:
            mark_namespace_unoffloaded(change.namespace, change.managed_id)  # gone at once: no finalizer held it
    elif obj:
        if not keeps:
            store_offloading(change.namespace, obj, change.managed_id)
        meta = obj.get("metadata") or {}
        fields.update(
            result_resource_version=meta.get("resourceVersion", ""),
            result_generation=meta.get("generation"),
            result_uid=meta.get("uid", ""),
        )
    finish(change.pk, ChangeState.APPLIED, _applied_message(change), **fields)
    if not keeps:
        trigger_refresh(cluster)  # (which does nothing while the watcher keeps the snapshot)
    return ChangeState.APPLIED


def _permanent_failure(exc: kube.KubeError) -> str:
    """A permanent error's message; a refusal (the user's RBAC, validation, Liqo's webhook) says so."""
    if exc.kind in ("forbidden", "invalid"):
        return f"{REFUSED_BY_CLUSTER}: {exc.message}"
    return exc.message


def _applied_message(change: ChangeRequest) -> str:
    return {
        ChangeAction.OFFLOAD: "NamespaceOffloading created",
        ChangeAction.UPDATE: "NamespaceOffloading updated",
        ChangeAction.UNOFFLOAD: "NamespaceOffloading deleted and gone",
    }[ChangeAction(change.action)]


@dataclass
class Claimed:
    """A change claimed for a bulk's threads, with the owner of its namespace's lock."""

    change: ChangeRequest
    owner: str


def claim_batch(change_ids: list[int]) -> list[Claimed]:
    """Claim the changes among ``change_ids`` that :func:`apply_change` would claim, at once (see
    :func:`settle_batch`, which claims the next ones in the transaction that records the last ones)."""
    with transaction.atomic():
        changes = _take_batch(change_ids)
    return _lock_batch(changes)


def _take_batch(change_ids: list[int]) -> list[ChangeRequest]:
    """The claims of :func:`claim_batch`, in the caller's transaction: one read of the changes and of
    the older pending changes of their namespaces (per-namespace order: a change behind an older one is
    left, as :func:`claim` leaves it), then each one's conditional UPDATE."""
    rows = [c for c in ChangeRequest.objects.filter(pk__in=change_ids).order_by("pk") if not c.is_terminal]
    if not rows:
        return []
    first_pending: dict[tuple[int, str], int] = {}
    for managed_id, namespace, pk in (
        ChangeRequest.objects.filter(
            managed_id__in={c.managed_id for c in rows},
            namespace__in={c.namespace for c in rows},
            state__in=ChangeState.pending(),
        )
        .order_by("pk")
        .values_list("managed_id", "namespace", "pk")
    ):
        first_pending.setdefault((managed_id, namespace), pk)
    now = timezone.now()
    taken = [c.pk for c in rows if first_pending.get((c.managed_id, c.namespace), c.pk) >= c.pk and _take(c.pk, now)]
    return list(ChangeRequest.objects.filter(pk__in=taken).select_related("managed").order_by("pk")) if taken else []


def _lock_batch(changes: list[ChangeRequest]) -> list[Claimed]:
    """After the claims: the breaker read once per cluster (an outage parks that cluster's changes, as
    :func:`apply_change` parks one), then each namespace's lock (one held by another worker requeues its
    change)."""
    if not changes:
        return []
    outages: dict[int, apihealth.Outage | None] = {}
    rechecks: dict[int, Callable[[], None]] = {}
    ready = []
    for change in changes:
        if change.managed_id not in outages:
            outages[change.managed_id] = apihealth.outage(change.managed)
        current_outage = outages[change.managed_id]
        if current_outage is None:
            ready.append(change)
        else:
            rechecks[change.managed_id] = _park(change, current_outage, count_attempt=False)[0]
    for recheck in rechecks.values():
        recheck()
    lease = max(1, int(settings.LIQO_DASH["STUCK_AFTER"]))
    claimed = []
    for change in ready:
        owner = f"{change.pk}:{random.random()}"
        if cache.add(_lock_of(change), owner, timeout=lease):
            claimed.append(Claimed(change, owner))
        else:
            _requeue(change, "another worker is writing this namespace", countdown=1.0, count_attempt=False)
    return claimed


def _unlock_all(claims: list[Claimed]) -> None:
    """Release the namespaces' locks these claims still own: two cache round trips for the batch."""
    held = cache.get_many([_lock_of(c.change) for c in claims])
    mine = [_lock_of(c.change) for c in claims if held.get(_lock_of(c.change)) == c.owner]
    if mine:
        cache.delete_many(mine)


def settle_batch(done: list[tuple[Claimed, Pushed]], claim: list[int] | None = None) -> list[Claimed]:
    """Record the outcomes of a bulk's pushes and claim the changes ``claim`` in one transaction (each
    outcome in its own savepoint, so one failing leaves the others; on SQLite one turn of its one write
    lock instead of one per change), then release the namespaces' locks, send the follow-ups, start the
    next change of each namespace whose change finished, and lock the newly claimed changes: what
    :func:`apply_change` does after its push and before the next one, for many changes at once. A push
    that raised a bug is logged and left applying (the sweeper takes it over once its lease expires);
    a commit that fails leaves every change of the batch to the sweeper. Returns the claimed changes."""
    followups: list[Callable[[], None]] = []
    finished: list[tuple[int, str]] = []
    taken: list[ChangeRequest] = []
    facts = Facts.now(done[0][0].change) if done else Facts.now()
    try:
        with transaction.atomic(), sealed_together() as events:
            for claimed, pushed in done:
                recorded = len(events)
                try:
                    with transaction.atomic():
                        state = settle(claimed.change, pushed, followups, facts)
                except Exception:  # noqa: BLE001 - one change's bug must not stop the others
                    del events[recorded:]  # its savepoint is rolled back: so are its audit events
                    log.exception("recording change %s failed", claimed.change.pk)
                    continue
                if state in ChangeState.terminal():
                    finished.append((claimed.change.managed_id, claimed.change.namespace))
            if claim:
                taken = _take_batch(claim)
    except Exception:  # noqa: BLE001 - the commit failed: the changes stay applying until their lease expires
        log.exception("recording %d changes failed", len(done))
        followups, finished, taken = [], [], []
    _unlock_all([claimed for claimed, _ in done])
    for followup in followups:
        followup()
    start_next_of(finished)
    return _lock_batch(taken)


def start_next_of(namespaces: list[tuple[int, str]]) -> None:
    """:func:`start_next` for many (cluster pk, namespace), in one query."""
    if not namespaces:
        return
    wanted = set(namespaces)
    seen: set[tuple[int, str]] = set()
    for pk, managed_id, namespace, state, default in (
        ChangeRequest.objects.filter(
            managed_id__in={m for m, _ in wanted}, namespace__in={n for _, n in wanted}, state__in=ChangeState.pending()
        )
        .order_by("pk")
        .values_list("pk", "managed_id", "namespace", "state", "managed__is_default")
    ):
        key = (managed_id, namespace)
        if key not in wanted or key in seen:
            continue
        seen.add(key)
        if state == ChangeState.QUEUED:
            enqueue_apply(pk, managed=None if default else managed_id)


def await_deletion(change_id: int) -> str:
    """Poll until the deleted NamespaceOffloading is gone (Liqo removes its finalizer once the
    remote namespaces are deleted), then report the unoffload as applied."""
    change = ChangeRequest.objects.filter(pk=change_id, state=ChangeState.APPLYING).select_related("managed").first()
    if change is None:
        return "skipped"
    # Poll a few times within this task before handing over to a new one: cheap on the broker, and
    # it keeps eager (in-process) runs from recursing. While the watcher keeps the snapshot, the
    # snapshot is polled (the watch brings the deletion): no request to the API server, unless the
    # object seems to linger (then it is read once per task).
    current: dict[str, Any] | None = {}
    waited = (timezone.now() - (change.claimed_at or change.created_at)).total_seconds()
    from_snapshot = bool(change.base_uid) and waited < 10 and watcher_keeps_snapshot(change.managed)
    for _ in range(10):
        if from_snapshot:
            held = Namespace.objects.of(change.managed_id).filter(
                name=change.namespace, offloaded=True, offloading_uid=change.base_uid
            )
            current = {"held": True} if held.exists() else None
            if current is None:
                break
            time.sleep(0.5)
            continue
        try:
            with talking_to(change.managed, paced=True):
                current = kube.get_offloading(change.namespace)
        except kube.KubeError as exc:
            if not exc.transient:
                finish(change.pk, ChangeState.FAILED, exc.message)
                start_next(change.namespace, change.managed)
                return ChangeState.FAILED
            current = {"transient": True}
        if current is None:
            break
        time.sleep(0.5)
    if current is None:
        mark_namespace_unoffloaded(change.namespace, change.managed_id)
        finish(change.pk, ChangeState.APPLIED, _applied_message(change))
        trigger_refresh(change.managed)
        start_next(change.namespace, change.managed)
        return ChangeState.APPLIED
    waited = (timezone.now() - (change.claimed_at or change.created_at)).total_seconds()
    if waited > settings.LIQO_DASH["DELETE_WAIT"]:
        finish(change.pk, ChangeState.FAILED, f"The NamespaceOffloading was still terminating after {waited:.0f}s")
        start_next(change.namespace, change.managed)
        return ChangeState.FAILED
    ChangeRequest.objects.filter(pk=change.pk, state=ChangeState.APPLYING).update(updated_at=timezone.now())
    enqueue_await_deletion(change.pk, countdown=1.0, managed=route(change))
    return ChangeState.APPLYING
