"""Edges of liqo_rules.selectors.match (selector-semantics.md 6, liqo-semantics.md c.5): the errors
of malformed terms, matchFields In/NotIn, how several errors are aggregated (Go's "[a, b]"), and what
explain() reports per term."""

from __future__ import annotations

from typing import Any

import pytest

from liqo_rules.selectors.match import (
    cluster_matches,
    explain,
    matches,
    validate_node_selector,
    validate_term,
    virtual_node_labels,
)
from liqo_rules.selectors.requirements import SelectorError

T = "nodeSelectorTerms[0]"
SUPPORTED = '"DoesNotExist", "Exists", "Gt", "In", "Lt", "NotIn"'


def sel(*terms: Any) -> dict[str, Any]:
    return {"nodeSelectorTerms": list(terms)}


def field(op: str, *values: Any, key: str = "metadata.name") -> dict[str, Any]:
    return {"matchFields": [{"key": key, "operator": op, "values": list(values)}]}


def test_a_selector_that_is_not_an_object() -> None:
    with pytest.raises(SelectorError) as err:
        matches("x", {})  # type: ignore[arg-type]
    assert err.value.message == "a NodeSelector must be an object with nodeSelectorTerms"
    with pytest.raises(SelectorError) as err2:
        matches({"nodeSelectorTerms": "x"}, {})
    assert (err2.value.message, err2.value.path) == ("nodeSelectorTerms must be a list", "nodeSelectorTerms")


def test_malformed_term_errors() -> None:
    assert validate_term("x", 3) == ["nodeSelectorTerms[3]: Invalid value: 'x': must be an object"]  # type: ignore[arg-type]
    assert validate_term({"matchExpressions": "x"}) == [f"{T}.matchExpressions: must be a list"]
    assert validate_term({"matchFields": 5}) == [f"{T}.matchFields: must be a list"]
    assert validate_term({"matchExpressions": ["x", {"key": "a", "operator": "Exists"}, 7]}) == [
        f"{T}.matchExpressions[0]: Invalid value: 'x': must be an object",
        f"{T}.matchExpressions[2]: Invalid value: 7: must be an object",
    ]
    assert validate_term({"matchExpressions": [{"key": "a", "operator": "Like"}, {"key": "b", "operator": None}]}) == [
        f'{T}.matchExpressions[0].operator: Unsupported value: "Like": supported values: {SUPPORTED}',
        f"{T}.matchExpressions[1].operator: Unsupported value: None: supported values: {SUPPORTED}",
    ]
    assert validate_term(
        {"matchExpressions": [{"key": "a", "operator": "In", "values": "x"}, {"key": "-", "operator": "Exists"}]}
    )[0] == (f"{T}.matchExpressions[0].values: Invalid value: 'x': must be a list")
    assert (
        len(
            validate_term(
                {
                    "matchExpressions": [
                        {"key": "a", "operator": "In", "values": "x"},
                        {"key": "-", "operator": "Exists"},
                    ]
                }
            )
        )
        == 2
    )


def test_match_fields_errors() -> None:
    assert validate_term({"matchFields": ["x", {"key": "metadata.name", "operator": "In", "values": ["a"]}]}) == [
        f"{T}.matchFields[0]: Invalid value: 'x': must be an object"
    ]
    assert validate_term(field("Exists")) == [
        f'{T}.matchFields[0].operator: Unsupported value: "Exists": supported values: "In", "NotIn"'
    ]
    assert validate_term(field("In", "a", "b")) == [
        f'{T}.matchFields[0].values: Invalid value: ["a","b"]: must have one element'
    ]
    assert validate_term({"matchFields": [{"key": "metadata.name", "operator": "In", "values": "a"}]}) == [
        f'{T}.matchFields[0].values: Invalid value: ["a"]: must have one element'
    ]
    assert validate_term(field("NotIn", "a", key=None)) == [
        f"{T}.matchFields[0].key: Invalid value: None: must be a string"
    ]  # type: ignore[arg-type]
    assert validate_term({}) == []
    assert validate_term({"matchExpressions": [], "matchFields": []}) == []


@pytest.mark.parametrize(
    ("op", "name", "want"),
    [("In", "vk", True), ("In", "other", False), ("NotIn", "vk", False), ("NotIn", "other", True)],
)
def test_match_fields_in_and_not_in(op: str, name: str, want: bool) -> None:
    assert matches(sel(field(op, "vk")), {}, {"metadata.name": name}) is want


def test_match_fields_are_not_checked_when_the_node_has_no_name() -> None:
    assert matches(sel(field("In", "vk")), {}, {"metadata.name": ""}) is True
    assert matches(sel(field("In", "vk")), {}, None) is True


