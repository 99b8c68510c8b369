"""What Liqo reflects of one namespace, object by object, and what its pods reference that will not be
reflected (liqo-semantics.md section f.1; the per-object rule is ``reflection.reflection_decision``).

Pure: the caller passes the objects (ConfigMaps, Secrets, Services, ServiceAccounts, Pods as dicts) and
the reflection configuration of the virtual kubelets (``ReflectionConfig``).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from liqo_rules import reflection as r

__all__ = [
    "ObjectVerdict",
    "Reference",
    "ReflectionConfig",
    "ReferenceWarning",
    "parse_policies",
    "plural",
    "pod_references",
    "reference_warnings",
    "verdict",
]

SA_TOKEN_TYPE = "kubernetes.io/service-account-token"
DEFAULT_SERVICE_ACCOUNT = "default"


@dataclass(frozen=True)
class ReflectionConfig:
    """The virtual kubelets' settings: the policy per customizable kind (Helm
    ``offloading.reflection.<kind>.type``), the kinds whose reflector has 0 workers, and whether the
    API server support (``--enable-apiserver-support``, service-account tokens) is on."""

    policies: dict[str, str] = field(default_factory=dict)
    disabled: frozenset[str] = frozenset()
    apiserver_support: bool = True

    def policy(self, kind: str) -> str:
        if kind in r.CUSTOM_LIQO_KINDS:
            return "CustomLiqo"
        return self.policies.get(kind, r.DENY_LIST)


def plural(kind: str) -> str:
    """configmap -> configmaps, ingress -> ingresses, networkpolicy -> networkpolicies."""
    if kind.endswith("y"):
        return kind[:-1] + "ies"
    return kind + ("es" if kind.endswith("s") else "s")


def parse_policies(text: str) -> dict[str, str]:
    """``"secret=AllowList, configmap=DenyList"`` as a dict; ReflectionError names a wrong entry."""
    policies: dict[str, str] = {}
    for item in filter(None, (part.strip() for part in text.split(","))):
        kind, sep, policy = item.partition("=")
        kind = kind.strip().lower()
        if not sep or kind not in r.CUSTOMIZABLE_KINDS:
            kinds = ", ".join(r.CUSTOMIZABLE_KINDS)
            raise r.ReflectionError(f"{item!r}: expected <kind>=<policy>, the kind one of {kinds}")
        r.validate_reflection_policy(kind, policy.strip())
        policies[kind] = policy.strip()
    return policies


@dataclass(frozen=True)
class ObjectVerdict:
    kind: str
    name: str
    reflected: bool
    reason: str
    error: str | None = None


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def verdict(kind: str, obj: dict[str, Any], config: ReflectionConfig) -> ObjectVerdict:
    """Whether Liqo reflects ``obj`` (a ``kind`` in singular form) into the twin namespaces, and why."""
    meta = _meta(obj)
    name = str(meta.get("name") or "")
    if kind in config.disabled:
        return ObjectVerdict(kind, name, False, f"the {kind} reflector is disabled (0 workers)")
    if kind == "secret" and obj.get("type") == SA_TOKEN_TYPE and not config.apiserver_support:
        return ObjectVerdict(kind, name, False, "a service-account token secret, and API server support is disabled")
    if kind == "serviceaccount" and not config.apiserver_support:
        return ObjectVerdict(kind, name, False, "API server support is disabled: no token reaches the peers")
    try:
        decision = r.reflection_decision(
            kind,
            meta.get("annotations") or {},
            config.policy(kind) if kind in r.CUSTOMIZABLE_KINDS else r.DENY_LIST,
            name=f"{meta.get('namespace', '')}/{name}",
        )
    except r.ReflectionError as exc:
        return ObjectVerdict(kind, name, False, str(exc), str(exc))
    return ObjectVerdict(kind, name, decision.reflected, decision.reason, decision.error)


@dataclass(frozen=True)
class Reference:
    """A pod's use of another object: ``how`` is e.g. "volume config", "envFrom", "env DB_URL"."""

    pod: str
    kind: str
    name: str
    how: str
    optional: bool = False


