"""Hypothesis properties of liqo_rules.selectors and webhook."""

from __future__ import annotations

import copy
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from liqo_rules.selectors.format import format_term
from liqo_rules.selectors.liqoctl import cluster_selector
from liqo_rules.selectors.match import cluster_matches, explain, matches, validate_node_selector
from liqo_rules.selectors.parse import parse_label_selector, parse_requirements
from liqo_rules.selectors.requirements import SelectorError
from liqo_rules.webhook import mutate_pod

SETTINGS = settings(max_examples=200, deadline=None)

# Small alphabets so that generated selectors often hit the generated labels.
names = st.sampled_from(["a", "b", "zone", "x.y", "A-1", "in", "notin", "k_8"])
prefixes = st.sampled_from(["", "example.com/", "liqo.io/"])
keys = st.builds(lambda p, n: p + n, prefixes, names)
values = st.sampled_from(["", "1", "2", "10", "v", "eu", "us", "in", "007"])
# Node label values are not validated by the matcher, so they may be anything.
label_values = st.sampled_from(["", "1", "2", "10", "-3", "+5", "v", "eu", "us", "1_0", " 5", "99999999999999999999"])
int_values = st.sampled_from(["0", "1", "2", "10", "007", "9223372036854775807"])


@st.composite
def requirements(draw: st.DrawFn) -> dict[str, Any]:
    op = draw(st.sampled_from(["In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt"]))
    expr: dict[str, Any] = {"key": draw(keys), "operator": op}
    if op in ("In", "NotIn"):
        expr["values"] = draw(st.lists(values, min_size=1, max_size=3))
    elif op in ("Gt", "Lt"):
        expr["values"] = [draw(int_values)]
    return expr


terms = st.builds(lambda exprs: {"matchExpressions": exprs} if exprs else {}, st.lists(requirements(), max_size=4))
label_sets = st.dictionaries(keys, label_values, max_size=5)
selectors = st.builds(lambda ts: {"nodeSelectorTerms": ts}, st.lists(terms, max_size=3))


def simple_expr(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    """Reference semantics written from selector-semantics.md section 5, independently of the package."""
    key, op, vals = expr["key"], expr["operator"], expr.get("values") or []
    if op == "In":
        return key in labels and labels[key] in vals
    if op == "NotIn":
        return key not in labels or labels[key] not in vals
    if op == "Exists":
        return key in labels
    if op == "DoesNotExist":
        return key not in labels
    if key not in labels:
        return False
    text = labels[key]
    digits = text[1:] if text[:1] in "+-" else text
    if not digits or not all(ch in "0123456789" for ch in digits):
        return False
    have, want = int(text), int(vals[0])
    if not -(2**63) <= have < 2**63:
        return False
    return have > want if op == "Gt" else have < want


def simple_match(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    return any(
        bool(t.get("matchExpressions")) and all(simple_expr(e, labels) for e in t["matchExpressions"])
        for t in selector["nodeSelectorTerms"]
    )


@SETTINGS
@given(selectors, label_sets)
def test_matches_agrees_with_a_simple_evaluator(selector: dict[str, Any], labels: dict[str, str]) -> None:
    assert matches(selector, labels) is simple_match(selector, labels)
    assert cluster_matches(selector, labels) is (simple_match(selector, labels) or not selector["nodeSelectorTerms"])
    assert explain(selector, labels)["selected"] is cluster_matches(selector, labels)


@SETTINGS
@given(terms, st.lists(label_sets, min_size=1, max_size=4))
def test_format_term_round_trips(term: dict[str, Any], samples: list[dict[str, str]]) -> None:
    text = format_term(term)
    [back] = cluster_selector([text])["nodeSelectorTerms"]

    def canon(t: dict[str, Any]) -> list[tuple[str, str, tuple[str, ...]]]:
        return sorted(
            (e["key"], e["operator"], tuple(sorted(set(e.get("values") or []))))
            for e in t.get("matchExpressions") or []
        )

    assert canon(back) == canon(term)
    for labels in samples:
        assert matches({"nodeSelectorTerms": [back]}, labels) is matches({"nodeSelectorTerms": [term]}, labels)


@SETTINGS
@given(st.text(max_size=40))
def test_parser_only_raises_selector_error(text: str) -> None:
    try:
        reqs = parse_requirements(text)
    except SelectorError:
        return
    # whatever parses re-parses to the same canonical string
    canonical = ",".join(str(r) for r in reqs)
    assert ",".join(str(r) for r in parse_requirements(canonical)) == canonical


@SETTINGS
@given(st.text(alphabet="ab=!(),<> \t01in-./", max_size=30))
def test_parser_on_selector_like_text(text: str) -> None:
    try:
        reqs = parse_requirements(text)
    except SelectorError as err:
        assert err.message
        return
    canonical = ",".join(str(r) for r in reqs)
    assert ",".join(str(r) for r in parse_requirements(canonical)) == canonical
    assert parse_label_selector(canonical) == parse_label_selector(text)


@SETTINGS
@given(st.lists(st.text(alphabet="ab=!(),<> 1in", max_size=15), max_size=3))
def test_cluster_selector_only_raises_selector_error(texts: list[str]) -> None:
    try:
        out = cluster_selector(texts)
    except SelectorError:
        return
    assert len(out["nodeSelectorTerms"]) == len(texts)
    assert validate_node_selector(out) == []


@SETTINGS
@given(st.sampled_from(["Local", "Remote", "LocalAndRemote"]), selectors, terms)
def test_mutate_pod_never_modifies_inputs(strategy: str, selector: dict[str, Any], pod_term: dict[str, Any]) -> None:
    spec = {"podOffloadingStrategy": strategy, "clusterSelector": selector}
    pod = {
        "spec": {
            "affinity": {
                "nodeAffinity": {"requiredDuringSchedulingIgnoredDuringExecution": {"nodeSelectorTerms": [pod_term]}}
            }
        }
    }
    before = copy.deepcopy((spec, pod))
    out = mutate_pod(spec, pod)
    assert (spec, pod) == before
    required = out["spec"]["affinity"]["nodeAffinity"]["requiredDuringSchedulingIgnoredDuringExecution"]
    if strategy == "Local":
        assert out == pod
    else:
        count = len(selector["nodeSelectorTerms"])
        n = max(count, 1) if strategy == "Remote" else (count + 1 if count else 1)
        assert len(required["nodeSelectorTerms"]) == n
