"""Applying a change on the worker: claim it (conditional UPDATE with a lease), push it, record the outcome,
retry transient errors with backoff, start the next change of the namespace."""

from __future__ import annotations

import logging
import random
import time
from collections.abc import Callable
from datetime import timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import F
from django.utils import timezone

from liqo_rules.spec import normalize_spec
from offloading.alerts import rules as alerts
from offloading.audit.events import record_outcome
from offloading.changes import groupcommit
from offloading.changes.authorize import identity_of_change
from offloading.changes.push import Conflict, Waiting, push_delete, push_spec
from offloading.choices import ChangeAction, ChangeState
from offloading.cluster import breaker as apihealth
from offloading.cluster import kube
from offloading.cluster.identity import acting_as
from offloading.models import (
    ChangeRequest,
    Namespace,
)
from offloading.queue import enqueue_apply, enqueue_await_deletion
from offloading.snapshot.refresh import trigger_refresh, watcher_keeps_snapshot
from offloading.snapshot.store import mark_namespace_unoffloaded, store_offloading

log = logging.getLogger(__name__)


def finish(change_id: int, state: str, message: str, **fields: Any) -> bool:
    """Move an applying change to a terminal state and audit it, exactly once (grouped with the other
    threads' writes on SQLite: ``groupcommit``)."""
    return groupcommit.write(lambda: _finish(change_id, state, message, **fields))


def _finish(change_id: int, state: str, message: str, **fields: Any) -> bool:
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


def _lock_key(namespace: str) -> str:
    return f"liqo-dash:ns-lock:{namespace}"


def claim(change_id: int) -> ChangeRequest | None:
    """Claim a queued change for this worker (conditional UPDATE). Returns None when another worker
    has it, it is finished, or an older change of the same namespace must go first."""
    change = ChangeRequest.objects.filter(pk=change_id).first()
    if change is None or change.is_terminal:
        return None
    older = ChangeRequest.objects.filter(
        namespace=change.namespace, state__in=ChangeState.pending(), id__lt=change.pk
    ).exists()
    if older:
        # Per-namespace order: this one waits for the older change of the same namespace. No polling:
        # the older change enqueues it when it finishes (start_next), and the sweeper is the safety
        # net if that message is lost.
        return None
    return groupcommit.write(lambda: _claim(change_id))


def _claim(change_id: int) -> ChangeRequest | None:
    now = timezone.now()
    lease_expired = now - timedelta(seconds=settings.LIQO_DASH["STUCK_AFTER"])
    claimed = ChangeRequest.objects.filter(pk=change_id, state=ChangeState.QUEUED).update(
        state=ChangeState.APPLYING,
        claimed_at=now,
        updated_at=now,
        attempts=F("attempts") + 1,
        waiting_reason="",
        waiting_since=None,
    ) or ChangeRequest.objects.filter(pk=change_id, state=ChangeState.APPLYING, updated_at__lt=lease_expired).update(
        claimed_at=now, updated_at=now, attempts=F("attempts") + 1
    )
    if not claimed:
        return None
    return ChangeRequest.objects.get(pk=change_id)


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
    current_outage = apihealth.outage()
    if current_outage is not None:
        # The API server is known to be unreachable: wait for it without spending the retry budget.
        for recheck in _park(change, current_outage, count_attempt=False):
            recheck()
        return ChangeState.QUEUED
    lease = max(1, int(settings.LIQO_DASH["STUCK_AFTER"]))
    if not cache.add(_lock_key(change.namespace), owner, timeout=lease):
        _requeue(change, "another worker is writing this namespace", countdown=1.0, count_attempt=False)
        return ChangeState.QUEUED
    followups: list[Callable[[], None]] = []
    try:
        state = _apply_claimed(change, followups)
    finally:
        if cache.get(_lock_key(change.namespace)) == owner:
            cache.delete(_lock_key(change.namespace))
    # Enqueue follow-up tasks only once the lock is released (an eager run executes them at once).
    for followup in followups:
        followup()
    if state in ChangeState.terminal():
        start_next(change.namespace)
    return state


def start_next(namespace: str) -> None:
    """Enqueue the next queued change of ``namespace`` now that the one before it finished (changes
    waiting behind an older one do not poll; see :func:`claim`)."""
    first = (
        ChangeRequest.objects.filter(namespace=namespace, state__in=ChangeState.pending())
        .order_by("id")
        .values_list("pk", "state")
        .first()
    )
    if first is not None and first[1] == ChangeState.QUEUED:
        enqueue_apply(first[0])


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
        if apihealth.outage() is None:
            apihealth.resume_waiting()
        else:
            apihealth.schedule_probe()

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
        enqueue = lambda: enqueue_apply(change.pk, countdown=countdown)  # noqa: E731
        if followups is None:
            enqueue()
        else:
            followups.append(enqueue)


def _backoff(attempt: int) -> float:
    """Capped exponential backoff with jitter (the cap keeps recovery quick once errors stop)."""
    base = float(settings.LIQO_DASH["APPLY_RETRY_BASE"])
    cap = float(settings.LIQO_DASH["APPLY_RETRY_CAP"])
    return min(cap, base * (2 ** max(0, attempt - 1))) * random.uniform(0.5, 1.5)


def _resume_waiting() -> None:
    """This change got an answer after an outage: send the changes that waited for the API server."""
    apihealth.resume_waiting()


