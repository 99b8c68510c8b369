"""NamespaceOffloading rules: controller outcomes (ported from Liqo's controller tests), webhook, schema,
naming, status and liqoctl manifests."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml

from liqo_rules import constants as c
from liqo_rules.admission import validate_spec, webhook_admission
from liqo_rules.manifest import render_manifest
from liqo_rules.schema import schema_errors
from liqo_rules.selectors.liqoctl import cluster_selector
from liqo_rules.selectors.match import cluster_matches
from liqo_rules.selectors.requirements import SelectorError
from liqo_rules.spec import (
    Problem,
    apply_defaults,
    json_copy,
    local_cluster_id_from,
    mapping_strategy,
    normalize_spec,
    remote_namespace_name,
)
from liqo_rules.status import (
    cluster_status_table,
    compute_status,
    condition_list,
    offloading_phase,
    phase_from_namespace_maps,
)

CTRL = yaml.safe_load((Path(__file__).parent / "data" / "liqo_controller.yaml").read_text(encoding="utf-8"))
NOW = "2026-01-01T00:00:00Z"
LATER = "2026-01-01T00:05:00Z"


# --------------------------------------------------------------------------------------------------
# Controller outcomes (namespaceoffloading_controller_test.go), composed from the pure functions.


def reconcile(spec: dict[str, Any], phases: dict[str, str]) -> dict[str, Any]:
    """What the controller converges to for the ported fleet: selection, event, label and status."""
    ns = CTRL["namespace"]
    selector = apply_defaults(spec).get("clusterSelector")
    selected: list[str] = []
    event = None
    for vn in CTRL["fleet"]:
        try:
            if cluster_matches(selector, vn["node_labels"], {"metadata.name": vn["virtual_node"]}):
                selected.append(vn["cluster_id"])
        except SelectorError:
            event = c.INVALID_SELECTOR_EVENT_REASON
            break
    maps = []
    for vn in CTRL["fleet"]:
        cid = vn["cluster_id"]
        nm: dict[str, Any] = {"metadata": {"name": cid}, "spec": {}, "status": {}}
        if cid in selected:
            nm["spec"]["desiredMapping"] = {ns: "remote"}
        if cid in phases:
            nm["status"]["currentMapping"] = {ns: {"phase": phases[cid]}}
        maps.append(nm)
    obj = {"metadata": {"generation": 1}, "spec": spec, "status": {}}
    status = compute_status(ns, obj, maps, local_cluster_id=CTRL["local_cluster_id"], now=NOW)
    label = event is None and apply_defaults(spec)["podOffloadingStrategy"] != c.LOCAL
    return {"selected": selected, "event": event, "label": label, "status": status}


@pytest.mark.parametrize("case", CTRL["scenarios"], ids=lambda s: s["name"])
def test_controller_scenarios(case: dict[str, Any]) -> None:
    got = reconcile(case["spec"], case["phases"])
    assert got["selected"] == case["selected"]
    assert got["event"] == case["event"]
    assert got["label"] is case["scheduling_label"]
    status = got["status"]
    assert status["observedGeneration"] == 1
    assert status["remoteNamespaceName"] == case["remote_namespace"]
    assert status["offloadingPhase"] == case["phase"]
    conditions = {k: [[x["type"], x["status"]] for x in v] for k, v in status["remoteNamespacesConditions"].items()}
    assert conditions == case["conditions"]


# --------------------------------------------------------------------------------------------------
# Phase, conditions and the status table (liqo-semantics.md a.3, a.4, i).


@pytest.mark.parametrize(
    ("deleting", "required", "ready", "failed", "phase"),
    [
        (True, 3, 3, 0, "Terminating"),
        (False, 0, 2, 1, "NoClusterSelected"),
        (False, 2, 2, 0, "Ready"),
        (False, 2, 2, 2, "Ready"),  # ready == required is checked before failed
        (False, 2, 0, 2, "AllFailed"),
        (False, 3, 1, 1, "SomeFailed"),
        (False, 2, 3, 0, "InProgress"),  # a de-selected cluster still Accepted
        (False, 2, 1, 0, "InProgress"),
        (False, 1, 0, 0, "InProgress"),
    ],
)
def test_offloading_phase(deleting: bool, required: int, ready: int, failed: int, phase: str) -> None:
    assert offloading_phase(deleting=deleting, required=required, ready=ready, failed=failed) == phase


def test_phase_counts_include_unselected_clusters() -> None:
    maps = [
        {
            "spec": {"desiredMapping": {"ns": "ns-x"}},
            "status": {"currentMapping": {"ns": {"phase": "Accepted"}}},
        },
        {"spec": {}, "status": {"currentMapping": {"ns": {"phase": "Accepted"}}}},
    ]
    assert phase_from_namespace_maps("ns", maps, deleting=False) == "InProgress"
    assert phase_from_namespace_maps("other", maps, deleting=False) == "NoClusterSelected"


def test_conditions_first_creation_order_and_messages() -> None:
    conds = condition_list(None, required=True, mapping_phase=None, now=NOW)
    assert conds == [
        {
            "type": "OffloadingRequired",
            "status": "True",
            "lastTransitionTime": NOW,
            "reason": "ClusterSelected",
            "message": "The remote cluster has been selected through the ClusterSelector field",
        },
        {
            "type": "Ready",
            "status": "False",
            "lastTransitionTime": NOW,
            "reason": "Creating",
            "message": "The remote namespace is being created",
        },
    ]
    assert condition_list(None, required=False, mapping_phase=None, now=NOW) == [
        {
            "type": "OffloadingRequired",
            "status": "False",
            "lastTransitionTime": NOW,
            "reason": "ClusterNotSelected",
            "message": "The remote cluster has not been selected through the ClusterSelector field",
        }
    ]


@pytest.mark.parametrize(
    ("phase", "status", "reason", "message"),
    [
        ("Accepted", "True", "NamespaceCreated", "Namespace correctly offloaded to the remote cluster"),
        (
            "CreationLoopBackOff",
            "False",
            "CreationLoopBackOff",
            "Some problems occurred during remote namespace creation",
        ),
        ("Terminating", "False", "Terminating", "The remote namespace is being deleted"),
    ],
)
def test_ready_condition_per_mapping_phase(phase: str, status: str, reason: str, message: str) -> None:
    ready = condition_list(None, required=False, mapping_phase=phase, now=NOW)[1]
    assert (ready["status"], ready["reason"], ready["message"]) == (status, reason, message)


def test_conditions_keep_time_when_unchanged_and_overwrite_on_change() -> None:
    first = condition_list(None, required=True, mapping_phase=None, now=NOW)
    same = condition_list(first, required=True, mapping_phase=None, now=LATER)
    assert same == first
    changed = condition_list(first, required=True, mapping_phase="Accepted", now=LATER)
    assert changed[0]["lastTransitionTime"] == NOW
    assert changed[1]["lastTransitionTime"] == LATER and changed[1]["reason"] == "NamespaceCreated"
    # de-selected but still mapped: Ready stays, OffloadingRequired flips
    deselected = condition_list(changed, required=False, mapping_phase="Terminating", now=LATER)
    assert [x["reason"] for x in deselected] == ["ClusterNotSelected", "Terminating"]
    # existing order is kept even when Ready came first
    reordered = condition_list(list(reversed(first)), required=True, mapping_phase=None, now=LATER)
    assert [x["type"] for x in reordered] == ["Ready", "OffloadingRequired"]
    assert first == condition_list(None, required=True, mapping_phase=None, now=NOW)


def test_conditions_removed_while_deleting() -> None:
    assert (
        condition_list([{"type": "OffloadingRequired"}], required=False, mapping_phase=None, now=NOW, deleting=True)
        == []
    )
    assert len(condition_list(None, required=False, mapping_phase="Terminating", now=NOW, deleting=True)) == 2


def test_compute_status_drops_vanished_maps_and_terminates() -> None:
    obj = {
        "metadata": {"generation": 4, "deletionTimestamp": NOW},
        "spec": {"namespaceMappingStrategy": "SelectedName", "remoteNamespaceName": "far"},
        "status": {"remoteNamespacesConditions": {"gone": [{"type": "Ready"}], "a": [], "b": []}},
    }
    maps = [
        {"metadata": {"name": "a"}, "status": {"currentMapping": {"ns": {"phase": "Terminating"}}}},
        {"metadata": {"name": "b"}},
    ]
    status = compute_status("ns", obj, maps, local_cluster_id="rome", now=NOW)
    assert status["offloadingPhase"] == "Terminating"
    assert status["remoteNamespaceName"] == "far"
    assert status["observedGeneration"] == 4
    assert list(status["remoteNamespacesConditions"]) == ["a"]


def test_cluster_status_table() -> None:
    obj = {
        "metadata": {"generation": 3},
        "status": {
            "observedGeneration": 2,
            "remoteNamespaceName": "foo-rome",
            "remoteNamespacesConditions": {
                "milan": condition_list(None, required=True, mapping_phase="Accepted", now=NOW),
                "florence": condition_list(None, required=False, mapping_phase=None, now=NOW),
                "bari": condition_list(None, required=True, mapping_phase="CreationLoopBackOff", now=NOW),
            },
        },
    }
    rows = cluster_status_table(obj)
    assert [r["cluster_id"] for r in rows] == ["bari", "florence", "milan"]
    assert [r["state"] for r in rows] == ["CreationLoopBackOff", "NotSelected", "NamespaceCreated"]
    assert [r["selected"] for r in rows] == [True, False, True]
    assert all(r["stale"] and r["remote_namespace"] == "foo-rome" for r in rows)
    assert rows[0]["message"] == "Some problems occurred during remote namespace creation"
    assert rows[0]["last_transition"] == NOW
    assert set(rows[0]) == {
        "cluster_id",
        "selected",
        "remote_namespace",
        "state",
        "reason",
        "message",
        "last_transition",
        "stale",
        "stale_ready",
    }
    assert [r["stale_ready"] for r in rows] == ["", "", ""]
    obj["status"]["observedGeneration"] = 3
    assert not any(r["stale"] for r in cluster_status_table(obj))
    assert cluster_status_table({"metadata": {}}) == []


# --------------------------------------------------------------------------------------------------
# Naming (b.1)


@pytest.mark.parametrize(
    ("spec", "want"),
    [
        ({}, "foo-rome"),
        ({"namespaceMappingStrategy": "DefaultName", "remoteNamespaceName": "ignored"}, "foo-rome"),
        ({"namespaceMappingStrategy": "EnforceSameName"}, "foo"),
        ({"namespaceMappingStrategy": "SelectedName", "remoteNamespaceName": "bar"}, "bar"),
        ({"namespaceMappingStrategy": "Bogus"}, "foo-rome"),
    ],
)
def test_remote_namespace_name(spec: dict[str, Any], want: str) -> None:
    assert remote_namespace_name("foo", "rome", spec) == want


def test_default_name_is_not_truncated() -> None:
    ns = "n" * 60
    assert remote_namespace_name(ns, "florence", {}) == f"{ns}-florence"


# --------------------------------------------------------------------------------------------------
# Defaults, canonical form, schema, webhook, dashboard checks (a.2, b.2)


def test_apply_defaults_returns_a_new_dict() -> None:
    spec: dict[str, Any] = {"clusterSelector": {"nodeSelectorTerms": []}}
    out = apply_defaults(spec)
    assert out == {
        "clusterSelector": {"nodeSelectorTerms": []},
        "namespaceMappingStrategy": "DefaultName",
        "podOffloadingStrategy": "LocalAndRemote",
    }
    assert spec == {"clusterSelector": {"nodeSelectorTerms": []}}
    assert "clusterSelector" not in apply_defaults({})
    assert apply_defaults({"podOffloadingStrategy": ""})["podOffloadingStrategy"] == ""


def test_normalize_spec_makes_equivalent_specs_equal() -> None:
    a = {
        "remoteNamespaceName": "",
        "clusterSelector": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "a", "operator": "Exists", "values": []}], "matchFields": []}
            ]
        },
    }
    b = {
        "podOffloadingStrategy": "LocalAndRemote",
        "namespaceMappingStrategy": "DefaultName",
        "clusterSelector": cluster_selector(["a"]),
    }
    assert normalize_spec(a) == normalize_spec(b)
    assert list(normalize_spec(a)) == ["namespaceMappingStrategy", "podOffloadingStrategy", "clusterSelector"]
    assert normalize_spec({})["clusterSelector"] == {"nodeSelectorTerms": []}
    assert (
        normalize_spec({"namespaceMappingStrategy": "SelectedName", "remoteNamespaceName": "x"})["remoteNamespaceName"]
        == "x"
    )


@pytest.mark.parametrize(
    ("spec", "fields"),
    [
        ({}, []),
        ({"namespaceMappingStrategy": "Other"}, ["namespaceMappingStrategy"]),
        ({"podOffloadingStrategy": "remote"}, ["podOffloadingStrategy"]),
        ({"podOffloadingStrategy": ""}, ["podOffloadingStrategy"]),
        ({"remoteNamespaceName": 5}, ["remoteNamespaceName"]),
        ({"clusterSelector": {}}, ["clusterSelector"]),
        ({"clusterSelector": {"nodeSelectorTerms": "x"}}, ["clusterSelector"]),
        (
            {"clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "a"}]}]}},
            ["clusterSelector"],
        ),
        (
            {"clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Foo"}]}]}},
            [],
        ),
        (
            {
                "clusterSelector": {
                    "nodeSelectorTerms": [{"matchFields": [{"key": "a", "operator": "In", "values": [1]}]}]
                }
            },
            ["clusterSelector"],
        ),
        ({"clusterSelector": {"nodeSelectorTerms": []}}, []),
    ],
)
def test_schema_errors(spec: dict[str, Any], fields: list[str]) -> None:
    problems = schema_errors(spec)
    assert [p.field for p in problems] == fields
    assert all(p.source == "schema" for p in problems)


def test_schema_error_messages() -> None:
    [p] = schema_errors({"clusterSelector": {}})
    assert p.message == "spec.clusterSelector.nodeSelectorTerms: Required value"
    [p] = schema_errors({"podOffloadingStrategy": "remote"})
    assert p.message == (
        'spec.podOffloadingStrategy: Unsupported value: "remote": supported values: "Local", "Remote", "LocalAndRemote"'
    )


@pytest.mark.parametrize(
    ("operation", "name", "spec", "old", "denials", "warnings"),
    [
        ("CREATE", "other", {}, None, [c.WEBHOOK_NAME_MESSAGE], []),
        ("UPDATE", "other", {}, {}, [c.WEBHOOK_NAME_MESSAGE], []),
        (
            "CREATE",
            "offloading",
            {"namespaceMappingStrategy": "SelectedName"},
            None,
            [c.WEBHOOK_SELECTED_NAME_EMPTY_MESSAGE],
            [],
        ),
        (
            "CREATE",
            "offloading",
            {"namespaceMappingStrategy": "SelectedName", "remoteNamespaceName": "x"},
            None,
            [],
            [],
        ),
        ("CREATE", "offloading", {"podOffloadingStrategy": "Remote"}, None, [], []),
        (
            "UPDATE",
            "offloading",
            {},
            {"namespaceMappingStrategy": "EnforceSameName"},
            [c.WEBHOOK_MAPPING_IMMUTABLE_MESSAGE],
            [],
        ),
        (
            "UPDATE",
            "offloading",
            {"remoteNamespaceName": "b"},
            {"remoteNamespaceName": "a"},
            [c.WEBHOOK_REMOTE_NAME_IMMUTABLE_MESSAGE],
            [],
        ),
        (
            "UPDATE",
            "offloading",
            {},
            {"remoteNamespaceName": "a"},
            [c.WEBHOOK_REMOTE_NAME_IMMUTABLE_MESSAGE],
            [],
        ),
        (
            "UPDATE",
            "offloading",
            {"podOffloadingStrategy": "Local"},
            {},
            [],
            [c.WEBHOOK_RESTRICTIVE_POD_STRATEGY_WARNING],
        ),
        (
            "UPDATE",
            "offloading",
            {"podOffloadingStrategy": "Remote"},
            {"podOffloadingStrategy": "Local"},
            [],
            [c.WEBHOOK_RESTRICTIVE_POD_STRATEGY_WARNING],
        ),
        (
            "UPDATE",
            "offloading",
            {"podOffloadingStrategy": "LocalAndRemote"},
            {"podOffloadingStrategy": "Local"},
            [],
            [],
        ),
        (
            "UPDATE",
            "offloading",
            {"podOffloadingStrategy": "Remote"},
            {"podOffloadingStrategy": "Remote"},
            [],
            [],
        ),
        ("UPDATE", "offloading", {"clusterSelector": {"nodeSelectorTerms": [{}]}}, {}, [], []),
        ("DELETE", "offloading", {}, None, [], []),
    ],
)
def test_webhook_admission(
    operation: str,
    name: str,
    spec: dict[str, Any],
    old: dict[str, Any] | None,
    denials: list[str],
    warnings: list[str],
) -> None:
    assert webhook_admission(operation, name, spec, old) == (denials, warnings)


def test_webhook_message_strings_are_exact() -> None:
    assert c.WEBHOOK_NAME_MESSAGE == "NamespaceOffloading name must match offloading"
    assert c.WEBHOOK_RESTRICTIVE_POD_STRATEGY_WARNING == (
        "The PodOffloadingStrategy was mutated to a more restrictive setting: existing pods violating this policy "
        "might still be running"
    )


def fields_of(problems: list[Problem]) -> list[tuple[str, str]]:
    return [(p.field, p.source) for p in problems]


def test_validate_spec_collects_schema_webhook_and_dashboard_problems() -> None:
    assert validate_spec("foo", {}) == ([], [])
    errors, _ = validate_spec("foo", {"namespaceMappingStrategy": "SelectedName"})
    assert fields_of(errors) == [("remoteNamespaceName", "webhook")]
    errors, _ = validate_spec("foo", {"namespaceMappingStrategy": "SelectedName", "remoteNamespaceName": "Bad_Name"})
    assert fields_of(errors) == [("remoteNamespaceName", "dashboard")]
    errors, _ = validate_spec("foo", {"namespaceMappingStrategy": "SelectedName", "remoteNamespaceName": "a" * 64})
    assert fields_of(errors) == [("remoteNamespaceName", "dashboard")]
    errors, _ = validate_spec("n" * 55, {}, local_cluster_id="florence")
    assert fields_of(errors) == [("namespaceMappingStrategy", "dashboard")]
    assert validate_spec("n" * 54, {}, local_cluster_id="florence") == ([], [])
    errors, _ = validate_spec("kube-system", {})
    assert fields_of(errors) == [("namespace", "dashboard")]
    errors, _ = validate_spec("liqo", {})
    assert fields_of(errors) == [("namespace", "dashboard")]
    errors, _ = validate_spec("foo", {"podOffloadingStrategy": "Nope"})
    assert fields_of(errors) == [("podOffloadingStrategy", "schema")]
    bad_selector = {"clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Foo"}]}]}}
    errors, _ = validate_spec("foo", bad_selector)
    assert fields_of(errors) == [("clusterSelector", "dashboard")]
    errors, warnings = validate_spec("foo", {"podOffloadingStrategy": "Remote"}, {"podOffloadingStrategy": "Local"})
    assert errors == [] and fields_of(warnings) == [("podOffloadingStrategy", "webhook")]
    errors, _ = validate_spec("foo", {"namespaceMappingStrategy": "EnforceSameName"}, {})
    assert fields_of(errors) == [("namespaceMappingStrategy", "webhook")]
    assert errors[0].message == c.WEBHOOK_MAPPING_IMMUTABLE_MESSAGE
    errors, warnings = validate_spec("foo", {"remoteNamespaceName": "x"})
    assert fields_of(errors) == [("remoteNamespaceName", "dashboard")] and warnings == []


def test_problem_is_frozen() -> None:
    p = Problem("namespace", "m", "dashboard")
    with pytest.raises(AttributeError):
        p.field = "x"  # type: ignore[misc]


# --------------------------------------------------------------------------------------------------
# liqoctl offload namespace --output yaml|json (d.1)

YAML_DEFAULT = """apiVersion: offloading.liqo.io/v1beta1
kind: NamespaceOffloading
metadata:
  name: offloading
  namespace: foo
