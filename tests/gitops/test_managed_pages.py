"""The namespace page and the API say who manages an offloading from Git, with the evidence."""

from __future__ import annotations

from typing import Any

import pytest

from liqo_rules.constants import GROUP
from offloading.gitops.detect import facts
from offloading.models import Namespace

pytestmark = pytest.mark.django_db

FLUX = {
    "apiVersion": f"{GROUP}/v1beta1",
    "kind": "NamespaceOffloading",
    "metadata": {
        "name": "offloading",
        "namespace": "shop",
        "labels": {"kustomize.toolkit.fluxcd.io/name": "apps", "kustomize.toolkit.fluxcd.io/namespace": "flux-system"},
        "managedFields": [{"manager": "kustomize-controller", "operation": "Apply"}],
    },
}
HELM_OR_ARGO = {
    "apiVersion": f"{GROUP}/v1beta1",
    "kind": "NamespaceOffloading",
    "metadata": {"name": "offloading", "namespace": "shop", "labels": {"app.kubernetes.io/instance": "guestbook"}},
}


def _manage(obj: dict[str, Any]) -> None:
    Namespace.objects.filter(name="shop").update(gitops_facts=facts(obj))


def test_the_namespace_page_shows_flux_with_its_evidence(admin_client: Any, fleet: Any) -> None:
    assert 'id="gitops"' not in admin_client.get("/namespaces/shop/").content.decode()
    _manage(FLUX)
    html = admin_client.get("/namespaces/shop/").content.decode()
    assert "Managed by Flux (Kustomization flux-system/apps)" in html
    assert "label kustomize.toolkit.fluxcd.io/name=apps" in html
    assert "field manager kustomize-controller (Apply)" in html


def test_an_instance_label_alone_is_probably_argo_cd(admin_client: Any, fleet: Any) -> None:
    _manage(HELM_OR_ARGO)
    html = admin_client.get("/namespaces/shop/").content.decode()
    assert "Probably managed by Argo CD (app guestbook)" in html
    assert "Helm charts and other tools set it too" in html


def test_the_api_names_the_manager_or_null(api: Any, fleet: Any) -> None:
    assert api.get("/api/v1/namespaces/shop/").json()["gitops"] is None
    _manage(FLUX)
    body = api.get("/api/v1/namespaces/shop/").json()["gitops"]
    assert body["managed"] is True
    claim = body["claims"][0]
    assert (claim["tool"], claim["sourceKind"], claim["namespace"], claim["name"]) == (
        "flux",
        "Kustomization",
        "flux-system",
        "apps",
    )
    assert claim["revertsEdit"] is True
    listed = {ns["name"]: ns["gitops"] for ns in api.get("/api/v1/namespaces/").json()["results"]}
    assert listed["payments"] is None
    assert listed["shop"]["claims"][0]["tool"] == "flux"
