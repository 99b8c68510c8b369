"""What the NamespaceOffloading CRD's structural schema rejects (after defaulting)."""

from __future__ import annotations

from typing import Any

from liqo_rules import constants as c
from liqo_rules.spec import (
    FIELD_MAPPING,
    FIELD_POD,
    FIELD_REMOTE_NAME,
    FIELD_SELECTOR,
    SOURCE_SCHEMA,
    Problem,
    defaults_view,
)


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number" if isinstance(v, float) else "integer"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def _requirement_schema_errors(expr: Any, path: str) -> list[str]:
    if not isinstance(expr, dict):
        return [
            f'{path}: Invalid value: "{_type_name(expr)}": {path} in body must be of type object: "{_type_name(expr)}"'
        ]
    errs = []
    for name in ("key", "operator"):
        if name not in expr or expr[name] is None:
            errs.append(f"{path}.{name}: Required value")
        elif not isinstance(expr[name], str):
            errs.append(
                f'{path}.{name}: Invalid value: "{_type_name(expr[name])}": {path}.{name} in body must be of type string'
            )
    values = expr.get("values")
    if values is not None:
        if not isinstance(values, list):
            errs.append(
                f'{path}.values: Invalid value: "{_type_name(values)}": {path}.values in body must be of type array'
            )
        else:
            for i, v in enumerate(values):
                if not isinstance(v, str):
                    errs.append(
                        f'{path}.values[{i}]: Invalid value: "{_type_name(v)}": '
                        f"{path}.values[{i}] in body must be of type string"
                    )
    return errs


def schema_errors(spec: dict[str, Any]) -> list[Problem]:
    """What the CRD's structural schema rejects (after defaulting): enums, types, required nodeSelectorTerms.

    The CRD has no enum for selector operators and no pattern for remoteNamespaceName; those are
    checked by validate_spec as dashboard checks.
    """
    if not isinstance(spec, dict):
        return [
            Problem(
                "spec",
                f'spec: Invalid value: "{_type_name(spec)}": spec in body must be of type object',
                SOURCE_SCHEMA,
            )
        ]
    d = defaults_view(spec)
    out: list[Problem] = []
    enums = ((FIELD_MAPPING, c.MAPPING_STRATEGIES), (FIELD_POD, ("Local", "Remote", "LocalAndRemote")))
    for name, allowed in enums:
        value = d[name]
        if not isinstance(value, str):
            out.append(
                Problem(
                    name,
                    f'spec.{name}: Invalid value: "{_type_name(value)}": spec.{name} in body must be of type string',
                    SOURCE_SCHEMA,
                )
            )
        elif value not in allowed:
            shown = ", ".join(f'"{a}"' for a in allowed)
            out.append(
                Problem(
                    name,
                    f'spec.{name}: Unsupported value: "{value}": supported values: {shown}',
                    SOURCE_SCHEMA,
                )
            )
    remote = d.get(FIELD_REMOTE_NAME)
    if remote is not None and not isinstance(remote, str):
        out.append(
            Problem(
                FIELD_REMOTE_NAME,
                f'spec.remoteNamespaceName: Invalid value: "{_type_name(remote)}": '
                "spec.remoteNamespaceName in body must be of type string",
                SOURCE_SCHEMA,
            )
        )
    if FIELD_SELECTOR in d and d[FIELD_SELECTOR] is not None:
        out.extend(Problem(FIELD_SELECTOR, m, SOURCE_SCHEMA) for m in _selector_schema_errors(d[FIELD_SELECTOR]))
    return out


def _selector_schema_errors(selector: Any) -> list[str]:
    base = "spec.clusterSelector"
    if not isinstance(selector, dict):
        return [
            f'{base}: Invalid value: "{_type_name(selector)}": {base} in body must be of type object: "{_type_name(selector)}"'
        ]
    terms = selector.get("nodeSelectorTerms")
    if terms is None:
        return [f"{base}.nodeSelectorTerms: Required value"]
    if not isinstance(terms, list):
        return [
            f'{base}.nodeSelectorTerms: Invalid value: "{_type_name(terms)}": {base}.nodeSelectorTerms in body must be of type array'
        ]
    errs: list[str] = []
    for i, term in enumerate(terms):
        tp = f"{base}.nodeSelectorTerms[{i}]"
        if term is None:
            continue
        if not isinstance(term, dict):
            errs.append(
                f'{tp}: Invalid value: "{_type_name(term)}": {tp} in body must be of type object: "{_type_name(term)}"'
            )
            continue
        for part in ("matchExpressions", "matchFields"):
            exprs = term.get(part)
            if exprs is None:
                continue
            if not isinstance(exprs, list):
                errs.append(
                    f'{tp}.{part}: Invalid value: "{_type_name(exprs)}": {tp}.{part} in body must be of type array'
                )
                continue
            for j, expr in enumerate(exprs):
                errs.extend(_requirement_schema_errors(expr, f"{tp}.{part}[{j}]"))
    return errs
