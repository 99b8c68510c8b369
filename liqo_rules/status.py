"""NamespaceOffloading status: phase algorithm, remote namespace conditions, per-cluster table (a.3, a.4)."""

from __future__ import annotations

import copy
from collections.abc import Container
from typing import Any

from liqo_rules import constants as c
from liqo_rules.mapping import stale_ready_message, stale_ready_reason
from liqo_rules.spec import remote_namespace_name


def phase_is_settled(phase: str) -> bool:
    """Whether Liqo has finished converging for now (nothing changes until the spec or the fleet does)."""
    return phase in (c.PHASE_READY, c.PHASE_NO_CLUSTER_SELECTED, c.PHASE_SOME_FAILED, c.PHASE_ALL_FAILED)


def offloading_phase(*, deleting: bool, required: int, ready: int, failed: int) -> str:
    """status.offloadingPhase from the controller's counters (a.4); first matching rule wins."""
    if deleting:
        return c.PHASE_TERMINATING
    if required == 0:
        return c.PHASE_NO_CLUSTER_SELECTED
    if ready == required:
        return c.PHASE_READY
    if failed == required:
        return c.PHASE_ALL_FAILED
    if failed > 0:
        return c.PHASE_SOME_FAILED
    return c.PHASE_IN_PROGRESS


def phase_from_namespace_maps(namespace: str, namespace_maps: list[dict[str, Any]], *, deleting: bool) -> str:
    """offloading_phase computed from NamespaceMap objects (desiredMapping / currentMapping) like the controller."""
    required = ready = failed = 0
    for nm in namespace_maps:
        if namespace in ((nm.get("spec") or {}).get("desiredMapping") or {}):
            required += 1
        phase = (((nm.get("status") or {}).get("currentMapping") or {}).get(namespace) or {}).get("phase")
        if phase == c.MAPPING_ACCEPTED:
            ready += 1
        elif phase == c.MAPPING_CREATION_LOOP_BACKOFF:
            failed += 1
    return offloading_phase(deleting=deleting, required=required, ready=ready, failed=failed)


def _required_condition(required: bool, now: str) -> dict[str, Any]:
    if required:
        status, reason, message = "True", c.REASON_CLUSTER_SELECTED, c.MESSAGE_CLUSTER_SELECTED
    else:
        status, reason, message = "False", c.REASON_CLUSTER_NOT_SELECTED, c.MESSAGE_CLUSTER_NOT_SELECTED
    return {
        "type": c.CONDITION_OFFLOADING_REQUIRED,
        "status": status,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }


def _ready_condition(phase: str | None, now: str) -> dict[str, Any]:
    status, reason, message = {
        c.MAPPING_ACCEPTED: ("True", c.REASON_NAMESPACE_CREATED, c.MESSAGE_NAMESPACE_CREATED),
        c.MAPPING_CREATION_LOOP_BACKOFF: (
            "False",
            c.REASON_CREATION_LOOP_BACKOFF,
            c.MESSAGE_CREATION_LOOP_BACKOFF,
        ),
        c.MAPPING_TERMINATING: ("False", c.REASON_TERMINATING, c.MESSAGE_TERMINATING),
    }.get(phase or "", ("False", c.REASON_CREATING, c.MESSAGE_CREATING))
    return {
        "type": c.CONDITION_READY,
        "status": status,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }


def _set_condition(conditions: list[dict[str, Any]], new: dict[str, Any]) -> None:
    for i, cond in enumerate(conditions):
        if cond.get("type") == new["type"]:
            if cond.get("status") == new["status"] and cond.get("reason") == new["reason"]:
                return
            conditions[i] = new
            return
    conditions.append(new)


def condition_list(
    existing: list[dict[str, Any]] | None,
    *,
    required: bool,
    mapping_phase: str | None,
    now: str,
    deleting: bool = False,
) -> list[dict[str, Any]]:
    """The RemoteNamespaceConditions of one NamespaceMap after a reconcile (a.3 rules 1-5).

    OffloadingRequired is always set; Ready only when required or a mapping phase exists; a condition
    whose status and reason are unchanged is kept as is (with its lastTransitionTime). With
    deleting=True, a cluster neither required nor mapped gets [] (its entry is removed).
    """
    if deleting and not required and not mapping_phase:
        return []
    conditions = copy.deepcopy(list(existing or []))
    _set_condition(conditions, _required_condition(required, now))
    if required or mapping_phase:
        _set_condition(conditions, _ready_condition(mapping_phase, now))
    return conditions


