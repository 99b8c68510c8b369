"""offloading.gitops.detect on objects labelled the way Argo CD and Flux label what they apply.

Each case is an object as the API server returns it after that tool applied it; the comment above each
names the page that documents the label, annotation or field manager.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from offloading.gitops import detect as d

API = "offloading.liqo.io/v1beta1"
SPEC = {"namespaceMappingStrategy": "DefaultName", "podOffloadingStrategy": "LocalAndRemote"}
LAST_APPLIED = "kubectl.kubernetes.io/last-applied-configuration"


def offloading(namespace: str = "web", labels: Any = None, annotations: Any = None, managers: Any = ()) -> Any:
    """A NamespaceOffloading as read from the API server, with managedFields (fieldsV1 included) and the
    status Liqo's controller writes."""
    managed = [
        {
            "manager": manager,
            "operation": operation,
            "apiVersion": API,
            "time": "2026-05-04T10:00:00Z",
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:spec": {"f:podOffloadingStrategy": {}}},
        }
        for manager, operation in managers
    ]
    managed.append(
        {
            "manager": "liqo-controller-manager",
            "operation": "Update",
            "subresource": "status",
            "apiVersion": API,
            "fieldsType": "FieldsV1",
            "fieldsV1": {"f:status": {}},
        }
    )
    meta: dict[str, Any] = {"name": "offloading", "namespace": namespace, "uid": "u-1", "managedFields": managed}
    if labels:
        meta["labels"] = dict(labels)
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": API, "kind": "NamespaceOffloading", "metadata": meta, "spec": SPEC, "status": {}}


def namespace_object(name: str = "web", labels: Any = None, annotations: Any = None, managers: Any = ()) -> Any:
    meta: dict[str, Any] = {
        "name": name,
        "labels": {"kubernetes.io/metadata.name": name, **(labels or {})},
        "managedFields": [{"manager": m, "operation": op, "fieldsV1": {}} for m, op in managers],
    }
    if annotations:
        meta["annotations"] = dict(annotations)
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": meta, "spec": {"finalizers": ["kubernetes"]}}


