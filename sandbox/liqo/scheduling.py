"""The scheduling predicates of the stand-in scheduler (`pods.py`): taints, the required node affinity and
room (the node's allocatable CPU and memory minus what the pods bound to it request), and the
kube-scheduler's message for a pod no node can take ("0/5 nodes are available: 4 Insufficient cpu, ...")."""

from __future__ import annotations

import functools
import re
from collections import Counter
from decimal import Decimal, InvalidOperation
from typing import Any

from liqo_rules.selectors.match import matches
from liqo_rules.selectors.requirements import SelectorError
from sandbox.objects import Obj

_BLOCKING_EFFECTS = ("NoSchedule", "NoExecute")
RESOURCES = ("cpu", "memory")
_SUFFIXES: dict[str, int | Decimal] = {
    "": 1,
    "m": Decimal("0.001"),
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)([a-zA-Z]*)$")


def quantity(text: Any) -> Decimal:
    """A Kubernetes quantity ("250m", "64Mi", "2") as a number; 0 when missing or unreadable."""
    return _quantity(str(text or "").strip())


@functools.lru_cache(maxsize=4096)  # a fleet repeats a handful of quantities over thousands of pods and nodes
def _quantity(text: str) -> Decimal:
    found = _QUANTITY.match(text)
    if not found or found.group(2) not in _SUFFIXES:
        return Decimal(0)
    try:
        return Decimal(found.group(1)) * Decimal(_SUFFIXES[found.group(2)])
    except InvalidOperation:
        return Decimal(0)


def requests(pod: Obj) -> dict[str, Decimal]:
    """What a pod's containers request, summed per resource."""
    total = dict.fromkeys(RESOURCES, Decimal(0))
    for container in (pod.get("spec") or {}).get("containers") or []:
        asked = (container.get("resources") or {}).get("requests") or {}
        for resource in RESOURCES:
            total[resource] += quantity(asked.get(resource))
    return total


def tolerates(tolerations: list[dict[str, Any]], taint: dict[str, Any]) -> bool:
    for tol in tolerations:
        if tol.get("effect") and tol.get("effect") != taint.get("effect"):
            continue
        if tol.get("operator") == "Exists":
            if not tol.get("key") or tol.get("key") == taint.get("key"):
                return True
        elif tol.get("key") == taint.get("key") and (tol.get("value") or "") == (taint.get("value") or ""):
            return True
    return False


def misfit(pod: Obj, node: Obj, used: dict[str, Decimal] | None = None) -> str | None:
    """Why ``pod`` cannot run on ``node`` in the kube-scheduler's words (None: it can). ``used`` is what the
    pods already bound there request."""
    spec = pod.get("spec") or {}
    tolerations = spec.get("tolerations") or []
    for taint in (node.get("spec") or {}).get("taints") or []:
        if taint.get("effect") in _BLOCKING_EFFECTS and not tolerates(tolerations, taint):
            return f"node(s) had untolerated taint {{{taint.get('key')}: {taint.get('value') or ''}}}"
    required = ((spec.get("affinity") or {}).get("nodeAffinity") or {}).get(
        "requiredDuringSchedulingIgnoredDuringExecution"
    )
    if required is not None:
        meta = node["metadata"]
        try:
            if not matches(required, meta.get("labels") or {}, {"metadata.name": meta["name"]}):
                return "node(s) didn't match Pod's node affinity/selector"
        except SelectorError:
            return "node(s) didn't match Pod's node affinity/selector"
    allocatable = (node.get("status") or {}).get("allocatable") or {}
    asked = requests(pod)
    for resource in RESOURCES:
        if not asked[resource] or resource not in allocatable:
            continue  # nothing asked, or a node that does not say: no limit
        if asked[resource] + (used or {}).get(resource, Decimal(0)) > quantity(allocatable[resource]):
            return f"Insufficient {resource}"
    return None


def unschedulable_message(reasons: list[str]) -> str:
    """The message of the PodScheduled=False condition: one count per reason, as kube-scheduler words it."""
    counts = Counter(reasons)
    parts = ", ".join(f"{count} {reason}" for reason, count in sorted(counts.items()))
    return f"0/{len(reasons)} nodes are available: {parts}."
