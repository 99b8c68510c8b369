"""What a real API server does with a body before it stores it: strict decoding (`fieldValidation`),
structural pruning, defaulting and validation against a CRD's openAPIV3Schema (`sandbox.crds`), and the
ObjectMeta checks every kind gets (label and annotation keys and values).

* `fieldValidation=Strict` (what kubectl sends by default): unknown and duplicate fields are a 400
  BadRequest ``<Kind> in version "<v>" cannot be handled as a <Kind>: strict decoding error: unknown
  field "spec.foo"``; `Warn` (the API server's default when the parameter is absent) prunes them and
  returns one `Warning` header each; `Ignore` prunes them silently.
* Unknown fields of a CRD object are pruned (also `metadata` to ObjectMeta's fields), nulls of
  non-nullable fields are dropped, defaults applied, and what the schema rejects is a 422 Invalid whose
  causes name the field.
* The core kinds have no schema here: their unknown fields are kept, as before.
"""

from __future__ import annotations

import json
import re
from typing import Any

from liqo_rules.selectors.labels import byte_len, label_key_errors, label_value_errors
from sandbox import errors
from sandbox.crds import SCHEMAS, Schema
from sandbox.kinds import Kind

STRICT, WARN, IGNORE = "Strict", "Warn", "Ignore"
FIELD_VALIDATION = (STRICT, WARN, IGNORE)

OBJECT_META_FIELDS = frozenset(
    {
        "name",
        "generateName",
        "namespace",
        "selfLink",
        "uid",
        "resourceVersion",
        "generation",
        "creationTimestamp",
        "deletionTimestamp",
        "deletionGracePeriodSeconds",
        "labels",
        "annotations",
        "ownerReferences",
        "finalizers",
        "managedFields",
    }
)
ANNOTATIONS_MAX_BYTES = 256 * 1024
_DATE_TIME = re.compile(r"\d{4}-\d{2}-\d{2}[Tt ]\d{2}:\d{2}:\d{2}(\.\d+)?([Zz]|[+-]\d{2}:\d{2})")

Cause = dict[str, str]


def field_validation(query: dict[str, str]) -> str:
    """The request's fieldValidation directive (Warn when absent, as the API server defaults it)."""
    value = query.get("fieldValidation", "")
    if value == "":
        return WARN
    if value not in FIELD_VALIDATION:
        raise errors.bad_request(
            f'fieldValidation parameter unsupported: "{value}"; valid values are: "Ignore", "Warn", "Strict"'
        )
    return value


# -- decoding ----------------------------------------------------------------------------------------
class _Object(dict[str, Any]):
    """A JSON object that remembers the keys it was given more than once."""

    duplicates: list[str]


def _pairs(pairs: list[tuple[str, Any]]) -> _Object:
    out = _Object()
    out.duplicates = []
    for key, value in pairs:
        if key in out and key not in out.duplicates:
            out.duplicates.append(key)
        out[key] = value
    return out


def loads_tracking_duplicates(raw: bytes | str) -> tuple[Any, list[str]]:
    """json.loads (last value wins, as Go's decoder) and the paths of the fields given twice."""
    doc = json.loads(raw, object_pairs_hook=_pairs)
    found: list[str] = []
    _collect_duplicates(doc, "", found)
    return _plain(doc), found


def _collect_duplicates(value: Any, path: str, found: list[str]) -> None:
    if isinstance(value, _Object):
        found.extend(_join(path, key) for key in value.duplicates)
        for key, child in value.items():
            _collect_duplicates(child, _join(path, key), found)
    elif isinstance(value, list):
        for i, child in enumerate(value):
            _collect_duplicates(child, f"{path}[{i}]", found)


