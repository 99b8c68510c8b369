"""liqo_rules.mapping and the RuntimeClass notes of liqo_rules.webhook (issue 27, items 1-4).

Cases from liqotech/liqo 557c199cf: namespaceoffloading-controller/status.go
(setRemoteConditionsForEveryCluster never removes Ready), namespaceoffloading_controller.go (the deferred
status write drops the error), clusterselector.go, namespacemap-controller/enforcement.go and its test
("already exists but it is not managed by the NamespaceMap" -> CreationLoopBackOff; "managed by the
NamespaceMap" -> Accepted), cmd/webhook/main.go and virtualKubelet/forge/pods.go (RuntimeClassNameMutator).
"""

from __future__ import annotations

from typing import Any

import pytest

from liqo_rules.mapping import (
    CAUSE_INVALID_NAME,
    CAUSE_NAME_TAKEN,
    GAP_NO_NAMESPACE_MAP,
    GAP_NOT_DROPPED,
    GAP_NOT_TAKEN_UP,
    SWALLOWED_ERRORS,
    Gap,
    backoff_causes,
    controller_gaps,
    local_map_cluster,
    map_entries,
    shared_remote_note,
    stale_ready_message,
    stale_ready_reason,
)
from liqo_rules.status import cluster_status_table, compute_status, condition_list
from liqo_rules.webhook import mutate_pod, runtime_class_notes

NOW = "2026-01-01T00:00:00Z"
LATER = "2026-01-01T01:00:00Z"


def _nm(name: str, desired: bool, phase: str | None) -> dict[str, Any]:
    nm: dict[str, Any] = {"metadata": {"name": name}, "spec": {"desiredMapping": {"ns": "ns-rome"} if desired else {}}}
    if phase:
        nm["status"] = {"currentMapping": {"ns": {"remoteNamespace": "ns-rome", "phase": phase}}}
    return nm


# --------------------------------------------------------------------------------------------------
# 1. Stale Ready


def _deselected_lifecycle() -> list[dict[str, Any]]:
    """The conditions of one cluster as Liqo's controller leaves them: selected and Accepted, then
    de-selected (provider: Terminating), then the remote namespace gone (entry removed)."""
    obj: dict[str, Any] = {"metadata": {"generation": 1}, "spec": {}, "status": {}}
    steps = [(True, "Accepted"), (False, "Terminating"), (False, None)]
    out = []
    for desired, phase in steps:
        obj["status"] = compute_status("ns", obj, [_nm("milan", desired, phase)], local_cluster_id="rome", now=NOW)
        out.append(obj["status"]["remoteNamespacesConditions"]["milan"])
    return out


def test_liqo_keeps_ready_after_deselection() -> None:
    accepted, terminating, gone = _deselected_lifecycle()
    assert [c["type"] for c in gone] == ["OffloadingRequired", "Ready"]
    assert gone[0]["status"] == "False" and gone[1]["reason"] == "Terminating"
    assert terminating == gone  # nothing changes when the currentMapping entry goes
    assert stale_ready_reason(accepted, deleting=False) == ""
    assert stale_ready_reason(gone, deleting=False) == "Terminating"
    assert stale_ready_reason(gone, deleting=False, mapped=False) == "Terminating"
    assert stale_ready_reason(gone, deleting=False, mapped=True) == ""  # the teardown is real
    assert stale_ready_reason(gone, deleting=True) == ""  # Liqo drops the entry while deleting


@pytest.mark.parametrize(
    ("conditions", "want"),
    [
        (None, ""),
        ([], ""),
        (condition_list(None, required=False, mapping_phase=None, now=NOW), ""),  # never selected
        (condition_list(None, required=True, mapping_phase=None, now=NOW), ""),
        ([{"type": "Ready", "status": "False", "reason": "CreationLoopBackOff"}], ""),  # no OffloadingRequired
        ([{"type": "OffloadingRequired", "status": "Unknown"}, {"type": "Ready", "status": "True"}], ""),
        ([{"type": "OffloadingRequired", "status": "False"}, {"type": "Ready", "status": "True"}], "True"),
        ([{"type": "OffloadingRequired", "status": "False"}, {"type": "Ready"}], "Ready"),
        (
            [
                "junk",
                {"type": "OffloadingRequired", "status": "False"},
                {"type": "Ready", "reason": "NamespaceCreated"},
            ],
            "NamespaceCreated",
        ),
        (
            [{"type": "OffloadingRequired", "status": "False"}, {"type": "Ready", "reason": "", "status": "False"}],
            "False",
        ),
    ],
)
def test_stale_ready_reason(conditions: Any, want: str) -> None:
    assert stale_ready_reason(conditions, deleting=False) == want


