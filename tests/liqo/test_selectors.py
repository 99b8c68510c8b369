"""Conformance of liqo_rules.selectors with apimachinery, component-helpers and liqoctl (data-driven)."""

from __future__ import annotations

import copy
from pathlib import Path
from typing import Any

import pytest
import yaml

from liqo_rules.selectors.format import format_term
from liqo_rules.selectors.liqoctl import cluster_selector, cluster_selector_notes
from liqo_rules.selectors.match import (
    cluster_matches,
    explain,
    matches,
    validate_node_selector,
    validate_term,
    virtual_node_labels,
)
from liqo_rules.selectors.parse import (
    label_selector_matches,
    lex,
    parse_label_selector,
    parse_operator,
    parse_requirements,
)
from liqo_rules.selectors.requirements import (
    Requirement,
    SelectorError,
    UnformattableTermError,
    new_requirement,
    requirement_errors,
)

DATA = Path(__file__).parent / "data"


def load(name: str) -> dict[str, Any]:
    """A data table from tests/liqo/data."""
    with open(DATA / name, encoding="utf-8") as fh:
        return yaml.safe_load(fh)


APIM = load("apimachinery_selector.yaml")
HELPERS = load("component_helpers_nodeaffinity.yaml")
DOCS = load("docs_selector_cases.yaml")
LIQOCTL = load("liqoctl_offload.yaml")


def canonical(text: str) -> str:
    """apimachinery Selector.String() of a parsed selector."""
    return ",".join(str(r) for r in parse_requirements(text))


def expand(value: Any) -> Any:
    """Data-file shorthand {repeat: [char, n]}."""
    if isinstance(value, dict) and "repeat" in value:
        char, n = value["repeat"]
        return char * n
    if isinstance(value, list):
        return [expand(v) for v in value]
    return value


def node_args(node: dict[str, Any] | None) -> tuple[dict[str, str], dict[str, str]]:
    """Labels and fields (metadata.name, only when set) of a data-table node."""
    node = node or {}
    fields = {"metadata.name": node["name"]} if node.get("name") else {}
    return dict(node.get("labels") or {}), fields


def k8s_match(selector: dict[str, Any] | None, node: dict[str, Any] | None) -> bool:
    """MatchNodeSelectorTerms(node, selector) ignoring the error, as the upstream tests do."""
    if node is None:
        return False
    labels, fields = node_args(node)
    try:
        return matches(selector, labels, fields)
    except SelectorError:
        return False


# --------------------------------------------------------------------------------------------------
# apimachinery pkg/labels/selector_test.go


@pytest.mark.parametrize("text", APIM["selector_parse"]["good"])
def test_good_selectors_parse_and_restring(text: str) -> None:
    assert canonical(text) == text.replace(" ", "")


@pytest.mark.parametrize("text", APIM["selector_parse"]["bad"])
def test_bad_selectors_are_rejected(text: str) -> None:
    with pytest.raises(SelectorError):
        parse_requirements(text)


@pytest.mark.parametrize(("a", "b"), APIM["deterministic_parse"])
def test_parse_is_deterministic(a: str, b: str) -> None:
    assert canonical(a) == canonical(b)


@pytest.mark.parametrize(("text", "labels", "want"), APIM["selector_matches"])
def test_selector_matches(text: str, labels: dict[str, str], want: bool) -> None:
    assert label_selector_matches(text, labels) is want


@pytest.mark.parametrize(("selector_set", "labels"), APIM["set_matches"])
def test_set_selector_matches(selector_set: dict[str, str], labels: dict[str, str]) -> None:
    text = ",".join(f"{k}={v}" for k, v in selector_set.items())
    assert label_selector_matches(text, labels)


@pytest.mark.parametrize(("selector_set", "want"), APIM["set_selector_string"])
def test_set_selector_string(selector_set: dict[str, str], want: str) -> None:
    assert canonical(",".join(f"{k}={v}" for k, v in selector_set.items())) == want


@pytest.mark.parametrize(("text", "token"), APIM["lexer"])
def test_lexer_first_token(text: str, token: str) -> None:
    kind, literal = lex(text)[0]
    assert kind == token
    assert literal == text


