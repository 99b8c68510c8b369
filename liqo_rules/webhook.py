"""Preview of Liqo's pod mutating webhook (pod.mutate.liqo.io), liqo-semantics.md section e."""

from __future__ import annotations

from typing import Any

from liqo_rules import constants as c
from liqo_rules.spec import json_copy

__all__ = [
    "fill_pod_node_selector",
    "MutationError",
    "imposed_node_selector",
    "merge_node_selectors",
    "mutate_pod",
    "runtime_class_notes",
    "virtual_node_toleration",
]


class MutationError(ValueError):
    """The webhook would fail (HTTP 500 "failed constructing pod mutation"), e.g. unknown strategy."""


def virtual_node_toleration() -> dict[str, str]:
    """The toleration the webhook appends: virtual-node.liqo.io/not-allowed Exists/NoExecute."""
    return dict(c.VIRTUAL_NODE_TOLERATION)


def _type_requirement(operator: str) -> dict[str, Any]:
    return {"key": c.VIRTUAL_NODE_TYPE_LABEL, "operator": operator, "values": [c.VIRTUAL_NODE_TYPE_VALUE]}


def imposed_node_selector(spec: dict[str, Any]) -> dict[str, Any] | None:
    """The NodeSelector the webhook imposes for a NamespaceOffloading spec; None when nothing is imposed.

    Remote: every term (or a single empty term) gets `liqo.io/type In (virtual-node)`.
    LocalAndRemote: no terms -> None; otherwise a `liqo.io/type NotIn (virtual-node)` term is appended.
    """
    strategy = spec.get("podOffloadingStrategy") or c.DEFAULT_POD_STRATEGY
    selector = json_copy(spec.get("clusterSelector") or {})
    terms: list[dict[str, Any]] = list(selector.get("nodeSelectorTerms") or [])
    if strategy == c.REMOTE:
        if not terms:
            terms = [{}]
        out = []
        for term in terms:
            term = dict(term)
            term["matchExpressions"] = list(term.get("matchExpressions") or []) + [_type_requirement(c.OP_IN)]
            out.append(term)
        selector["nodeSelectorTerms"] = out
        return selector
    if strategy == c.LOCAL_AND_REMOTE:
        if not terms:
            return None
        selector["nodeSelectorTerms"] = terms + [{"matchExpressions": [_type_requirement(c.OP_NOT_IN)]}]
        return selector
    if strategy == c.LOCAL:
        return None
    raise MutationError(f"unknown PodOffloadingStrategyType {strategy!r}")


def merge_node_selectors(pod_selector: dict[str, Any], imposed: dict[str, Any]) -> dict[str, Any]:
    """Liqo's MergeNodeSelector: the cross product of terms, pod expressions first; matchFields are dropped."""
    terms: list[dict[str, Any]] = []
    for a in pod_selector.get("nodeSelectorTerms") or []:
        for b in imposed.get("nodeSelectorTerms") or []:
            exprs = json_copy(list(a.get("matchExpressions") or [])) + json_copy(list(b.get("matchExpressions") or []))
            terms.append({"matchExpressions": exprs} if exprs else {})
    return {"nodeSelectorTerms": terms}


def mutate_pod(
    spec: dict[str, Any], pod: dict[str, Any], liqo_runtime_class: str = c.LIQO_RUNTIME_CLASS
) -> dict[str, Any]:
    """The pod as Liqo's mutating webhook would leave it for a NamespaceOffloading with this spec.

    Local strategy and pods with the Liqo runtime class are left unchanged. Otherwise the virtual-node
    toleration is appended (never de-duplicated) and the imposed selector is set or merged into the
    pod's required node affinity. Inputs are not modified. Raises MutationError for an unknown strategy.
    """
    out = json_copy(pod)
    strategy = spec.get("podOffloadingStrategy") or c.DEFAULT_POD_STRATEGY
    if strategy == c.LOCAL:
        return out
    pod_spec = out.setdefault("spec", {})
    if pod_spec.get("runtimeClassName") is not None and pod_spec.get("runtimeClassName") == liqo_runtime_class:
        return out
    if strategy not in (c.REMOTE, c.LOCAL_AND_REMOTE):
        raise MutationError(f"unknown PodOffloadingStrategyType {strategy!r}")
    pod_spec["tolerations"] = list(pod_spec.get("tolerations") or []) + [virtual_node_toleration()]
    imposed = imposed_node_selector(spec)
    if imposed is None:
        return out
    return _fill(imposed, out)  # both are already copies: a selector at the limits is 2,500 expressions


def fill_pod_node_selector(imposed: dict[str, Any], pod: dict[str, Any]) -> dict[str, Any]:
    """A copy of pod with the imposed selector set as, or merged into, its required node affinity.

    No affinity / no nodeAffinity / no or empty required terms -> the imposed selector is used as is
    (podAffinity, podAntiAffinity and preferred terms are kept); otherwise merge_node_selectors.
    """
    return _fill(json_copy(imposed), json_copy(pod))


def _fill(imposed: dict[str, Any], out: dict[str, Any]) -> dict[str, Any]:
    """``fill_pod_node_selector`` on copies it may keep and change: ``out`` is filled in place."""
    pod_spec = out.setdefault("spec", {})
    affinity = pod_spec.get("affinity")
    if affinity is None:
        pod_spec["affinity"] = {"nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": imposed}}
        return out
    node_affinity = affinity.get("nodeAffinity")
    if node_affinity is None:
        affinity["nodeAffinity"] = {"requiredDuringSchedulingIgnoredDuringExecution": imposed}
        return out
    required = node_affinity.get("requiredDuringSchedulingIgnoredDuringExecution")
    if required is None or not required.get("nodeSelectorTerms"):
        node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = imposed
        return out
    node_affinity["requiredDuringSchedulingIgnoredDuringExecution"] = merge_node_selectors(required, imposed)
    return out


def runtime_class_notes(configured: str, pod: dict[str, Any]) -> list[str]:
    """Warnings when Liqo's RuntimeClass is not named ``liqo`` (Helm ``offloading.runtimeClass.name``).

    The webhook skips pods whose runtimeClassName is the configured name (``--liqo-runtime-class``),
    but the virtual kubelet strips only the hard-coded ``liqo`` from the remote pod: a pod of the
    renamed class gets neither toleration nor affinity, and its remote copy asks the provider for a
    RuntimeClass of that name, which fails unless the provider has one.
    """
    if configured == c.LIQO_RUNTIME_CLASS:
        return []
    notes = [
        f'Liqo\'s RuntimeClass is named "{configured}", not "{c.LIQO_RUNTIME_CLASS}": the webhook skips pods '
        f'of class "{configured}", and the virtual kubelet removes only "{c.LIQO_RUNTIME_CLASS}" from the '
        f'remote pod, so their remote copies ask the provider for a RuntimeClass "{configured}" and fail '
        "unless it has one."
    ]
    if ((pod or {}).get("spec") or {}).get("runtimeClassName") == configured:
        notes.append(
            f'This pod uses "{configured}": it is left unmutated and, on a peer without that RuntimeClass, '
            "its remote pod is refused."
        )
    return notes
