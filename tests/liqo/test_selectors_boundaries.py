"""Boundary cases of label-selector semantics (selector-semantics.md 3, 5, 6): every comparison at its edge.

Written to kill mutants that the conformance tests let through: Gt/Lt are strict, an unparsable integer
never matches, label keys and values at their Kubernetes length limits, int64 at its range limits, and
the exact apimachinery error messages that liqoctl and the API server print.
"""

from __future__ import annotations

import pytest

from liqo_rules.selectors.labels import (
    byte_len,
    is_label_key,
    is_label_value,
    label_key_errors,
    label_value_errors,
    parse_go_int64,
)
from liqo_rules.selectors.match import matches
from liqo_rules.selectors.parse import label_selector_matches
from liqo_rules.selectors.requirements import (
    SelectorError,
    new_requirement,
    requirement_errors,
    requirement_matches,
)

INT64_MAX = 2**63 - 1
INT64_MIN = -(2**63)


# --- Gt / Lt are strict comparisons of int64 values (5) -------------------------------------------------


@pytest.mark.parametrize(
    ("label", "bound", "gt", "lt"),
    [
        ("5", "5", False, False),
        ("6", "5", True, False),
        ("4", "5", False, True),
        ("0", "0", False, False),
        ("1", "0", True, False),
        ("-1", "0", False, True),
        ("10", "9", True, False),  # numeric, not string, order
        ("9", "10", False, True),
        ("007", "7", False, False),  # leading zeros are fine
        ("008", "7", True, False),
        (str(INT64_MAX), str(INT64_MAX - 1), True, False),
        (str(INT64_MIN), str(INT64_MIN + 1), False, True),
    ],
)
def test_gt_and_lt_compare_strictly(label: str, bound: str, gt: bool, lt: bool) -> None:
    assert requirement_matches("n", "gt", [bound], {"n": label}) is gt
    assert requirement_matches("n", "lt", [bound], {"n": label}) is lt


@pytest.mark.parametrize(
    "label", ["v2", "1_0", " 5", "5 ", "5\n", "0x10", "1.5", "", "+", "-", "٣", str(INT64_MAX + 1)]
)
def test_a_label_value_that_is_not_an_int64_never_matches_gt_or_lt(label: str) -> None:
    assert requirement_matches("n", "gt", ["-100"], {"n": label}) is False
    assert requirement_matches("n", "lt", ["100"], {"n": label}) is False


@pytest.mark.parametrize("bound", ["x", "", "1_0", "99999999999999999999"])
def test_an_unparsable_gt_or_lt_bound_matches_nothing(bound: str) -> None:
    for label in ("0", "1", "-1", "99999"):
        assert requirement_matches("n", "gt", [bound], {"n": label}) is False
        assert requirement_matches("n", "lt", [bound], {"n": label}) is False


@pytest.mark.parametrize("values", [[], ["1", "2"]])
def test_gt_and_lt_with_other_than_one_value_match_nothing(values: list[str]) -> None:
    assert requirement_matches("n", "gt", values, {"n": "5"}) is False
    assert requirement_matches("n", "lt", values, {"n": "0"}) is False


def test_gt_and_lt_need_the_key() -> None:
    assert requirement_matches("n", "gt", ["-1"], {}) is False
    assert requirement_matches("n", "lt", ["1"], {"m": "0"}) is False


def test_gt_in_a_node_selector_is_strict() -> None:
    sel = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "cpu", "operator": "Gt", "values": ["4"]}]}]}
    assert matches(sel, {"cpu": "5"}) is True
    assert matches(sel, {"cpu": "4"}) is False
    lt = {"nodeSelectorTerms": [{"matchExpressions": [{"key": "cpu", "operator": "Lt", "values": ["4"]}]}]}
    assert matches(lt, {"cpu": "3"}) is True
    assert matches(lt, {"cpu": "4"}) is False