@pytest.mark.parametrize(("text", "tokens"), APIM["lexer_sequence"])
def test_lexer_sequence(text: str, tokens: list[str]) -> None:
    assert [k for k, _ in lex(text)] == [*tokens, "EndOfStringToken"]


@pytest.mark.parametrize(("text", "tokens"), APIM["parser_lookahead"])
def test_parser_lookahead_sees_every_token(text: str, tokens: list[str]) -> None:
    assert [k for k, _ in lex(text)] == tokens


@pytest.mark.parametrize(("token", "operator"), APIM["parse_operator"])
def test_parse_operator(token: str, operator: str | None) -> None:
    if operator is None:
        with pytest.raises(SelectorError, match="expected: in, notin, =, ==, !=, gt, lt"):
            parse_operator(token)
    else:
        assert parse_operator(token) == operator


@pytest.mark.parametrize(("key", "op", "values", "paths"), APIM["requirement_constructor"])
def test_requirement_constructor(key: Any, op: str, values: list[Any], paths: list[str]) -> None:
    errors = requirement_errors(expand(key), op, expand(values))
    assert [e.split(": ", 1)[0] for e in errors] == paths
    if not paths:
        assert new_requirement(expand(key), op, expand(values)).key == expand(key)
    else:
        with pytest.raises(SelectorError):
            new_requirement(expand(key), op, expand(values))


@pytest.mark.parametrize(("labels", "want", "paths"), APIM["validated_selector_from_set"])
def test_validated_selector_from_set(labels: dict[str, str], want: str | None, paths: list[str]) -> None:
    errors = [e for k, v in labels.items() for e in requirement_errors(k, "=", [v])]
    assert [e.split(": ", 1)[0] for e in errors] == paths
    if want is not None:
        assert canonical(",".join(f"{k}={v}" for k, v in labels.items())) == want


@pytest.mark.parametrize(("reqs", "want"), APIM["to_string"])
def test_requirements_to_string(reqs: list[list[Any]], want: str) -> None:
    built = [Requirement(k, op, tuple(v)) for k, op, v in reqs]
    assert ",".join(str(r) for r in built) == want


@pytest.mark.parametrize(("labels", "reqs", "want"), APIM["requirement_selector_matching"])
def test_requirement_selector_matching(labels: dict[str, str], reqs: list[list[Any]], want: bool) -> None:
    built = [Requirement(k, op, tuple(v)) for k, op, v in reqs]
    assert all(r.matches(labels) for r in built) is want


@pytest.mark.parametrize(("text", "valid", "want"), APIM["set_selector_parser"])
def test_set_selector_parser(text: str, valid: bool, want: list[list[Any]] | None) -> None:
    if not valid:
        with pytest.raises(SelectorError):
            parse_requirements(text)
        return
    got = [[r.key, r.operator, list(r.values)] for r in parse_requirements(text)]
    assert got == want


@pytest.mark.parametrize(("text", "example"), APIM["matches_nothing"])
def test_parsed_selectors_are_not_the_nothing_selector(text: str, example: dict[str, str] | None) -> None:
    parse_requirements(text)
    if example is not None:
        assert label_selector_matches(text, example)


# --------------------------------------------------------------------------------------------------
# component-helpers scheduling/corev1 helpers_test.go and nodeaffinity_test.go


@pytest.mark.parametrize("case", HELPERS["match_node_selector_terms"], ids=lambda c: c["name"])
def test_match_node_selector_terms(case: dict[str, Any]) -> None:
    assert k8s_match(case["selector"], case["node"]) is case["want"]


@pytest.mark.parametrize("case", HELPERS["stateless"])
def test_matching_does_not_modify_the_selector(case: dict[str, Any]) -> None:
    before = copy.deepcopy(case["selector"])
    k8s_match(case["selector"], case["node"])
    assert case["selector"] == before


@pytest.mark.parametrize("case", HELPERS["node_selector_match"], ids=lambda c: c["name"])
def test_strict_node_selector(case: dict[str, Any]) -> None:
    assert validate_node_selector(case["selector"]) == case["errors"]
    if not case["errors"]:
        assert k8s_match(case["selector"], case["node"]) is case["want"]


