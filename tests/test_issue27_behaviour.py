"""Issue 27, items 1-4 (+9): what real Liqo does that its status does not say, produced in the sandbox
(which behaves like Liqo), read back like the watcher (NamespaceMaps included), and said on the namespace
page, in the diagnosis and in the API.

1. a de-selected cluster keeps a stale Ready: the page says "not selected" and that it is stale;
2. a NamespaceMap patch Liqo's controller cannot make is only logged: the page says which cluster Liqo has
   not taken up, and since when;
3. CreationLoopBackOff gets its likely cause (a remote name over 63 characters, a name taken on the peer);
   two local namespaces with one remote name share it (Accepted, as in Liqo) and the page warns;
4. a renamed Liqo RuntimeClass is warned about in the pod preview and on the namespace page.
"""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from offloading.insight.diagnosis import diagnose
from offloading.models import Namespace
from offloading.models.mapping import MappingEntry
from offloading.snapshot import namespacemaps_watch as _namespacemap_watch  # noqa: F401 - registers NamespaceMaps
from tests.test_diagnosis_scenarios import FLORENCE, KINDS, MILAN, _offload, _phase
from tests.test_diagnosis_scenarios import sync_snapshot as _sync

pytestmark = pytest.mark.django_db

BOTH = {"nodeSelectorTerms": [MILAN["nodeSelectorTerms"][0], FLORENCE["nodeSelectorTerms"][0]]}


def sync_snapshot() -> None:
    """The watcher's relist of every kind, NamespaceMaps included."""
    assert "namespacemaps" not in KINDS
    _sync((*KINDS, "namespacemaps"))


def _findings(name: str) -> dict[str, Any]:
    return {f.rule: f for f in diagnose(Namespace.objects.get(name=name), notes=True)}


def _replace_selector(k8s: Any, name: str, selector: dict[str, Any]) -> None:
    k8s.custom.patch_namespaced_custom_object(
        "offloading.liqo.io",
        "v1beta1",
        name,
        "namespaceoffloadings",
        "offloading",
        {"spec": {"clusterSelector": selector}},
    )


def test_a_deselected_cluster_keeps_a_stale_ready(sandbox: Any, k8s: Any, admin_client: Any) -> None:
    _offload(k8s, "alpha", {"clusterSelector": BOTH})
    sandbox.wait_idle(10)
    assert _phase(sandbox, "alpha") == "Ready"
    _replace_selector(k8s, "alpha", FLORENCE)
    sandbox.wait_idle(10)
    obj = sandbox.get("namespaceoffloadings.offloading.liqo.io", "alpha", "offloading")
    milan = {c["type"]: c for c in obj["status"]["remoteNamespacesConditions"]["milan"]}
    assert milan["OffloadingRequired"]["status"] == "False"
    assert (milan["Ready"]["status"], milan["Ready"]["reason"]) == ("False", "Terminating")  # as Liqo leaves it
    sync_snapshot()
    assert not MappingEntry.objects.filter(namespace="alpha", cluster_id="milan").exists()
    row = Namespace.objects.get(name="alpha").cluster_states.get(cluster_id="milan")
    assert (row.selected, row.state) == (False, "NotSelected")
    assert "still says Terminating" in row.message
    finding = _findings("alpha")["stale-condition"]
    assert finding.title == "Liqo's per-cluster status of milan is stale" and finding.severity == "info"
    page = admin_client.get(reverse("offloading:namespace_detail", args=["alpha"])).content.decode()
    assert "still says Terminating" in page and "is stale" in page
    data = admin_client.get("/api/v1/namespaces/alpha/").json()
    milan_row = next(c for c in data["clusters"] if c["clusterId"] == "milan")
    assert milan_row["staleReady"] is True and milan_row["state"] == "NotSelected"
    assert "stale-condition" in [f["rule"] for f in data["diagnosis"]]


