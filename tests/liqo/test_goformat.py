"""liqo_rules.goformat: the bytes Go's encoding/json (MarshalIndent) and sigs.k8s.io/yaml (go-yaml v2)
write, so that a previewed manifest is exactly what ``liqoctl ... -o json|yaml`` and kubectl print."""

from __future__ import annotations

import pytest

from liqo_rules.goformat import go_json, go_yaml, yaml_scalar

# --- JSON ------------------------------------------------------------------------------------------


def test_go_json_indents_with_four_spaces_and_keeps_key_order() -> None:
    assert (
        go_json({"b": 1, "a": [1, "x"], "c": {}})
        == '{\n    "b": 1,\n    "a": [\n        1,\n        "x"\n    ],\n    "c": {}\n}'
    )


def test_go_json_other_indent() -> None:
    assert go_json({"a": {"b": None}}, indent="  ") == '{\n  "a": {\n    "b": null\n  }\n}'


def test_go_json_escapes_html_characters_like_go() -> None:
    assert go_json("<a & b>") == '"\\u003ca \\u0026 b\\u003e"'


def test_go_json_escapes_line_and_paragraph_separators() -> None:
    assert go_json("a\u2028b\u2029c") == '"a\\u2028b\\u2029c"'


def test_go_json_keeps_other_non_ascii_text() -> None:
    assert go_json({"città": "Münster ✓"}) == '{\n    "città": "Münster ✓"\n}'


def test_go_json_scalars() -> None:
    assert go_json([True, False, None, 0, -3, ""]) == '[\n    true,\n    false,\n    null,\n    0,\n    -3,\n    ""\n]'
    assert go_json([]) == "[]"
    assert go_json({}) == "{}"


# --- YAML scalars (go-yaml v2 quotes every string that YAML 1.1 would read as something else) -------------


@pytest.mark.parametrize(
    "text",
    [
        "true",
        "True",
        "TRUE",
        "false",
        "yes",
        "Yes",
        "no",
        "NO",
        "on",
        "Off",
        "y",
        "Y",
        "n",
        "N",
        "null",
        "Null",
        "~",
        ".inf",
        "-.Inf",
        "+.INF",
        ".nan",
        ".NaN",
        "<<",
    ],
)
def test_yaml_11_keywords_are_double_quoted(text: str) -> None:
    assert yaml_scalar(text) == f'"{text}"'


@pytest.mark.parametrize(
    "text",
    [
        "0",
        "12",
        "-7",
        "+7",
        "007",
        "0x1F",
        "0o17",
        "0b101",
        "1_000",
        "1.5",
        ".5",
        "-1.",
        "1e3",
        "2.5E-3",
        "2026-01-02",
        "2026-1-2 10:11:12",
        "1:30",
        "-1:30:59.5",
    ],
)
def test_strings_that_read_as_numbers_or_timestamps_are_double_quoted(text: str) -> None:
    assert yaml_scalar(text) == f'"{text}"'


@pytest.mark.parametrize(
    "text",
    [
        "v1",
        "offloading",
        "liqo.io/type",
        "EnforceSameName",
        "a-b_c.d",
        "1a",
        "1.2.3",
        "yess",
        "nul",
        "x:y",
        "a#b",
        "it's",
        "café",
        "10.0.0.0/8",
        "a b",
    ],
)
def test_ordinary_strings_are_plain(text: str) -> None:
    assert yaml_scalar(text) == text


def test_the_empty_string_is_double_quoted() -> None:
    assert yaml_scalar("") == '""'


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("- item", "'- item'"),
        ("-", "'-'"),
        ("?x", "'?x'"),
        (":x", "':x'"),
        ("*ref", "'*ref'"),
        ("&anchor", "'&anchor'"),
        ("!tag", "'!tag'"),
        ("|x", "'|x'"),
        (">x", "'>x'"),
        ("%x", "'%x'"),
        ("@x", "'@x'"),
        ("`x", "'`x'"),
        ("#x", "'#x'"),
        ("[x", "'[x'"),
        ("{x", "'{x'"),
        (",x", "',x'"),
        ("'x", "'''x'"),
        ('"x', "'\"x'"),
        ("a: b", "'a: b'"),
        ("a #b", "'a #b'"),
        ("key:", "'key:'"),
        (" lead", "' lead'"),
        ("trail ", "'trail '"),
    ],
)
def test_strings_that_cannot_be_plain_are_single_quoted(text: str, want: str) -> None:
    assert yaml_scalar(text) == want


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("a\tb", '"a\\tb"'),
        ("a\rb", '"a\\rb"'),
        ('q"\t', '"q\\"\\t"'),
        ("b\\\t", '"b\\\\\\t"'),
        ("\x07", '"\\x07"'),
        ("\x85", '"\\x85"'),
        ("\u200b", '"\\u200B"'),
        ("\U000e0001", '"\\U000E0001"'),
    ],
)
def test_control_and_invisible_characters_are_escaped_in_double_quotes(text: str, want: str) -> None:
    assert yaml_scalar(text) == want


def test_non_string_scalars() -> None:
    assert yaml_scalar(None) == "null"
    assert yaml_scalar(True) == "true"
    assert yaml_scalar(False) == "false"
    assert yaml_scalar(0) == "0"
    assert yaml_scalar(-12) == "-12"


# --- YAML documents (sigs.k8s.io/yaml: sorted keys, 2-space indent, sequences not indented) ----------------


def test_go_yaml_sorts_keys_and_indents_maps() -> None:
    assert go_yaml({"b": {"d": 1, "c": "x"}, "a": "v"}) == "a: v\nb:\n  c: x\n  d: 1\n"


def test_go_yaml_does_not_indent_sequences_under_a_key() -> None:
    assert go_yaml({"items": ["a", "b"]}) == "items:\n- a\n- b\n"


def test_go_yaml_maps_inside_sequences() -> None:
    doc = {"terms": [{"key": "k", "values": ["1", "x"]}, {"b": 1, "a": 2}]}
    assert go_yaml(doc) == 'terms:\n- key: k\n  values:\n  - "1"\n  - x\n- a: 2\n  b: 1\n'


def test_go_yaml_nested_sequences_and_empty_collections() -> None:
    assert (
        go_yaml({"e": {}, "l": [], "z": None, "s": [[1, 2], [], {}]})
        == "e: {}\nl: []\ns:\n- - 1\n  - 2\n- []\n- {}\nz: null\n"
    )


def test_go_yaml_quotes_keys_like_values() -> None:
    assert go_yaml({"yes": "no", "1": 2}) == '"1": 2\n"yes": "no"\n'


def test_go_yaml_top_level_sequence_and_scalar() -> None:
    assert go_yaml(["a", {"k": "v"}]) == "- a\n- k: v\n"
    assert go_yaml("x") == "x\n"
    assert go_yaml({}) == "{}\n"
    assert go_yaml([]) == "[]\n"


def test_the_last_four_digit_escape_is_u_ffff() -> None:
    # U+FFFF is not printable and still fits the \uXXXX form (go-yaml: <= 0xFFFF uses \u).
    assert yaml_scalar("\uffff") == '"\\uFFFF"'


def test_go_yaml_tells_equal_scalars_of_different_types_apart() -> None:
    # 1 == True and 0 == False in Python: each is still written as its own type.
    doc = {"a": 1, "b": True, "c": "1", "d": 0, "e": False, "f": "true", "g": [True, 1, "1"]}
    assert go_yaml(doc) == 'a: 1\nb: true\nc: "1"\nd: 0\ne: false\nf: "true"\ng:\n- true\n- 1\n- "1"\n'
