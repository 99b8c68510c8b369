"""The namespace page's reflection section: which kinds Liqo reflects into the twin namespaces and how,
which objects of the namespace it leaves out and why, and what pods reference that will not be there.

The objects are read **live** when the section is asked for (it loads after the page), not watched:
one bounded LIST per kind (``READ_LIMIT`` objects, ``READ_TIMEOUT`` s each), as the signed-in user when
impersonation is on, so the cluster decides who may see the names of a namespace's secrets. A kind
that cannot be read says so; after an API server that does not answer, the other kinds are not tried.
Secrets are kept only for their name, type and annotations. The rules are ``liqo_rules``'s.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from django.conf import settings

from liqo_rules import reflection as liqo_reflection
from liqo_rules.reflectobjects import (
    ObjectVerdict,
    ReferenceWarning,
    ReflectionConfig,
    parse_policies,
    plural,
    reference_warnings,
    verdict,
)
from offloading.cluster import kube
from offloading.cluster.errors import KubeError

# How Liqo reflects each kind into the remote (twin) namespaces, in words (seed: Liqo's reflection page).
KIND_NOTES: dict[str, str] = {
    "pod": "offloaded verbatim through a ShadowPod, without local scheduling constraints and host namespaces",
    "service": "verbatim, with ClusterIP, LoadBalancerIP and NodePort left to the remote cluster",
    "endpointslice": "every local endpoint, remapped by the network fabric (policy inherited from the Service)",
    "ingress": "verbatim, without the IngressClassName",
    "configmap": "verbatim; kube-root-ca.crt always, whatever the policy, unless explicitly annotated",
    "secret": "verbatim; service-account token secrets only with API server support",
    "serviceaccount": "their tokens, so offloaded pods can reach the local API server",
    "persistentvolumeclaim": "only claims of the Liqo storage class, bound for a pod on a virtual node",
    "event": "remote to local only, for pods, services, endpointslices, ingresses, configmaps, secrets and PVCs",
}

READ_LIMIT = 500
READ_TIMEOUT = 3.0
# The kinds read, (plural for the API, singular for Liqo's rules); pods last: their references.
READ_KINDS = (
    ("configmaps", "configmap"),
    ("secrets", "secret"),
    ("services", "service"),
    ("serviceaccounts", "serviceaccount"),
    ("pods", "pod"),
)
# Kinds Liqo has no reflector for (their objects stay local; controllers' pods are offloaded).
NEVER_REFLECTED = ("deployment", "statefulset", "job", "role", "networkpolicy", "resourcequota", "limitrange")


@dataclass
class KindRow:
    kind: str
    policy: str
    how: str
    total: int = 0
    excluded: list[ObjectVerdict] = field(default_factory=list)
    truncated: bool = False
    error: str = ""  # the kind could not be read: why
    read: bool = False  # whether it was read at all (counts only make sense then)

    @property
    def label(self) -> str:
        return plural(self.kind)

    @property
    def reflected(self) -> int:
        return self.total - len(self.excluded)


@dataclass
class ReflectionReport:
    rows: list[KindRow]
    warnings: list[ReferenceWarning]
    never: list[tuple[str, str]]  # (kind, Liqo's reason)
    other_kinds: list[tuple[str, str, str]]  # (kind, policy, how) for kinds not read
    config_error: str = ""
    pods: int = 0
    unreachable: str = ""  # the API server did not answer: why (the kinds say only "could not read")


def configured() -> tuple[ReflectionConfig, str]:
    """The virtual kubelets' reflection settings from LIQO_DASH (defaults: DenyList everywhere, every
    reflector on, API server support on), and an error message when the settings are wrong."""
    opts = settings.LIQO_DASH
    disabled = {kind.strip().lower() for kind in opts.get("REFLECTION_DISABLED") or [] if kind.strip()}
    unknown = sorted(disabled - set(liqo_reflection.DEFAULT_WORKERS))
    try:
        policies = parse_policies(opts.get("REFLECTION_POLICIES") or "")
    except liqo_reflection.ReflectionError as exc:
        return ReflectionConfig(), f"LIQO_DASH_REFLECTION_POLICIES: {exc} (showing Liqo's defaults)"
    config = ReflectionConfig(policies, frozenset(disabled), bool(opts.get("REFLECTION_APISERVER_SUPPORT", True)))
    if unknown:
        return config, f"LIQO_DASH_REFLECTION_DISABLED: unknown kinds {', '.join(unknown)} (ignored)"
    return config, ""


def _slim(obj: dict[str, Any]) -> dict[str, Any]:
    """What the rules need of an object: its metadata, type (secrets) and spec (pods' references)."""
    meta = obj.get("metadata") or {}
    slim: dict[str, Any] = {"metadata": {k: meta.get(k) for k in ("name", "namespace", "annotations", "labels")}}
    if "type" in obj:
        slim["type"] = obj["type"]
    return slim


def report(namespace: str, unreachable: str = "") -> ReflectionReport:
    """Read the namespace's objects (bounded) and judge each with Liqo's rules; with ``unreachable`` (why
    the cluster cannot be asked at all) nothing is read, every kind "could not read"."""
    config, config_error = configured()
    rows: list[KindRow] = []
    verdicts: dict[tuple[str, str], ObjectVerdict] = {}
    pods: list[dict[str, Any]] = []
    readable: set[str] = set()
    for resource, kind in READ_KINDS:
        row = KindRow(kind, config.policy(kind), KIND_NOTES[kind])
        rows.append(row)
        if unreachable:
            row.error = "could not read"
            continue
        try:
            items, row.truncated = kube.list_in_namespace(resource, namespace, READ_LIMIT, READ_TIMEOUT)
        except KubeError as exc:
            if exc.transient:
                unreachable, row.error = exc.message, "could not read"
            else:
                row.error = "not allowed to list them" if exc.kind == "forbidden" else f"could not read: {exc.message}"
            continue
        row.read, row.total = True, len(items)
        readable.add(kind)
        if kind == "pod":
            pods = [{"metadata": item.get("metadata") or {}, "spec": item.get("spec") or {}} for item in items]
            continue
        for item in items:
            judged = verdict(kind, _slim(item), config)
            verdicts[(kind, judged.name)] = judged
            if not judged.reflected:
                row.excluded.append(judged)
    read = {kind for _plural, kind in READ_KINDS}
    other = [
        (kind, config.policy(kind), KIND_NOTES[kind] + ("; disabled (0 workers)" if kind in config.disabled else ""))
        for kind in KIND_NOTES
        if kind not in read
    ]
    never = [(kind, liqo_reflection.reflection_decision(kind, {}).reason) for kind in NEVER_REFLECTED]
    return ReflectionReport(
        rows=rows,
        warnings=reference_warnings(pods, verdicts, readable),
        never=never,
        other_kinds=other,
        config_error=config_error,
        pods=len(pods),
        unreachable=unreachable,
    )