# (id, object, expected claims as (tool, source kind, name, namespace, confidence), words expected in the notes)
CASES: list[tuple[str, Any, list[tuple[str, str, Any, Any, str]], list[str]]] = [
    # Argo CD before 3.0, `label` tracking (the default then): app.kubernetes.io/instance = the Application,
    # applied client-side by the application controller, which keeps kubectl's last-applied annotation.
    # https://argo-cd.readthedocs.io/en/release-2.9/user-guide/resource_tracking/
    (
        "argocd-label-tracking",
        offloading(
            labels={d.INSTANCE_LABEL: "liqo-offloadings"},
            annotations={LAST_APPLIED: '{"kind":"NamespaceOffloading"}'},
            managers=[(d.ARGOCD_CONTROLLER, "Update")],
        ),
        [(d.ARGOCD, "Application", "liqo-offloadings", None, d.CERTAIN)],
        [],
    ),
    # The same label with no other Argo CD signal: Helm charts set it too, so only "probably".
    (
        "instance-label-alone",
        offloading(labels={d.INSTANCE_LABEL: "liqo-offloadings"}, managers=[("kubectl-client-side-apply", "Update")]),
        [(d.ARGOCD, "Application", "liqo-offloadings", None, d.PROBABLE)],
        [],
    ),
    # Argo CD 3.0 and later, `annotation` tracking (the default): <app>:<group>/<kind>:<namespace>/<name>,
    # synced with ServerSideApply=true by field manager argocd-controller (common.ArgoCDSSAManager).
    # https://argo-cd.readthedocs.io/en/stable/user-guide/resource_tracking/
    (
        "argocd-annotation-tracking-ssa",
        offloading(
            annotations={
                d.ARGOCD_TRACKING_ID: "liqo-offloadings:offloading.liqo.io/NamespaceOffloading:web/offloading"
            },
            managers=[(d.ARGOCD_SSA_MANAGER, "Apply")],
        ),
        [(d.ARGOCD, "Application", "liqo-offloadings", None, d.CERTAIN)],
        [],
    ),
    # `annotation+label`: both, and several Argo CD instances add the installation id (same page).
    (
        "argocd-annotation-and-label",
        offloading(
            labels={d.INSTANCE_LABEL: "liqo-offloadings"},
            annotations={
                d.ARGOCD_TRACKING_ID: "liqo-offloadings:offloading.liqo.io/NamespaceOffloading:web/offloading",
                d.ARGOCD_INSTALLATION_ID: "prod-argocd",
            },
        ),
        [(d.ARGOCD, "Application", "liqo-offloadings", None, d.CERTAIN)],
        [],
    ),
    # An Application outside the control plane's namespace is tracked as <namespace>_<name>.
    # https://argo-cd.readthedocs.io/en/stable/operator-manual/app-any-namespace/
    (
        "argocd-app-in-any-namespace",
        offloading(
            annotations={
                d.ARGOCD_TRACKING_ID: "team-web_offloadings:offloading.liqo.io/NamespaceOffloading:web/offloading"
            }
        ),
        [(d.ARGOCD, "Application", "offloadings", "team-web", d.CERTAIN)],
        [],
    ),
    # A tracking id that names another object is a copy: Argo CD does not manage it ("Non self-referencing
    # annotations" on the resource tracking page).
    (
        "argocd-copied-tracking-id",
        offloading(
            "web",
            annotations={d.ARGOCD_TRACKING_ID: "liqo:offloading.liqo.io/NamespaceOffloading:shop/offloading"},
        ),
        [],
        ["names another object"],
    ),
    (
        "argocd-malformed-tracking-id",
        offloading(annotations={d.ARGOCD_TRACKING_ID: "liqo-offloadings"}),
        [],
        ["ignores it"],
    ),
    # A Namespace is cluster-scoped: its tracking id carries the Application's destination namespace.
    (
        "argocd-namespace-object",
        namespace_object(
            annotations={d.ARGOCD_TRACKING_ID: "platform:/Namespace:platform-system/web"},
            managers=[(d.ARGOCD_SSA_MANAGER, "Apply")],
        ),
        [(d.ARGOCD, "Application", "platform", None, d.CERTAIN)],
        [],
    ),
    # The custom instance label of the page's example (application.instanceLabelKey).
    (
        "argocd-custom-instance-label",
        offloading(labels={d.ARGOCD_INSTANCE_LABEL: "liqo-offloadings"}),
        [(d.ARGOCD, "Application", "liqo-offloadings", None, d.CERTAIN)],
        [],
    ),
    # `helm install`: the chart's app.kubernetes.io/instance next to Helm's release annotations.
    # https://helm.sh/docs/chart_best_practices/labels/ (Argo CD renders with `helm template`, which writes none)
    (
        "helm-install-not-argocd",
        offloading(
            labels={d.INSTANCE_LABEL: "offloadings", d.MANAGED_BY_LABEL: "Helm"},
            annotations={d.HELM_RELEASE_NAME: "offloadings", d.HELM_RELEASE_NAMESPACE: "web"},
            managers=[("helm", "Update")],
        ),
        [],
        ["a Helm release, not Argo CD"],
    ),
    # Flux kustomize-controller: the Kustomization's name and namespace as labels, server-side apply as
    # kustomize-controller. https://fluxcd.io/flux/components/kustomize/kustomizations/ (garbage collection:
    # "-l kustomize.toolkit.fluxcd.io/name=<Kustomization name>")
    (
        "flux-kustomization",
        offloading(
            labels={f"{d.KUSTOMIZE_GROUP}/name": "apps", f"{d.KUSTOMIZE_GROUP}/namespace": "flux-system"},
            managers=[(d.KUSTOMIZE_CONTROLLER, "Apply")],
        ),
        [(d.FLUX, "Kustomization", "apps", "flux-system", d.CERTAIN)],
        [],
    ),
    # The field manager alone (labels stripped by hand): Flux, Kustomization unknown.
    (
        "flux-manager-only",
        offloading(managers=[(d.KUSTOMIZE_CONTROLLER, "Apply")]),
        [(d.FLUX, "Kustomization", None, None, d.CERTAIN)],
        [],
    ),
    # Flux helm-controller: helm.toolkit.fluxcd.io/name + /namespace (fluxcd/helm-controller#238); the
    # chart's own app.kubernetes.io/instance is not Argo CD's.
    (
        "flux-helmrelease",
        offloading(
            labels={
                f"{d.HELM_GROUP}/name": "liqo-offloadings",
                f"{d.HELM_GROUP}/namespace": "flux-system",
                d.INSTANCE_LABEL: "web-liqo-offloadings",
                d.MANAGED_BY_LABEL: "Helm",
            },
            annotations={d.HELM_RELEASE_NAME: "web-liqo-offloadings", d.HELM_RELEASE_NAMESPACE: "web"},
            managers=[(d.HELM_CONTROLLER, "Update")],
        ),
        [(d.FLUX, "HelmRelease", "liqo-offloadings", "flux-system", d.CERTAIN)],
        ["a Helm release, not Argo CD"],
    ),
    # A Flux-applied object whose chart-less manifest also carries app.kubernetes.io/instance.
    (
        "flux-with-instance-label",
        offloading(
            labels={
                f"{d.KUSTOMIZE_GROUP}/name": "apps",
                f"{d.KUSTOMIZE_GROUP}/namespace": "flux-system",
                d.INSTANCE_LABEL: "web",
            },
        ),
        [(d.FLUX, "Kustomization", "apps", "flux-system", d.CERTAIN)],
        ["not counted for Argo CD"],
    ),
    # Written by liqoctl and liqo-dash only.
    ("liqoctl", offloading(managers=[("liqoctl", "Update"), ("liqo-dash", "Apply")]), [], []),
    # OpenShift GitOps: the namespace may receive an Argo CD instance's resources; the Namespace is not managed.
    (
        "argocd-managed-by-namespace",
        namespace_object(labels={d.ARGOCD_MANAGED_BY_LABEL: "openshift-gitops"}),
        [],
        ["does not say who manages the Namespace"],
    ),
    (
        "argocd-and-flux",
        offloading(
            labels={f"{d.KUSTOMIZE_GROUP}/name": "apps", f"{d.KUSTOMIZE_GROUP}/namespace": "flux-system"},
            managers=[(d.KUSTOMIZE_CONTROLLER, "Apply"), (d.ARGOCD_SSA_MANAGER, "Apply")],
        ),
        [(d.ARGOCD, "Application", None, None, d.CERTAIN), (d.FLUX, "Kustomization", "apps", "flux-system", d.CERTAIN)],
        ["both claim it"],
    ),
]


