"""Requesting changes: validate a desired spec with Liqo's rules and record a ChangeRequest and its audit
event in one transaction, sent to the worker after commit (the outbox)."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction

from offloading.changes.audit import record_requested
from offloading.changes.errors import ChangeRejected
from offloading.changes.queue import enqueue_apply
from offloading.choices import ChangeAction, ChangeState
from offloading.context import Actor
from offloading.liqo.admission import validate_spec
from offloading.liqo.spec import normalize_spec
from offloading.models import (
    BulkRequest,
    ChangeRequest,
    Namespace,
    SnapshotState,
)

log = logging.getLogger(__name__)


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


def get_namespace(namespace_name: str) -> Namespace:
    namespace = Namespace.objects.filter(name=namespace_name).first()
    if namespace is None:
        raise ChangeRejected({"namespace": [f'namespace "{namespace_name}" does not exist']})
    return namespace


def offload_change(
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


def unoffload_change(
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


def save_and_enqueue(change: ChangeRequest, actor: Actor) -> ChangeRequest:
    """Save the change and its audit event (inside the caller's transaction); enqueue after commit."""
    change.save()
    record_requested(change, actor, change.base_spec, change.desired_spec)
    transaction.on_commit(lambda: enqueue_apply(change.pk), robust=True)
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
    change = offload_change(
        get_namespace(namespace_name),
        spec,
        actor,
        expected_generation=expected_generation,
        label_namespace=label_namespace,
    )
    with transaction.atomic():
        return save_and_enqueue(change, actor)


def request_unoffload(namespace_name: str, actor: Actor, *, expected_generation: int | None = None) -> ChangeRequest:
    """Record a request to delete the namespace's NamespaceOffloading (Liqo then removes the remote
    namespaces and everything reflected into them)."""
    change = unoffload_change(get_namespace(namespace_name), actor, expected_generation=expected_generation)
    with transaction.atomic():
        return save_and_enqueue(change, actor)


def reapply(change_id: int, actor: Actor) -> ChangeRequest:
    """Resolve a change that ended in conflict by asking for it again, this time based on what the
    snapshot holds now (the requester has seen both versions and chose theirs)."""
    change = ChangeRequest.objects.filter(pk=change_id).first()
    if change is None or change.state != ChangeState.CONFLICT:
        raise ChangeRejected({"change": ["only a change in conflict can be applied again"]})
    namespace = get_namespace(change.namespace)
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
