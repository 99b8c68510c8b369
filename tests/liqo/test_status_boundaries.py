"""liqo_rules.status phase computation from NamespaceMaps (liqo-semantics.md a.4, a.6): every counter
and every rule at its edge, including maps that report a phase without being required."""

from __future__ import annotations

from typing import Any

import pytest

from liqo_rules.status import cluster_status_table, offloading_phase, phase_from_namespace_maps, phase_is_settled

NS = "demo"


def nm(desired: bool = False, phase: str | None = None, namespace: str = NS) -> dict[str, Any]:
    m: dict[str, Any] = {"spec": {"desiredMapping": {namespace: f"{namespace}-x"} if desired else {}}}
    if phase is not None:
        m["status"] = {"currentMapping": {namespace: {"remoteNamespace": f"{namespace}-x", "phase": phase}}}
    return m


def test_no_maps_no_cluster_selected() -> None:
    assert phase_from_namespace_maps(NS, [], deleting=False) == "NoClusterSelected"


def test_deleting_wins() -> None:
    assert phase_from_namespace_maps(NS, [nm(True, "Accepted")], deleting=True) == "Terminating"


@pytest.mark.parametrize(
    ("maps", "want"),
    [
        ([nm(True, "Accepted")], "Ready"),
        ([nm(True, "Accepted"), nm(True, "Accepted")], "Ready"),
        ([nm(True, "Accepted"), nm(True)], "InProgress"),
        ([nm(True, "Accepted"), nm(True, "Terminating")], "InProgress"),
        ([nm(True)], "InProgress"),
        ([nm(True, "CreationLoopBackOff")], "AllFailed"),
        ([nm(True, "CreationLoopBackOff"), nm(True, "CreationLoopBackOff")], "AllFailed"),
        ([nm(True, "CreationLoopBackOff"), nm(True, "Accepted")], "SomeFailed"),
        ([nm(True, "CreationLoopBackOff"), nm(True)], "SomeFailed"),
        # Counters include maps that are not required (a.4): a de-selected cluster still Accepted.
        ([nm(True, "Accepted"), nm(False, "Accepted")], "InProgress"),
        ([nm(True), nm(False, "Accepted")], "Ready"),
        ([nm(True, "Accepted"), nm(False, "CreationLoopBackOff")], "Ready"),
        ([nm(True), nm(False, "CreationLoopBackOff")], "AllFailed"),
        ([nm(False, "Accepted")], "NoClusterSelected"),
    ],
)
def test_phase_from_namespace_maps(maps: list[dict[str, Any]], want: str) -> None:
    assert phase_from_namespace_maps(NS, maps, deleting=False) == want


def test_other_namespaces_do_not_count() -> None:
    maps = [
        nm(True, "Accepted"),
        nm(True, "CreationLoopBackOff", namespace="other"),
        nm(False, "Accepted", namespace="other"),
    ]
    assert phase_from_namespace_maps(NS, maps, deleting=False) == "Ready"
    # For "other": one required map failed, and a map that is not required is Accepted: ready == required (a.4).
    assert phase_from_namespace_maps("other", maps, deleting=False) == "Ready"
    assert phase_from_namespace_maps("other", maps[:2], deleting=False) == "AllFailed"


@pytest.mark.parametrize(
    "broken",
    [
        {},
        {"spec": None, "status": None},
        {"status": {"currentMapping": None}},
        {"status": {"currentMapping": {NS: None}}},
    ],
)
def test_maps_without_spec_or_status_count_as_nothing(broken: dict[str, Any]) -> None:
    assert phase_from_namespace_maps(NS, [nm(True, "Accepted"), broken], deleting=False) == "Ready"


@pytest.mark.parametrize(
    ("required", "ready", "failed", "want"),
    [
        (0, 0, 0, "NoClusterSelected"),
        (0, 1, 1, "NoClusterSelected"),
        (1, 1, 0, "Ready"),
        (2, 2, 2, "Ready"),  # ready is checked before failed
        (2, 1, 0, "InProgress"),
        (2, 3, 0, "InProgress"),
        (2, 0, 2, "AllFailed"),
        (2, 0, 1, "SomeFailed"),
        (2, 1, 1, "SomeFailed"),
        (1, 0, 2, "SomeFailed"),
    ],
)
def test_offloading_phase_rules(required: int, ready: int, failed: int, want: str) -> None:
    assert offloading_phase(deleting=False, required=required, ready=ready, failed=failed) == want


@pytest.mark.parametrize(
    ("phase", "settled"),
    [
        ("Ready", True),
        ("NoClusterSelected", True),
        ("SomeFailed", True),
        ("AllFailed", True),
        ("InProgress", False),
        ("Terminating", False),
        ("", False),
    ],
)
def test_settled_phases(phase: str, settled: bool) -> None:
    assert phase_is_settled(phase) is settled


# --- per-cluster table (i: state = reason of the Ready condition, or "not selected") ----------------------


def cond(type_: str, status: str, reason: str | None = None, message: str = "m", when: str = "t") -> dict[str, Any]:
    c: dict[str, Any] = {"type": type_, "status": status, "message": message, "lastTransitionTime": when}
    if reason is not None:
        c["reason"] = reason
    return c


def row(conditions: list[dict[str, Any]] | None, **status: Any) -> dict[str, Any]:
    obj = {
        "metadata": {"generation": 2},
        "status": {"observedGeneration": 2, "remoteNamespaceName": "demo-x", **status},
    }
    obj["status"]["remoteNamespacesConditions"] = {"rome": conditions}
    [r] = cluster_status_table(obj)
    return r


def test_state_is_the_ready_reason() -> None:
    r = row(
        [cond("OffloadingRequired", "True", "ClusterSelected"), cond("Ready", "True", "NamespaceCreated", "ok", "t1")]
    )
    assert r == {
        "cluster_id": "rome",
        "selected": True,
        "remote_namespace": "demo-x",
        "state": "NamespaceCreated",
        "reason": "NamespaceCreated",
        "message": "ok",
        "last_transition": "t1",
        "stale": False,
        "stale_ready": "",
    }


def test_ready_without_reason_shows_ready_or_unknown() -> None:
    assert row([cond("Ready", "True")])["state"] == "Ready"
    assert row([cond("Ready", "False")])["state"] == "Unknown"
    assert row([cond("Ready", "Unknown", "")])["state"] == "Unknown"


def test_without_ready_condition_the_state_follows_selection() -> None:
    r = row([cond("OffloadingRequired", "False", "ClusterNotSelected", "not me", "t2")])
    assert (r["selected"], r["state"], r["reason"], r["message"], r["last_transition"]) == (
        False,
        "NotSelected",
        "ClusterNotSelected",
        "not me",
        "t2",
    )
    r = row([cond("OffloadingRequired", "True", "ClusterSelected")])
    assert (r["selected"], r["state"]) == (True, "Unknown")
    r = row(None)
    assert (r["selected"], r["state"], r["reason"], r["message"], r["last_transition"]) == (
        False,
        "NotSelected",
        None,
        None,
        None,
    )


def test_rows_without_a_remote_name_and_stale_rows() -> None:
    obj = {
        "metadata": {"generation": 3},
        "status": {"observedGeneration": 2, "remoteNamespacesConditions": {"b": [], "a": []}},
    }
    rows = cluster_status_table(obj)
    assert [r["cluster_id"] for r in rows] == ["a", "b"]
    assert all(r["remote_namespace"] == "" and r["stale"] is True for r in rows)
