"""Use cases shared by the views, the REST API and the Celery tasks.

``request_*`` record a change (outbox row + audit event, one transaction) and enqueue it after commit;
``apply_change`` pushes one change to the cluster; ``refresh`` rebuilds the snapshot.
"""

from __future__ import annotations

import logging
import random
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.core.cache import cache
from django.db import transaction
from django.db.models import Count, F, Q
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from offloading.liqo.admission import validate_spec
from offloading.liqo.manifest import manifest, render_manifest
from offloading.liqo.selectors.match import virtual_node_labels
from offloading.liqo.selectors.parse import parse_requirements
from offloading.liqo.selectors.requirements import SelectorError
from offloading.liqo.spec import apply_defaults, local_cluster_id_from, normalize_spec, remote_namespace_name
from offloading.liqo.status import cluster_status_table

from . import kube
from .choices import AuditAction, ChangeAction, ChangeState, Source
from .context import Actor
from .liqo import constants as liqo
from .liqo import peers as liqo_peers
from .liqo import webhook as liqo_webhook
from .models import (
    AuditEvent,
    BulkRequest,
    ChangeRequest,
    Cluster,
    ClusterOffloading,
    Namespace,
    SnapshotState,
    StatusTransition,
    VirtualNode,
)

log = logging.getLogger(__name__)

# Cache keys shared by all workers.
_REFRESH_LOCK = "liqo-dash:refresh-lock"
_REFRESH_REQUESTED = "liqo-dash:refresh-requested"
_REFRESH_AGAIN = "liqo-dash:refresh-again"


# --------------------------------------------------------------------------------------------------
# Requesting changes


class ChangeRejected(Exception):
    """The change breaks a rule; ``errors`` maps a field name to its messages."""

    def __init__(self, errors: dict[str, list[str]]) -> None:
        super().__init__("; ".join(f"{k}: {m}" for k, msgs in errors.items() for m in msgs))
        self.errors = errors


def local_cluster_id() -> str:
    """The configured local cluster id, else the one the refresh discovered (may be empty)."""
    return settings.LIQO_DASH["LOCAL_CLUSTER_ID"] or SnapshotState.get().local_cluster_id


