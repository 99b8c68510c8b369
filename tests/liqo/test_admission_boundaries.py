"""Edges of liqo_rules.admission: Liqo's validating webhook on updates (b.2), which field each problem
is attached to, and the exact texts of the dashboard's early checks (shown next to the form fields)."""

from __future__ import annotations

import pytest

from liqo_rules.admission import validate_spec, webhook_admission
from liqo_rules.spec import Problem

REMOTE_IMMUTABLE = "The RemoteNamespaceName value cannot be modified after creation"
MAPPING_IMMUTABLE = "The NamespaceMappingStrategy value cannot be modified after creation"
RESTRICTIVE = (
    "The PodOffloadingStrategy was mutated to a more restrictive setting: "
    "existing pods violating this policy might still be running"
)
SELECTED = {"namespaceMappingStrategy": "SelectedName", "remoteNamespaceName": "there"}


def test_an_update_that_keeps_the_remote_name_is_allowed() -> None:
    assert webhook_admission("UPDATE", "offloading", dict(SELECTED), dict(SELECTED)) == ([], [])
    assert validate_spec("ns", dict(SELECTED), dict(SELECTED)) == ([], [])


@pytest.mark.parametrize(("old", "new"), [("there", "elsewhere"), ("there", ""), (None, "there")])
def test_changing_the_remote_name_is_denied(old: str | None, new: str) -> None:
    old_spec = {"namespaceMappingStrategy": "EnforceSameName", "remoteNamespaceName": old}
    new_spec = {"namespaceMappingStrategy": "EnforceSameName", "remoteNamespaceName": new}
    assert webhook_admission("UPDATE", "offloading", new_spec, old_spec) == ([REMOTE_IMMUTABLE], [])


def test_an_empty_and_a_missing_remote_name_are_the_same() -> None:
    assert webhook_admission("UPDATE", "offloading", {"remoteNamespaceName": ""}, {}) == ([], [])


def test_validate_spec_passes_the_old_spec_to_the_webhook() -> None:
    errors, warnings = validate_spec("ns", {"namespaceMappingStrategy": "EnforceSameName"}, {})
    assert errors == [Problem("namespaceMappingStrategy", MAPPING_IMMUTABLE, "webhook")]
    assert warnings == []
    errors, warnings = validate_spec("ns", {"remoteNamespaceName": "x"}, {"remoteNamespaceName": "y"})
    assert errors == [Problem("remoteNamespaceName", REMOTE_IMMUTABLE, "webhook")]


def test_the_restrictive_strategy_warning_is_attached_to_the_pod_strategy_field() -> None:
    errors, warnings = validate_spec("ns", {"podOffloadingStrategy": "Remote"}, {})
    assert errors == []
    assert warnings == [Problem("podOffloadingStrategy", RESTRICTIVE, "webhook")]


def test_system_namespace_message() -> None:
    errors, _ = validate_spec("kube-system", {})
    assert errors == [
        Problem(
            "namespace",
            "namespace 'kube-system' is a Kubernetes or Liqo system namespace and must not be offloaded "
            "(Liqo does not prevent it)",
            "dashboard",
        )
    ]


def test_invalid_selected_name_message() -> None:
    errors, _ = validate_spec("ns", {"namespaceMappingStrategy": "SelectedName", "remoteNamespaceName": "Bad_Name"})
    assert [p.field for p in errors] == ["remoteNamespaceName"]
    assert errors[0].source == "dashboard"
    assert errors[0].message.startswith(
        "remote namespace name 'Bad_Name' is not a valid namespace name: a lowercase RFC 1123"
    )
    assert errors[0].message.endswith(
        "; Liqo would accept it but fail to create the remote namespace (CreationLoopBackOff)"
    )


def test_remote_name_with_another_strategy_is_refused_on_create_only() -> None:
    errors, warnings = validate_spec("ns", {"namespaceMappingStrategy": "EnforceSameName", "remoteNamespaceName": "x"})
    assert warnings == []
    assert errors == [
        Problem(
            "remoteNamespaceName",
            "a remote namespace name is only used with SelectedName; with EnforceSameName Liqo would store it, "
            "ignore it and never let it change: leave it empty or choose SelectedName",
            "dashboard",
        )
    ]
    # Already stored (by another client): an edit keeps it, as Liqo requires (it is immutable).
    stored = {"namespaceMappingStrategy": "DefaultName", "remoteNamespaceName": "x"}
    assert validate_spec("ns", stored, stored) == ([], [])


def test_default_name_too_long_message_and_the_63_character_edge() -> None:
    ns = "n" * 56
    assert validate_spec(ns, {}, local_cluster_id="abcdef") == ([], [])  # 56 + 1 + 6 = 63
    errors, _ = validate_spec(ns, {}, local_cluster_id="abcdefg")  # 64
    assert errors == [
        Problem(
            "namespaceMappingStrategy",
            f"the DefaultName remote namespace '{ns}-abcdefg' is not a valid namespace name: must be no more than "
            "63 characters (it has 64); Liqo does not shorten it, so remote creation would fail. "
            "Use SelectedName or EnforceSameName",
            "dashboard",
        )
    ]


def test_invalid_selector_message() -> None:
    spec = {
        "clusterSelector": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["x"]}]}]
        }
    }
    errors, _ = validate_spec("ns", spec)
    assert len(errors) == 1
    assert errors[0].field == "clusterSelector" and errors[0].source == "dashboard"
    assert errors[0].message.startswith("invalid cluster selector: ")
    assert errors[0].message.endswith(
        " (Liqo accepts it, then reports 'Invalid ClusterSelector' and may select no cluster)"
    )
    assert "must be an integer" in errors[0].message