spec:
  clusterSelector:
    nodeSelectorTerms: []
  namespaceMappingStrategy: DefaultName
  podOffloadingStrategy: LocalAndRemote
status: {}
---
"""

YAML_FULL = """apiVersion: offloading.liqo.io/v1beta1
kind: NamespaceOffloading
metadata:
  name: offloading
  namespace: bar
spec:
  clusterSelector:
    nodeSelectorTerms:
    - matchExpressions:
      - key: staging
        operator: DoesNotExist
      - key: topology.kubernetes.io/region
        operator: In
        values:
        - eu-west
        - us
    - {}
    - matchExpressions:
      - key: liqo.io/provider
        operator: In
        values:
        - "true"
  namespaceMappingStrategy: SelectedName
  podOffloadingStrategy: Remote
  remoteNamespaceName: bar-remote
status: {}
---
"""

JSON_FULL = """{
    "kind": "NamespaceOffloading",
    "apiVersion": "offloading.liqo.io/v1beta1",
    "metadata": {
        "name": "offloading",
        "namespace": "bar"
    },
    "spec": {
        "namespaceMappingStrategy": "SelectedName",
        "remoteNamespaceName": "bar-remote",
        "podOffloadingStrategy": "Remote",
        "clusterSelector": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {
                            "key": "staging",
                            "operator": "DoesNotExist"
                        },
                        {
                            "key": "topology.kubernetes.io/region",
                            "operator": "In",
                            "values": [
                                "eu-west",
                                "us"
                            ]
                        }
                    ]
                },
                {},
                {
                    "matchExpressions": [
                        {
                            "key": "liqo.io/provider",
                            "operator": "In",
                            "values": [
                                "true"
                            ]
                        }
                    ]
                }
            ]
        }
    },
    "status": {}
}
"""

FULL_SPEC = {
    "namespaceMappingStrategy": "SelectedName",
    "remoteNamespaceName": "bar-remote",
    "podOffloadingStrategy": "Remote",
    "clusterSelector": cluster_selector(
        ["topology.kubernetes.io/region in (us,eu-west),!staging", "", "liqo.io/provider=true"]
    ),
}


def test_render_manifest_yaml_default() -> None:
    assert render_manifest("foo", {}) == YAML_DEFAULT


def test_render_manifest_yaml_full() -> None:
    assert render_manifest("bar", FULL_SPEC, "yaml") == YAML_FULL


def test_render_manifest_json_full() -> None:
    out = render_manifest("bar", FULL_SPEC, "json")
    assert out == JSON_FULL
    assert json.loads(out)["spec"]["remoteNamespaceName"] == "bar-remote"


def test_render_manifest_json_default_and_round_trip() -> None:
    out = render_manifest("foo", {}, "json")
    assert out.startswith('{\n    "kind": "NamespaceOffloading",\n    "apiVersion": "offloading.liqo.io/v1beta1",\n')
    assert '"clusterSelector": {\n            "nodeSelectorTerms": []\n        }' in out
    assert out.endswith('    "status": {}\n}\n')
    assert yaml.safe_load(render_manifest("foo", {}).removesuffix("---\n")) == json.loads(out)


def test_render_manifest_rejects_unknown_format() -> None:
    with pytest.raises(ValueError, match="unsupported output format"):
        render_manifest("foo", {}, "toml")


def test_render_manifest_does_not_modify_the_spec() -> None:
    spec = copy.deepcopy(FULL_SPEC)
    render_manifest("bar", spec)
    assert spec == FULL_SPEC


@pytest.mark.parametrize(
    ("namespace", "spec", "remote", "expected"),
    [
        ("shop", {}, "shop-rome", "rome"),
        ("shop", {"namespaceMappingStrategy": "DefaultName"}, "shop-milan-2", "milan-2"),
        ("shop", {"namespaceMappingStrategy": "EnforceSameName"}, "shop", None),
        ("shop", {"namespaceMappingStrategy": "SelectedName", "remoteNamespaceName": "shop-x"}, "shop-x", None),
        ("shop", {}, "", None),
        ("shop", {}, "shop-", None),
    ],
)
def test_the_local_cluster_id_is_read_back_from_a_default_name(
    namespace: str, spec: dict, remote: str, expected: str | None
) -> None:
    assert local_cluster_id_from(namespace, spec, remote) == expected
    if expected:
        assert remote_namespace_name(namespace, expected, spec) == remote


def test_webhook_messages_name_their_field_also_when_the_api_server_wraps_them() -> None:
    from liqo_rules.admission import field_of_message

    wrapped = f'admission webhook "nsoff.validate.liqo.io" denied the request: {c.WEBHOOK_MAPPING_IMMUTABLE_MESSAGE}'
    assert field_of_message(wrapped) == "namespaceMappingStrategy"
    assert field_of_message(c.WEBHOOK_SELECTED_NAME_EMPTY_MESSAGE) == "remoteNamespaceName"
    assert field_of_message(c.WEBHOOK_REMOTE_NAME_IMMUTABLE_MESSAGE) == "remoteNamespaceName"
    assert field_of_message("quota exceeded") == "namespace"


def test_json_copy_is_a_deep_copy_of_json_data() -> None:
    data: dict[str, Any] = {"a": [{"b": ["x", 1, None, True]}, 2.5], "c": {"d": {}}, "e": "s"}
    copied = json_copy(data)
    assert copied == data and copied is not data
    assert copied["a"] is not data["a"] and copied["a"][0] is not data["a"][0]
    assert copied["a"][0]["b"] is not data["a"][0]["b"] and copied["c"]["d"] is not data["c"]["d"]
    copied["a"][0]["b"].append("y")
    copied["c"]["d"]["k"] = "v"
    assert data == {"a": [{"b": ["x", 1, None, True]}, 2.5], "c": {"d": {}}, "e": "s"}
    assert json_copy([]) == [] and json_copy("t") == "t" and json_copy(None) is None


def test_mapping_strategy_defaults_like_the_api_server() -> None:
    assert mapping_strategy({}) == "DefaultName"
    assert mapping_strategy(None) == "DefaultName"
    assert mapping_strategy({"namespaceMappingStrategy": None}) == "DefaultName"
    assert mapping_strategy({"namespaceMappingStrategy": "EnforceSameName"}) == "EnforceSameName"
    assert mapping_strategy({"namespaceMappingStrategy": ""}) == ""  # only a missing or null value is defaulted
