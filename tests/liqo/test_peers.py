"""liqo_rules.peers against liqo-semantics.md: module status and virtual node health as
``liqoctl info`` reports them (g), the Node of a VirtualNode (c.3, c.5) and cluster selection (a.5, c.5, i)."""

from __future__ import annotations

from typing import Any

import pytest

from liqo_rules.peers import module_status, node_of, select_clusters, virtual_node_healthy

CLUSTER_ID = "liqo.io/remote-cluster-id"


def cond(status: str, message: str | None = None, type_: str | None = "OffloadingVirtualNodeStatus") -> dict[str, Any]:
    c: dict[str, Any] = {"status": status}
    if type_ is not None:
        c["type"] = type_
    if message is not None:
        c["message"] = message
    return c


# --- module status (g: Disabled / Unhealthy / Healthy, alerts only when Unhealthy) ---------------------


@pytest.mark.parametrize("module", [None, {}, {"enabled": False}, {"conditions": [cond("Error", "down")]}])
def test_module_without_enabled_true_is_disabled(module: dict[str, Any] | None) -> None:
    assert module_status(module) == ("Disabled", [])


def test_disabled_module_shows_no_alerts_even_with_bad_conditions() -> None:
    assert module_status({"enabled": False, "conditions": [cond("Error", "down")]}) == ("Disabled", [])


@pytest.mark.parametrize("conditions", [None, [], [cond("Established")], [cond("Ready"), cond("Established")]])
def test_enabled_module_with_only_established_or_ready_conditions_is_healthy(conditions: Any) -> None:
    module: dict[str, Any] = {"enabled": True}
    if conditions is not None:
        module["conditions"] = conditions
    assert module_status(module) == ("Healthy", [])


@pytest.mark.parametrize("status", ["None", "Pending", "Error", "NotReady", "SomeNotReady", "Running", ""])
def test_any_other_condition_status_makes_the_module_unhealthy(status: str) -> None:
    module = {"enabled": True, "conditions": [cond("Established"), cond(status, "gateway not reachable")]}
    assert module_status(module) == ("Unhealthy", ["gateway not reachable"])


def test_a_condition_without_status_is_unhealthy() -> None:
    module = {"enabled": True, "conditions": [{"type": "NetworkConnectionStatus", "message": "no status"}]}
    assert module_status(module) == ("Unhealthy", ["no status"])


def test_alerts_are_the_messages_of_every_unhealthy_condition_in_order() -> None:
    module = {
        "enabled": True,
        "conditions": [
            cond("Error", "first"),
            cond("Ready", "fine, not an alert"),
            cond("NotReady", "second"),
            cond("Established", "also fine"),
        ],
    }
    assert module_status(module) == ("Unhealthy", ["first", "second"])


def test_an_alert_without_message_names_the_condition_type() -> None:
    module = {"enabled": True, "conditions": [cond("Error", None, "NetworkGatewayPresence"), cond("Error", "")]}
    assert module_status(module) == ("Unhealthy", ["NetworkGatewayPresence", "OffloadingVirtualNodeStatus"])


def test_an_alert_without_message_or_type_is_an_empty_string() -> None:
    assert module_status({"enabled": True, "conditions": [cond("Error", None, None)]}) == ("Unhealthy", [""])


def test_module_status_leaves_its_input_alone() -> None:
    module = {"enabled": True, "conditions": [cond("Error", "down"), cond("Ready")]}
    before = repr(module)
    module_status(module)
    assert repr(module) == before


# --- virtual node health (g: Healthy only if every condition is Running or None; none at all is Unhealthy) ---


def vn_with(*statuses: str) -> dict[str, Any]:
    return {
        "status": {
            "conditions": [{"type": t, "status": s} for t, s in zip(("VirtualKubelet", "Node"), statuses, strict=False)]
        }
    }


@pytest.mark.parametrize(
    "statuses", [("Running",), ("None",), ("Running", "Running"), ("Running", "None"), ("None", "None")]
)
def test_virtual_node_with_only_running_or_none_conditions_is_healthy(statuses: tuple[str, ...]) -> None:
    assert virtual_node_healthy(vn_with(*statuses)) is True


@pytest.mark.parametrize("bad", ["Creating", "Draining", "Deleting", "Ready", "Established", "", "running"])
def test_one_condition_in_another_state_makes_the_virtual_node_unhealthy(bad: str) -> None:
    assert virtual_node_healthy(vn_with("Running", bad)) is False
    assert virtual_node_healthy(vn_with(bad, "Running")) is False