def _problems_by_field(problems: list[Any]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for problem in problems:
        grouped.setdefault(problem.field, []).append(problem.message)
    return grouped


@dataclass
class Validation:
    spec: dict[str, Any]
    errors: dict[str, list[str]]
    warnings: dict[str, list[str]]


def validate(namespace: Namespace, spec: dict[str, Any], local_id: str | None = None) -> Validation:
    """Check a desired spec for ``namespace`` against its observed one with Liqo's rules
    (``local_id``: the local cluster id, when the caller already has it)."""
    normalized = normalize_spec(spec)
    old = namespace.offloading_spec if namespace.offloaded else None
    if local_id is None:
        local_id = local_cluster_id()
    errors, warnings = validate_spec(namespace.name, normalized, old, local_cluster_id=local_id or None)
    return Validation(normalized, _problems_by_field(errors), _problems_by_field(warnings))


def _record(change: ChangeRequest, actor: Actor, before: Any, after: Any, message: str = "") -> None:
    AuditEvent.objects.create(
        user_id=actor.user_id,
        user_name=actor.user_name,
        source=change.source,
        request_id=actor.request_id,
        action=AuditAction.REQUESTED,
        namespace=change.namespace,
        change=change,
        before=before,
        after=after,
        outcome=ChangeState.QUEUED,
        message=message,
    )


def _enqueue(change_id: int, countdown: float = 0) -> None:
    """Send the apply task. A broker failure is logged, not raised: the change is already recorded
    (the outbox), and the sweeper sends it again once the broker is back."""
    from .tasks import apply_change

    try:
        apply_change.apply_async((change_id,), countdown=countdown or None)
    except Exception:  # noqa: BLE001 - kombu/redis raise many types; none may fail the request
        log.warning("could not enqueue change %s; the sweeper will retry it", change_id, exc_info=True)


def _namespace(namespace_name: str) -> Namespace:
    namespace = Namespace.objects.filter(name=namespace_name).first()
    if namespace is None:
        raise ChangeRejected({"namespace": [f'namespace "{namespace_name}" does not exist']})
    return namespace


def _offload_change(
    namespace: Namespace,
    spec: dict[str, Any],
    actor: Actor,
    *,
    expected_generation: int | None = None,
    label_namespace: bool = False,
    bulk: BulkRequest | None = None,
    local_id: str | None = None,
) -> ChangeRequest:
    """An unsaved offload/update change for ``namespace``; raises ChangeRejected when Liqo's rules
    (or ours) refuse the spec, or when the requester saw another state of the namespace."""
    if namespace.offloading_deleting:
        raise ChangeRejected({"namespace": ["the namespace offloading is being deleted; wait until it is gone"]})
    _check_expected_generation(namespace, expected_generation)
    checked = validate(namespace, spec, local_id)
    if checked.errors:
        raise ChangeRejected(checked.errors)
    action = ChangeAction.UPDATE if namespace.offloaded else ChangeAction.OFFLOAD
    base_generation = expected_generation
    if base_generation is None and namespace.offloaded:
        base_generation = namespace.offloading_generation
    return ChangeRequest(
        namespace=namespace.name,
        action=action,
        desired_spec=checked.spec,
        label_namespace=label_namespace,
        base_spec=namespace.offloading_spec if namespace.offloaded else None,
        base_generation=base_generation if action == ChangeAction.UPDATE else None,
        base_resource_version=namespace.offloading_resource_version if namespace.offloaded else "",
        base_uid=namespace.offloading_uid if namespace.offloaded else "",
        requester_id=actor.user_id,
        requester_name=actor.user_name,
        source=actor.source,
        request_id=actor.request_id,
        warnings=[m for msgs in checked.warnings.values() for m in msgs],
        bulk=bulk,
    )


def _check_expected_generation(namespace: Namespace, expected: int | None) -> None:
    """Refuse a change based on another state than the snapshot's: 0 means "not offloaded"."""
    if expected is None:
        return
    if expected == 0 and namespace.offloaded:
        raise ChangeRejected(
            {"namespace": ["the namespace was offloaded by someone else after you loaded it; review its offloading"]}
        )
    if expected > 0 and not namespace.offloaded:
        raise ChangeRejected({"namespace": ["the namespace was unoffloaded after you loaded it"]})


def _unoffload_change(
    namespace: Namespace, actor: Actor, *, expected_generation: int | None = None, bulk: BulkRequest | None = None
) -> ChangeRequest:
    if not namespace.offloaded:
        raise ChangeRejected({"namespace": [f'namespace "{namespace.name}" is not offloaded']})
    return ChangeRequest(
        namespace=namespace.name,
        action=ChangeAction.UNOFFLOAD,
        base_spec=namespace.offloading_spec,
        base_generation=expected_generation if expected_generation is not None else namespace.offloading_generation,
        base_resource_version=namespace.offloading_resource_version,
        base_uid=namespace.offloading_uid,
        requester_id=actor.user_id,
        requester_name=actor.user_name,
        source=actor.source,
        request_id=actor.request_id,
        bulk=bulk,
    )


def _save_and_enqueue(change: ChangeRequest, actor: Actor) -> ChangeRequest:
    """Save the change and its audit event (inside the caller's transaction); enqueue after commit."""
    change.save()
    _record(change, actor, change.base_spec, change.desired_spec)
    transaction.on_commit(lambda: _enqueue(change.pk), robust=True)
    return change


def request_offload(
    namespace_name: str,
    spec: dict[str, Any],
    actor: Actor,
    *,
    expected_generation: int | None = None,
    label_namespace: bool = False,
) -> ChangeRequest:
    """Record a request to offload ``namespace_name`` with ``spec`` (create, or update when it is
    already offloaded). ``expected_generation`` is the generation the requester saw (None: what the
    snapshot holds now); if the cluster moved past it, the change ends in ``conflict``."""
    change = _offload_change(
        _namespace(namespace_name),
        spec,
        actor,
        expected_generation=expected_generation,
        label_namespace=label_namespace,
    )
    with transaction.atomic():
        return _save_and_enqueue(change, actor)


def request_unoffload(namespace_name: str, actor: Actor, *, expected_generation: int | None = None) -> ChangeRequest:
    """Record a request to delete the namespace's NamespaceOffloading (Liqo then removes the remote
    namespaces and everything reflected into them)."""
    change = _unoffload_change(_namespace(namespace_name), actor, expected_generation=expected_generation)
    with transaction.atomic():
        return _save_and_enqueue(change, actor)


SAMPLE_POD: dict[str, Any] = {
    "apiVersion": "v1",
    "kind": "Pod",
    "metadata": {"name": "sample"},
    "spec": {"containers": [{"name": "app", "image": "registry.example/app:1.0"}]},
}


@dataclass
class Preview:
    """Everything a requester should see before submitting a spec for a namespace; computed from the
    snapshot only (no Kubernetes call)."""

    clusters: list[dict[str, Any]]
    selected: list[str]
    target_count: int
    gains: list[str]
    losses: list[str]
    remote_namespace_name: str
    local_cluster_id: str
    manifest: str
    pod_before: dict[str, Any]
    pod_after: dict[str, Any]

    @property
    def pod_changed(self) -> bool:
        return self.pod_after != self.pod_before


def preview(namespace: Namespace, spec: dict[str, Any], pod: dict[str, Any] | None = None) -> Preview:
    """Which clusters ``spec`` selects for ``namespace`` and why the others are excluded, what is gained
    and lost compared with now, the remote name, the manifest liqoctl would print, and how Liqo's
    webhook would mutate ``pod`` (a sample pod by default)."""
    virtual_nodes = [(vn.cluster_id, vn.name, vn.labels) for vn in VirtualNode.objects.order_by("namespace", "name")]
    selection = liqo_peers.select_clusters(spec.get("clusterSelector"), virtual_nodes)
    known = set(Cluster.objects.values_list("cluster_id", flat=True))
    rows = []
    for cluster_id in sorted(set(selection) | known):
        entry = selection.get(cluster_id)
        if entry is None:
            entry = {"selected": False, "explanations": [], "disagree": False, "error": None, "reached": False}
            note = "no virtual node: Liqo cannot offload to this cluster"
        elif not entry["reached"]:
            note = "not evaluated: Liqo stopped at an earlier cluster whose selector evaluation failed"
        else:
            note = ""
        rows.append({"cluster_id": cluster_id, "note": note, **entry})
    selected = [r["cluster_id"] for r in rows if r["selected"]]
    before = set()
    if namespace.offloaded:
        before = set(namespace.cluster_states.filter(selected=True).values_list("cluster_id", flat=True))
    local_id = local_cluster_id()
    sample = pod or SAMPLE_POD
    return Preview(
        clusters=rows,
        selected=selected,
        target_count=len(selection),
        gains=sorted(set(selected) - before) if namespace.offloaded else [],
        losses=sorted(before - set(selected)) if namespace.offloaded else [],
        remote_namespace_name=remote_namespace_name(namespace.name, local_id or "<local-cluster-id>", spec),
        local_cluster_id=local_id,
        manifest=render_manifest(namespace.name, spec, "yaml"),
        pod_before=sample,
        pod_after=liqo_webhook.mutate_pod(spec, sample),
    )


@dataclass
class DryRun:
    """What the API server said about a change without persisting it (``dryRun=All``)."""

    errors: list[str]
    warnings: list[str]
    checked: bool  # False when the API server could not be asked (the change can still be queued)


def dry_run(namespace_name: str, spec: dict[str, Any]) -> DryRun:
    """Ask the API server (and so Liqo's validating webhook) whether it would accept ``spec`` now.
    Only denials count as errors; an unreachable API server only means we could not check."""
    body: dict[str, Any] = {
        "apiVersion": f"{liqo.GROUP}/{liqo.VERSION}",
        "kind": "NamespaceOffloading",
        "metadata": {"name": liqo.OFFLOADING_NAME, "namespace": namespace_name},
        "spec": normalize_spec(spec),
    }
    try:
        current = kube.get_offloading(namespace_name, timeout=kube.DRY_RUN_TIMEOUT)
        if current is None:
            result = kube.create_offloading(namespace_name, body, dry_run=True)
        else:
            body["metadata"]["resourceVersion"] = (current.get("metadata") or {}).get("resourceVersion")
            body["metadata"]["annotations"] = (current.get("metadata") or {}).get("annotations") or {}
            result = kube.replace_offloading(namespace_name, body, dry_run=True)
    except kube.KubeError as exc:
        if exc.kind in ("invalid", "forbidden", "not_found"):
            return DryRun([exc.message], [], True)
        return DryRun([], [], False)
    return DryRun([], result.warnings, True)


def reapply(change_id: int, actor: Actor) -> ChangeRequest:
    """Resolve a change that ended in conflict by asking for it again, this time based on what the
    snapshot holds now (the requester has seen both versions and chose theirs)."""
    change = ChangeRequest.objects.filter(pk=change_id).first()
    if change is None or change.state != ChangeState.CONFLICT:
        raise ChangeRejected({"change": ["only a change in conflict can be applied again"]})
    namespace = _namespace(change.namespace)
    current = namespace.offloading_generation if namespace.offloaded else 0
    if change.action == ChangeAction.UNOFFLOAD:
        return request_unoffload(namespace.name, actor, expected_generation=current or None)
    return request_offload(
        namespace.name,
        change.desired_spec or {},
        actor,
        expected_generation=current,
        label_namespace=change.label_namespace,
    )


@dataclass
class BulkPlan:
    """What a bulk request would do: the changes it would make and the namespaces it would skip."""

    changes: list[ChangeRequest]
    skipped: list[dict[str, str]]

    @property
    def namespaces(self) -> list[str]:
        return [c.namespace for c in self.changes]


def namespace_ids_matching(requirements: list[Any]) -> list[int]:
    """Ids of the snapshot namespaces whose labels satisfy parsed label-selector requirements (matched
    here with offloading.liqo, as the API server would)."""
    return [
        pk
        for pk, labels in Namespace.objects.values_list("pk", "labels")
        if all(r.matches(labels or {}) for r in requirements)
    ]


def bulk_targets(namespace_selector: str) -> list[Namespace]:
    """Snapshot namespaces whose labels match a kubectl-style label selector."""
    try:
        requirements = parse_requirements(namespace_selector)
    except SelectorError as exc:
        raise ChangeRejected({"namespace_selector": [str(exc)]})
    if not requirements:
        raise ChangeRejected({"namespace_selector": ["give a selector: an empty one would match every namespace"]})
    return list(Namespace.objects.filter(pk__in=namespace_ids_matching(requirements)).defer("offloading_status"))


def plan_bulk(
    action: str,
    namespace_selector: str,
    spec: dict[str, Any] | None,
    actor: Actor,
    *,
    label_namespace: bool = False,
    bulk: BulkRequest | None = None,
) -> BulkPlan:
    """Build (unsaved) the changes of a bulk request; namespaces that cannot take it are skipped
    with the reason (a system namespace, not offloaded, an immutable field ...)."""
    if action != ChangeAction.UNOFFLOAD:
        if spec is None:
            raise ChangeRejected({"spec": ["a spec is required to offload"]})
        if apply_defaults(spec).get("namespaceMappingStrategy") == "SelectedName":
            # Like liqoctl: one remote name for many namespaces would collide on every cluster.
            raise ChangeRejected(
                {"namespaceMappingStrategy": ["SelectedName cannot be used when offloading several namespaces at once"]}
            )
    changes, skipped = [], []
    local_id = local_cluster_id()
    # The children of a bulk request say so; the parent keeps where it came from (web or api).
    actor = Actor(actor.user_id, actor.user_name, Source.BULK, actor.request_id)
    for namespace in bulk_targets(namespace_selector):
        try:
            if action == ChangeAction.UNOFFLOAD:
                change = _unoffload_change(namespace, actor, bulk=bulk)
            else:
                change = _offload_change(
                    namespace, spec or {}, actor, label_namespace=label_namespace, bulk=bulk, local_id=local_id
                )
        except ChangeRejected as exc:
            reason = "; ".join(m for msgs in exc.errors.values() for m in msgs)
            skipped.append({"namespace": namespace.name, "reason": reason})
            continue
        changes.append(change)
    return BulkPlan(changes, skipped)


def request_bulk(
    action: str,
    namespace_selector: str,
    spec: dict[str, Any] | None,
    actor: Actor,
    *,
    label_namespace: bool = False,
) -> BulkRequest:
    """Record one parent request and a change per matching namespace, in one transaction."""
    with transaction.atomic():
        bulk = BulkRequest.objects.create(
            action=action,
            namespace_selector=namespace_selector,
            desired_spec=spec,
            requester_id=actor.user_id,
            requester_name=actor.user_name,
            source=actor.source,
            request_id=actor.request_id,
        )
        plan = plan_bulk(action, namespace_selector, spec, actor, label_namespace=label_namespace, bulk=bulk)
        if not plan.changes:
            transaction.set_rollback(True)
            raise ChangeRejected({"namespace_selector": ["no namespace matched that can take this change"]})
        for change in plan.changes:
            _save_and_enqueue(change, actor)
        BulkRequest.objects.filter(pk=bulk.pk).update(total=len(plan.changes), skipped=plan.skipped)
    bulk.refresh_from_db()
    return bulk


# --------------------------------------------------------------------------------------------------
# Applying changes (worker side)


class _Conflict(Exception):
    def __init__(self, message: str, found: dict[str, Any] | None) -> None:
        super().__init__(message)
        self.found = found


class _Waiting(Exception):
    """The change was pushed; the object is still terminating."""


def _finish(change_id: int, state: str, message: str, **fields: Any) -> bool:
    """Move an applying change to a terminal state and audit it, exactly once."""
    now = timezone.now()
    with transaction.atomic():
        done = ChangeRequest.objects.filter(pk=change_id, state=ChangeState.APPLYING).update(
            state=state, message=message, finished_at=now, updated_at=now, **fields
        )
        if not done:
            return False
        change = ChangeRequest.objects.get(pk=change_id)
        action = {
            ChangeState.APPLIED: AuditAction.APPLIED,
            ChangeState.FAILED: AuditAction.FAILED,
            ChangeState.CONFLICT: AuditAction.CONFLICT,
        }[state]
        AuditEvent.objects.create(
            user_id=change.requester_id,
            user_name=change.requester_name,
            source=change.source,
            request_id=change.request_id,
            action=action,
            namespace=change.namespace,
            change=change,
            before=change.base_spec,
            after=change.desired_spec if change.action != ChangeAction.UNOFFLOAD else None,
            outcome=state,
            message=message,
        )
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
        # the older change enqueues it when it finishes (_start_next), and the sweeper is the safety
        # net if that message is lost.
        return None
    now = timezone.now()
    lease_expired = now - timedelta(seconds=settings.LIQO_DASH["STUCK_AFTER"])
    claimed = ChangeRequest.objects.filter(pk=change_id, state=ChangeState.QUEUED).update(
        state=ChangeState.APPLYING, claimed_at=now, updated_at=now, attempts=F("attempts") + 1
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
        _start_next(change.namespace)
    return state


def _start_next(namespace: str) -> None:
    """Enqueue the next queued change of ``namespace`` now that the one before it finished (changes
    waiting behind an older one do not poll; see :func:`claim`)."""
    first = (
        ChangeRequest.objects.filter(namespace=namespace, state__in=ChangeState.pending())
        .order_by("id")
        .values_list("pk", "state")
        .first()
    )
    if first is not None and first[1] == ChangeState.QUEUED:
        _enqueue(first[0])


def _requeue(
    change: ChangeRequest,
    message: str,
    countdown: float,
    count_attempt: bool = True,
    followups: list[Callable[[], None]] | None = None,
) -> None:
    # updated_at is when the change is next due: the sweeper leaves it alone during its backoff.
    due = timezone.now() + timedelta(seconds=countdown)
    fields: dict[str, Any] = {"state": ChangeState.QUEUED, "message": message, "updated_at": due}
    if not count_attempt:
        fields["attempts"] = F("attempts") - 1
    if ChangeRequest.objects.filter(pk=change.pk, state=ChangeState.APPLYING).update(**fields):
        enqueue = lambda: _enqueue(change.pk, countdown=countdown)  # noqa: E731
        if followups is None:
            enqueue()
        else:
            followups.append(enqueue)


def _backoff(attempt: int) -> float:
    base = float(settings.LIQO_DASH["APPLY_RETRY_BASE"])
    return min(60.0, base * (2 ** max(0, attempt - 1))) * random.uniform(0.5, 1.5)


def _apply_claimed(change: ChangeRequest, followups: list[Callable[[], None]]) -> str:
    try:
        if change.action == ChangeAction.UNOFFLOAD:
            result = _push_delete(change)
        else:
            result = _push_spec(change)
    except _Waiting:
        ChangeRequest.objects.filter(pk=change.pk).update(
            message="Waiting for Liqo to remove the remote namespaces", updated_at=timezone.now()
        )
        from .tasks import await_deletion

        followups.append(lambda: await_deletion.apply_async((change.pk,), countdown=1.0))
        return ChangeState.APPLYING
    except _Conflict as exc:
        found = normalize_spec(exc.found["spec"]) if exc.found and "spec" in exc.found else None
        _finish(change.pk, ChangeState.CONFLICT, str(exc), conflict_spec=found)
        trigger_refresh()
        return ChangeState.CONFLICT
    except kube.KubeError as exc:
        retrying_for = (timezone.now() - change.created_at).total_seconds()
        if (
            exc.transient
            and change.attempts < settings.LIQO_DASH["APPLY_MAX_RETRIES"]
            and retrying_for < settings.LIQO_DASH["APPLY_RETRY_FOR"]
        ):
            _requeue(
                change,
                f"retrying after a transient error: {exc.message}",
                _backoff(change.attempts),
                followups=followups,
            )
            return ChangeState.QUEUED
        _finish(change.pk, ChangeState.FAILED, exc.message)
        trigger_refresh()
        return ChangeState.FAILED
    obj, warnings = result
    fields: dict[str, Any] = {"warnings": list(dict.fromkeys([*change.warnings, *warnings]))}
    if obj:
        _store_offloading(change.namespace, obj)
        meta = obj.get("metadata") or {}
        fields.update(result_resource_version=meta.get("resourceVersion", ""), result_generation=meta.get("generation"))
    _finish(change.pk, ChangeState.APPLIED, _applied_message(change), **fields)
    trigger_refresh()
    return ChangeState.APPLIED


def _applied_message(change: ChangeRequest) -> str:
    return {
        ChangeAction.OFFLOAD: "NamespaceOffloading created",
        ChangeAction.UPDATE: "NamespaceOffloading updated",
        ChangeAction.UNOFFLOAD: "NamespaceOffloading deleted and gone",
    }[ChangeAction(change.action)]


def _annotations(obj: dict[str, Any]) -> dict[str, str]:
    return (obj.get("metadata") or {}).get("annotations") or {}


def _written_by(obj: dict[str, Any], change: ChangeRequest) -> bool:
    return _annotations(obj).get(kube.CHANGE_ID_ANNOTATION) == str(change.pk)


def _check_base(change: ChangeRequest, current: dict[str, Any], advice: str = "") -> None:
    """Conflict when the object is not the one the requester saw: another uid (deleted and created
    again) or another generation (its spec changed)."""
    meta = current.get("metadata") or {}
    if change.base_uid and meta.get("uid") and meta["uid"] != change.base_uid:
        raise _Conflict(f"The NamespaceOffloading was deleted and created again after you loaded it{advice}", current)
    if change.base_generation is not None and meta.get("generation") != change.base_generation:
        raise _Conflict(
            f"The offloading changed after you loaded it (generation {change.base_generation} "
            f"became {meta.get('generation')}){advice}",
            current,
        )


def _create(change: ChangeRequest, annotations: dict[str, str]) -> kube.Result:
    """Create the NamespaceOffloading, labelling the namespace first when asked to; a label we added
    is taken back if the create is refused, so a refused change leaves nothing behind."""
    body = manifest(change.namespace, change.desired_spec or {})
    body.pop("status", None)
    body["metadata"]["annotations"] = annotations
    body["spec"] = change.desired_spec
    added_label = False
    warnings: list[str] = []
    if change.label_namespace:
        known = Namespace.objects.filter(name=change.namespace).values_list("labels", flat=True).first() or {}
        if known.get(liqo.SCHEDULING_LABEL) != "true":
            warnings += kube.label_namespace(change.namespace, {liqo.SCHEDULING_LABEL: "true"}).warnings
            added_label = True
    try:
        result = kube.create_offloading(change.namespace, body)
    except kube.KubeError as exc:
        if added_label and exc.kind != "exists":
            try:
                kube.label_namespace(change.namespace, {liqo.SCHEDULING_LABEL: None})
            except kube.KubeError:
                log.warning("could not remove the scheduling label of %s after a refused create", change.namespace)
        raise
    result.warnings = warnings + result.warnings
    return result


def _push_spec(change: ChangeRequest) -> tuple[dict[str, Any] | None, list[str]]:
    """Create or update the NamespaceOffloading; conflict if it moved since the requester saw it."""
    annotations = {kube.CHANGE_ID_ANNOTATION: str(change.pk), kube.REQUESTER_ANNOTATION: change.requester_name}
    for _ in range(5):
        current = kube.get_offloading(change.namespace)
        if current is not None and _written_by(current, change):
            return current, []  # a redelivery: our earlier attempt already wrote it
        if current is None:
            if change.action == ChangeAction.UPDATE:
                raise _Conflict("The NamespaceOffloading was deleted after you loaded it", None)
            try:
                result = _create(change, annotations)
            except kube.KubeError as exc:
                if exc.kind == "exists":
                    continue  # created meanwhile: look again
                raise
            return result.obj, result.warnings
        meta = current.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            raise _Conflict("The NamespaceOffloading is being deleted", current)
        if change.action == ChangeAction.OFFLOAD:
            raise _Conflict("The namespace was offloaded by someone else after you loaded it", current)
        _check_base(change, current)
        body = dict(current)
        body["metadata"] = {**meta, "annotations": {**(meta.get("annotations") or {}), **annotations}}
        body["spec"] = change.desired_spec
        body.pop("status", None)
        try:
            result = kube.replace_offloading(change.namespace, body)
        except kube.KubeError as exc:
            if exc.kind == "conflict":
                # Usually only the status moved (Liqo writes it); the generation check above
                # decides on the next round whether the spec moved too.
                continue
            raise
        return result.obj, result.warnings
    raise kube.KubeError("transient", "the object kept changing while it was being updated")


def _push_delete(change: ChangeRequest) -> tuple[dict[str, Any] | None, list[str]]:
    for _ in range(5):
        current = kube.get_offloading(change.namespace)
        if current is None:
            return None, []
        meta = current.get("metadata") or {}
        if meta.get("deletionTimestamp"):
            raise _Waiting()
        _check_base(change, current, "; review it before removing it")
        try:
            kube.delete_offloading(change.namespace, resource_version=meta.get("resourceVersion"))
        except kube.KubeError as exc:
            if exc.kind == "conflict":
                continue
            if exc.kind == "not_found":
                return None, []
            raise
        raise _Waiting()
    raise kube.KubeError("transient", "the object kept changing while it was being deleted")


def await_deletion(change_id: int) -> str:
    """Poll until the deleted NamespaceOffloading is gone (Liqo removes its finalizer once the
    remote namespaces are deleted), then report the unoffload as applied."""
    change = ChangeRequest.objects.filter(pk=change_id, state=ChangeState.APPLYING).first()
    if change is None:
        return "skipped"
    # Poll a few times within this task before handing over to a new one: cheap on the broker, and
    # it keeps eager (in-process) runs from recursing.
    current: dict[str, Any] | None = {}
    for _ in range(10):
        try:
            current = kube.get_offloading(change.namespace)
        except kube.KubeError as exc:
            if not exc.transient:
                _finish(change.pk, ChangeState.FAILED, exc.message)
                _start_next(change.namespace)
                return ChangeState.FAILED
            current = {"transient": True}
        if current is None:
            break
        time.sleep(0.5)
    if current is None:
        _mark_namespace_unoffloaded(change.namespace)
        _finish(change.pk, ChangeState.APPLIED, _applied_message(change))
        trigger_refresh()
        _start_next(change.namespace)
        return ChangeState.APPLIED
    waited = (timezone.now() - (change.claimed_at or change.created_at)).total_seconds()
    if waited > settings.LIQO_DASH["DELETE_WAIT"]:
        _finish(change.pk, ChangeState.FAILED, f"The NamespaceOffloading was still terminating after {waited:.0f}s")
        _start_next(change.namespace)
        return ChangeState.FAILED
    ChangeRequest.objects.filter(pk=change.pk, state=ChangeState.APPLYING).update(updated_at=timezone.now())
    from .tasks import await_deletion as task

    task.apply_async((change.pk,), countdown=1.0)
    return ChangeState.APPLYING


def sweep() -> int:
    """Re-enqueue changes whose message was lost or whose worker died (outbox sweeper)."""
    cutoff = timezone.now() - timedelta(seconds=settings.LIQO_DASH["STUCK_AFTER"])
    stuck = list(
        ChangeRequest.objects.filter(state__in=ChangeState.pending(), updated_at__lt=cutoff).values_list(
            "pk", flat=True
        )
    )
    for pk in stuck:
        ChangeRequest.objects.filter(pk=pk, state=ChangeState.APPLYING, updated_at__lt=cutoff).update(
            state=ChangeState.QUEUED, updated_at=timezone.now(), message="re-enqueued by the sweeper"
        )
        ChangeRequest.objects.filter(pk=pk, state=ChangeState.QUEUED, updated_at__lt=cutoff).update(
            updated_at=timezone.now()
        )
        _enqueue(pk)
    return len(stuck)


HISTORY_PER_NAMESPACE = 200


def trim_history(limit: int = HISTORY_PER_NAMESPACE) -> int:
    """Keep only the newest ``limit`` status transitions of each namespace."""
    deleted = 0
    crowded = (
        StatusTransition.objects.values("namespace")
        .annotate(n=Count("id"))
        .filter(n__gt=limit)
        .values_list("namespace", flat=True)
    )
    for namespace in list(crowded):
        keep_from = (
            StatusTransition.objects.filter(namespace=namespace).order_by("-id").values_list("id", flat=True)[limit - 1]
        )
        deleted += StatusTransition.objects.filter(namespace=namespace, id__lt=keep_from).delete()[0]
    return deleted


# --------------------------------------------------------------------------------------------------
# Snapshot refresh


def trigger_refresh() -> None:
    """Ask for a refresh soon; many triggers within a second coalesce into one refresh."""
    if cache.add(_REFRESH_REQUESTED, 1, timeout=5):
        from .tasks import refresh

        transaction.on_commit(lambda: refresh.apply_async(countdown=0.5))


def _dt(value: str | None) -> datetime | None:
    return parse_datetime(value) if value else None


def _actor_from_managed_fields(obj: dict[str, Any]) -> str:
    """Who last wrote the spec, from managedFields (the newest manager other than Liqo's controller)."""
    entries = [
        e
        for e in (obj.get("metadata") or {}).get("managedFields") or []
        if e.get("manager") != liqo.CONTROLLER_MANAGER and e.get("subresource") != "status"
    ]
    if not entries:
        return "unknown"
    entries.sort(key=lambda e: e.get("time") or "")
    return entries[-1].get("manager") or "unknown"


def _offloading_fields(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    return {
        "offloaded": True,
        "offloading_uid": meta.get("uid", ""),
        "offloading_spec": normalize_spec(obj.get("spec") or {}),
        "offloading_status": status,
        "offloading_phase": status.get("offloadingPhase", ""),
        "offloading_generation": meta.get("generation") or 0,
        "offloading_observed_generation": status.get("observedGeneration") or 0,
        "offloading_resource_version": meta.get("resourceVersion", ""),
        "offloading_deleting": bool(meta.get("deletionTimestamp")),
        "offloading_managed_by": _actor_from_managed_fields(obj),
        "remote_namespace_name": status.get("remoteNamespaceName", ""),
    }


_NOT_OFFLOADED: dict[str, Any] = {
    "offloaded": False,
    "offloading_uid": "",
    "offloading_spec": None,
    "offloading_status": None,
    "offloading_phase": "",
    "offloading_generation": 0,
    "offloading_observed_generation": 0,
    "offloading_resource_version": "",
    "offloading_deleting": False,
    "offloading_managed_by": "",
    "remote_namespace_name": "",
}


# Per-cluster states kept as rows: a cluster that is not selected and holds no remote namespace is
# left out (with 200 peers that is over 90% of Liqo's per-cluster conditions, and nothing to show).
_IDLE_STATES = ("", "NotSelected")


def _cluster_rows(namespace_id: int, obj: dict[str, Any]) -> list[ClusterOffloading]:
    return [
        ClusterOffloading(
            namespace_id=namespace_id,
            cluster_id=row["cluster_id"],
            selected=bool(row["selected"]),
            state=row["state"] or "",
            message=row.get("message") or "",
            since=_dt(row.get("last_transition")),
        )
        for row in cluster_status_table(obj)
        if row["selected"] or (row["state"] or "") not in _IDLE_STATES
    ]


def replace_offloading_rows(observed: dict[str, dict[str, Any] | None], now: Any, history: bool = True) -> int:
    """Write the observed NamespaceOffloading (or None: not offloaded) of each namespace name into the
    snapshot: the namespace row, its per-cluster rows, and a StatusTransition for every phase or
    per-cluster state that changed. Returns how many transitions were recorded."""
    if not observed:
        return 0
    with transaction.atomic():
        return _replace_offloading_rows(observed, now, history)


def _replace_offloading_rows(observed: dict[str, dict[str, Any] | None], now: Any, history: bool) -> int:
    # Why the row locks: apply, watcher and refresh may write the same namespace at once; on
    # PostgreSQL the delete + insert of its per-cluster rows would otherwise collide. Locking in name
    # order avoids deadlocks; SQLite's IMMEDIATE transactions already serialise writers.
    namespaces = {
        n.name: n
        for n in Namespace.objects.select_for_update()
        .filter(name__in=list(observed))
        .only("pk", "name", "offloaded", "offloading_phase")
        .order_by("name")
    }
    old_states: dict[int, dict[str, str]] = defaultdict(dict)
    for namespace_id, cluster_id, state in ClusterOffloading.objects.filter(
        namespace_id__in=[n.pk for n in namespaces.values()]
    ).values_list("namespace_id", "cluster_id", "state"):
        old_states[namespace_id][cluster_id] = state
    transitions: list[StatusTransition] = []
    new_rows: list[ClusterOffloading] = []
    updated: list[Namespace] = []
    for name, obj in observed.items():
        namespace = namespaces.get(name)
        if namespace is None or (obj is None and not namespace.offloaded and not old_states.get(namespace.pk)):
            continue  # unknown, or not offloaded before nor now: nothing to write
        fields = _offloading_fields(obj) if obj else dict(_NOT_OFFLOADED)
        if fields["offloading_phase"] != namespace.offloading_phase:
            transitions.append(
                StatusTransition(
                    time=now, namespace=name, old=namespace.offloading_phase, new=fields["offloading_phase"]
                )
            )
        for field_name, value in fields.items():
            setattr(namespace, field_name, value)
        namespace.refreshed_at = now
        updated.append(namespace)
        rows = _cluster_rows(namespace.pk, obj) if obj else []
        new_rows += rows
        new_states = {row.cluster_id: row.state for row in rows}
        before_states = old_states.get(namespace.pk, {})
        for cluster_id in sorted(set(new_states) | set(before_states)):
            before, after = before_states.get(cluster_id, ""), new_states.get(cluster_id, "")
            if before != after:
                transitions.append(
                    StatusTransition(time=now, namespace=name, cluster_id=cluster_id, old=before, new=after)
                )
    Namespace.objects.bulk_update(updated, [*_NOT_OFFLOADED, "refreshed_at"], batch_size=500)
    ClusterOffloading.objects.filter(namespace_id__in=[n.pk for n in updated if n.pk in old_states]).delete()
    ClusterOffloading.objects.bulk_create(new_rows, batch_size=2000)
    if not history:
        return 0
    StatusTransition.objects.bulk_create(transitions, batch_size=2000)
    return len(transitions)


def _store_offloading(namespace_name: str, obj: dict[str, Any]) -> None:
    """Write one observed NamespaceOffloading into the snapshot (after our own apply)."""
    replace_offloading_rows({namespace_name: obj}, timezone.now())


def _mark_namespace_unoffloaded(namespace_name: str) -> None:
    replace_offloading_rows({namespace_name: None}, timezone.now())


@dataclass
class RefreshReport:
    ok: bool
    list_calls: int = 0
    clusters: int = 0
    namespaces: int = 0
    offloadings: int = 0
    changed: int = 0
    drift: int = 0
    error: str = ""


def refresh_once() -> RefreshReport | None:
    """Run :func:`refresh` unless one is already running anywhere; a refresh asked for meanwhile
    runs right after the current one (so no trigger is lost). Returns None when it only queued."""
    owner = f"{time.monotonic()}:{random.random()}"
    # Why 60 s: a killed worker's lock must not hold refreshes back for long; a refresh of 10,000
    # namespaces takes a few seconds, and an expired lock only allows two refreshes at once.
    if not cache.add(_REFRESH_LOCK, owner, timeout=60):
        cache.set(_REFRESH_AGAIN, 1, timeout=300)
        return None
    # A trigger that arrives from now on must schedule another refresh: this one may list too early.
    cache.delete(_REFRESH_REQUESTED)
    try:
        return refresh()
    finally:
        if cache.get(_REFRESH_LOCK) == owner:
            cache.delete(_REFRESH_LOCK)
        if cache.delete(_REFRESH_AGAIN):
            from .tasks import refresh as task

            task.apply_async(countdown=0.2)


def refresh() -> RefreshReport:
    """Rebuild the snapshot from a constant number of paginated LIST calls; record drift."""
    started = time.monotonic()
    now = timezone.now()
    SnapshotState.objects.get_or_create(pk=1)
    SnapshotState.objects.filter(pk=1).update(last_attempt_at=now)
    try:
        listed = {
            "fc": kube.list_foreign_clusters(),
            "vn": kube.list_virtual_nodes(),
            "nodes": kube.list_virtual_node_nodes(),
            "ns": kube.list_namespaces(),
            "nsoff": kube.list_offloadings(),
        }
    except kube.KubeError as exc:
        SnapshotState.objects.filter(pk=1).update(last_error=exc.message)
        return RefreshReport(ok=False, error=exc.message)
    calls = sum(result.calls for result in listed.values())
    report = RefreshReport(ok=True, list_calls=calls)
    with transaction.atomic():
        report.clusters = _store_clusters(listed["fc"].items, listed["vn"].items, listed["nodes"].items, now)
        report.namespaces, report.offloadings, report.changed, report.drift = _store_namespaces(
            listed["ns"].items, listed["nsoff"].items, now
        )
        discovered = _discover_local_cluster_id(listed["nsoff"].items)
        updates: dict[str, Any] = {
            "last_success_at": now,
            "last_error": "",
            "last_duration_ms": int((time.monotonic() - started) * 1000),
            "last_list_calls": calls,
        }
        if discovered:
            updates["local_cluster_id"] = discovered
        SnapshotState.objects.filter(pk=1).update(**updates)
    return report


def _store_clusters(
    foreign_clusters: list[dict[str, Any]], virtual_nodes: list[dict[str, Any]], nodes: list[dict[str, Any]], now: Any
) -> int:
    rows = []
    for fc in foreign_clusters:
        meta, spec, status = fc.get("metadata") or {}, fc.get("spec") or {}, fc.get("status") or {}
        modules = status.get("modules") or {}
        summary = {}
        for module in ("networking", "authentication", "offloading"):
            state, alerts = liqo_peers.module_status(modules.get(module))
            summary[module] = {
                "status": state,
                "alerts": alerts,
                "conditions": (modules.get(module) or {}).get("conditions") or [],
            }
        rows.append(
            Cluster(
                cluster_id=spec.get("clusterID") or meta.get("name", ""),
                name=meta.get("name", ""),
                role=status.get("role", "Unknown"),
                networking_status=summary["networking"]["status"],
                authentication_status=summary["authentication"]["status"],
                offloading_status=summary["offloading"]["status"],
                modules=summary,
                api_server_url=status.get("apiServerUrl", "") or "",
                resource_version=meta.get("resourceVersion", ""),
                refreshed_at=now,
            )
        )
    update_fields = [
        "name", "role", "networking_status", "authentication_status", "offloading_status", "modules",
        "api_server_url", "resource_version", "refreshed_at",
    ]  # fmt: skip
    Cluster.objects.bulk_create(rows, update_conflicts=True, unique_fields=["cluster_id"], update_fields=update_fields)
    Cluster.objects.exclude(cluster_id__in=[r.cluster_id for r in rows]).delete()

    nodes_by_name = {(n.get("metadata") or {}).get("name"): n for n in nodes}
    vn_rows = []
    for vn in virtual_nodes:
        meta, spec = vn.get("metadata") or {}, vn.get("spec") or {}
        cluster_id = spec.get("clusterID", "")
        node = liqo_peers.node_of(vn, nodes_by_name)
        vn_rows.append(
            VirtualNode(
                namespace=meta.get("namespace", ""),
                name=meta.get("name", ""),
                cluster_id=cluster_id,
                labels=virtual_node_labels(vn, node),
                has_node=node is not None,
                capacity=(spec.get("resourceQuota") or {}).get("hard") or {},
                healthy=liqo_peers.virtual_node_healthy(vn),
                conditions=(vn.get("status") or {}).get("conditions") or [],
                refreshed_at=now,
            )
        )
    VirtualNode.objects.bulk_create(
        vn_rows,
        update_conflicts=True,
        unique_fields=["namespace", "name"],
        update_fields=["cluster_id", "labels", "has_node", "capacity", "healthy", "conditions", "refreshed_at"],
    )
    keep = {(v.namespace, v.name) for v in vn_rows}
    stale = [
        pk for pk, ns, name in VirtualNode.objects.values_list("pk", "namespace", "name") if (ns, name) not in keep
    ]
    VirtualNode.objects.filter(pk__in=stale).delete()
    return len(rows)


def _store_namespaces(
    namespaces: list[dict[str, Any]], offloadings: list[dict[str, Any]], now: Any
) -> tuple[int, int, int, int]:
    baseline = SnapshotState.get().last_success_at is None
    by_ns = {
        (o.get("metadata") or {}).get("namespace"): o
        for o in offloadings
        if (o.get("metadata") or {}).get("name") == liqo.OFFLOADING_NAME
    }
    existing = {n.name: n for n in Namespace.objects.defer("offloading_status")}
    rows, changed, seen = [], {}, set()
    drift = 0
    for item in namespaces:
        meta = item.get("metadata") or {}
        name = meta.get("name", "")
        obj = by_ns.get(name)
        old = existing.get(name)
        row = Namespace(
            name=name,
            labels=meta.get("labels") or {},
            status_phase=(item.get("status") or {}).get("phase", ""),
            created_at=_dt(meta.get("creationTimestamp")),
            refreshed_at=now,
        )
        seen.add(name)
        if old is None or (old.labels, old.status_phase, old.created_at) != (
            row.labels,
            row.status_phase,
            row.created_at,
        ):
            # Only new or changed namespaces are written: a refresh of an unchanged fleet writes nothing.
            # Offloading fields of known namespaces are written below, only where they changed.
            if old is not None:
                for field_name in _NOT_OFFLOADED:
                    setattr(row, field_name, getattr(old, field_name))
            rows.append(row)
        if old is not None and old.refreshed_at is not None and old.refreshed_at > now:
            # Why: an apply of ours (or the watcher) wrote this namespace after our LISTs began, so the
            # LIST may predate that write: comparing would record our own change as drift and put
            # the old state back. The next refresh looks at it again.
            continue
        observed_rv = (obj.get("metadata") or {}).get("resourceVersion", "") if obj else ""
        if old is None or old.offloading_resource_version != observed_rv:
            changed[name] = obj
        if not baseline and _record_drift(old, obj, now):
            drift += 1
    update_fields = ["labels", "status_phase", "created_at", "refreshed_at"]
    Namespace.objects.bulk_create(
        rows, update_conflicts=True, unique_fields=["name"], update_fields=update_fields, batch_size=1000
    )
    gone = [name for name in existing if name not in seen]
    if gone:
        Namespace.objects.filter(name__in=gone).delete()
    # The first refresh only learns the state: it has no transitions to report.
    replace_offloading_rows(changed, now, history=not baseline)
    return len(seen), len(by_ns), len(changed), drift


def _record_drift(old: Namespace | None, obj: dict[str, Any] | None, now: Any) -> bool:
    """Record an audit event when the offloading changed in the cluster without a change of ours."""
    old_spec = old.offloading_spec if old is not None and old.offloaded else None
    new_spec = normalize_spec(obj.get("spec") or {}) if obj else None
    if old_spec == new_spec:
        return False
    name = (obj or {}).get("metadata", {}).get("namespace") or (old.name if old else "")
    if obj is not None:
        meta = obj.get("metadata") or {}
        change_id = (meta.get("annotations") or {}).get(kube.CHANGE_ID_ANNOTATION, "")
        ours = (
            ChangeRequest.objects.filter(
                pk=int(change_id) if change_id.isdigit() else -1,
                namespace=name,
                result_generation=meta.get("generation"),
            ).exists()
            or ChangeRequest.objects.filter(
                pk=int(change_id) if change_id.isdigit() else -1, state__in=ChangeState.pending()
            ).exists()
        )
        if ours:
            return False
        action = AuditAction.DRIFT_CREATED if old_spec is None else AuditAction.DRIFT_UPDATED
        actor = _actor_from_managed_fields(obj)
    else:
        # Ours while the unoffload is pending, and also when it gave up waiting for Liqo's finalizer
        # (failed after DELETE_WAIT) but the deletion it started went through later.
        recent = timezone.now() - timedelta(seconds=4 * settings.LIQO_DASH["DELETE_WAIT"])
        ours = ChangeRequest.objects.filter(
            Q(state__in=ChangeState.pending()) | Q(state=ChangeState.FAILED, finished_at__gte=recent),
            namespace=name,
            action=ChangeAction.UNOFFLOAD,
        ).exists()
        if ours:
            return False
        action = AuditAction.DRIFT_DELETED
        actor = "unknown"
    AuditEvent.objects.create(
        user_name=actor,
        source=Source.EXTERNAL,
        action=action,
        namespace=name,
        before=old_spec,
        after=new_spec,
        outcome="observed",
        message=f"{AuditAction(action).label} (field manager: {actor})",
    )
    return True


def observe_offloading(namespace_name: str, obj: dict[str, Any] | None) -> bool:
    """Apply one watched NamespaceOffloading event to the snapshot at once (``obj`` None: deleted),
    recording drift as the full refresh would. Returns False when the namespace is not in the
    snapshot yet (the caller then asks for a full refresh)."""
    now = timezone.now()
    with transaction.atomic():
        # Read under the row lock, so a refresh committing the same drift meanwhile is seen.
        old = Namespace.objects.select_for_update().filter(name=namespace_name).first()
        if old is None:
            return False
        if obj is not None and _older(obj, old.offloading_resource_version):
            return True  # a late event: the snapshot already holds something newer
        if SnapshotState.get().last_success_at is not None:
            _record_drift(old, obj, now)
        replace_offloading_rows({namespace_name: obj}, now)
    return True


def _older(obj: dict[str, Any], known_version: str) -> bool:
    """Whether ``obj`` is older than the resourceVersion we hold. Versions are opaque in Kubernetes,
    but etcd's (and the sandbox's) are increasing integers; anything else is never called older."""
    version = (obj.get("metadata") or {}).get("resourceVersion", "")
    if version.isdigit() and known_version.isdigit():
        return int(version) < int(known_version)
    return False


def _discover_local_cluster_id(offloadings: list[dict[str, Any]]) -> str:
    """The local cluster id, read from the first DefaultName offloading Liqo has named."""
    for obj in offloadings:
        found = local_cluster_id_from(
            (obj.get("metadata") or {}).get("namespace", ""),
            obj.get("spec") or {},
            (obj.get("status") or {}).get("remoteNamespaceName", ""),
        )
        if found:
            return found
    return ""