@pytest.mark.parametrize(("exprs", "want", "paths"), HELPERS["requirements_as_selector"])
def test_node_requirements_as_selector(exprs: list[dict[str, Any]] | None, want: str | None, paths: list[str]) -> None:
    term = {"matchExpressions": exprs} if exprs is not None else {}
    errors = validate_term(term)
    prefix = "nodeSelectorTerms[0].matchExpressions"
    assert [e.split(": ", 1)[0].removeprefix(prefix) for e in errors] == paths
    if want == "nothing":
        assert matches({"nodeSelectorTerms": [term]}, {}) is False
        assert matches({"nodeSelectorTerms": [term]}, {"foo": "bar"}) is False
    elif want is not None:
        assert parse_label_selector(format_term(term)) == parse_label_selector(want)


def test_invalid_term_only_errors_when_nothing_matches() -> None:
    selector = {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": "a", "operator": "NotIn", "values": ["invalid value: ___@#$%^"]}]},
            {"matchExpressions": [{"key": "b", "operator": "Exists"}]},
        ]
    }
    assert matches(selector, {"b": "1"}) is True
    with pytest.raises(SelectorError, match=r"nodeSelectorTerms\[0\]\.matchExpressions\[0\]\.values\[0\]\[a\]"):
        matches(selector, {"c": "1"})


def test_missing_or_empty_selector_matches_nothing_but_selects_every_cluster() -> None:
    for selector in (None, {}, {"nodeSelectorTerms": []}):
        assert matches(selector, {"a": "b"}) is False
        assert cluster_matches(selector, {"a": "b"}) is True
    assert cluster_matches({"nodeSelectorTerms": [{}]}, {"a": "b"}) is False


