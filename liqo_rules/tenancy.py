"""Resource slices, quotas and cordons: whether a peer takes new pods (liqo-semantics.md j.2).

* A ``ResourceSlice`` (authentication.liqo.io/v1beta1) asks a provider for resources. Its conditions
  ``Authentication`` and ``Resources`` are ``Accepted`` or ``Denied`` with a reason; ``liqoctl info peer``
  calls a slice accepted when it has conditions and every one is Accepted, and lists the messages of the
  others as alerts. A slice labelled ``liqo.io/replicated=true`` was replicated here by a consumer: this
  cluster is *providing*; otherwise this cluster is *consuming*.
* A ``Tenant`` (authentication.liqo.io/v1beta1) is a consumer of this cluster; ``spec.tenantCondition`` is
  ``Active`` (the default), ``Cordoned`` (its slices are annotated ``liqo.io/cordon-tenant``, new slices
  denied, existing resources kept) or ``Drained`` (its slices' resources denied).
* A ``Quota`` (offloading.liqo.io/v1beta1) is created per consumer user from an accepted slice: its
  ``resources``, ``limitsEnforcement`` (Hard / Soft / None) and ``cordoned`` (set when the slice carries
  ``liqo.io/cordon`` or ``liqo.io/cordon-tenant`` with a value other than false/False/0). Liqo's ShadowPod
  webhook on the provider refuses every new pod of a cordoned user (``user is cordoned``) and any pod
  beyond the quota; the consumer sees the refusal as a ``FailedReflection`` Warning on its pod.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass
from decimal import Decimal
from typing import Any

AUTH_GROUP = "authentication.liqo.io"
OFFLOADING_GROUP = "offloading.liqo.io"
VERSION = "v1beta1"
RESOURCE_SLICES = "resourceslices"
TENANTS = "tenants"
QUOTAS = "quotas"

CORDON_ANNOTATION = "liqo.io/cordon"
CORDON_TENANT_ANNOTATION = "liqo.io/cordon-tenant"
REPLICATED_LABEL = "liqo.io/replicated"
REMOTE_CLUSTER_ID_LABEL = "liqo.io/remote-cluster-id"

CONDITION_AUTHENTICATION = "Authentication"
CONDITION_RESOURCES = "Resources"
ACCEPTED = "Accepted"
DENIED = "Denied"

TENANT_ACTIVE = "Active"
TENANT_CORDONED = "Cordoned"
TENANT_DRAINED = "Drained"
TENANT_CONDITIONS = (TENANT_ACTIVE, TENANT_CORDONED, TENANT_DRAINED)

HARD = "Hard"
SOFT = "Soft"
NONE = "None"
ENFORCEMENTS = (HARD, SOFT, NONE)

CONSUMING = "Consuming"
PROVIDING = "Providing"

USER_CORDONED = "user is cordoned"
QUOTA_EXCEEDED = "quota usage exceeded"
FAILED_REFLECTION = "FailedReflection"


def _false(value: str) -> bool:
    return value in ("false", "False", "0")


def cordoned_by_annotations(annotations: Mapping[str, str]) -> bool:
    """Whether a slice's annotations cordon it (the quota creator's rule)."""
    return any(
        key in annotations and not _false(annotations[key]) for key in (CORDON_ANNOTATION, CORDON_TENANT_ANNOTATION)
    )


@dataclass(frozen=True)
class Slice:
    name: str
    cluster_id: str
    action: str  # Consuming | Providing
    accepted: bool
    authentication: str  # Accepted | Denied | "" (not yet)
    resources_status: str  # Accepted | Denied | ""
    alerts: tuple[str, ...]
    reason: str  # the reason of the first condition that is not Accepted
    cordoned: bool
    resources: dict[str, str]


def _condition(conditions: Iterable[Mapping[str, Any]], kind: str) -> str:
    for condition in conditions:
        if condition.get("type") == kind:
            return str(condition.get("status") or "")
    return ""


def read_slice(obj: Mapping[str, Any]) -> Slice:
    """A ResourceSlice as liqoctl info peer reads it."""
    meta, spec, status = (obj.get(key) or {} for key in ("metadata", "spec", "status"))
    labels, annotations = meta.get("labels") or {}, meta.get("annotations") or {}
    conditions = list(status.get("conditions") or [])
    refused = [c for c in conditions if c.get("status") != ACCEPTED]
    providing = str(labels.get(REPLICATED_LABEL, "")).lower() == "true"
    peer = spec.get("consumerClusterID") if providing else spec.get("providerClusterID")
    return Slice(
        name=str(meta.get("name") or ""),
        cluster_id=str(labels.get(REMOTE_CLUSTER_ID_LABEL) or peer or ""),
        action=PROVIDING if providing else CONSUMING,
        accepted=bool(conditions) and not refused,
        authentication=_condition(conditions, CONDITION_AUTHENTICATION),
        resources_status=_condition(conditions, CONDITION_RESOURCES),
        alerts=tuple(str(c.get("message") or "") for c in refused),
        reason=str(refused[0].get("reason") or "") if refused else "",
        cordoned=cordoned_by_annotations(annotations),
        resources={str(k): str(v) for k, v in (status.get("resources") or {}).items()},
    )


def tenant_condition(obj: Mapping[str, Any]) -> str:
    """A Tenant's condition (the CRD default Active when unset)."""
    return str((obj.get("spec") or {}).get("tenantCondition") or TENANT_ACTIVE)