def test_a_failing_field_is_explained() -> None:
    why = explain(sel(field("In", "vk")), {}, {"metadata.name": "other"})
    assert why["terms"][0]["failed"] == "field metadata.name In (vk) but the cluster has metadata.name=other"
    why = explain(sel(field("NotIn", "vk")), {}, {"metadata.name": "vk"})
    assert why["terms"][0]["failed"] == "field metadata.name NotIn (vk) but the cluster has metadata.name=vk"


def test_several_invalid_terms_are_aggregated_like_go() -> None:
    bad0 = {"matchExpressions": [{"key": "a", "operator": "Like"}]}
    bad1 = {"matchExpressions": [{"key": "b", "operator": "Gt", "values": ["x"]}]}
    with pytest.raises(SelectorError) as one:
        matches(sel(bad0), {})
    assert (
        one.value.message
        == f'{T}.matchExpressions[0].operator: Unsupported value: "Like": supported values: {SUPPORTED}'
    )
    assert one.value.path == "nodeSelectorTerms"
    with pytest.raises(SelectorError) as two:
        matches(sel(bad0, {}, bad1), {"b": "1"})
    errs = validate_node_selector(sel(bad0, {}, bad1))
    assert len(errs) == 2 and errs[1].startswith("nodeSelectorTerms[2].matchExpressions[0].values[0]")
    assert two.value.message == "[" + ", ".join(errs) + "]"
    assert explain(sel(bad0, {}, bad1), {"b": "1"})["error"] == "[" + ", ".join(errs) + "]"
    assert explain(sel(bad0), {})["error"] == errs[0]


def test_a_valid_matching_term_wins_over_invalid_ones() -> None:
    bad = {"matchExpressions": [{"key": "a", "operator": "Like"}]}
    ok = {"matchExpressions": [{"key": "a", "operator": "Exists"}]}
    assert matches(sel(bad, ok), {"a": ""}) is True
    why = explain(sel(bad, ok), {"a": ""})
    assert (why["selected"], why["matched_term"], why["error"]) == (True, 1, None)
    assert [t["index"] for t in why["terms"]] == [0, 1]
    assert [t["matched"] for t in why["terms"]] == [False, True]
    assert why["terms"][0]["invalid"].startswith(f"{T}.matchExpressions[0].operator: Unsupported value")
    assert why["terms"][1]["invalid"] is None
    assert why["terms"][1]["failed"] is None


def test_explain_reasons() -> None:
    why = explain(sel({}, {"matchExpressions": [{"key": "a", "operator": "Like"}]}), {})
    assert why["terms"][0]["failed"] == "the term is empty, and an empty term never matches"
    assert why["terms"][1]["failed"].startswith("the term is invalid: nodeSelectorTerms[1].matchExpressions[0]")
    two_bad = {"matchExpressions": [{"key": "a", "operator": "Like"}, {"key": "b", "operator": "Like"}]}
    failed = explain(sel(two_bad), {})["terms"][0]["failed"]
    assert failed.count("; ") == 1 and failed.startswith("the term is invalid: ")
    assert explain(sel(two_bad), {})["terms"][0]["invalid"].count("; ") == 1


@pytest.mark.parametrize(
    ("expr", "labels", "failed"),
    [
        ({"key": "a", "operator": "In", "values": ["x"]}, {"a": "y"}, "a In (x) but the cluster has a=y"),
        ({"key": "a", "operator": "In", "values": ["x"]}, {}, "a In (x) but the cluster has no label a"),
        ({"key": "a", "operator": "NotIn", "values": ["x"]}, {"a": "x"}, "a NotIn (x) but the cluster has a=x"),
        ({"key": "a", "operator": "Exists"}, {}, "a Exists but the cluster has no label a"),
        ({"key": "a", "operator": "DoesNotExist"}, {"a": ""}, "a DoesNotExist but the cluster has a="),
        ({"key": "a", "operator": "Lt", "values": ["3"]}, {}, "a Lt (3) but the cluster has no label a"),
    ],
)
def test_why_an_expression_fails(expr: dict[str, Any], labels: dict[str, str], failed: str) -> None:
    assert explain(sel({"matchExpressions": [expr]}), labels)["terms"][0]["failed"] == failed


def test_cluster_matches_passes_the_fields() -> None:
    assert cluster_matches(sel(field("In", "vk")), {}, {"metadata.name": "other"}) is False
    assert cluster_matches(sel(field("In", "vk")), {}, {"metadata.name": "vk"}) is True
    assert cluster_matches(None, {}) is True
    assert cluster_matches(sel(), {}) is True


def test_virtual_node_labels_without_cluster_id() -> None:
    labels = virtual_node_labels({"spec": {"labels": {"x": "1"}}}, None)
    assert labels == {"x": "1", "liqo.io/remote-cluster-id": "", "storage.liqo.io/available": "true"}