def test_gt_and_lt_in_a_selector_string_are_strict() -> None:
    assert label_selector_matches("cpu>4", {"cpu": "5"}) is True
    assert label_selector_matches("cpu>4", {"cpu": "4"}) is False
    assert label_selector_matches("cpu<4", {"cpu": "3"}) is True
    assert label_selector_matches("cpu<4", {"cpu": "4"}) is False
    assert label_selector_matches("cpu>4", {"cpu": "many"}) is False


# --- the other operators: empty value versus missing key (5) -------------------------------------------


def test_equality_and_in_need_the_key_even_for_the_empty_value() -> None:
    for op in ("=", "==", "in"):
        assert requirement_matches("k", op, [""], {"k": ""}) is True
        assert requirement_matches("k", op, [""], {}) is False
        assert requirement_matches("k", op, ["a"], {"k": "b"}) is False


def test_inequality_and_notin_hold_when_the_key_is_absent() -> None:
    for op in ("!=", "notin"):
        assert requirement_matches("k", op, [""], {}) is True
        assert requirement_matches("k", op, [""], {"k": ""}) is False
        assert requirement_matches("k", op, ["a"], {"k": "b"}) is True
        assert requirement_matches("k", op, ["a"], {"k": "a"}) is False


def test_exists_and_does_not_exist_look_only_at_the_key() -> None:
    assert requirement_matches("k", "exists", [], {"k": ""}) is True
    assert requirement_matches("k", "exists", [], {"j": "k"}) is False
    assert requirement_matches("k", "!", [], {"k": ""}) is False
    assert requirement_matches("k", "!", [], {"j": "k"}) is True


def test_an_unknown_operator_matches_nothing() -> None:
    assert requirement_matches("k", "like", ["a"], {"k": "a"}) is False


# --- int64 parsing as strconv.ParseInt(s, 10, 64) (3) -----------------------------------------------------


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("0", 0),
        ("-0", 0),
        ("+5", 5),
        ("007", 7),
        (str(INT64_MAX), INT64_MAX),
        (str(INT64_MIN), INT64_MIN),
        (str(INT64_MAX + 1), None),
        (str(INT64_MIN - 1), None),
        ("", None),
        ("1_000", None),
        (" 1", None),
        ("1\n", None),
        ("0x1f", None),
        ("１", None),  # a full-width digit
        ("--1", None),
    ],
)
def test_parse_go_int64(text: str, want: int | None) -> None:
    assert parse_go_int64(text) == want


def test_parse_go_int64_refuses_non_strings() -> None:
    assert parse_go_int64(5) is None  # type: ignore[arg-type]


# --- label keys and values at their length limits (3) ----------------------------------------------------


def test_a_label_name_may_have_63_bytes_not_64() -> None:
    assert label_key_errors("a" * 63) == []
    assert is_label_key("a" * 63)
    assert len(label_key_errors("a" * 64)) == 1
    assert not is_label_key("a" * 64)
    assert not is_label_key("example.com/" + "a" * 64)
    assert is_label_key("example.com/" + "a" * 63)


def test_a_label_key_prefix_may_have_253_bytes_not_254() -> None:
    prefix_253 = ".".join(["a" * 63] * 4)[:253]
    assert len(prefix_253) == 253 and is_label_key(prefix_253 + "/x")
    prefix_254 = prefix_253 + "b"
    errs = label_key_errors(prefix_254 + "/x")
    assert len(errs) == 1
    assert "prefix" in errs[0]


def test_a_label_value_may_have_63_bytes_not_64() -> None:
    assert label_value_errors("a" * 63) == []
    assert is_label_value("a" * 63) and is_label_value("")
    assert len(label_value_errors("a" * 64)) == 1
    assert not is_label_value("a" * 64)


def test_lengths_are_counted_in_bytes() -> None:
    assert byte_len("é") == 2
    assert byte_len("a" * 63) == 63


