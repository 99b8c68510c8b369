"""The error of every parser state of liqo_rules.selectors.parse: apimachinery's text (what kubectl -l
and liqoctl --selector print, selector-semantics.md 1-3), where it points, and what the exception carries."""

from __future__ import annotations

import pytest

from liqo_rules.selectors.parse import label_selector_matches, lex, parse_label_selector, parse_requirements
from liqo_rules.selectors.requirements import SelectorError

REQ = "unable to parse requirement: "
OPS = "in, notin, =, ==, !=, gt, lt"


@pytest.mark.parametrize(
    ("text", "message", "position", "token"),
    [
        ("x,", "found '', expected: identifier after ',' (at the end of the selector)", 2, ""),
        (",x", "found ',', expected: !, identifier, or 'end of string' (at position 0)", 0, ","),
        ("x,,y", "found ',', expected: identifier after ',' (at position 2)", 2, ","),
        ("!x=a", "found '=', expected: ',' or 'end of string' (at position 2)", 2, "="),
        ("x=a=b", "found '=', expected: ',' or 'end of string' (at position 3)", 3, "="),
        ("x =a b", "found 'b', expected: ',' or 'end of string' (at position 5)", 5, "b"),
        ("x y", f"{REQ}found 'y', expected: {OPS} (at position 2)", 2, "y"),
        ("x!", f"{REQ}found '!', expected: {OPS} (at position 1)", 1, "!"),
        ("x in a", f"{REQ}found 'a' expected: '(' (at position 5)", 5, "a"),
        ("x in (a),y notin", f"{REQ}found '' expected: '(' (at the end of the selector)", 16, ""),
        ("x in (a", f"{REQ}found '', expected: ',' or ')' (at the end of the selector)", 7, ""),
        ("x in (a b)", f"{REQ}found 'b', expected: ',' or ')' (at position 8)", 8, "b"),
        ("x in (a,", f"{REQ}found '', expected: ',', or identifier (at the end of the selector)", 8, ""),
        ("x in ((", f"{REQ}found '(', expected: ',', ')' or identifier (at position 6)", 6, "("),
        ("x=(", f"{REQ}found '(', expected: identifier (at position 2)", 2, "("),
        ("x>=1", f"{REQ}found '=', expected: identifier (at position 2)", 2, "="),
    ],
)
def test_syntax_errors(text: str, message: str, position: int, token: str) -> None:
    with pytest.raises(SelectorError) as err:
        parse_requirements(text)
    e = err.value
    assert (e.message, e.position, e.token, e.text) == (message, position, token, text)
    assert str(e) == message


def test_invalid_values_and_keys_name_the_requirement() -> None:
    with pytest.raises(SelectorError) as gt:
        parse_requirements("a=1,x>a")
    assert gt.value.message == (
        f"{REQ}for 'Gt', 'Lt' operators, the value must be an integer, got \"a\" (in the requirement at position 4)"
    )
    assert (gt.value.position, gt.value.token) == (4, "a")
    with pytest.raises(SelectorError) as value:
        parse_requirements("x=$y")
    assert value.value.message.startswith(f'{REQ}invalid label value "$y" for key "x": a valid label must be an empty')
    assert value.value.message.endswith("(in the requirement at position 0)")
    assert value.value.message.count("; ") == 0
    with pytest.raises(SelectorError) as key:
        parse_requirements("ok,Bad_/x")
    assert key.value.message.startswith(f'{REQ}invalid label key "Bad_/x": prefix part a lowercase RFC 1123 subdomain')
    assert key.value.message.endswith("(at position 3)")
    assert (key.value.position, key.value.token) == (3, "Bad_/x")


def test_two_key_problems_are_joined() -> None:
    with pytest.raises(SelectorError) as err:
        parse_requirements("Bad_/-x")
    assert "prefix part a lowercase RFC 1123 subdomain" in err.value.message
    assert "; name part must consist of" in err.value.message


