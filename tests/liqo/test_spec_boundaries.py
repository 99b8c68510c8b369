"""Edges of liqo_rules.spec (liqo-semantics.md a.2, b.1): namespace names at the 63-character limit,
the canonical form we store and compare (Go's omitempty), defaults, and inputs left untouched."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from liqo_rules.spec import (
    apply_defaults,
    dns1123_problems,
    is_dns1123_label,
    is_system_namespace,
    local_cluster_id_from,
    normalize_spec,
)

RFC1123_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
    "and must start and end with an alphanumeric character (e.g. 'my-name', or '123-abc')"
)


# --- namespace names (RFC 1123 labels, at most 63 characters) ---------------------------------------------


@pytest.mark.parametrize("name", ["a", "0", "a-b", "1-2-3", "a" * 63, "x" + "-" * 61 + "y"])
def test_valid_namespace_names(name: str) -> None:
    assert is_dns1123_label(name) is True
    assert dns1123_problems(name) == []


@pytest.mark.parametrize("name", ["", "-a", "a-", "A", "a_b", "a.b", "a b", "é"])
def test_invalid_namespace_names(name: str) -> None:
    assert is_dns1123_label(name) is False
    assert dns1123_problems(name) == [RFC1123_MSG]


def test_64_characters_is_one_too_many() -> None:
    assert is_dns1123_label("a" * 64) is False
    assert dns1123_problems("a" * 64) == ["must be no more than 63 characters (it has 64)"]
    assert dns1123_problems("A" * 70) == ["must be no more than 63 characters (it has 70)", RFC1123_MSG]


def test_only_strings_are_namespace_names() -> None:
    assert is_dns1123_label(None) is False  # type: ignore[arg-type]
    assert is_dns1123_label(12) is False  # type: ignore[arg-type]


# --- defaults ---------------------------------------------------------------------------------------------


def test_apply_defaults_fills_only_missing_or_null_fields() -> None:
    assert apply_defaults({}) == {"namespaceMappingStrategy": "DefaultName", "podOffloadingStrategy": "LocalAndRemote"}
    assert apply_defaults({"namespaceMappingStrategy": None, "podOffloadingStrategy": "Remote"}) == {
        "namespaceMappingStrategy": "DefaultName",
        "podOffloadingStrategy": "Remote",
    }


def test_apply_defaults_of_a_non_dict_is_the_default_spec() -> None:
    assert apply_defaults(None) == apply_defaults({})  # type: ignore[arg-type]
    assert apply_defaults(["x"]) == apply_defaults({})  # type: ignore[arg-type]


def test_apply_defaults_copies_deeply() -> None:
    spec = {"clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Exists"}]}]}}
    before = copy.deepcopy(spec)
    out = apply_defaults(spec)
    out["clusterSelector"]["nodeSelectorTerms"][0]["matchExpressions"].append({"key": "b", "operator": "Exists"})
    assert spec == before


# --- canonical form (Go struct order, omitempty) ----------------------------------------------------------


def test_normalize_spec_orders_fields_like_the_go_struct() -> None:
    out = normalize_spec(
        {
            "clusterSelector": {"nodeSelectorTerms": []},
            "podOffloadingStrategy": "Remote",
            "remoteNamespaceName": "there",
            "namespaceMappingStrategy": "SelectedName",
        }
    )
    assert list(out) == ["namespaceMappingStrategy", "remoteNamespaceName", "podOffloadingStrategy", "clusterSelector"]
    assert out == {
        "namespaceMappingStrategy": "SelectedName",
        "remoteNamespaceName": "there",
        "podOffloadingStrategy": "Remote",
        "clusterSelector": {"nodeSelectorTerms": []},
    }


@pytest.mark.parametrize("selector", [None, {}, {"nodeSelectorTerms": None}, {"nodeSelectorTerms": []}, "bad"])
def test_normalize_spec_always_has_a_terms_list(selector: Any) -> None:
    spec = {"remoteNamespaceName": ""}
    if selector is not None:
        spec["clusterSelector"] = selector
    assert normalize_spec(spec) == {
        "namespaceMappingStrategy": "DefaultName",
        "podOffloadingStrategy": "LocalAndRemote",
        "clusterSelector": {"nodeSelectorTerms": []},
    }


def test_normalize_spec_omits_empty_lists_and_keeps_requirement_fields() -> None:
    expr = {"key": "region", "operator": "In", "values": ["north", "south"], "extra": "dropped"}
    spec = {
        "clusterSelector": {
            "nodeSelectorTerms": [
                {"matchExpressions": [expr, {"key": "gpu", "operator": "Exists", "values": []}], "matchFields": []},
                {
                    "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["vk"]}],
                    "matchExpressions": None,
                },
                {},
                "not-a-term",
                {"matchExpressions": ["not-an-expression"]},
            ]
        }
    }
    before = copy.deepcopy(spec)
    out = normalize_spec(spec)
    assert out["clusterSelector"]["nodeSelectorTerms"] == [
        {
            "matchExpressions": [
                {"key": "region", "operator": "In", "values": ["north", "south"]},
                {"key": "gpu", "operator": "Exists"},
            ]
        },
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["vk"]}]},
        {},
        "not-a-term",
        {"matchExpressions": ["not-an-expression"]},
    ]
    assert list(out["clusterSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]) == ["key", "operator", "values"]
    # The values list is a copy: the stored form does not share lists with the input.
    out["clusterSelector"]["nodeSelectorTerms"][0]["matchExpressions"][0]["values"].append("east")
    assert spec == before


def test_normalize_spec_keeps_missing_key_and_operator_as_null() -> None:
    out = normalize_spec({"clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"values": ["a"]}]}]}})
    assert out["clusterSelector"]["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": None, "operator": None, "values": ["a"]}
    ]


# --- naming ------------------------------------------------------------------------------------------------


def test_local_cluster_id_is_read_back_only_from_default_name() -> None:
    assert local_cluster_id_from("foo", {}, "foo-rome") == "rome"
    assert local_cluster_id_from("foo", {}, "foo-rome-2") == "rome-2"
    assert local_cluster_id_from("foo", {}, "foo-") is None
    assert local_cluster_id_from("foo", {}, "foorome") is None
    assert local_cluster_id_from("foo", {}, "bar-rome") is None
    assert local_cluster_id_from("foo", {"namespaceMappingStrategy": "EnforceSameName"}, "foo-rome") is None
    assert local_cluster_id_from("foo", {"namespaceMappingStrategy": "SelectedName"}, "foo-rome") is None


@pytest.mark.parametrize(
    ("ns", "system"),
    [
        ("kube-system", True),
        ("kube-public", True),
        ("kube-node-lease", True),
        ("liqo", True),
        ("liqo-system", True),
        ("liqo-tenant-rome", True),
        ("liqo-tenant-", True),
        ("default", False),
        ("liqo-demo", False),
        ("my-liqo-tenant-x", False),
        ("kube-systems", False),
    ],
)
def test_system_namespaces(ns: str, system: bool) -> None:
    assert is_system_namespace(ns) is system


def test_selected_name_without_a_name_gives_an_empty_remote_name() -> None:
    from liqo_rules.spec import remote_namespace_name

    assert remote_namespace_name("foo", "rome", {"namespaceMappingStrategy": "SelectedName"}) == ""
    assert (
        remote_namespace_name("foo", "rome", {"namespaceMappingStrategy": "SelectedName", "remoteNamespaceName": None})
        == ""
    )
