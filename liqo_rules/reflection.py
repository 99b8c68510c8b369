"""Liqo resource-reflection decisions and anti-affinity presets (liqo-semantics.md section f)."""

from __future__ import annotations

import copy
from dataclasses import dataclass
from typing import Any

from liqo_rules import constants as c

__all__ = [
    "ALLOW_LIST",
    "CUSTOMIZABLE_KINDS",
    "CUSTOM_LIQO_KINDS",
    "DEFAULT_WORKERS",
    "DENY_LIST",
    "REFLECTION_POLICIES",
    "ReflectionDecision",
    "ReflectionError",
    "anti_affinity_labels",
    "event_is_reflected",
    "reflection_decision",
    "remote_affinity",
    "should_reflect",
    "validate_reflection_policy",
]

DENY_LIST = "DenyList"
ALLOW_LIST = "AllowList"
REFLECTION_POLICIES = (DENY_LIST, ALLOW_LIST)
ROOT_CA_CONFIGMAP = "kube-root-ca.crt"
SERVICE_NAME_LABEL = "kubernetes.io/service-name"

# Kinds whose policy is set with Helm offloading.reflection.<res>.type.
CUSTOMIZABLE_KINDS = ("service", "ingress", "configmap", "secret", "event")
# Kinds that follow Liqo's own logic and cannot be customised.
CUSTOM_LIQO_KINDS = ("pod", "serviceaccount", "persistentvolumeclaim")
DEFAULT_WORKERS = {
    "pod": 10,
    "service": 3,
    "endpointslice": 10,
    "ingress": 3,
    "configmap": 3,
    "secret": 3,
    "serviceaccount": 3,
    "persistentvolumeclaim": 3,
    "event": 3,
}
EVENT_REFLECTED_KINDS = (
    "pod",
    "service",
    "endpointslice",
    "ingress",
    "configmap",
    "secret",
    "persistentvolumeclaim",
)
_ALIASES = {
    "pods": "pod",
    "services": "service",
    "svc": "service",
    "endpointslices": "endpointslice",
    "ingresses": "ingress",
    "configmaps": "configmap",
    "cm": "configmap",
    "secrets": "secret",
    "events": "event",
    "serviceaccounts": "serviceaccount",
    "sa": "serviceaccount",
    "persistentvolumeclaims": "persistentvolumeclaim",
    "pvc": "persistentvolumeclaim",
    "pvcs": "persistentvolumeclaim",
}
ANTI_AFFINITY_PRESETS = ("propagate", "soft", "hard")
ANTI_AFFINITY_DROPPED_LABELS = (
    "controller-revision-hash",
    "pod-template-hash",
    "statefulset.kubernetes.io/pod-name",
)
HOSTNAME_TOPOLOGY_KEY = "kubernetes.io/hostname"


class ReflectionError(ValueError):
    """A reflection configuration or object that Liqo rejects (invalid policy, both annotations set)."""


@dataclass(frozen=True)
class ReflectionDecision:
    """Whether Liqo reflects an object, and a human reason; error is set when Liqo reports one."""

    reflected: bool
    reason: str
    error: str | None = None


def _kind(kind: str) -> str:
    k = kind.strip().lower()
    return _ALIASES.get(k, k)


def _is_false(value: str) -> bool:
    """Go strings.EqualFold(value, "false")."""
    return value.casefold() == "false"


def validate_reflection_policy(kind: str, policy: str) -> None:
    """Raise ReflectionError with the virtual kubelet's message when policy is not DenyList/AllowList."""
    if policy not in REFLECTION_POLICIES:
        raise ReflectionError(
            f'reflection type "{policy}" is not valid for resource {_kind(kind)}. '
            'Ammitted values: "DenyList", "AllowList"'
        )


def _policy_decision(policy: str, annotations: dict[str, str], subject: str) -> ReflectionDecision:
    if policy == ALLOW_LIST:
        if c.ALLOW_REFLECTION_ANNOTATION not in annotations:
            return ReflectionDecision(False, f"AllowList policy and {subject} has no {c.ALLOW_REFLECTION_ANNOTATION}")
        if _is_false(annotations[c.ALLOW_REFLECTION_ANNOTATION]):
            return ReflectionDecision(
                False, f"AllowList policy and {subject} has {c.ALLOW_REFLECTION_ANNOTATION}=false"
            )
        return ReflectionDecision(True, f"AllowList policy and {subject} has {c.ALLOW_REFLECTION_ANNOTATION}")
    if c.SKIP_REFLECTION_ANNOTATION not in annotations:
        return ReflectionDecision(True, f"DenyList policy and {subject} has no {c.SKIP_REFLECTION_ANNOTATION}")
    if _is_false(annotations[c.SKIP_REFLECTION_ANNOTATION]):
        return ReflectionDecision(True, f"DenyList policy and {subject} has {c.SKIP_REFLECTION_ANNOTATION}=false")
    return ReflectionDecision(False, f"DenyList policy and {subject} has {c.SKIP_REFLECTION_ANNOTATION}")


def _forced(annotations: dict[str, str], name: str) -> ReflectionDecision | None:
    allow = c.ALLOW_REFLECTION_ANNOTATION in annotations and not _is_false(annotations[c.ALLOW_REFLECTION_ANNOTATION])
    skip = c.SKIP_REFLECTION_ANNOTATION in annotations and not _is_false(annotations[c.SKIP_REFLECTION_ANNOTATION])
    if allow and skip:
        msg = f'object "{name}" can\'t have both the allow and deny annotations set'
        return ReflectionDecision(False, msg, msg)
    if allow:
        return ReflectionDecision(True, f"explicitly annotated with {c.ALLOW_REFLECTION_ANNOTATION}")
    if skip:
        return ReflectionDecision(False, f"explicitly annotated with {c.SKIP_REFLECTION_ANNOTATION}")
    return None