@pytest.mark.parametrize(("obj", "claims", "notes"), [c[1:] for c in CASES], ids=[c[0] for c in CASES])
def test_detect(obj: Any, claims: list[Any], notes: list[str]) -> None:
    found = d.detect(obj)
    assert [(c.tool, c.source_kind, c.name, c.namespace, c.confidence) for c in found.claims] == claims
    for words in notes:
        assert any(words in note for note in found.notes), (words, found.notes)
    if not notes:
        assert not found.notes
    assert found.managed == any(c[4] == d.CERTAIN for c in claims)
    assert found.probable == (bool(claims) and not found.managed)


@pytest.mark.parametrize("obj", [c[1] for c in CASES], ids=[c[0] for c in CASES])
def test_facts_keep_what_detect_reads(obj: Any) -> None:
    kept = d.facts(obj)
    assert d.detect(kept) == d.detect(obj)
    assert d.facts(kept) == kept
    meta = kept["metadata"]
    assert LAST_APPLIED not in meta.get("annotations", {})
    assert "kubernetes.io/metadata.name" not in meta.get("labels", {})
    assert all(set(entry) == {"manager", "operation"} for entry in meta.get("managedFields", []))
    assert all(entry["manager"] != "liqo-controller-manager" for entry in meta.get("managedFields", []))


def test_evidence_says_which_signal_counted() -> None:
    obj = offloading(
        labels={d.INSTANCE_LABEL: "liqo-offloadings"},
        annotations={d.ARGOCD_TRACKING_ID: "liqo-offloadings:offloading.liqo.io/NamespaceOffloading:web/offloading"},
        managers=[(d.ARGOCD_SSA_MANAGER, "Apply")],
    )
    (claim,) = d.detect(obj).claims
    assert [(e.where, e.key) for e in claim.evidence] == [
        ("annotation", d.ARGOCD_TRACKING_ID),
        ("manager", d.ARGOCD_SSA_MANAGER),
        ("label", d.INSTANCE_LABEL),
    ]
    assert claim.text() == (
        "Managed by Argo CD (Application liqo-offloadings): annotation argocd.argoproj.io/tracking-id="
        "liqo-offloadings:offloading.liqo.io/NamespaceOffloading:web/offloading, field manager argocd-controller "
        "(Apply), label app.kubernetes.io/instance=liqo-offloadings"
    )
    assert d.detect(offloading(labels={d.INSTANCE_LABEL: "x"})).text().startswith("Probably managed by Argo CD")
    assert d.detect(offloading()).text() == "No GitOps tool manages it"