@pytest.mark.parametrize("key", ["a", "A", "0", "a.b-c_d", "x/y", "example.com/MyName", "a-1.b-2/n"])
def test_valid_label_keys(key: str) -> None:
    assert label_key_errors(key) == []


@pytest.mark.parametrize(
    "key",
    [
        "",
        "-a",
        "a-",
        "_a",
        "a b",
        "Example.com/abc",
        "example_com/abc",
        "/simple",
        "example.com/",
        "a/b/c",
        ".x/y",
        "x./y",
    ],
)
def test_invalid_label_keys(key: str) -> None:
    assert label_key_errors(key)
    assert not is_label_key(key)


def test_only_strings_are_labels() -> None:
    assert is_label_key(1) is False  # type: ignore[arg-type]
    assert is_label_value(None) is False  # type: ignore[arg-type]


# --- exact messages of apimachinery's NewRequirement (liqoctl and the API server print them) -------------


def test_gt_lt_value_count_message() -> None:
    assert requirement_errors("n", "gt", ["1", "2"]) == [
        "values: Invalid value: [\"1\",\"2\"]: for 'Gt', 'Lt' operators, exactly one value is required"
    ]
    assert requirement_errors("n", "lt", []) == [
        "values: Invalid value: []: for 'Gt', 'Lt' operators, exactly one value is required"
    ]


def test_gt_lt_integer_message() -> None:
    assert requirement_errors("n", "gt", ["abc"]) == [
        "values[0]: Invalid value: \"abc\": for 'Gt', 'Lt' operators, the value must be an integer"
    ]


def test_in_notin_empty_message_and_path() -> None:
    assert requirement_errors("k", "in", [], "spec.x") == [
        "spec.x.values: Invalid value: []: for 'in', 'notin' operators, values set can't be empty"
    ]


def test_exact_match_message() -> None:
    assert requirement_errors("k", "=", ["a", "b"]) == [
        'values: Invalid value: ["a","b"]: exact-match compatibility requires one single value'
    ]


def test_exists_message() -> None:
    assert requirement_errors("k", "exists", ["a"]) == [
        'values: Invalid value: ["a"]: values set must be empty for exists and does not exist'
    ]


def test_valid_requirements_have_no_errors() -> None:
    for op, values in (
        ("in", ["a"]),
        ("notin", [""]),
        ("=", ["a"]),
        ("!=", [""]),
        ("exists", []),
        ("!", []),
        ("gt", ["1"]),
        ("lt", ["1"]),
    ):
        assert requirement_errors("k", op, values) == [], op


def test_a_negative_gt_bound_is_not_a_valid_label_value() -> None:
    # selector-semantics.md 3: the label-value check applies to Gt/Lt values too, so x>-1 is invalid.
    errs = requirement_errors("k", "gt", ["-1"])
    assert len(errs) == 1 and errs[0].startswith('values[0][k]: Invalid value: "-1": a valid label must be')


def test_new_requirement_joins_several_errors_and_names_the_first_path() -> None:
    with pytest.raises(SelectorError) as one:
        new_requirement("k", "gt", ["x"])
    assert str(one.value) == "values[0]: Invalid value: \"x\": for 'Gt', 'Lt' operators, the value must be an integer"
    with pytest.raises(SelectorError) as many:
        new_requirement("-k", "gt", ["1", "2"])
    text = str(many.value)
    assert text.startswith('[key: Invalid value: "-k": ') and text.endswith("]")
    assert "exactly one value is required" in text


# --- label key messages (apimachinery IsQualifiedName; the name-part text is pinned by component-helpers' tests) ---