def test_a_selector_must_be_text() -> None:
    with pytest.raises(SelectorError) as err:
        parse_requirements(5)  # type: ignore[arg-type]
    assert err.value.message == "a selector must be a string, not int"


def test_requirements_remember_where_they_start() -> None:
    reqs = parse_requirements("a, b in (y,x),c=1 ,!d")
    assert [(str(r), r.position) for r in reqs] == [("a", 0), ("b in (x,y)", 3), ("c=1", 14), ("!d", 19)]


def test_values_are_ordered_by_bytes() -> None:
    [r] = parse_requirements("k in (b,B,a,Z,0)")
    assert r.values == ("0", "B", "Z", "a", "b")


def test_non_ascii_bytes_are_word_bytes() -> None:
    assert lex("é=1")[:3] == [("IdentifierToken", "é"), ("EqualsToken", "="), ("IdentifierToken", "1")]
    # ... but not valid label bytes: the value check rejects them.
    with pytest.raises(SelectorError):
        parse_requirements("a=é")
    assert label_selector_matches("a=b", {"a": "b"}) is True


def test_parse_label_selector_gives_node_requirements() -> None:
    assert parse_label_selector("a in (x),!b,c>3") == [
        {"key": "a", "operator": "In", "values": ["x"]},
        {"key": "b", "operator": "DoesNotExist", "values": []},
        {"key": "c", "operator": "Gt", "values": ["3"]},
    ]


def test_not_must_be_followed_by_a_key() -> None:
    for text, lit, pos, where in (("!,x", ",", 1, "at position 1"), ("!", "", 1, "at the end of the selector")):
        with pytest.raises(SelectorError) as err:
            parse_requirements(text)
        assert err.value.message == f"{REQ}found '{lit}', expected: identifier ({where})"
        assert (err.value.position, err.value.token, err.value.text) == (pos, lit, text)


def test_value_errors_carry_text_position_and_token() -> None:
    for text, token in (("a=1,x=$y", "$y"), ("a=1,x>b", "b"), ("a=1,x in (-z)", "-z")):
        with pytest.raises(SelectorError) as err:
            parse_requirements(text)
        assert (err.value.text, err.value.position, err.value.token) == (text, 4, token), text


def test_keywords_used_as_keys_keep_their_position() -> None:
    reqs = parse_requirements("a,in,notin=in")
    assert [(r.key, r.position) for r in reqs] == [("a", 0), ("in", 2), ("notin", 5)]
    assert reqs[2].values == ("in",)


def test_parse_operator_errors() -> None:
    from liqo_rules.selectors.parse import parse_operator

    assert parse_operator("notin") == "notin"
    assert parse_operator(" != ") == "!="
    with pytest.raises(SelectorError) as err:
        parse_operator("like")
    assert err.value.message == f"found 'like', expected: {OPS}"
    assert (err.value.text, err.value.position, err.value.token) == ("like", 0, "like")


def test_two_value_problems_are_joined() -> None:
    value = "a" * 63 + "-"  # 64 bytes, and it does not end with an alphanumeric character
    with pytest.raises(SelectorError) as err:
        parse_requirements(f"x={value}")
    assert f'invalid label value "{value}" for key "x": must be no more than 63 bytes; a valid label must be' in (
        err.value.message
    )


def test_lone_surrogates_are_text_the_value_check_rejects() -> None:
    # A JSON body can carry "\ud800": it is lexed (as apimachinery lexes its WTF-8 bytes), then refused
    # as a label value, never an encoding error.
    assert lex("a\ud800=x\udfff") == [
        ("IdentifierToken", "a\ud800"),
        ("EqualsToken", "="),
        ("IdentifierToken", "x\udfff"),
        ("EndOfStringToken", ""),
    ]
    with pytest.raises(SelectorError) as err:
        parse_requirements("k=\ud800")
    assert (err.value.token, err.value.position) == ("\ud800", 0)