def reflection_decision(
    kind: str,
    annotations: dict[str, str] | None,
    policy: str = DENY_LIST,
    *,
    name: str = "",
    labels: dict[str, str] | None = None,
    service_annotations: dict[str, str] | None = None,
) -> ReflectionDecision:
    """Whether Liqo reflects an object of `kind` with these annotations under the per-kind `policy`.

    For endpointslices `policy` is the Service reflector's; pass the owning Service's annotations
    (found through kubernetes.io/service-name) as service_annotations, or None when it is not known.
    `name` is "<namespace>/<name>" and matters for configmap kube-root-ca.crt and error messages.
    """
    k = _kind(kind)
    ann = dict(annotations or {})
    if k in CUSTOM_LIQO_KINDS:
        return ReflectionDecision(True, f"{k}s follow Liqo's own reflection logic; the policy does not apply")
    if k == "persistentvolume":
        return ReflectionDecision(
            False, "persistentvolumes are only reflected back for PVCs bound through Liqo storage"
        )
    validate_reflection_policy(k, policy)
    if k == "endpointslice":
        forced = _forced(ann, name)
        if forced is not None:
            return forced
        if (labels or {}).get(SERVICE_NAME_LABEL) is not None and service_annotations is not None:
            inner = _policy_decision(policy, dict(service_annotations), "its Service")
            return ReflectionDecision(inner.reflected, inner.reason + " (inherited by the endpointslice)")
        return _policy_decision(policy, ann, "the endpointslice")
    if k == "configmap" and name.rsplit("/", 1)[-1] == ROOT_CA_CONFIGMAP:
        forced = _forced(ann, name)
        if forced is not None:
            return forced
        return ReflectionDecision(True, f"{ROOT_CA_CONFIGMAP} is always reflected unless explicitly annotated")
    if k == "event":
        inner = _policy_decision(policy, ann, "the remote event")
        return ReflectionDecision(inner.reflected, inner.reason + " (events are reflected remote to local only)")
    if k not in CUSTOMIZABLE_KINDS:
        return ReflectionDecision(False, f"Liqo does not reflect {k} resources")
    return _policy_decision(policy, ann, f"the {k}")


def should_reflect(kind: str, annotations: dict[str, str] | None, policy: str = DENY_LIST) -> bool:
    """Shortcut for reflection_decision(...).reflected."""
    return reflection_decision(kind, annotations, policy).reflected


def event_is_reflected(involved_kind: str, namespace_offloaded: bool) -> bool:
    """Whether a remote event is reflected to the local cluster (offloaded namespace, supported kind)."""
    return namespace_offloaded and _kind(involved_kind) in EVENT_REFLECTED_KINDS


def anti_affinity_labels(
    pod_labels: dict[str, str] | None,
    virtual_node_name: str,
    annotations: dict[str, str] | None = None,
    labels_not_reflected: list[str] | None = None,
) -> dict[str, str]:
    """The matchLabels L that the soft/hard presets use for the remote pod (f.2 steps 1-6)."""
    labels = dict(pod_labels or {})
    labels.pop(c.SHADOW_POD_LABEL, None)
    labels[c.LOCAL_POD_NODE_NAME_LABEL] = virtual_node_name
    for key in labels_not_reflected or []:
        labels.pop(key, None)
    whitelist = (annotations or {}).get(c.ANTI_AFFINITY_LABELS_ANNOTATION, "")
    if whitelist:
        keep = set(whitelist.split(","))
        return {k: v for k, v in labels.items() if k in keep}
    return {k: v for k, v in labels.items() if k not in ANTI_AFFINITY_DROPPED_LABELS}


def remote_affinity(
    pod: dict[str, Any],
    virtual_node_name: str,
    labels_not_reflected: list[str] | None = None,
    patch_affinity: dict[str, Any] | None = None,
) -> dict[str, Any] | None:
    """The affinity of the remote pod Liqo forges for a local pod (f.2); None when it has none.

    The local affinity is never copied; `patch_affinity` is the VirtualNode offloadingPatch affinity,
    which a preset overwrites (propagate only when the local pod has a podAntiAffinity).
    """
    meta = pod.get("metadata") or {}
    annotations = meta.get("annotations") or {}
    preset = annotations.get(c.ANTI_AFFINITY_PRESET_ANNOTATION)
    result = copy.deepcopy(patch_affinity) if patch_affinity else None
    if preset == "propagate":
        local = ((pod.get("spec") or {}).get("affinity") or {}).get("podAntiAffinity")
        if local is not None:
            result = {"podAntiAffinity": copy.deepcopy(local)}
    elif preset in ("soft", "hard"):
        selected = anti_affinity_labels(meta.get("labels"), virtual_node_name, annotations, labels_not_reflected)
        term = {"labelSelector": {"matchLabels": selected}, "topologyKey": HOSTNAME_TOPOLOGY_KEY}
        if preset == "soft":
            result = {
                "podAntiAffinity": {
                    "preferredDuringSchedulingIgnoredDuringExecution": [{"weight": 1, "podAffinityTerm": term}]
                }
            }
        else:
            result = {"podAntiAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": [term]}}
    return result