def _containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    return list(spec.get("initContainers") or []) + list(spec.get("containers") or [])


def _volume_references(pod: str, spec: dict[str, Any]) -> list[Reference]:
    found: list[Reference] = []
    for volume in spec.get("volumes") or []:
        label = f"volume {volume.get('name', '')}"
        if volume.get("configMap"):
            source = volume["configMap"]
            found.append(Reference(pod, "configmap", source.get("name", ""), label, bool(source.get("optional"))))
        if volume.get("secret"):
            source = volume["secret"]
            found.append(Reference(pod, "secret", source.get("secretName", ""), label, bool(source.get("optional"))))
        for projected in (volume.get("projected") or {}).get("sources") or []:
            for key, kind in (("configMap", "configmap"), ("secret", "secret")):
                if projected.get(key):
                    source = projected[key]
                    found.append(Reference(pod, kind, source.get("name", ""), label, bool(source.get("optional"))))
    return found


def _env_references(pod: str, spec: dict[str, Any]) -> list[Reference]:
    found: list[Reference] = []
    for container in _containers(spec):
        for source in container.get("envFrom") or []:
            for key, kind in (("configMapRef", "configmap"), ("secretRef", "secret")):
                if source.get(key):
                    ref = source[key]
                    found.append(Reference(pod, kind, ref.get("name", ""), "envFrom", bool(ref.get("optional"))))
        for env in container.get("env") or []:
            value_from = env.get("valueFrom") or {}
            for key, kind in (("configMapKeyRef", "configmap"), ("secretKeyRef", "secret")):
                if value_from.get(key):
                    ref = value_from[key]
                    how = f"env {env.get('name', '')}"
                    found.append(Reference(pod, kind, ref.get("name", ""), how, bool(ref.get("optional"))))
    return found


def pod_references(pod: dict[str, Any]) -> list[Reference]:
    """Every ConfigMap, Secret and ServiceAccount ``pod`` uses: volumes (also projected), ``envFrom``,
    ``env[].valueFrom``, ``imagePullSecrets`` and its service account."""
    name = str(_meta(pod).get("name") or "")
    spec = pod.get("spec") or {}
    found = _volume_references(name, spec) + _env_references(name, spec)
    for secret in spec.get("imagePullSecrets") or []:
        found.append(Reference(name, "secret", secret.get("name", ""), "imagePullSecrets"))
    account = spec.get("serviceAccountName") or spec.get("serviceAccount") or DEFAULT_SERVICE_ACCOUNT
    found.append(Reference(name, "serviceaccount", account, "serviceAccountName"))
    return [ref for ref in found if ref.name]


@dataclass(frozen=True)
class ReferenceWarning:
    reference: Reference
    problem: str  # "not reflected" or "missing"
    reason: str


def reference_warnings(
    pods: list[dict[str, Any]], verdicts: dict[tuple[str, str], ObjectVerdict], known_kinds: set[str]
) -> list[ReferenceWarning]:
    """The references of ``pods`` to objects Liqo will not reflect (``verdicts`` by (kind, name)), or
    that do not exist (only for ``known_kinds``: kinds that could be read; a missing optional reference
    or service account is no warning)."""
    # One warning per pod and object; optional only when every use of it by that pod is optional.
    uses: dict[tuple[str, str, str], Reference] = {}
    for pod in pods:
        for ref in pod_references(pod):
            key = (ref.pod, ref.kind, ref.name)
            first = uses.get(key)
            if first is None or (first.optional and not ref.optional):
                uses[key] = ref
    warnings: list[ReferenceWarning] = []
    for ref in uses.values():
        if ref.kind not in known_kinds:
            continue
        found = verdicts.get((ref.kind, ref.name))
        if found is None:
            # A missing service account is refused by the API server's admission: not our concern.
            if not ref.optional and ref.kind != "serviceaccount":
                warnings.append(ReferenceWarning(ref, "missing", f"no {ref.kind} {ref.name} in the namespace"))
        elif not found.reflected:
            warnings.append(ReferenceWarning(ref, "not reflected", found.reason))
    return warnings