NAME_PART_REGEX = (
    "name part must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an "
    "alphanumeric character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
    "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]')"
)
PREFIX_REGEX = (
    "prefix part a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for validation is "
    "'[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)


def test_name_part_message() -> None:
    assert label_key_errors("invalid key") == [NAME_PART_REGEX]
    assert label_key_errors("example.com/-x") == [NAME_PART_REGEX]


def test_empty_name_part_message() -> None:
    assert label_key_errors("") == ["name part must be non-empty", NAME_PART_REGEX]
    assert label_key_errors("example.com/") == ["name part must be non-empty", NAME_PART_REGEX]


def test_empty_prefix_message() -> None:
    assert label_key_errors("/name") == ["prefix part must be non-empty"]


def test_prefix_regex_message() -> None:
    assert label_key_errors("Example.com/name") == [PREFIX_REGEX]
    assert label_key_errors("example_com/x y") == [PREFIX_REGEX, NAME_PART_REGEX]


def test_too_many_slashes_is_one_error() -> None:
    errs = label_key_errors("a/b/c")
    assert len(errs) == 1
    assert "with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')" in errs[0]


VALUE_REGEX_TAIL = (
    "and must start and end with an alphanumeric character (e.g. 'MyValue',  or 'my_value',  or '12345', "
    "regex used for validation is '(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?')"
)


def test_label_value_regex_message_tail() -> None:
    [msg] = label_value_errors("-x")
    # apimachinery's LabelValueErrorMsg: "... an empty string or consist of ..." (no second "must").
    assert msg.startswith(
        "a valid label must be an empty string or consist of alphanumeric characters, '-', '_' or '.', "
        "and must start and end with an alphanumeric character"
    )
    assert msg.endswith(VALUE_REGEX_TAIL)
    assert len(label_value_errors("-" * 64)) == 2


def test_too_many_slashes_message_names_the_name_rules() -> None:
    [msg] = label_key_errors("a/b/c")
    assert msg.endswith(
        "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric "
        "character (e.g. 'MyName',  or 'my.name',  or '123-abc', regex used for validation is "
        "'([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]') with an optional DNS subdomain prefix and '/' (e.g. "
        "'example.com/MyName')"
    )


def test_requirement_errors_for_non_strings_and_unknown_operators() -> None:
    assert requirement_errors(5, "exists", [], "p") == ["p.key: Invalid value: 5: must be a string"]
    assert requirement_errors("k", "in", ["a", 3]) == ["values[1]: Invalid value: 3: must be a string"]
    assert requirement_errors("k", "in", [3, "-x"])[0] == "values[0]: Invalid value: 3: must be a string"
    assert requirement_errors("k", "in", [3, "-x"])[1].startswith('values[1][k]: Invalid value: "-x": a valid label')
    assert requirement_errors("k", "like", ["a"], "spec") == [
        'spec.operator: Unsupported value: "like": supported values: "!", "!=", "=", "==", "exists", "gt", "in", "lt", "notin"'
    ]


def test_key_problems_are_joined_in_one_message() -> None:
    [msg] = requirement_errors("Bad_/-x", "exists", [])
    assert msg.startswith('key: Invalid value: "Bad_/-x": prefix part ')
    assert "; name part must consist of" in msg


def test_value_problems_are_joined_in_one_message() -> None:
    [msg] = requirement_errors("k", "in", ["-" * 64])
    assert msg.startswith('values[0][k]: Invalid value: "' + "-" * 64 + '": ')
    assert msg.count("; ") == 1


def test_quotes_are_escaped_like_go() -> None:
    msg = requirement_errors("k", "gt", ['a"b\\c'])[0]
    assert msg.startswith('values[0]: Invalid value: "a\\"b\\\\c": ')


def test_new_requirement_builds_the_requirement_or_names_the_error_path() -> None:
    r = new_requirement("k", "in", ["b", "a"])
    assert (r.key, r.operator, r.values) == ("k", "in", ("b", "a"))
    with pytest.raises(SelectorError) as err:
        new_requirement("k", "in", [])
    assert err.value.path == "values"
    with pytest.raises(SelectorError) as err2:
        new_requirement("-k", "gt", ["x", "y"])
    assert err2.value.path == "key"
    assert str(err2.value).startswith("[key: ") and ", values: Invalid value: " in str(err2.value)