def test_status_table_says_not_selected_for_a_stale_ready() -> None:
    gone = _deselected_lifecycle()[2]
    obj = {
        "metadata": {"generation": 1},
        "status": {"observedGeneration": 1, "remoteNamespacesConditions": {"milan": gone}},
    }
    (row,) = cluster_status_table(obj)
    assert (row["state"], row["selected"], row["stale_ready"]) == ("NotSelected", False, "Terminating")
    assert row["message"] == stale_ready_message("Terminating")
    assert stale_ready_message("Terminating") == (
        "Not selected. Liqo's Ready condition still says Terminating: it is left from when the cluster was "
        "selected (Liqo never removes it), not the state of a remote namespace."
    )
    assert row["reason"] == "ClusterNotSelected"
    assert row["last_transition"] == NOW
    assert "Terminating" in row["message"] and "never removes" in row["message"]
    (real,) = cluster_status_table(obj, mapped={"milan"})
    assert (real["state"], real["stale_ready"], real["message"]) == (
        "Terminating",
        "",
        "The remote namespace is being deleted",
    )
    (unmapped,) = cluster_status_table(obj, mapped=set())
    assert unmapped["stale_ready"] == "Terminating"
    obj["metadata"]["deletionTimestamp"] = NOW
    assert cluster_status_table(obj)[0]["state"] == "Terminating"


def test_stale_row_keeps_the_required_condition() -> None:
    required = {"type": "OffloadingRequired", "status": "False", "reason": "R", "lastTransitionTime": "t"}
    ready = {"type": "Ready", "reason": "Creating", "message": "m", "lastTransitionTime": "u"}
    obj = {"metadata": {}, "status": {"remoteNamespacesConditions": {"x": [required, ready]}}}
    (row,) = cluster_status_table(obj)
    assert row["state"] == "NotSelected" and row["message"] == stale_ready_message("Creating")
    assert (row["reason"], row["last_transition"], row["selected"]) == ("R", "t", False)
    assert "message" not in required  # the condition itself is not changed


# --------------------------------------------------------------------------------------------------
# 2. Swallowed errors


def _entry(selected: bool, *, error: str | None = None, reached: bool = True) -> dict[str, Any]:
    return {"selected": selected, "error": error, "reached": reached, "explanations": [], "disagree": False}


def test_controller_gaps() -> None:
    selection = {
        "milan": _entry(True),  # selected, no desiredMapping: a patch failed
        "turin": _entry(False),  # desired, not selected: a removal failed
        "naples": _entry(True),  # fine
        "florence": _entry(False),  # fine
        "bari": _entry(True, error="bad"),  # the selector errored there: Liqo left it
        "genoa": _entry(True, reached=False),  # not reached
        "pisa": _entry(False),  # no NamespaceMap
    }
    desired = {"turin", "naples"}  # bari: selected with an error, not desired, and still no gap
    maps = {"milan", "turin", "naples", "florence", "bari", "genoa"}
    assert controller_gaps(selection, desired, maps) == [
        Gap("milan", GAP_NOT_TAKEN_UP),
        Gap("pisa", GAP_NO_NAMESPACE_MAP),
        Gap("turin", GAP_NOT_DROPPED),
    ]
    assert controller_gaps(selection, iter(desired), iter(maps)) == controller_gaps(selection, desired, maps)
    assert controller_gaps({}, set(), set()) == []


def test_controller_gaps_while_deleting() -> None:
    selection = {"milan": _entry(True), "turin": _entry(False)}
    assert controller_gaps(selection, {"turin", "rome"}, {"milan", "turin"}, deleting=True) == [
        Gap("turin", GAP_NOT_DROPPED)
    ]
    assert controller_gaps(selection, set(), {"milan"}, deleting=True) == []


def test_gap_texts() -> None:
    assert Gap("milan", GAP_NOT_TAKEN_UP).text("web") == (
        "the selector selects milan, but its NamespaceMap has no desiredMapping entry for web: "
        "Liqo has not asked for the remote namespace there"
    )
    assert Gap("milan", GAP_NOT_DROPPED).text("web") == (
        "the selector no longer selects milan, but its NamespaceMap still asks for web: "
        "Liqo has not released the remote namespace there"
    )
    assert Gap("pisa", GAP_NO_NAMESPACE_MAP).text("web") == (
        "pisa has a virtual node but no NamespaceMap: Liqo's controller stops every reconcile at "
        '"no NamespaceMap found for remote cluster ID: pisa", before selecting'
    )
    assert "drops the error" in SWALLOWED_ERRORS


# --------------------------------------------------------------------------------------------------
# 3. CreationLoopBackOff causes


def test_backoff_invalid_name_is_alone() -> None:
    long = "a" * 59 + "-rome"
    (cause,) = backoff_causes(long, "DefaultName")
    assert cause.code == CAUSE_INVALID_NAME
    assert cause.text == (
        f'the remote name "{long}" is not a valid namespace name (must be no more than 63 characters (it has 64)): '
        "the peer's API server refuses to create it"
    )
    (empty,) = backoff_causes("", "SelectedName")
    assert empty.code == CAUSE_INVALID_NAME and "(is empty)" in empty.text
    (upper,) = backoff_causes("Foo", "SelectedName")
    assert upper.code == CAUSE_INVALID_NAME
    (both,) = backoff_causes("F" * 64, "SelectedName")
    assert "(it has 64); " in both.text  # every problem, joined with "; "
    assert backoff_causes("a" * 63, "EnforceSameName")[0].code == CAUSE_NAME_TAKEN