def test_match_fields_ignored_without_a_node_name() -> None:
    selector = {"nodeSelectorTerms": [{"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["x"]}]}]}
    assert matches(selector, {}) is True
    assert matches(selector, {}, {"metadata.name": "y"}) is False
    assert matches(selector, {}, {"metadata.name": "x"}) is True


# --------------------------------------------------------------------------------------------------
# liqoctl offload --selector (pkg/liqoctl/offload/handler_test.go) and the documented behaviour


@pytest.mark.parametrize(("texts", "terms"), LIQOCTL["cluster_selectors"])
def test_liqoctl_cluster_selectors(texts: list[str], terms: list[dict[str, Any]]) -> None:
    assert cluster_selector(texts) == {"nodeSelectorTerms": terms}


@pytest.mark.parametrize(("texts", "terms"), DOCS["cluster_selector"])
def test_documented_cluster_selectors(texts: list[str], terms: list[dict[str, Any]]) -> None:
    assert cluster_selector(texts) == {"nodeSelectorTerms": terms}


@pytest.mark.parametrize(("text", "want"), DOCS["parse"])
def test_documented_grammar(text: str, want: str | None) -> None:
    if want is None:
        with pytest.raises(SelectorError):
            parse_label_selector(text)
    else:
        assert canonical(text) == want


@pytest.mark.parametrize(("text", "labels", "want"), DOCS["matches"])
def test_documented_matching(text: str, labels: dict[str, str], want: bool) -> None:
    assert label_selector_matches(text, labels) is want


def test_parse_label_selector_gives_node_selector_requirements() -> None:
    assert parse_label_selector("a=1,b==2,c!=3,d in (y,x),e notin (z),f,!g,h>4,i<5") == [
        {"key": "a", "operator": "In", "values": ["1"]},
        {"key": "b", "operator": "In", "values": ["2"]},
        {"key": "c", "operator": "NotIn", "values": ["3"]},
        {"key": "d", "operator": "In", "values": ["x", "y"]},
        {"key": "e", "operator": "NotIn", "values": ["z"]},
        {"key": "f", "operator": "Exists", "values": []},
        {"key": "g", "operator": "DoesNotExist", "values": []},
        {"key": "h", "operator": "Gt", "values": ["4"]},
        {"key": "i", "operator": "Lt", "values": ["5"]},
    ]


def test_selector_error_says_where() -> None:
    with pytest.raises(SelectorError) as info:
        parse_label_selector("region in (eu, us) staging")
    assert info.value.position == 19
    assert info.value.token == "staging"
    assert "position 19" in str(info.value)
    with pytest.raises(SelectorError) as info2:
        cluster_selector(["a=b", "x=$y"])
    assert info2.value.path == "nodeSelectorTerms[1]"
    assert "$y" in str(info2.value)


def test_liqoctl_incompatibilities_are_reported_not_fatal() -> None:
    selector = cluster_selector(["a!=b,c>5"])
    assert selector["nodeSelectorTerms"][0]["matchExpressions"] == [
        {"key": "a", "operator": "NotIn", "values": ["b"]},
        {"key": "c", "operator": "Gt", "values": ["5"]},
    ]
    notes = cluster_selector_notes(["a!=b,c>5"])
    assert any("!=" in n and "liqoctl rejects" in n for n in notes)
    assert any("gt" in n and "liqoctl rejects" in n for n in notes)
    assert cluster_selector_notes(["a=b,c in (d)"]) == []


# --------------------------------------------------------------------------------------------------
# format_term, explain, virtual-node labels


def test_format_term_writes_every_operator() -> None:
    term = {
        "matchExpressions": [
            {"key": "region", "operator": "In", "values": ["us", "eu"]},
            {"key": "zone", "operator": "In", "values": ["a"]},
            {"key": "tier", "operator": "NotIn", "values": ["dev"]},
            {"key": "gpu", "operator": "Exists"},
            {"key": "staging", "operator": "DoesNotExist"},
            {"key": "cpu", "operator": "Gt", "values": ["4"]},
            {"key": "mem", "operator": "Lt", "values": ["64"]},
            {"key": "empty", "operator": "In", "values": [""]},
        ]
    }
    text = format_term(term)
    assert text == "region in (eu,us),zone=a,tier notin (dev),gpu,!staging,cpu>4,mem<64,empty in ()"
    assert format_term({}) == ""


@pytest.mark.parametrize(
    "term",
    [
        {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["n1"]}]},
        {"matchExpressions": [{"key": "a", "operator": "Foo", "values": ["b"]}]},
        {"matchExpressions": [{"key": "a", "operator": "In", "values": ["A,B"]}]},
        {"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["b"]}]},
        {"matchExpressions": [{"key": "a", "operator": "Gt", "values": ["x"]}]},
        {"matchExpressions": [{"key": "a", "operator": "In", "values": []}]},
    ],
)
def test_format_term_reports_terms_it_cannot_write(term: dict[str, Any]) -> None:
    with pytest.raises(UnformattableTermError):
        format_term(term)


def test_explain_names_the_failing_expression() -> None:
    selector = cluster_selector(["region=eu", "region in (us),!staging"])
    out = explain(selector, {"region": "us", "staging": "true"}, {"metadata.name": "milan"})
    assert out["selected"] is False
    assert out["matched_term"] is None
    assert out["error"] is None
    assert [t["failed"] for t in out["terms"]] == [
        "region In (eu) but the cluster has region=us",
        "staging DoesNotExist but the cluster has staging=true",
    ]
    assert [t["text"] for t in out["terms"]] == ["region=eu", "region=us,!staging"]
    ok = explain(selector, {"region": "eu"})
    assert ok["selected"] is True and ok["matched_term"] == 0
    assert ok["terms"][0]["failed"] is None
    missing = explain(selector, {})
    assert missing["terms"][0]["failed"] == "region In (eu) but the cluster has no label region"


def test_explain_empty_and_invalid_terms() -> None:
    assert explain(None, {})["selected"] is True
    assert explain({"nodeSelectorTerms": []}, {})["all_clusters"] is True
    out = explain({"nodeSelectorTerms": [{}]}, {"a": "b"})
    assert out["selected"] is False and "empty" in out["terms"][0]["failed"]
    bad = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "a", "operator": "Exists", "values": ["x"]}]}]}
    out = explain(bad, {"a": "b"})
    assert out["selected"] is False
    assert "values set must be empty" in out["error"]
    assert out["terms"][0]["invalid"]
    assert out["terms"][0]["text"] == "a Exists (x)"