def compute_status(
    namespace: str,
    obj: dict[str, Any],
    namespace_maps: list[dict[str, Any]],
    *,
    local_cluster_id: str,
    now: str,
) -> dict[str, Any]:
    """The status the controller writes for a NamespaceOffloading given the local NamespaceMaps (a.3, a.4).

    `obj` is the NamespaceOffloading (metadata.generation / deletionTimestamp, spec, previous status);
    each NamespaceMap is named after its cluster id and carries spec.desiredMapping and
    status.currentMapping. Conditions of vanished NamespaceMaps are dropped; unchanged ones keep their time.
    """
    meta = obj.get("metadata") or {}
    old = obj.get("status") or {}  # read only: condition_list copies the lists it keeps
    deleting = bool(meta.get("deletionTimestamp"))
    names = {(nm.get("metadata") or {}).get("name") for nm in namespace_maps}
    conditions = {k: v for k, v in (old.get("remoteNamespacesConditions") or {}).items() if k in names}
    for nm in namespace_maps:
        name = (nm.get("metadata") or {}).get("name")
        requested = namespace in ((nm.get("spec") or {}).get("desiredMapping") or {})
        phase = (((nm.get("status") or {}).get("currentMapping") or {}).get(namespace) or {}).get("phase") or None
        new = condition_list(conditions.get(name), required=requested, mapping_phase=phase, now=now, deleting=deleting)
        if new:
            conditions[name] = new
        else:
            conditions.pop(name, None)
    status: dict[str, Any] = {
        "remoteNamespaceName": remote_namespace_name(namespace, local_cluster_id, obj.get("spec") or {}),
        "offloadingPhase": phase_from_namespace_maps(namespace, namespace_maps, deleting=deleting),
    }
    if conditions:
        status["remoteNamespacesConditions"] = conditions
    if meta.get("generation"):
        status["observedGeneration"] = meta["generation"]
    return status


def _find(conditions: list[dict[str, Any]], ctype: str) -> dict[str, Any] | None:
    for cond in conditions or []:
        if isinstance(cond, dict) and cond.get("type") == ctype:
            return cond
    return None


def cluster_status_table(obj: dict[str, Any], mapped: Container[str] | None = None) -> list[dict[str, Any]]:
    """Per-cluster rows from a NamespaceOffloading object, sorted by cluster id.

    Rows: cluster_id, selected, remote_namespace, state (Ready reason or "NotSelected"), reason, message,
    last_transition, stale (status.observedGeneration != metadata.generation), stale_ready (the reason
    of a Ready condition Liqo left behind on a cluster it no longer selects: the row says NotSelected).
    ``mapped``: the clusters whose NamespaceMap still has a currentMapping entry for the namespace
    (None: not known); a not-selected cluster among them is really being torn down.
    """
    meta = obj.get("metadata") or {}
    deleting = bool(meta.get("deletionTimestamp"))
    status = obj.get("status") or {}
    stale = status.get("observedGeneration") != meta.get("generation")
    remote = status.get("remoteNamespaceName") or ""
    rows = []
    for cluster_id, conditions in sorted((status.get("remoteNamespacesConditions") or {}).items()):
        conditions = conditions or []
        req = _find(conditions, c.CONDITION_OFFLOADING_REQUIRED)
        ready = _find(conditions, c.CONDITION_READY)
        selected = bool(req and req.get("status") == "True")
        leftover = stale_ready_reason(
            conditions, deleting=deleting, mapped=None if mapped is None else cluster_id in mapped
        )
        if leftover:
            state, shown = "NotSelected", {**(req or {}), "message": stale_ready_message(leftover)}
        elif ready is not None:
            state = ready.get("reason") or ("Ready" if ready.get("status") == "True" else "Unknown")
            shown = ready
        else:
            state = "NotSelected" if not selected else "Unknown"
            shown = req or {}
        rows.append(
            {
                "cluster_id": cluster_id,
                "selected": selected,
                "remote_namespace": remote,
                "state": state,
                "reason": shown.get("reason"),
                "message": shown.get("message"),
                "last_transition": shown.get("lastTransitionTime"),
                "stale": stale,
                "stale_ready": leftover,
            }
        )
    return rows