@dataclass(frozen=True)
class Quota:
    name: str
    user: str
    enforcement: str  # as written; "" behaves as Soft in the webhook
    cordoned: bool
    resources: dict[str, str]


def read_quota(obj: Mapping[str, Any]) -> Quota:
    meta, spec = obj.get("metadata") or {}, obj.get("spec") or {}
    return Quota(
        name=str(meta.get("name") or ""),
        user=str(spec.get("user") or ""),
        enforcement=str(spec.get("limitsEnforcement") or ""),
        cordoned=spec.get("cordoned") is True,
        resources={str(k): str(v) for k, v in (spec.get("resources") or {}).items()},
    )


def shadow_pod_denial(
    quota: Quota, free: Mapping[str, Decimal], pod: Mapping[str, Any], quantity: Callable[[Any], Decimal]
) -> str:
    """Why Liqo's ShadowPod webhook on the provider refuses ``pod`` ("" when it admits it): the user is
    cordoned; with Hard enforcement a container whose request differs from its limit; unless None, a
    container without CPU or memory requests; then any resource asked beyond the free quota (``free`` is
    the quota minus what the user's running pods ask) or missing from the quota."""
    if quota.cordoned:
        return USER_CORDONED
    spec = pod.get("spec") or {}
    asked: dict[str, Decimal] = {}
    for container in spec.get("containers") or []:
        resources = container.get("resources") or {}
        requests, limits = resources.get("requests") or {}, resources.get("limits") or {}
        for key, value in requests.items():
            asked[key] = asked.get(key, Decimal(0)) + quantity(value)
            if quota.enforcement == HARD and quantity(value) != quantity(limits.get(key)):
                return f"{key} limits and requests are not equal for container {container.get('name')}"
        if quota.enforcement != NONE and not ("cpu" in requests and "memory" in requests):
            return f"CPU and/or memory requests not set for container {container.get('name')}"
    for key in sorted(asked):
        if key not in free:
            return f"{key} quota limit not found for this peering"
        if free[key] < asked[key]:
            return f"peering {key} {QUOTA_EXCEEDED} - free {_number(free[key])} / requested {_number(asked[key])}"
    return ""


def _number(value: Decimal) -> str:
    return format(value.normalize(), "f")


@dataclass(frozen=True)
class Admission:
    """Whether a peer takes new pods of this cluster, and why not."""

    refuses: bool
    reasons: tuple[str, ...]


def refusal_of(message: str) -> str:
    """The kind of provider refusal a FailedReflection message carries: "cordoned", "quota" or ""."""
    if USER_CORDONED in message:
        return "cordoned"
    if QUOTA_EXCEEDED in message or "quota limit not found" in message:
        return "quota"
    return ""


def admission(cluster_id: str, slices: Iterable[Slice], refusals: Mapping[str, int] | None = None) -> Admission:
    """Whether ``cluster_id`` takes new pods from here: every slice this cluster consumes from it was
    denied (its reasons), or Liqo on the peer refused pods because this cluster's user is cordoned there
    or over its quota (``refusals``: count of pods per kind of refusal, from FailedReflection Events)."""
    reasons: list[str] = []
    consuming = [s for s in slices if s.action == CONSUMING and s.cluster_id == cluster_id]
    denied = [s for s in consuming if s.resources_status == DENIED or s.authentication == DENIED]
    if consuming and len(denied) == len(consuming):
        for s in denied:
            reasons.append(f"{cluster_id} denied the resources of slice {s.name}: {s.reason or 'Denied'}")
    refused = refusals or {}
    if refused.get("cordoned"):
        n = refused["cordoned"]
        reasons.append(
            f"{cluster_id} has cordoned this cluster's tenant: new pods are refused "
            f"(\u201c{USER_CORDONED}\u201d on {n} pod{'' if n == 1 else 's'})"
        )
    blocking = bool(reasons)
    if refused.get("quota"):
        n = refused["quota"]
        reasons.append(
            f"{cluster_id} refused {n} pod{'' if n == 1 else 's'} over this cluster's quota there "
            f"(\u201c{QUOTA_EXCEEDED}\u201d)"
        )
    return Admission(blocking, tuple(reasons))


def tenant_refuses(condition: str, quota: Quota | None) -> str:
    """Why this cluster refuses new pods of a consumer (its Tenant's condition, its Quota): "" if it takes them."""
    if condition == TENANT_DRAINED:
        return "drained: its resources are denied and no new pods are accepted"
    if condition == TENANT_CORDONED or (quota is not None and quota.cordoned):
        return "cordoned: its existing resources stay, new pods are refused (user is cordoned)"
    return ""
