"""liqo_rules.schema: what the NamespaceOffloading CRD's structural schema rejects, with the field path
and the JSON type names the API server reports ("Invalid value: \"<type>\": <path> in body must be of type <T>").
The tail of some API-server messages varies by version, so these tests pin path, type names and the
"in body must be of type" phrase rather than whole strings."""

from __future__ import annotations

from typing import Any

import pytest

from liqo_rules.schema import schema_errors

SEL = "spec.clusterSelector"


def messages(spec: Any) -> list[str]:
    return [p.message for p in schema_errors(spec)]


def one(spec: Any) -> str:
    [msg] = messages(spec)
    return msg


@pytest.mark.parametrize(
    ("value", "type_name"),
    [
        (None, "null"),
        (True, "boolean"),
        (False, "boolean"),
        (3, "integer"),
        (1.5, "number"),
        ("x", "string"),
        ([], "array"),
        ({}, "object"),
    ],
)
def test_json_type_names_in_messages(value: Any, type_name: str) -> None:
    spec = {"clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "k", "operator": value}]}]}}
    path = f"{SEL}.nodeSelectorTerms[0].matchExpressions[0].operator"
    if value is None:
        assert one(spec) == f"{path}: Required value"
    elif type_name == "string":
        assert messages(spec) == []
    else:
        assert one(spec).startswith(f'{path}: Invalid value: "{type_name}": {path} in body must be of type string')


def test_a_non_object_spec() -> None:
    [p] = schema_errors(["x"])  # type: ignore[arg-type]
    assert (p.field, p.source) == ("spec", "schema")
    assert p.message.startswith('spec: Invalid value: "array": spec in body must be of type object')


def test_a_non_string_enum_field() -> None:
    [p] = schema_errors({"podOffloadingStrategy": 7})
    assert (p.field, p.source) == ("podOffloadingStrategy", "schema")
    assert p.message.startswith(
        'spec.podOffloadingStrategy: Invalid value: "integer": spec.podOffloadingStrategy in body must be of type string'
    )


def test_unsupported_enum_values_list_the_allowed_ones() -> None:
    [p] = schema_errors({"namespaceMappingStrategy": "Same"})
    assert p.field == "namespaceMappingStrategy"
    assert p.message == (
        'spec.namespaceMappingStrategy: Unsupported value: "Same": supported values: '
        '"EnforceSameName", "DefaultName", "SelectedName"'
    )


def test_remote_namespace_name_must_be_a_string_when_set() -> None:
    assert schema_errors({"remoteNamespaceName": None}) == []
    assert schema_errors({"remoteNamespaceName": ""}) == []
    [p] = schema_errors({"remoteNamespaceName": 5})
    assert p.field == "remoteNamespaceName"
    assert p.message.startswith(
        'spec.remoteNamespaceName: Invalid value: "integer": spec.remoteNamespaceName in body must be of type string'
    )


def test_selector_shape_errors() -> None:
    assert schema_errors({"clusterSelector": None}) == []
    assert one({"clusterSelector": "x"}).startswith(
        f'{SEL}: Invalid value: "string": {SEL} in body must be of type object'
    )
    assert one({"clusterSelector": {}}) == f"{SEL}.nodeSelectorTerms: Required value"
    assert one({"clusterSelector": {"nodeSelectorTerms": {}}}).startswith(
        f'{SEL}.nodeSelectorTerms: Invalid value: "object": {SEL}.nodeSelectorTerms in body must be of type array'
    )
    assert messages({"clusterSelector": {"nodeSelectorTerms": [None, {}]}}) == []
    t = f"{SEL}.nodeSelectorTerms[1]"
    assert one({"clusterSelector": {"nodeSelectorTerms": [{}, 3]}}).startswith(
        f'{t}: Invalid value: "integer": {t} in body must be of type object'
    )


@pytest.mark.parametrize("part", ["matchExpressions", "matchFields"])
def test_requirement_list_errors(part: str) -> None:
    p = f"{SEL}.nodeSelectorTerms[0].{part}"
    assert one({"clusterSelector": {"nodeSelectorTerms": [{part: "x"}]}}).startswith(
        f'{p}: Invalid value: "string": {p} in body must be of type array'
    )
    assert messages({"clusterSelector": {"nodeSelectorTerms": [{part: None}]}}) == []
    assert one({"clusterSelector": {"nodeSelectorTerms": [{part: [{"key": "k", "operator": "In"}, "e"]}]}}).startswith(
        f'{p}[1]: Invalid value: "string": {p}[1] in body must be of type object'
    )


def test_requirement_field_errors() -> None:
    p = f"{SEL}.nodeSelectorTerms[0].matchExpressions[0]"

    def errs(expr: dict[str, Any]) -> list[str]:
        return messages({"clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": [expr]}]}})

    assert errs({}) == [f"{p}.key: Required value", f"{p}.operator: Required value"]
    assert errs({"key": None, "operator": "In"}) == [f"{p}.key: Required value"]
    [msg] = errs({"key": 1, "operator": "In"})
    assert msg.startswith(f'{p}.key: Invalid value: "integer": {p}.key in body must be of type string')
    assert errs({"key": "k", "operator": "In", "values": None}) == []
    [msg] = errs({"key": "k", "operator": "In", "values": "a"})
    assert msg.startswith(f'{p}.values: Invalid value: "string": {p}.values in body must be of type array')
    assert errs({"key": "k", "operator": "In", "values": ["a", "b"]}) == []
    [msg] = errs({"key": "k", "operator": "In", "values": ["a", 2]})
    assert msg.startswith(f'{p}.values[1]: Invalid value: "integer": {p}.values[1] in body must be of type string')


def test_a_null_expression_is_not_an_object() -> None:
    p = f"{SEL}.nodeSelectorTerms[0].matchExpressions[0]"
    assert one({"clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": [None]}]}}).startswith(
        f'{p}: Invalid value: "null": {p} in body must be of type object'
    )


def test_every_term_and_list_is_checked_after_a_skipped_or_bad_one() -> None:
    bad = {"matchExpressions": [{"key": "k"}]}
    t = f"{SEL}.nodeSelectorTerms"
    assert messages({"clusterSelector": {"nodeSelectorTerms": [None, bad]}}) == [
        f"{t}[1].matchExpressions[0].operator: Required value"
    ]
    errs = messages({"clusterSelector": {"nodeSelectorTerms": [3, bad]}})
    assert len(errs) == 2 and errs[1] == f"{t}[1].matchExpressions[0].operator: Required value"
    errs = messages(
        {"clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": "x", "matchFields": [{"key": "k"}]}]}}
    )
    assert len(errs) == 2 and errs[1] == f"{t}[0].matchFields[0].operator: Required value"
    assert messages(
        {"clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": None, "matchFields": [{"key": "k"}]}]}}
    ) == [f"{t}[0].matchFields[0].operator: Required value"]
