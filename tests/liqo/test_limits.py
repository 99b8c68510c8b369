"""Edges of liqo_rules.limits: the caps on selector size, exactly at and one past each limit."""

from __future__ import annotations

from typing import Any

import pytest

from liqo_rules import limits
from liqo_rules.admission import validate_spec
from liqo_rules.selectors.parse import parse_requirements
from liqo_rules.spec import Problem


def _expression(values: int) -> dict[str, Any]:
    return {"key": "region", "operator": "In", "values": [f"v{i}" for i in range(values)]}


def _selector(terms: int = 1, expressions: int = 1, values: int = 1, kind: str = "matchExpressions") -> dict[str, Any]:
    return {"nodeSelectorTerms": [{kind: [_expression(values)] * expressions} for _ in range(terms)]}


def test_the_limits_are_the_documented_ones() -> None:
    assert (limits.MAX_TERMS, limits.MAX_EXPRESSIONS, limits.MAX_VALUES) == (50, 50, 100)


def test_a_selector_exactly_at_every_limit_passes() -> None:
    assert limits.node_selector_limit_problems(_selector(50, 50, 100)) == []
    assert limits.node_selector_limit_problems(_selector(50, 50, 100, kind="matchFields")) == []


def test_one_term_too_many() -> None:
    assert limits.node_selector_limit_problems(_selector(terms=51)) == [
        "nodeSelectorTerms has 51 terms; at most 50 are allowed"
    ]


@pytest.mark.parametrize("kind", ["matchExpressions", "matchFields"])
def test_one_expression_too_many(kind: str) -> None:
    selector = _selector(terms=2, expressions=51, kind=kind)
    assert limits.node_selector_limit_problems(selector) == [
        f"nodeSelectorTerms[0].{kind} has 51 expressions; at most 50 are allowed",
        f"nodeSelectorTerms[1].{kind} has 51 expressions; at most 50 are allowed",
    ]


def test_one_value_too_many_names_the_expression() -> None:
    selector = {"nodeSelectorTerms": [{"matchExpressions": [_expression(1), _expression(101)]}]}
    assert limits.node_selector_limit_problems(selector) == [
        "nodeSelectorTerms[0].matchExpressions[1].values has 101 values; at most 100 are allowed"
    ]


@pytest.mark.parametrize(
    "selector",
    [
        None,
        "x",
        [],
        {},
        {"nodeSelectorTerms": "x"},
        {"nodeSelectorTerms": ["x", {"matchExpressions": 5}]},
        {"nodeSelectorTerms": [{"matchExpressions": ["x", {"values": "abc" * 200}]}]},
    ],
)
def test_shapes_it_cannot_read_are_left_to_the_schema(selector: Any) -> None:
    assert limits.node_selector_limit_problems(selector) == []


def test_requirements_of_a_label_selector() -> None:
    at = parse_requirements(",".join(f"k{i}" for i in range(50)))
    assert limits.requirement_limit_problems(at) == []
    over = parse_requirements(",".join(f"k{i}" for i in range(51)))
    assert limits.requirement_limit_problems(over) == ["the label selector has 51 expressions; at most 50 are allowed"]
    wide = parse_requirements("a in (" + ",".join(f"v{i}" for i in range(101)) + "),b in (x)")
    assert limits.requirement_limit_problems(wide) == ["requirement 'a' has 101 values; at most 100 are allowed"]
    full = parse_requirements("a in (" + ",".join(f"v{i}" for i in range(100)) + ")")
    assert limits.requirement_limit_problems(full) == []


def test_selector_strings_count_as_terms() -> None:
    assert limits.selector_count_problems(["a"] * 50) == []
    assert limits.selector_count_problems(["a"] * 51) == ["selectors has 51 terms; at most 50 are allowed"]


def test_validate_spec_checks_the_limits_first_and_alone() -> None:
    spec = {"clusterSelector": _selector(terms=51), "namespaceMappingStrategy": "Nope"}
    errors, warnings = validate_spec("ns", spec)
    assert errors == [
        Problem(
            "clusterSelector",
            "cluster selector too large: nodeSelectorTerms has 51 terms; at most 50 are allowed",
            "dashboard",
        )
    ]
    assert warnings == []
    errors, _ = validate_spec("ns", {"clusterSelector": _selector(50, 50, 100)})
    assert errors == []


def test_explaining_with_prepared_terms_is_explaining_without() -> None:
    from liqo_rules.peers import select_clusters
    from liqo_rules.selectors.match import explain, prepare_terms

    selector = {
        "nodeSelectorTerms": [
            {"matchExpressions": [_expression(3)]},
            {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["vn-b"]}]},
            {},
            "bad",
        ]
    }
    prepared = prepare_terms(selector)
    assert [text for _term, text in prepared][:2] == ["region in (v0,v1,v2)", "field metadata.name In (vn-b)"]
    for labels, name in (({"region": "v1"}, "vn-a"), ({"region": "x"}, "vn-b"), ({}, "vn-c")):
        fields = {"metadata.name": name}
        assert explain(selector, labels, fields, prepared=prepared) == explain(selector, labels, fields)
    nodes = [("a", "vn-a", {"region": "v1"}), ("b", "vn-b", {"region": "x"})]
    chosen = select_clusters(selector, nodes)
    assert chosen["a"]["selected"] and chosen["b"]["selected"]
    assert chosen["a"]["explanations"][0][1]["terms"][0]["text"] == "region in (v0,v1,v2)"
    assert prepare_terms(None) == [] and explain(None, {}, prepared=[])["all_clusters"] is True


def test_nodes_alike_for_the_selector_share_one_explanation() -> None:
    from liqo_rules.peers import select_clusters
    from liqo_rules.selectors.match import explain, explanation_key, explanation_reads, prepare_terms

    selector = {"nodeSelectorTerms": [{"matchExpressions": [_expression(2), {"key": "tier", "operator": "Exists"}]}]}
    prepared = prepare_terms(selector)
    reads = explanation_reads(prepared)
    assert reads == (frozenset({"region", "tier"}), False)
    assert explanation_key(reads, {"region": "v1", "other": "x"}, "a") == ((("region", "v1"),), None)
    assert explanation_key(reads, {"tier": "1", "region": "v0"}, "a") == ((("region", "v0"), ("tier", "1")), None)
    nodes = [
        ("a", "vn-a", {"region": "v1", "x": "1"}),
        ("b", "vn-b", {"region": "v1", "x": "2"}),
        ("c", "vn-c", {"region": "v1", "tier": "t"}),
        ("d", "vn-d", {"region": "zz", "tier": "t"}),
    ]
    chosen = select_clusters(selector, nodes)
    whys = {cid: chosen[cid]["explanations"][0][1] for cid in "abcd"}
    assert whys["a"] is whys["b"] and whys["a"] is not whys["c"]
    for cluster_id, vn_name, labels in nodes:
        assert whys[cluster_id] == explain(selector, labels, {"metadata.name": vn_name})
    assert [cid for cid in "abcd" if chosen[cid]["selected"]] == ["c"]
    fields = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["vn-a"]}]}]}
    assert explanation_reads(prepare_terms(fields)) == (frozenset(), True)
    assert explanation_key((frozenset(), True), {}, "vn-a") == ((), "vn-a")
    by_name = select_clusters(fields, nodes[:2])
    assert by_name["a"]["selected"] and not by_name["b"]["selected"]