def _plain(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _plain(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_plain(v) for v in value]
    return value


def _join(path: str, key: str) -> str:
    return f"{path}.{key}" if path else key


def strict_problems(kind: Kind, directive: str, unknown: list[str], duplicates: list[str]) -> list[str]:
    """Apply the fieldValidation directive: raise 400 under Strict, else the warnings to return."""
    problems = [f'unknown field "{p}"' for p in unknown] + [f'duplicate field "{p}"' for p in duplicates]
    if not problems or directive == IGNORE:
        return []
    if directive == STRICT:
        raise errors.bad_request(
            f'{kind.kind} in version "{kind.version}" cannot be handled as a {kind.kind}: '
            f"strict decoding error: {', '.join(problems)}"
        )
    return problems


# -- pruning and defaulting -------------------------------------------------------------------------
def has_schema(kind: Kind) -> bool:
    return kind.key in SCHEMAS


def prune(kind: Kind, obj: dict[str, Any]) -> list[str]:
    """Drop what the kind's schema does not know (in place); the dropped paths. Kinds without a schema
    keep everything."""
    schema = SCHEMAS.get(kind.key)
    if schema is None:
        return []
    dropped: list[str] = []
    meta = obj.get("metadata")
    if isinstance(meta, dict):
        for key in [k for k in meta if k not in OBJECT_META_FIELDS]:
            del meta[key]
            dropped.append(f"metadata.{key}")
    for key in [k for k in obj if k not in schema["properties"]]:
        del obj[key]
        dropped.append(key)
    for key, child_schema in schema["properties"].items():
        if key in ("apiVersion", "kind", "metadata") or key not in obj:
            continue
        if obj[key] is None and not child_schema.get("nullable"):
            del obj[key]
            continue
        _prune(obj[key], child_schema, key, dropped)
    return dropped


def _prune(value: Any, schema: Schema, path: str, dropped: list[str]) -> None:
    if schema.get("x-kubernetes-preserve-unknown-fields"):
        return
    if isinstance(value, dict):
        props = schema.get("properties")
        if props is not None:
            for key in list(value):
                if key not in props:
                    del value[key]
                    dropped.append(_join(path, key))
                elif value[key] is None and not props[key].get("nullable"):
                    del value[key]
                else:
                    _prune(value[key], props[key], _join(path, key), dropped)
        elif isinstance(schema.get("additionalProperties"), dict):
            for key, child in value.items():
                _prune(child, schema["additionalProperties"], _join(path, key), dropped)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, child in enumerate(value):
            _prune(child, schema["items"], f"{path}[{i}]", dropped)


def apply_defaults(kind: Kind, obj: dict[str, Any]) -> None:
    """The schema's `default`s for missing fields of objects that are present (in place)."""
    schema = SCHEMAS.get(kind.key)
    if schema is not None:
        _default(obj, schema)


def _default(value: Any, schema: Schema) -> None:
    if isinstance(value, dict):
        props = schema.get("properties")
        if props is not None:
            for key, child in props.items():
                if key not in value and "default" in child:
                    value[key] = json.loads(json.dumps(child["default"]))
                if key in value:
                    _default(value[key], child)
        elif isinstance(schema.get("additionalProperties"), dict):
            for child in value.values():
                _default(child, schema["additionalProperties"])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for child in value:
            _default(child, schema["items"])


# -- validation -------------------------------------------------------------------------------------
def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, int):
        return "integer"
    if isinstance(v, float):
        return "number"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    return "object"


def _is_type(v: Any, wanted: str) -> bool:
    actual = _type_name(v)
    return actual == wanted or (wanted == "number" and actual == "integer")


def _quote(v: Any) -> str:
    return json.dumps(v, ensure_ascii=False) if isinstance(v, str) else f'"{_type_name(v)}"'


def schema_causes(kind: Kind, obj: dict[str, Any], old: dict[str, Any] | None) -> list[Cause]:
    """What the kind's schema rejects in `obj` (empty for kinds without a schema)."""
    schema = SCHEMAS.get(kind.key)
    if schema is None:
        return []
    causes: list[Cause] = []
    for name in schema.get("required", []):
        if name not in obj and not schema["properties"][name].get("x-sandbox-validated-elsewhere"):
            causes.append({"field": name, "reason": "FieldValueRequired", "message": "Required value"})
    for key, child in schema["properties"].items():
        if key in ("apiVersion", "kind", "metadata") or key not in obj:
            continue
        _validate(obj[key], child, key, (old or {}).get(key) if old is not None else _ABSENT, causes)
    return causes


_ABSENT = object()