def test_a_namespace_map_patch_liqo_swallows(sandbox: Any, k8s: Any, admin_client: Any) -> None:
    sandbox.liqo.set_peer("milan", namespace_map_writable=False)
    _offload(k8s, "beta", {"clusterSelector": BOTH})
    sandbox.wait_idle(10)
    # As in Liqo: the status is written (and looks settled), the error is only in the log.
    obj = sandbox.get("namespaceoffloadings.offloading.liqo.io", "beta", "offloading")
    assert obj["status"]["observedGeneration"] == obj["metadata"]["generation"]
    assert obj["status"]["offloadingPhase"] == "Ready"  # florence only
    assert any(ns == "beta" and "NamespaceMap milan" in msg for ns, msg in sandbox.liqo.swallowed)
    sync_snapshot()
    finding = _findings("beta")["controller-stuck"]
    assert finding.title == "Liqo has not taken up milan" and finding.severity == "bad"
    assert (
        "The selector selects milan, but its NamespaceMap has no desiredMapping entry for beta" in finding.explanation
    )
    assert "(since " in finding.explanation and "only its log says it" in finding.explanation
    assert "florence" not in finding.title
    page = admin_client.get(reverse("offloading:namespace_detail", args=["beta"])).content.decode()
    assert "Liqo has not taken up milan" in page
    # Writable again: nothing happens until the next event (no retry), then Liqo takes it up.
    sandbox.liqo.set_peer("milan", namespace_map_writable=True)
    _replace_selector(k8s, "beta", {"nodeSelectorTerms": list(reversed(BOTH["nodeSelectorTerms"]))})
    sandbox.wait_idle(10)
    sync_snapshot()
    assert "controller-stuck" not in _findings("beta")


def test_creation_loop_backoff_says_its_likely_cause(sandbox: Any, k8s: Any, admin_client: Any) -> None:
    long = "x" * 60  # DefaultName: 60 + "-rome" = 65 characters
    k8s.core.create_namespace({"metadata": {"name": long}})
    _offload(k8s, long, {"clusterSelector": FLORENCE})
    _offload(k8s, "gamma", {"namespaceMappingStrategy": "EnforceSameName", "clusterSelector": MILAN})
    sandbox.wait_idle(10)
    assert _phase(sandbox, long) == "AllFailed" and _phase(sandbox, "gamma") == "AllFailed"
    sync_snapshot()
    too_long = _findings(long)["creation-loop-backoff"]
    assert "must be no more than 63 characters (it has 65)" in too_long.explanation
    assert "at most 63 characters" in too_long.action
    taken = _findings("gamma")["creation-loop-backoff"]
    assert 'a namespace "gamma" already exists on the peer' in taken.explanation
    assert "likely with EnforceSameName" in taken.explanation
    page = admin_client.get(reverse("offloading:namespace_detail", args=["gamma"])).content.decode()
    assert "already exists on the peer" in page


def test_two_namespaces_with_one_remote_name_share_it(sandbox: Any, k8s: Any, admin_client: Any) -> None:
    _offload(
        k8s,
        "alpha",
        {"namespaceMappingStrategy": "SelectedName", "remoteNamespaceName": "shared", "clusterSelector": FLORENCE},
    )
    _offload(
        k8s,
        "beta",
        {"namespaceMappingStrategy": "SelectedName", "remoteNamespaceName": "shared", "clusterSelector": FLORENCE},
    )
    sandbox.wait_idle(10)
    # As in Liqo: one NamespaceMap per consumer, so the second is Accepted into the same remote namespace.
    assert _phase(sandbox, "alpha") == "Ready" and _phase(sandbox, "beta") == "Ready"
    sync_snapshot()
    finding = _findings("beta")["shared-remote-namespace"]
    assert 'alpha also maps to "shared" there' in finding.explanation
    assert "deletes it for both" in finding.explanation
    page = admin_client.get(reverse("offloading:namespace_detail", args=["beta"])).content.decode()
    assert "Another namespace uses the remote namespace" in page


def test_a_renamed_runtime_class(sandbox: Any, k8s: Any, admin_client: Any, settings: Any) -> None:
    settings.LIQO_DASH = {**settings.LIQO_DASH, "RUNTIME_CLASS": "liqo-fast"}
    _offload(k8s, "alpha", {"clusterSelector": FLORENCE})
    sandbox.wait_idle(10)
    sync_snapshot()
    finding = _findings("alpha")["runtime-class"]
    assert 'renamed to "liqo-fast"' in finding.title
    page = admin_client.get(reverse("offloading:namespace_detail", args=["alpha"])).content.decode()
    assert "the virtual kubelet removes only" in page
    answer = admin_client.post(
        "/api/v1/namespaces/delta/preview/",
        {"podOffloadingStrategy": "Remote", "pod": {"spec": {"runtimeClassName": "liqo-fast"}}},
        content_type="application/json",
    ).json()
    assert answer["valid"], answer
    assert len(answer["runtimeClassWarnings"]) == 2 and "liqo-fast" in answer["runtimeClassWarnings"][1]
    assert "tolerations" not in answer["pod"]["spec"]  # skipped by the webhook