@pytest.mark.parametrize(
    "virtual_node",
    [{}, {"status": None}, {"status": {}}, {"status": {"conditions": None}}, {"status": {"conditions": []}}],
)
def test_virtual_node_without_conditions_is_unhealthy(virtual_node: dict[str, Any]) -> None:
    assert virtual_node_healthy(virtual_node) is False


def test_a_condition_without_status_is_not_healthy() -> None:
    assert virtual_node_healthy({"status": {"conditions": [{"type": "Node"}]}}) is False


# --- the Node of a VirtualNode (c.5: same name, labelled with the VirtualNode's cluster id) --------------


def vnode(name: str, cluster_id: str) -> dict[str, Any]:
    return {"metadata": {"name": name}, "spec": {"clusterID": cluster_id}}


def node(name: str, labels: dict[str, str] | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": name}
    if labels is not None:
        meta["labels"] = labels
    return {"metadata": meta}


def test_node_of_finds_the_node_with_the_same_name_and_cluster_id() -> None:
    n = node("milan", {CLUSTER_ID: "milan", "liqo.io/type": "virtual-node"})
    assert node_of(vnode("milan", "milan"), {"milan": n, "rome": node("rome", {CLUSTER_ID: "rome"})}) is n


def test_node_of_ignores_a_node_of_another_name() -> None:
    assert node_of(vnode("milan", "milan"), {"rome": node("rome", {CLUSTER_ID: "milan"})}) is None


@pytest.mark.parametrize(
    "labels", [None, {}, {CLUSTER_ID: "rome"}, {CLUSTER_ID: ""}, {"liqo.io/remote-cluster": "milan"}]
)
def test_node_of_requires_the_remote_cluster_id_label_to_match(labels: dict[str, str] | None) -> None:
    assert node_of(vnode("milan", "milan"), {"milan": node("milan", labels)}) is None


def test_node_of_a_virtual_node_without_cluster_id_does_not_take_a_labelled_node() -> None:
    vn = {"metadata": {"name": "milan"}}
    assert node_of(vn, {"milan": node("milan", {CLUSTER_ID: "milan"})}) is None


def test_node_of_a_virtual_node_without_metadata_finds_nothing() -> None:
    assert node_of({"spec": {"clusterID": "milan"}}, {"milan": node("milan", {CLUSTER_ID: "milan"})}) is None


def test_node_of_works_when_the_node_is_named_differently_from_the_cluster() -> None:
    n = node("liqo-florence", {CLUSTER_ID: "florence"})
    assert node_of(vnode("liqo-florence", "florence"), {"liqo-florence": n}) is n


# --- cluster selection (a.5, c.5, i) -----------------------------------------------------------------


def selector(*terms: list[dict[str, Any]]) -> dict[str, Any]:
    return {"nodeSelectorTerms": [{"matchExpressions": list(t)} for t in terms]}


def expr(key: str, operator: str, *values: str) -> dict[str, Any]:
    e: dict[str, Any] = {"key": key, "operator": operator}
    if values:
        e["values"] = list(values)
    return e


REGION = "topology.kubernetes.io/region"


def vns(*rows: tuple[str, str, dict[str, str]]) -> list[tuple[str, str, dict[str, str]]]:
    return list(rows)


@pytest.mark.parametrize("cluster_selector", [None, {}, {"nodeSelectorTerms": []}])
def test_an_empty_cluster_selector_selects_every_cluster(cluster_selector: dict[str, Any] | None) -> None:
    out = select_clusters(cluster_selector, vns(("milan", "milan", {}), ("rome", "rome", {REGION: "south"})))
    assert set(out) == {"milan", "rome"}
    for entry in out.values():
        assert entry["selected"] is True
        assert entry["reached"] is True
        assert entry["error"] is None
        assert entry["disagree"] is False
        assert len(entry["explanations"]) == 1
        assert entry["explanations"][0][1]["all_clusters"] is True


def test_selection_follows_the_labels_of_each_cluster() -> None:
    out = select_clusters(
        selector([expr(REGION, "In", "north")]),
        vns(("milan", "milan", {REGION: "north"}), ("rome", "rome", {REGION: "south"}), ("oslo", "oslo", {})),
    )
    assert {cid: e["selected"] for cid, e in out.items()} == {"milan": True, "rome": False, "oslo": False}
    assert [vn for vn, _ in out["milan"]["explanations"]] == ["milan"]
    assert all(e["error"] is None and e["reached"] and not e["disagree"] for e in out.values())


def test_the_virtual_node_name_is_matched_as_the_metadata_name_field() -> None:
    sel = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["vn-b"]}]}]}
    out = select_clusters(sel, vns(("milan", "vn-a", {}), ("rome", "vn-b", {})))
    assert out["milan"]["selected"] is False
    assert out["rome"]["selected"] is True