FLUX_LABELS = {f"{d.KUSTOMIZE_GROUP}/name": "apps", f"{d.KUSTOMIZE_GROUP}/namespace": "flux-system"}


# Whether a direct push is undone: Flux documents what stops it per object (reconcile: disabled, label or
# annotation; ssa: Ignore | IfNotPresent). https://fluxcd.io/flux/components/kustomize/kustomizations/
# ("Controlling the apply behavior of resources", "Suspending and resuming").
@pytest.mark.parametrize(
    ("labels", "annotations", "edit", "delete"),
    [
        ({}, {}, True, True),
        ({}, {d.FLUX_RECONCILE: "disabled"}, False, False),
        ({d.FLUX_RECONCILE: "disabled"}, {}, False, False),
        ({}, {d.FLUX_RECONCILE: "enabled"}, True, True),
        ({}, {d.FLUX_SSA: "Ignore"}, False, False),
        ({}, {d.FLUX_SSA: "IfNotPresent"}, False, True),
        ({}, {d.FLUX_SSA: "Merge"}, True, True),
    ],
)
def test_flux_says_whether_a_direct_push_stays(labels: Any, annotations: Any, edit: bool, delete: bool) -> None:
    found = d.detect(offloading(labels={**FLUX_LABELS, **labels}, annotations=annotations))
    (claim,) = found.claims
    assert (claim.reverts_edit, claim.reverts_delete) == (edit, delete)
    assert (found.reverted(deleting=False), found.reverted(deleting=True)) == (edit, delete)


def test_argocd_and_helmrelease_may_revert_and_probable_claims_do_not_count() -> None:
    argo = d.detect(offloading(managers=[(d.ARGOCD_SSA_MANAGER, "Apply")]))
    assert argo.claims[0].reverts_edit is None and argo.reverted(deleting=True)
    assert any("selfHeal" in note for note in argo.claims[0].notes)
    helm = d.detect(offloading(labels={f"{d.HELM_GROUP}/name": "x", f"{d.HELM_GROUP}/namespace": "y"}))
    assert helm.reverted(deleting=False) and any("drift detection" in n for n in helm.claims[0].notes)
    probable = d.detect(offloading(labels={d.INSTANCE_LABEL: "x"}))
    assert probable.probable and not probable.reverted(deleting=False)


def test_a_label_cut_at_63_characters_is_said() -> None:
    name = "a" * d.LABEL_MAX
    (claim,) = d.detect(offloading(labels={d.ARGOCD_INSTANCE_LABEL: name})).claims
    assert claim.name == name and any("cuts the label" in n for n in claim.notes)


def test_to_dict_is_plain_json() -> None:
    import json

    obj = offloading(labels=FLUX_LABELS, managers=[(d.KUSTOMIZE_CONTROLLER, "Apply")])
    data = d.detect(obj).to_dict()
    assert json.loads(json.dumps(data)) == data
    assert data["managed"] is True and data["claims"][0]["name"] == "apps"
    assert data["claims"][0]["evidence"][-1] == {
        "where": "manager",
        "key": "kustomize-controller",
        "value": "Apply",
        "meaning": "Flux's kustomize-controller",
    }


@pytest.mark.parametrize(
    "obj",
    [
        {},
        {"metadata": None},
        {"metadata": "x"},
        {"metadata": {"labels": {"a": 1, d.INSTANCE_LABEL: None}, "annotations": ["x"], "managedFields": "x"}},
        {"metadata": {"managedFields": [None, 3, {"manager": 5}, {"manager": "", "operation": "Apply"}]}},
        {"kind": "NamespaceOffloading", "metadata": {"annotations": {d.ARGOCD_TRACKING_ID: "a:b:c:d"}}},
    ],
)
def test_odd_objects_are_not_managed(obj: Any) -> None:
    before = copy.deepcopy(obj)
    found = d.detect(obj)
    assert not found.claims
    assert obj == before
    assert d.detect(d.facts(obj)) == found
