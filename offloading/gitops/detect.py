"""Who manages an object from Git: Argo CD or Flux, read from its labels, annotations and managedFields.

Pure (no Django, no cluster): ``detect(obj)`` takes a NamespaceOffloading or a Namespace as the raw dict
the API server returns (or the compact ``facts(obj)`` the snapshot keeps) and says which GitOps tool
claims it, with the Application / Kustomization / HelmRelease when the object names it, how sure that is,
and the evidence: each label, annotation or field manager that counted, and the signals that did not.

Sources, as each tool documents what it writes on the objects it applies:

- Argo CD, "Resource Tracking" (argo-cd.readthedocs.io/en/stable/user-guide/resource_tracking/): the
  ``label`` method writes the Application's name in ``app.kubernetes.io/instance`` (the default key of
  ``application.instanceLabelKey``; the page's example of a custom key is ``argocd.argoproj.io/instance``);
  ``annotation`` (the default since 3.0) and ``annotation+label`` write ``argocd.argoproj.io/tracking-id``
  = ``<application>:<group>/<kind>:<namespace>/<name>``, and Argo CD ignores a tracking id that does not
  name the object it is on (a copy). Several Argo CD instances add ``argocd.argoproj.io/installation-id``.
  Applications outside the control plane's namespace are tracked as ``<namespace>_<name>``
  ("Applications in any namespace"; ``_`` cannot occur in either name, so the split is exact).
  A server-side apply sync writes as field manager ``argocd-controller`` (common.ArgoCDSSAManager); the
  default client-side apply names no manager, so the API server records the controller's user agent,
  ``argocd-application-controller``.
- Flux, kustomize-controller ("Kustomization", fluxcd.io/flux/components/kustomize/kustomizations/, and
  its garbage-collection section): every applied object is labelled ``kustomize.toolkit.fluxcd.io/name``
  and ``kustomize.toolkit.fluxcd.io/namespace`` (the Kustomization's), and applied server-side by field
  manager ``kustomize-controller``. ``kustomize.toolkit.fluxcd.io/reconcile: disabled`` (label or
  annotation) stops applying and pruning that object; ``kustomize.toolkit.fluxcd.io/ssa: Ignore`` skips it,
  ``IfNotPresent`` only creates it when missing.
- Flux, helm-controller (fluxcd/helm-controller#238, "Label release resources with HelmRelease origin"):
  ``helm.toolkit.fluxcd.io/name`` and ``helm.toolkit.fluxcd.io/namespace``; its Kubernetes client writes
  as ``helm-controller``. It corrects a change made in the cluster only when the HelmRelease enables drift
  detection (``.spec.driftDetection.mode: enabled``), which the object does not show.

``app.kubernetes.io/instance`` alone is ambiguous: Helm charts set it to the release name. It counts only
as "probably Argo CD", and not at all next to Helm's own release annotations (``meta.helm.sh/release-name``,
written by ``helm install``/``upgrade``, never by the ``helm template`` Argo CD renders with) or next to a
Flux claim (a HelmRelease's chart sets it too).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

ARGOCD = "argocd"
FLUX = "flux"
TOOL_NAMES = {ARGOCD: "Argo CD", FLUX: "Flux"}

# How sure a claim is: a signal only that tool writes, or Argo CD's default label alone.
CERTAIN = "certain"
PROBABLE = "probable"

ARGOCD_TRACKING_ID = "argocd.argoproj.io/tracking-id"
ARGOCD_INSTALLATION_ID = "argocd.argoproj.io/installation-id"
ARGOCD_INSTANCE_LABEL = "argocd.argoproj.io/instance"
INSTANCE_LABEL = "app.kubernetes.io/instance"
ARGOCD_SSA_MANAGER = "argocd-controller"
ARGOCD_CONTROLLER = "argocd-application-controller"
# On a Namespace (the OpenShift GitOps operator): which Argo CD instance may deploy into the namespace.
# It says nothing of who manages the Namespace object itself, so it is a note, never a claim.
ARGOCD_MANAGED_BY_LABEL = "argocd.argoproj.io/managed-by"

KUSTOMIZE_GROUP = "kustomize.toolkit.fluxcd.io"
HELM_GROUP = "helm.toolkit.fluxcd.io"
KUSTOMIZE_CONTROLLER = "kustomize-controller"
HELM_CONTROLLER = "helm-controller"
FLUX_RECONCILE = f"{KUSTOMIZE_GROUP}/reconcile"
FLUX_SSA = f"{KUSTOMIZE_GROUP}/ssa"

HELM_RELEASE_NAME = "meta.helm.sh/release-name"
HELM_RELEASE_NAMESPACE = "meta.helm.sh/release-namespace"
MANAGED_BY_LABEL = "app.kubernetes.io/managed-by"

# What the snapshot keeps of an object's metadata for detect(): these keys, and every key under these
# prefixes (the object's other labels and annotations, last-applied-configuration say, are not needed).
KEPT_KEYS = frozenset({INSTANCE_LABEL, MANAGED_BY_LABEL, HELM_RELEASE_NAME, HELM_RELEASE_NAMESPACE})
KEPT_PREFIXES = ("argocd.argoproj.io/", f"{KUSTOMIZE_GROUP}/", f"{HELM_GROUP}/")
LABEL_MAX = 63  # Argo CD truncates the instance label to a label value's limit


@dataclass(frozen=True)
class Evidence:
    """One signal on the object: where it is (label, annotation or field manager), its key and value."""

    where: str  # "label" | "annotation" | "manager"
    key: str
    value: str
    meaning: str

    def text(self) -> str:
        if self.where == "manager":
            return f"field manager {self.key} ({self.value or 'no operation'})"
        return f"{self.where} {self.key}={self.value}"

    def to_dict(self) -> dict[str, str]:
        return {"where": self.where, "key": self.key, "value": self.value, "meaning": self.meaning}


@dataclass(frozen=True)
class Claim:
    """One GitOps tool's claim on the object, with the source object (Application, Kustomization or
    HelmRelease) when the object names it. ``reverts_edit`` / ``reverts_delete``: whether that tool undoes
    a direct edit / a deletion (None: the object does not say, it is a setting of the source object)."""

    tool: str
    source_kind: str
    name: str | None
    namespace: str | None
    confidence: str
    evidence: tuple[Evidence, ...]
    reverts_edit: bool | None
    reverts_delete: bool | None
    notes: tuple[str, ...] = ()

    @property
    def source(self) -> str:
        """The source object in words: "Kustomization flux-system/apps", "Application guestbook"."""
        if not self.name:
            return f"an unnamed {self.source_kind}"
        return (
            f"{self.source_kind} {self.namespace}/{self.name}" if self.namespace else f"{self.source_kind} {self.name}"
        )

    def text(self) -> str:
        lead = "Managed" if self.confidence == CERTAIN else "Probably managed"
        signals = ", ".join(e.text() for e in self.evidence)
        return f"{lead} by {TOOL_NAMES[self.tool]} ({self.source}): {signals}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "tool": self.tool,
            "sourceKind": self.source_kind,
            "name": self.name,
            "namespace": self.namespace,
            "confidence": self.confidence,
            "evidence": [e.to_dict() for e in self.evidence],
            "revertsEdit": self.reverts_edit,
            "revertsDelete": self.reverts_delete,
            "notes": list(self.notes),
        }


@dataclass(frozen=True)
class Detection:
    """Every claim on one object, and the signals seen that do not make one (notes)."""

    claims: tuple[Claim, ...]
    notes: tuple[str, ...] = field(default=())

    @property
    def managed(self) -> bool:
        """A tool surely manages the object."""
        return any(c.confidence == CERTAIN for c in self.claims)

    @property
    def probable(self) -> bool:
        """Only an ambiguous signal says a tool manages it."""
        return bool(self.claims) and not self.managed

    def reverted(self, deleting: bool) -> bool:
        """A tool that surely manages the object may undo a direct push: an edit (or a deletion). Only a
        claim whose object says it stays (Flux's reconcile: disabled, ssa: Ignore) does not count."""
        for claim in self.claims:
            reverts = claim.reverts_delete if deleting else claim.reverts_edit
            if claim.confidence == CERTAIN and reverts is not False:
                return True
        return False

    def text(self) -> str:
        if not self.claims:
            return "No GitOps tool manages it"
        return "; ".join(c.text() for c in self.claims)

    def to_dict(self) -> dict[str, Any]:
        return {
            "managed": self.managed,
            "probable": self.probable,
            "claims": [c.to_dict() for c in self.claims],
            "notes": list(self.notes),
        }


def _strings(value: Any) -> dict[str, str]:
    if not isinstance(value, dict):
        return {}
    return {k: v for k, v in value.items() if isinstance(k, str) and isinstance(v, str)}


def _managers(meta: dict[str, Any]) -> list[tuple[str, str]]:
    """(manager, operation) of each managedFields entry but the status subresource's, in order, once each."""
    seen: list[tuple[str, str]] = []
    entries = meta.get("managedFields")
    for entry in entries if isinstance(entries, list) else []:
        if not isinstance(entry, dict) or entry.get("subresource") == "status":
            continue
        manager, operation = entry.get("manager"), entry.get("operation")
        if isinstance(manager, str) and manager:
            pair = (manager, operation if isinstance(operation, str) else "")
            if pair not in seen:
                seen.append(pair)
    return seen


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    meta = obj.get("metadata")
    return meta if isinstance(meta, dict) else {}


def _kept(key: str) -> bool:
    return key in KEPT_KEYS or key.startswith(KEPT_PREFIXES)


def facts(obj: dict[str, Any]) -> dict[str, Any]:
    """The part of ``obj`` that ``detect`` reads, small enough to keep in the snapshot: its identity, the
    GitOps labels and annotations, and who wrote it (managers and operations, no field sets). It is an
    object itself: ``detect(facts(obj)) == detect(obj)``."""
    meta = _meta(obj)
    out_meta: dict[str, Any] = {"name": meta.get("name", "")}
    if meta.get("namespace"):
        out_meta["namespace"] = meta["namespace"]
    labels = {k: v for k, v in sorted(_strings(meta.get("labels")).items()) if _kept(k)}
    annotations = {k: v for k, v in sorted(_strings(meta.get("annotations")).items()) if _kept(k)}
    if labels:
        out_meta["labels"] = labels
    if annotations:
        out_meta["annotations"] = annotations
    managers = [{"manager": m, "operation": op} for m, op in _managers(meta)]
    if managers:
        out_meta["managedFields"] = managers
    return {"apiVersion": obj.get("apiVersion", ""), "kind": obj.get("kind", ""), "metadata": out_meta}


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def _tracking_id(value: str) -> tuple[str, str, str, str, str] | None:
    """``app:group/kind:namespace/name`` split as Argo CD parses it (util/argo/resource_tracking.go)."""
    parts = value.split(":", 2)
    if len(parts) != 3:
        return None
    group_kind, ns_name = parts[1].split("/"), parts[2].split("/")
    if len(group_kind) != 2 or len(ns_name) != 2:
        return None
    return parts[0], group_kind[0], group_kind[1], ns_name[0], ns_name[1]


def _application(instance: str) -> tuple[str | None, str | None]:
    """An Application's instance value as (name, namespace): ``ns_name`` outside the control plane's
    namespace, a bare name inside it (which namespace that is, the object does not say)."""
    namespace, sep, name = instance.partition("_")
    return (name, namespace) if sep and name and namespace else (instance, None)


def _argocd(
    obj: dict[str, Any], labels: dict[str, str], annotations: dict[str, str], managers: list[tuple[str, str]]
) -> tuple[Claim | None, list[str]]:
    """Argo CD's claim (or None) and the notes on signals that do not count."""
    meta = _meta(obj)
    evidence: list[Evidence] = []
    notes: list[str] = []
    app: str | None = None
    tracking = annotations.get(ARGOCD_TRACKING_ID)
    if tracking is not None:
        parsed = _tracking_id(tracking)
        if parsed is None:
            notes.append(
                f"annotation {ARGOCD_TRACKING_ID}={tracking} is not <app>:<group>/<kind>:<ns>/<name>: Argo CD ignores it"
            )
        else:
            tracked_app, group, kind, tracked_namespace, tracked_name = parsed
            namespaced = bool(meta.get("namespace"))
            identity = (_group(str(obj.get("apiVersion", ""))), obj.get("kind"), meta.get("name"))
            refers = (group, kind, tracked_name) == identity
            if refers and (not namespaced or tracked_namespace == meta.get("namespace")):
                evidence.append(Evidence("annotation", ARGOCD_TRACKING_ID, tracking, "Argo CD's tracking id"))
                app = tracked_app
            else:
                notes.append(
                    f"annotation {ARGOCD_TRACKING_ID}={tracking} names another object: a copy, which Argo CD "
                    "does not manage"
                )
    if evidence and ARGOCD_INSTALLATION_ID in annotations:
        value = annotations[ARGOCD_INSTALLATION_ID]
        evidence.append(Evidence("annotation", ARGOCD_INSTALLATION_ID, value, "the Argo CD instance"))
    if ARGOCD_INSTANCE_LABEL in labels:
        evidence.append(
            Evidence("label", ARGOCD_INSTANCE_LABEL, labels[ARGOCD_INSTANCE_LABEL], "Argo CD's tracking label")
        )
        app = app or labels[ARGOCD_INSTANCE_LABEL]
    for manager, operation in managers:
        if manager == ARGOCD_SSA_MANAGER:
            evidence.append(Evidence("manager", manager, operation, "Argo CD's server-side apply sync"))
        elif manager == ARGOCD_CONTROLLER:
            evidence.append(Evidence("manager", manager, operation, "Argo CD's application controller"))
    instance = labels.get(INSTANCE_LABEL)
    confidence = CERTAIN if evidence else PROBABLE
    if instance is not None:
        evidence.append(
            Evidence("label", INSTANCE_LABEL, instance, "Argo CD's default tracking label (Helm sets it too)")
        )
        app = app or instance
        if confidence == PROBABLE and HELM_RELEASE_NAME in annotations:
            release = annotations[HELM_RELEASE_NAME]
            notes.append(
                f"label {INSTANCE_LABEL}={instance} comes with Helm's release annotation {HELM_RELEASE_NAME}="
                f"{release}: a Helm release, not Argo CD"
            )
            return None, notes
    if not evidence:
        return None, notes
    claim_notes: list[str] = []
    if confidence == PROBABLE:
        claim_notes.append(f"only the label {INSTANCE_LABEL} says so: Helm charts and other tools set it too")
    if app is not None and len(app) == LABEL_MAX and tracking is None:
        claim_notes.append(f"the Application's name may be longer: Argo CD cuts the label at {LABEL_MAX} characters")
    claim_notes.append(
        "Argo CD undoes a direct change when the Application syncs automatically with selfHeal, or at its next sync"
    )
    name, namespace = _application(app) if app is not None else (None, None)
    claim = Claim(ARGOCD, "Application", name, namespace, confidence, tuple(evidence), None, None, tuple(claim_notes))
    return claim, notes


def _flux(
    kind: str,
    group: str,
    controller: str,
    labels: dict[str, str],
    annotations: dict[str, str],
    managers: list[tuple[str, str]],
) -> Claim | None:
    """Flux's claim through a Kustomization (kustomize-controller) or a HelmRelease (helm-controller)."""
    evidence: list[Evidence] = []
    notes: list[str] = []
    name, namespace = labels.get(f"{group}/name"), labels.get(f"{group}/namespace")
    for key in (f"{group}/name", f"{group}/namespace"):
        if key in labels:
            evidence.append(Evidence("label", key, labels[key], f"the {kind} that applied it"))
    for manager, operation in managers:
        if manager == controller:
            evidence.append(Evidence("manager", manager, operation, f"Flux's {controller}"))
    if not evidence:
        return None
    if (name is None) != (namespace is None):
        notes.append(f"only one of {group}/name and {group}/namespace is set")
    if kind == "HelmRelease":
        notes.append("helm-controller undoes a direct change only if the HelmRelease enables drift detection")
        return Claim(FLUX, kind, name, namespace, CERTAIN, tuple(evidence), None, None, tuple(notes))
    reverts_edit, reverts_delete = True, True
    reconcile = labels.get(FLUX_RECONCILE) or annotations.get(FLUX_RECONCILE)
    ssa = annotations.get(FLUX_SSA) or labels.get(FLUX_SSA)
    if reconcile is not None and reconcile.lower() == "disabled":
        where = "label" if FLUX_RECONCILE in labels else "annotation"
        evidence.append(Evidence(where, FLUX_RECONCILE, reconcile, "Flux neither applies nor prunes it"))
        reverts_edit = reverts_delete = False
    elif ssa is not None and ssa.lower() in ("ignore", "ifnotpresent"):
        evidence.append(Evidence("annotation", FLUX_SSA, ssa, "Flux's apply policy for it"))
        reverts_edit = False
        reverts_delete = ssa.lower() == "ifnotpresent"
        if reverts_delete:
            notes.append("Flux re-creates it if it is deleted (ssa: IfNotPresent)")
    return Claim(FLUX, kind, name, namespace, CERTAIN, tuple(evidence), reverts_edit, reverts_delete, tuple(notes))


def detect(obj: dict[str, Any]) -> Detection:
    """Which GitOps tool manages ``obj`` (a raw object, or ``facts(obj)``), and how we know."""
    meta = _meta(obj)
    labels, annotations = _strings(meta.get("labels")), _strings(meta.get("annotations"))
    managers = _managers(meta)
    claims: list[Claim] = []
    notes: list[str] = []
    for kind, group, controller in (
        ("Kustomization", KUSTOMIZE_GROUP, KUSTOMIZE_CONTROLLER),
        ("HelmRelease", HELM_GROUP, HELM_CONTROLLER),
    ):
        claim = _flux(kind, group, controller, labels, annotations, managers)
        if claim is not None:
            claims.append(claim)
    argo, argo_notes = _argocd(obj, labels, annotations, managers)
    notes.extend(argo_notes)
    if argo is not None and argo.confidence == PROBABLE and claims:
        notes.append(f"label {INSTANCE_LABEL}={labels[INSTANCE_LABEL]} is not counted for Argo CD: Flux applies it")
    elif argo is not None:
        claims.insert(0, argo)
    if ARGOCD_MANAGED_BY_LABEL in labels:
        notes.append(
            f"label {ARGOCD_MANAGED_BY_LABEL}={labels[ARGOCD_MANAGED_BY_LABEL]} lets that Argo CD instance deploy "
            "into the namespace; it does not say who manages the Namespace itself"
        )
    if len({c.tool for c in claims if c.confidence == CERTAIN}) > 1:
        notes.append("Argo CD and Flux both claim it: they will undo each other's changes")
    return Detection(tuple(claims), tuple(notes))