def _gave_up(first: Any, now: Any, exc: kube.KubeError) -> str:
    """Why a change failed after its retry budget, in words a person reads."""
    minutes = max(1, round((now - first).total_seconds() / 60))
    if exc.unreachable:
        return f"Gave up after {minutes} min: {apihealth.Outage(first, '', now).describe()} ({exc.message})"
    since = timezone.localtime(first).strftime("%H:%M:%S")
    until = timezone.localtime(now).strftime("%H:%M:%S")
    return f"Gave up after {minutes} min: the API server kept failing from {since} to {until} ({exc.message})"


def _apply_claimed(change: ChangeRequest, followups: list[Callable[[], None]]) -> str:
    try:
        # As the user who asked (Kubernetes impersonation), on every attempt: the cluster decides. Paced:
        # bounded in flight per process, and a 429 holds every push until its Retry-After.
        with acting_as(identity_of_change(change)), kube.paced():
            if change.action == ChangeAction.UNOFFLOAD:
                result = push_delete(change)
            else:
                result = push_spec(change)
    except Waiting:
        ChangeRequest.objects.filter(pk=change.pk).update(
            message="Waiting for Liqo to remove the remote namespaces", updated_at=timezone.now()
        )
        followups.append(lambda: enqueue_await_deletion(change.pk, countdown=1.0))
        return ChangeState.APPLYING
    except Conflict as exc:
        found = normalize_spec(exc.found["spec"]) if exc.found and "spec" in exc.found else None
        finish(change.pk, ChangeState.CONFLICT, str(exc), conflict_spec=found)
        trigger_refresh()
        return ChangeState.CONFLICT
    except kube.KubeError as exc:
        # A retry budget, not a retry count: transient errors are retried for APPLY_RETRY_FOR seconds
        # from the first one; a permanent error (4xx other than 409/429) fails at once.
        now = timezone.now()
        first = change.retrying_since or now
        if exc.transient:
            current_outage = apihealth.report_failure(exc)
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
            finish(change.pk, ChangeState.FAILED, exc.message)
        trigger_refresh()
        return ChangeState.FAILED
    if apihealth.report_success():
        followups.append(_resume_waiting)
    obj, warnings = result
    fields: dict[str, Any] = {"warnings": list(dict.fromkeys([*change.warnings, *warnings]))}
    # What was written goes into the snapshot now, unless the watcher keeps it: then the watch brings
    # the same object within a second, and writing it here too would double the snapshot's writes.
    keeps = watcher_keeps_snapshot()
    if change.action == ChangeAction.UNOFFLOAD:
        if not keeps:
            mark_namespace_unoffloaded(change.namespace)  # gone at once: no finalizer held it
    elif obj:
        if not keeps:
            store_offloading(change.namespace, obj)
        meta = obj.get("metadata") or {}
        fields.update(
            result_resource_version=meta.get("resourceVersion", ""),
            result_generation=meta.get("generation"),
            result_uid=meta.get("uid", ""),
        )
    finish(change.pk, ChangeState.APPLIED, _applied_message(change), **fields)
    trigger_refresh()
    return ChangeState.APPLIED


def _applied_message(change: ChangeRequest) -> str:
    return {
        ChangeAction.OFFLOAD: "NamespaceOffloading created",
        ChangeAction.UPDATE: "NamespaceOffloading updated",
        ChangeAction.UNOFFLOAD: "NamespaceOffloading deleted and gone",
    }[ChangeAction(change.action)]


def await_deletion(change_id: int) -> str:
    """Poll until the deleted NamespaceOffloading is gone (Liqo removes its finalizer once the
    remote namespaces are deleted), then report the unoffload as applied."""
    change = ChangeRequest.objects.filter(pk=change_id, state=ChangeState.APPLYING).first()
    if change is None:
        return "skipped"
    # Poll a few times within this task before handing over to a new one: cheap on the broker, and
    # it keeps eager (in-process) runs from recursing. While the watcher keeps the snapshot, the
    # snapshot is polled (the watch brings the deletion): no request to the API server, unless the
    # object seems to linger (then it is read once per task).
    current: dict[str, Any] | None = {}
    waited = (timezone.now() - (change.claimed_at or change.created_at)).total_seconds()
    from_snapshot = bool(change.base_uid) and waited < 10 and watcher_keeps_snapshot()
    for _ in range(10):
        if from_snapshot:
            held = Namespace.objects.filter(name=change.namespace, offloaded=True, offloading_uid=change.base_uid)
            current = {"held": True} if held.exists() else None
            if current is None:
                break
            time.sleep(0.5)
            continue
        try:
            current = kube.get_offloading(change.namespace)
        except kube.KubeError as exc:
            if not exc.transient:
                finish(change.pk, ChangeState.FAILED, exc.message)
                start_next(change.namespace)
                return ChangeState.FAILED
            current = {"transient": True}
        if current is None:
            break
        time.sleep(0.5)
    if current is None:
        mark_namespace_unoffloaded(change.namespace)
        finish(change.pk, ChangeState.APPLIED, _applied_message(change))
        trigger_refresh()
        start_next(change.namespace)
        return ChangeState.APPLIED
    waited = (timezone.now() - (change.claimed_at or change.created_at)).total_seconds()
    if waited > settings.LIQO_DASH["DELETE_WAIT"]:
        finish(change.pk, ChangeState.FAILED, f"The NamespaceOffloading was still terminating after {waited:.0f}s")
        start_next(change.namespace)
        return ChangeState.FAILED
    ChangeRequest.objects.filter(pk=change.pk, state=ChangeState.APPLYING).update(updated_at=timezone.now())
    enqueue_await_deletion(change.pk, countdown=1.0)
    return ChangeState.APPLYING
