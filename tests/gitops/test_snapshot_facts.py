"""The snapshot keeps what GitOps detection reads of each NamespaceOffloading (gitops.detect.facts), from a
refresh and from a watch event, and forgets it when the offloading goes."""

from __future__ import annotations

import threading
from typing import Any

import pytest

from liqo_rules.constants import GROUP, PLURAL, VERSION
from offloading.gitops.detect import ARGOCD, FLUX, detect
from offloading.models import Namespace
from offloading.snapshot.engine import KindWatcher
from offloading.snapshot.refresh import refresh
from tests.fixtures.waits import wait_until

pytestmark = pytest.mark.django_db(transaction=True)

FLUX_LABELS = {
    "kustomize.toolkit.fluxcd.io/name": "apps",
    "kustomize.toolkit.fluxcd.io/namespace": "flux-system",
    "team": "pay",  # not a GitOps label: not kept
}
TRACKING = f"guestbook:{GROUP}/NamespaceOffloading:gitops-planted/offloading"


def _plant(k8s: Any) -> None:
    """A namespace and its offloading written as Flux's kustomize-controller writes them."""
    k8s.core.create_namespace({"metadata": {"name": "gitops-planted"}}, field_validation="Strict")
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "NamespaceOffloading"}
    body |= {"metadata": {"name": "offloading", "labels": FLUX_LABELS}, "spec": {"podOffloadingStrategy": "Local"}}
    k8s.custom.create_namespaced_custom_object(
        GROUP, VERSION, "gitops-planted", PLURAL, body, field_validation="Strict", field_manager="kustomize-controller"
    )


def _facts() -> dict[str, Any]:
    return Namespace.objects.get(name="gitops-planted").gitops_facts


def test_a_refresh_keeps_the_facts_and_a_watch_event_updates_and_clears_them(sandbox: Any, k8s: Any) -> None:
    _plant(k8s)
    sandbox.wait_idle(30)
    assert refresh().ok
    facts = _facts()
    assert facts["metadata"]["labels"] == {k: v for k, v in FLUX_LABELS.items() if k != "team"}
    assert {"manager": "kustomize-controller", "operation": "Update"} in facts["metadata"]["managedFields"]
    detection = detect(facts)
    assert [(c.tool, c.source) for c in detection.claims] == [(FLUX, "Kustomization flux-system/apps")]
    assert detection.reverted(deleting=False)

    # A second refresh of an unchanged fleet keeps them.
    assert refresh().ok
    assert _facts() == facts

    stop = threading.Event()
    thread = KindWatcher("namespaceoffloadings", stop, timeout_seconds=5)
    thread.start()
    try:
        wait_until(lambda: thread.resource_version, 60, message="the watch to start")
        # Argo CD's tracking id comes and Flux's labels go (a watch event, no refresh); Flux's field
        # manager stays in managedFields, so both claim it.
        patch = {"metadata": {"labels": None, "annotations": {"argocd.argoproj.io/tracking-id": TRACKING}}}
        k8s.custom.patch_namespaced_custom_object(GROUP, VERSION, "gitops-planted", PLURAL, "offloading", patch)
        wait_until(
            lambda: [c.tool for c in detect(_facts()).claims] == [ARGOCD, FLUX], 60, message="the facts via the watch"
        )
        assert "labels" not in _facts()["metadata"]
        claim = detect(_facts()).claims[0]
        assert (claim.source_kind, claim.name) == ("Application", "guestbook")
        k8s.custom.delete_namespaced_custom_object(GROUP, VERSION, "gitops-planted", PLURAL, "offloading")
        wait_until(lambda: not Namespace.objects.get(name="gitops-planted").offloaded, 60, message="the deletion")
        assert _facts() == {}
    finally:
        stop.set()
        thread.join(15)
    assert not thread.is_alive()
