"""Edges of liqo_rules.selectors.format: why a NodeSelectorTerm cannot be written as selector text
(the dashboard shows these reasons), and the text it writes at the edges of each form."""

from __future__ import annotations

from typing import Any

import pytest

from liqo_rules.selectors.format import describe_expr, format_requirement, format_term, term_text
from liqo_rules.selectors.requirements import UnformattableTermError


def reason(fn: Any, arg: Any) -> str:
    with pytest.raises(UnformattableTermError) as err:
        fn(arg)
    return str(err.value)


def test_reasons_for_unformattable_expressions() -> None:
    assert reason(format_requirement, "x") == "expression 'x' is not an object"
    assert (
        reason(format_requirement, {"key": "a", "operator": "Like"})
        == "operator 'Like' cannot be written as selector text"
    )
    assert reason(format_requirement, {"key": "a", "operator": 3}) == "operator 3 cannot be written as selector text"
    assert reason(format_requirement, {"key": "a", "operator": "In", "values": "x"}) == "values of 'a' must be a list"


def test_reasons_carry_the_requirement_errors_with_the_expression_path() -> None:
    assert reason(format_requirement, {"key": "a", "operator": "Gt", "values": ["x"]}) == (
        "expression.values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer"
    )
    two = reason(format_requirement, {"key": "a", "operator": "Gt", "values": ["1", "2"]})
    assert two.startswith("expression.values: Invalid value: [\"1\",\"2\"]: for 'Gt', 'Lt' operators, exactly one")
    assert two.count("; ") == 0
    both = reason(format_requirement, {"key": "-a", "operator": "In", "values": []})
    assert both.startswith('expression.key: Invalid value: "-a": ')
    assert "; expression.values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty" in both


def test_reasons_for_unformattable_terms() -> None:
    assert reason(format_term, ["x"]) == "term ['x'] is not an object"
    fields = {
        "matchFields": [
            {"key": "metadata.name", "operator": "In", "values": ["a", "b"]},
            "junk",
            {"key": "k", "operator": "Exists"},
        ]
    }
    assert reason(format_term, fields) == (
        "the term uses matchFields (metadata.name In (a,b), k Exists), which selector text cannot express"
    )
    assert reason(format_term, {"matchExpressions": "x"}) == "matchExpressions must be a list"


@pytest.mark.parametrize(
    ("expr", "text"),
    [
        ({"key": "a", "operator": "In", "values": ["x"]}, "a=x"),
        ({"key": "a", "operator": "In", "values": ["x", "x"]}, "a=x"),
        ({"key": "a", "operator": "In", "values": [""]}, "a in ()"),
        ({"key": "a", "operator": "In", "values": ["b", "a", "B"]}, "a in (B,a,b)"),
        ({"key": "a", "operator": "NotIn", "values": ["x"]}, "a notin (x)"),
        ({"key": "a", "operator": "Gt", "values": ["7"]}, "a>7"),
        ({"key": "a", "operator": "Lt", "values": ["7"]}, "a<7"),
        ({"key": "a", "operator": "Exists"}, "a"),
        ({"key": "a", "operator": "DoesNotExist"}, "!a"),
    ],
)
def test_format_requirement_forms(expr: dict[str, Any], text: str) -> None:
    assert format_requirement(expr) == text


def test_term_text_falls_back_to_a_description() -> None:
    assert term_text("x") == "'x'"
    term = {
        "matchExpressions": [{"key": "a", "operator": "Gt", "values": ["x"]}, "junk"],
        "matchFields": [{"key": "metadata.name", "operator": "In", "values": ["vk"]}],
    }
    assert term_text(term) == "a Gt (x) AND field metadata.name In (vk)"
    assert term_text({"matchExpressions": [{"key": "a", "operator": "In", "values": ["x"]}]}) == "a=x"


def test_describe_expr() -> None:
    assert describe_expr({"key": "a", "operator": "Exists"}) == "a Exists"
    assert describe_expr({"key": "a", "operator": "DoesNotExist", "values": []}) == "a DoesNotExist"
    assert describe_expr({"key": "a", "operator": "Exists", "values": ["x"]}) == "a Exists (x)"
    assert describe_expr({"key": "a", "operator": "In", "values": "x"}) == "a In (x)"
    assert describe_expr({"key": "a", "operator": "In", "values": [1, "b"]}) == "a In (1,b)"


def test_describe_expr_cuts_a_long_list_of_values_only_when_asked() -> None:
    from liqo_rules.selectors.format import describe_expr

    ten = {"key": "region", "operator": "In", "values": [f"r{i}" for i in range(10)]}
    eleven = {**ten, "values": [f"r{i}" for i in range(11)]}
    assert describe_expr(ten, 10) == "region In (r0,r1,r2,r3,r4,r5,r6,r7,r8,r9)"
    assert describe_expr(eleven, 10) == "region In (r0,r1,r2,r3,r4,r5,r6,r7,r8,r9,… 1 more)"
    assert describe_expr(eleven) == "region In (r0,r1,r2,r3,r4,r5,r6,r7,r8,r9,r10)"
    assert describe_expr({**ten, "values": ["a", "b", "c"]}, 2) == "region In (a,b,… 1 more)"
    assert describe_expr({"key": "gpu", "operator": "Exists"}, 1) == "gpu Exists"
    assert describe_expr({"key": "gpu", "operator": "In", "values": "x"}, 1) == "gpu In (x)"


def test_a_reason_quotes_ten_values_and_the_clusters_own() -> None:
    from liqo_rules.selectors.match import REASON_VALUES, explain

    assert REASON_VALUES == 10
    values = [f"zone-{i:03d}" for i in range(100)]
    selector = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "In", "values": values}]}]}
    why = explain(selector, {"zone": "elsewhere"})
    failed = why["terms"][0]["failed"]
    assert failed == "zone In (" + ",".join(values[:10]) + ",… 90 more) but the cluster has zone=elsewhere"
    not_in = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "zone", "operator": "NotIn", "values": values}]}]}
    assert explain(not_in, {"zone": "zone-050"})["terms"][0]["failed"].endswith(
        ",… 90 more) but the cluster has zone=zone-050"
    )