@pytest.mark.parametrize(
    ("strategy", "how"),
    [
        ("EnforceSameName", "likely with EnforceSameName, which uses the same name on every peer"),
        ("SelectedName", "likely with SelectedName, which uses the same name on every peer"),
        ("", "likely with DefaultName, which uses the same name on every peer"),
        ("DefaultName", "possible, though the name ends with this cluster's id"),
    ],
)
def test_backoff_name_taken(strategy: str, how: str) -> None:
    (cause,) = backoff_causes("shop", strategy)
    assert cause.code == CAUSE_NAME_TAKEN
    assert cause.text == (
        'a namespace "shop" already exists on the peer and is not managed by this cluster\'s NamespaceMap '
        f"(made there by hand, or another consumer's twin): {how}; the peer's namespaces are not visible from here"
    )
    assert backoff_causes("shop", strategy, peer_visible=True)[0].text.endswith("; check the peer's namespaces")


def test_shared_remote_note() -> None:
    assert shared_remote_note(["b"], "x") == (
        'b also maps to "x" there: Liqo accepts both into one shared remote namespace, and unoffloading or '
        "de-selecting either deletes it for both"
    )
    assert shared_remote_note(["c", "b"], "x").startswith('b, c also map to "x" there')


# --------------------------------------------------------------------------------------------------
# 4. RuntimeClass


def test_runtime_class_default_says_nothing() -> None:
    assert runtime_class_notes("liqo", {"spec": {"runtimeClassName": "liqo"}}) == []


def test_runtime_class_renamed() -> None:
    general = (
        'Liqo\'s RuntimeClass is named "fast", not "liqo": the webhook skips pods of class "fast", and the virtual '
        'kubelet removes only "liqo" from the remote pod, so their remote copies ask the provider for a '
        'RuntimeClass "fast" and fail unless it has one.'
    )
    assert runtime_class_notes("fast", {}) == [general]
    assert runtime_class_notes("fast", {"spec": {"runtimeClassName": "liqo"}}) == [general]
    assert runtime_class_notes("fast", {"spec": {"runtimeClassName": "fast"}}) == [
        general,
        'This pod uses "fast": it is left unmutated and, on a peer without that RuntimeClass, its remote pod is '
        "refused.",
    ]
    assert runtime_class_notes("fast", None) == [general]  # type: ignore[arg-type]


def test_webhook_skips_only_the_configured_class() -> None:
    spec = {"podOffloadingStrategy": "Remote"}
    pod = {"spec": {"runtimeClassName": "fast"}}
    assert mutate_pod(spec, pod, "fast") == pod
    assert mutate_pod(spec, pod)["spec"]["tolerations"]  # with the default "liqo" it is mutated


# --------------------------------------------------------------------------------------------------
# NamespaceMaps


@pytest.mark.parametrize(
    ("labels", "want"),
    [
        ({"liqo.io/replication": "true", "liqo.io/remoteID": "milan", "liqo.io/remote-cluster-id": "milan"}, "milan"),
        ({"liqo.io/replication": "true", "liqo.io/remoteID": "", "liqo.io/remote-cluster-id": "milan"}, "milan"),
        ({"liqo.io/replication": "false", "liqo.io/remoteID": "milan", "liqo.io/remote-cluster-id": "milan"}, ""),
        ({"liqo.io/remoteID": "milan", "liqo.io/remote-cluster-id": "milan"}, ""),
        ({"liqo.io/replication": "true", "liqo.io/remote-cluster-id": "milan"}, ""),
        ({"liqo.io/replication": "true", "liqo.io/remoteID": "milan"}, ""),
        ({"liqo.io/replication": "true", "liqo.io/remoteID": "x", "liqo.io/remote-cluster-id": ""}, ""),
        (None, ""),
    ],
)
def test_local_map_cluster(labels: Any, want: str) -> None:
    assert local_map_cluster({"metadata": {"labels": labels}}) == want
    assert local_map_cluster({}) == ""


def test_map_entries() -> None:
    nm = {
        "spec": {"desiredMapping": {"b": "b-rome", "a": "a-rome"}},
        "status": {
            "currentMapping": {
                "a": {"remoteNamespace": "a-rome", "phase": "Accepted"},
                "c": {"remoteNamespace": "c-rome", "phase": "Terminating"},
                "d": "junk",
            }
        },
    }
    entries = map_entries(nm)
    assert entries == {
        "a": ("a-rome", "a-rome", "Accepted"),
        "b": ("b-rome", "", ""),
        "c": ("", "c-rome", "Terminating"),
        "d": ("", "", ""),
    }
    assert list(entries) == ["a", "b", "c", "d"]
    assert map_entries({}) == {}
    assert map_entries({"spec": None, "status": {"currentMapping": None}}) == {}