def test_the_last_virtual_node_of_a_cluster_decides_and_disagreement_is_flagged() -> None:
    sel = selector([expr(REGION, "In", "north")])
    out = select_clusters(sel, vns(("milan", "vn-1", {REGION: "north"}), ("milan", "vn-2", {REGION: "south"})))
    assert out["milan"]["selected"] is False
    assert out["milan"]["disagree"] is True
    assert [vn for vn, _ in out["milan"]["explanations"]] == ["vn-1", "vn-2"]

    out = select_clusters(sel, vns(("milan", "vn-2", {REGION: "south"}), ("milan", "vn-1", {REGION: "north"})))
    assert out["milan"]["selected"] is True
    assert out["milan"]["disagree"] is True


def test_virtual_nodes_of_one_cluster_that_agree_are_not_flagged() -> None:
    sel = selector([expr(REGION, "In", "north")])
    for region, selected in (("north", True), ("south", False)):
        rows = vns(
            ("milan", "vn-1", {REGION: region}),
            ("milan", "vn-2", {REGION: region}),
            ("milan", "vn-3", {REGION: region}),
        )
        out = select_clusters(sel, rows)
        assert out["milan"]["selected"] is selected
        assert out["milan"]["disagree"] is False
        assert len(out["milan"]["explanations"]) == 3


def test_disagreement_stays_flagged_once_seen() -> None:
    sel = selector([expr(REGION, "In", "north")])
    rows = vns(("milan", "a", {REGION: "north"}), ("milan", "b", {REGION: "south"}), ("milan", "c", {REGION: "south"}))
    out = select_clusters(sel, rows)
    assert out["milan"] == {**out["milan"], "selected": False, "disagree": True}


def test_an_invalid_selector_stops_the_pass_at_the_first_virtual_node() -> None:
    sel = selector([expr(REGION, "Gt", "north")])  # Gt needs an integer: the term is invalid and matches nothing
    out = select_clusters(sel, vns(("milan", "milan", {REGION: "1"}), ("rome", "rome", {}), ("milan", "milan-2", {})))
    first = out["milan"]
    assert first["reached"] is True
    assert first["selected"] is False
    assert isinstance(first["error"], str) and first["error"]
    assert [vn for vn, _ in first["explanations"]] == ["milan"]
    rome = out["rome"]
    assert rome == {"selected": False, "explanations": [], "disagree": False, "error": None, "reached": False}


def test_clusters_before_the_failing_virtual_node_keep_their_selection() -> None:
    # The second term is invalid only when reached: a valid matching term means no error (c.5).
    sel = selector([expr(REGION, "In", "north")], [expr("size", "Lt", "big")])
    out = select_clusters(
        sel,
        vns(
            ("milan", "milan", {REGION: "north"}),
            ("rome", "rome", {REGION: "south"}),
            ("oslo", "oslo", {REGION: "north"}),
        ),
    )
    assert out["milan"]["selected"] is True and out["milan"]["error"] is None
    assert out["rome"]["selected"] is False and out["rome"]["error"]
    assert out["oslo"]["reached"] is False and out["oslo"]["selected"] is False and out["oslo"]["error"] is None


def test_an_error_on_a_later_virtual_node_of_a_selected_cluster_keeps_the_earlier_verdict() -> None:
    sel = selector([expr(REGION, "In", "north")], [expr("size", "Lt", "big")])
    out = select_clusters(sel, vns(("milan", "a", {REGION: "north"}), ("milan", "b", {REGION: "south"})))
    assert out["milan"]["error"]
    assert out["milan"]["selected"] is True
    assert out["milan"]["disagree"] is False
    assert len(out["milan"]["explanations"]) == 2


def test_no_virtual_nodes_no_clusters() -> None:
    assert select_clusters(selector([expr(REGION, "Exists")]), []) == {}


def test_clusters_after_the_stop_still_get_an_unreached_entry() -> None:
    sel = selector([expr(REGION, "Gt", "north")])
    out = select_clusters(sel, vns(("milan", "milan", {}), ("rome", "rome", {}), ("oslo", "oslo", {})))
    assert set(out) == {"milan", "rome", "oslo"}
    assert out["oslo"] == {"selected": False, "explanations": [], "disagree": False, "error": None, "reached": False}


def test_node_of_a_virtual_node_without_cluster_id_and_an_unlabelled_node() -> None:
    assert node_of({"metadata": {"name": "milan"}, "spec": {}}, {"milan": node("milan", {})}) is None
    assert node_of({"metadata": {"name": "milan"}}, {"milan": node("milan", None)}) is None