def test_explain_gt_lt_reasons() -> None:
    selector = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "cpu", "operator": "Gt", "values": ["4"]}]}]}
    assert explain(selector, {"cpu": "x"})["terms"][0]["failed"] == (
        "cpu Gt (4) but the cluster has cpu=x, which is not an integer"
    )
    assert explain(selector, {"cpu": "2"})["terms"][0]["failed"] == "cpu Gt (4) but the cluster has cpu=2"


def test_virtual_node_labels_prefers_the_node_and_inverts_storage_in_the_fallback() -> None:
    vn = {
        "metadata": {"name": "milan"},
        "spec": {"clusterID": "milan", "labels": {"liqo.io/provider": "kind"}},
    }
    node = {"metadata": {"name": "milan", "labels": {"liqo.io/type": "virtual-node"}}}
    assert virtual_node_labels(vn, node) == {"liqo.io/type": "virtual-node"}
    assert virtual_node_labels(vn, None) == {
        "liqo.io/provider": "kind",
        "liqo.io/remote-cluster-id": "milan",
        "storage.liqo.io/available": "true",
    }
    vn["spec"]["storageClasses"] = [{"storageClassName": "liqo"}]
    assert virtual_node_labels(vn, None)["storage.liqo.io/available"] == "false"


def test_nul_byte_ends_the_lexer_like_go() -> None:
    assert canonical("a \x00b") == "a"
    with pytest.raises(SelectorError):
        parse_requirements("a\x00b c")


def test_the_selector_and_its_notes_come_from_one_parse() -> None:
    from liqo_rules.selectors.liqoctl import cluster_selector_with_notes

    texts = ["region!=eu,tier>2", "a=1,a=2", "zone in (x)"]
    selector, notes = cluster_selector_with_notes(texts)
    assert selector == cluster_selector(texts)
    assert notes == cluster_selector_notes(texts) and len(notes) == 3
    assert cluster_selector_with_notes([]) == ({"nodeSelectorTerms": []}, [])
    with pytest.raises(SelectorError) as err:
        cluster_selector_with_notes(["ok=1", "bad in (x"])
    assert err.value.path == "nodeSelectorTerms[1]"


ID = "IdentifierToken"


@pytest.mark.parametrize(
    ("data", "tokens"),
    [
        # A NUL byte ends an identifier and is dropped; at the start of a token it ends the selector.
        (b"a\x00b=c", [(ID, "a", 0), (ID, "b", 2), ("EqualsToken", "=", 3), (ID, "c", 4)]),
        (b"a=b\x00,c", [(ID, "a", 0), ("EqualsToken", "=", 1), (ID, "b", 2), ("CommaToken", ",", 4), (ID, "c", 5)]),
        (b"\x00a", []),
        (b"a\tb\r\nc d", [(ID, "a", 0), (ID, "b", 2), (ID, "c", 5), (ID, "d", 7)]),
        (
            b"k!=v,x>1,y<2",
            [
                (ID, "k", 0),
                ("NotEqualsToken", "!=", 1),
                (ID, "v", 3),
                ("CommaToken", ",", 4),
                (ID, "x", 5),
                ("GreaterThanToken", ">", 6),
                (ID, "1", 7),
                ("CommaToken", ",", 8),
                (ID, "y", 9),
                ("LessThanToken", "<", 10),
                (ID, "2", 11),
            ],
        ),
        # "in" and "notin" are keywords only where an operator is expected: the parser decides (lex() names them).
        (
            b"x in (a)",
            [(ID, "x", 0), (ID, "in", 2), ("OpenParToken", "(", 5), (ID, "a", 6), ("ClosedParToken", ")", 7)],
        ),
        # Bytes that are not UTF-8 are replaced, lone surrogates (from text) kept.
        (b"a\xffb=\xed\xa0\x80", [(ID, "a\ufffdb", 0), ("EqualsToken", "=", 3), (ID, "\ud800", 4)]),
    ],
)
def test_the_lexer_splits_identifiers_where_apimachinery_does(data: bytes, tokens: list[tuple[str, str, int]]) -> None:
    from liqo_rules.selectors.parse import _lex

    lexed = _lex(data)
    assert lexed[:-1] == tokens
    assert lexed[-1][0] == "EndOfStringToken"
