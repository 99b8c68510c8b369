"""Edges of what `liqoctl offload namespace --selector ...` builds and prints (liqo-semantics.md d.1,
selector-semantics.md 7): repeated equalities, the notes that explain where liqoctl would refuse, the
position of an invalid --selector, and Go zero values in the printed manifest."""

from __future__ import annotations

import pytest

from liqo_rules.manifest import manifest, render_manifest
from liqo_rules.selectors.liqoctl import cluster_selector, cluster_selector_notes
from liqo_rules.selectors.requirements import SelectorError


def test_repeating_an_equality_with_another_value_is_noted_and_the_last_value_kept() -> None:
    assert cluster_selector(["a=1,a=2"]) == {
        "nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "In", "values": ["2"]}]}]
    }
    assert cluster_selector_notes(["a=1,a=2"]) == [
        "'a=1,a=2': a is compared with = more than once; liqoctl keeps only the last value (a=2)"
    ]


def test_repeating_an_equality_with_the_same_value_is_not_noted() -> None:
    assert cluster_selector_notes(["a=1,a==1"]) == []


@pytest.mark.parametrize(("text", "symbol", "op", "node_op"), [("n>4", ">", "gt", "Gt"), ("n<4", "<", "lt", "Lt")])
def test_gt_and_lt_notes_name_the_rejected_symbol(text: str, symbol: str, op: str, node_op: str) -> None:
    assert cluster_selector_notes([text]) == [
        f"'{text}': liqoctl rejects '{symbol}' (\"{op}\" isn't supported in label selectors); "
        f"it is stored as n {node_op} (4), which Liqo accepts"
    ]


def test_not_equals_note() -> None:
    assert cluster_selector_notes(["a!=b"]) == [
        "'a!=b': liqoctl rejects '!=' (\"!=\" is not a valid label selector operator); it is stored as a NotIn (b), "
        "which Liqo accepts"
    ]


def test_empty_selector_note() -> None:
    assert cluster_selector([""]) == {"nodeSelectorTerms": [{}]}
    assert cluster_selector_notes([""]) == ["'': an empty selector gives an empty term, which selects no cluster"]
    assert cluster_selector([]) == {"nodeSelectorTerms": []}
    assert cluster_selector_notes([]) == []


def test_notes_skip_an_invalid_selector_and_go_on() -> None:
    assert cluster_selector_notes(["x>=1", "a!=b", ""]) == [
        "'a!=b': liqoctl rejects '!=' (\"!=\" is not a valid label selector operator); it is stored as a NotIn (b), "
        "which Liqo accepts",
        "'': an empty selector gives an empty term, which selects no cluster",
    ]


def test_an_invalid_selector_names_its_position_among_the_flags() -> None:
    with pytest.raises(SelectorError) as first:
        cluster_selector(["a in (x", "b"])
    with pytest.raises(SelectorError) as third:
        cluster_selector(["a", "b", "x y"])
    for err, index, text in ((first.value, 0, "a in (x"), (third.value, 2, "x y")):
        assert err.message.startswith(f"selector #{index + 1} {text!r}: ")
        assert err.text == text
        assert err.path == f"nodeSelectorTerms[{index}]"
        assert isinstance(err.position, int)
        assert err.__cause__ is not None
        cause = err.__cause__
        assert isinstance(cause, SelectorError)
        assert err.message == f"selector #{index + 1} {text!r}: {cause.message}"
        assert (err.position, err.token) == (cause.position, cause.token)


def test_manifest_fills_go_zero_values_and_keeps_match_fields() -> None:
    spec = {
        "clusterSelector": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"values": ["x"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["vk"]}], "matchExpressions": []},
            ]
        }
    }
    terms = manifest("demo", spec)["spec"]["clusterSelector"]["nodeSelectorTerms"]
    assert terms == [
        {"matchExpressions": [{"key": "", "operator": "", "values": ["x"]}]},
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["vk"]}]},
    ]
    assert 'key: ""' in render_manifest("demo", spec)


def test_render_manifest_refuses_other_formats() -> None:
    with pytest.raises(ValueError) as err:
        render_manifest("demo", {}, "toml")
    assert str(err.value) == "unsupported output format 'toml'"