def _validate(value: Any, schema: Schema, path: str, old: Any, causes: list[Cause]) -> None:
    if schema.get("x-sandbox-validated-elsewhere"):
        return
    if value is None and schema.get("nullable"):
        return
    if schema.get("x-kubernetes-int-or-string"):
        if not isinstance(value, (int, str)) or isinstance(value, bool):
            causes.append(_invalid(path, value, f"{path} in body must be of type integer,string: {_quote(value)}"))
        return
    wanted = schema.get("type")
    if wanted and not _is_type(value, wanted):
        causes.append(_invalid(path, value, f"{path} in body must be of type {wanted}: {_quote(value)}"))
        return
    if "enum" in schema and value not in schema["enum"]:
        shown = ", ".join(json.dumps(v) for v in schema["enum"])
        causes.append(
            {
                "field": path,
                "reason": "FieldValueNotSupported",
                "message": f"Unsupported value: {_quote(value)}: supported values: {shown}",
            }
        )
    if isinstance(value, str):
        if "pattern" in schema and not re.search(schema["pattern"], value):
            causes.append(_invalid(path, value, f"{path} in body should match '{schema['pattern']}'"))
        if len(value) < schema.get("minLength", 0):
            causes.append(_invalid(path, value, f"{path} in body should be at least {schema['minLength']} chars long"))
        if schema.get("format") == "date-time" and not _DATE_TIME.fullmatch(value):
            causes.append(_invalid(path, value, f"{path} in body must be of type date-time: {_quote(value)}"))
    for rule in schema.get("x-kubernetes-validations", []):
        if rule.get("rule") == "self == oldSelf" and old is not _ABSENT and old is not None and old != value:
            causes.append(_invalid(path, value, rule["message"]))
    if isinstance(value, dict):
        props = schema.get("properties")
        if props is not None:
            for name in schema.get("required", []):
                if name not in value:
                    causes.append(
                        {"field": _join(path, name), "reason": "FieldValueRequired", "message": "Required value"}
                    )
            for key, child in value.items():
                if key in props:
                    before = old.get(key, _ABSENT) if isinstance(old, dict) else _ABSENT
                    _validate(child, props[key], _join(path, key), before, causes)
        elif isinstance(schema.get("additionalProperties"), dict):
            for key, child in value.items():
                _validate(child, schema["additionalProperties"], _join(path, key), _ABSENT, causes)
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, child in enumerate(value):
            _validate(child, schema["items"], f"{path}[{i}]", _ABSENT, causes)


def _invalid(path: str, value: Any, detail: str) -> Cause:
    shown = _quote(value) if isinstance(value, str) else f'"{_type_name(value)}"'
    return {"field": path, "reason": "FieldValueInvalid", "message": f"Invalid value: {shown}: {detail}"}


# -- ObjectMeta -------------------------------------------------------------------------------------
def metadata_causes(obj: dict[str, Any]) -> list[Cause]:
    """ValidateObjectMeta's checks of labels and annotations (every kind)."""
    meta = obj.get("metadata")
    if not isinstance(meta, dict):
        return []
    causes: list[Cause] = []
    labels = meta.get("labels")
    if labels is not None:
        if not isinstance(labels, dict):
            causes.append(_invalid("metadata.labels", labels, "metadata.labels in body must be of type object"))
        else:
            for key, value in labels.items():
                for msg in label_key_errors(key):
                    causes.append(_invalid("metadata.labels", key, msg))
                if not isinstance(value, str):
                    causes.append(_invalid(f"metadata.labels.{key}", value, "must be of type string"))
                    continue
                for msg in label_value_errors(value):
                    causes.append(_invalid("metadata.labels", value, msg))
    annotations = meta.get("annotations")
    if annotations is not None:
        if not isinstance(annotations, dict):
            causes.append(
                _invalid("metadata.annotations", annotations, "metadata.annotations in body must be of type object")
            )
        else:
            total = 0
            for key, value in annotations.items():
                for msg in label_key_errors(key.lower()):
                    causes.append(_invalid("metadata.annotations", key, msg))
                if not isinstance(value, str):
                    causes.append(_invalid(f"metadata.annotations.{key}", value, "must be of type string"))
                    continue
                total += byte_len(key) + byte_len(value)
            if total > ANNOTATIONS_MAX_BYTES:
                causes.append(
                    {
                        "field": "metadata.annotations",
                        "reason": "FieldValueTooLong",
                        "message": f"Too long: may not be more than {ANNOTATIONS_MAX_BYTES} bytes",
                    }
                )
    return causes
