"""NodeSelectorTerms written back as selector text (the inverse of liqoctl's --selector)."""

from __future__ import annotations

from typing import Any

from liqo_rules import constants as c
from liqo_rules.selectors.requirements import (
    NODE_OP_TO_SEL,
    SEL_DOES_NOT_EXIST,
    SEL_EXISTS,
    SEL_GT,
    SEL_IN,
    SEL_LT,
    UnformattableTermError,
    requirement_errors,
)


def format_requirement(expr: dict[str, Any]) -> str:
    """One NodeSelectorRequirement as selector text; raises UnformattableTermError when impossible."""
    if not isinstance(expr, dict):
        raise UnformattableTermError(f"expression {expr!r} is not an object")
    key = expr.get("key")
    op = expr.get("operator")
    values = expr.get("values") or []
    sel = NODE_OP_TO_SEL.get(op) if isinstance(op, str) else None
    if sel is None:
        raise UnformattableTermError(f"operator {op!r} cannot be written as selector text")
    if not isinstance(values, list):
        raise UnformattableTermError(f"values of {key!r} must be a list")
    errs = requirement_errors(key, sel, values, "expression")
    if errs:
        raise UnformattableTermError("; ".join(errs))
    assert isinstance(key, str)
    return _requirement_text(key, sel, values)


def _requirement_text(key: str, sel: str, values: list[str]) -> str:
    """A valid requirement (apimachinery operator ``sel``) as selector text."""
    if sel == SEL_EXISTS:
        return key
    if sel == SEL_DOES_NOT_EXIST:
        return "!" + key
    distinct = sorted(set(values))  # by code point: the order of their UTF-8 bytes, as apimachinery sorts
    if sel == SEL_GT:
        return f"{key}>{values[0]}"
    if sel == SEL_LT:
        return f"{key}<{values[0]}"
    if sel == SEL_IN and len(distinct) == 1 and distinct[0] != "":
        return f"{key}={distinct[0]}"
    return f"{key} {sel} ({','.join(distinct)})"


def format_term(term: dict[str, Any]) -> str:
    """A selector string that parses back (with cluster_selector) to a term equivalent to `term`.

    Raises UnformattableTermError for terms that cannot be written as text: matchFields, unknown
    operators or otherwise invalid expressions. The empty term gives "" (an empty term).
    """
    if not isinstance(term, dict):
        raise UnformattableTermError(f"term {term!r} is not an object")
    if term.get("matchFields"):
        raise UnformattableTermError(
            "the term uses matchFields ("
            + ", ".join(describe_expr(e) for e in term["matchFields"] if isinstance(e, dict))
            + "), which selector text cannot express"
        )
    exprs = term.get("matchExpressions") or []
    if not isinstance(exprs, list):
        raise UnformattableTermError("matchExpressions must be a list")
    return _joined([format_requirement(e) for e in exprs])


def valid_term_text(expressions: list[dict[str, Any]]) -> str:
    """``format_term`` of a term known to be valid and without matchFields (``match.prepare_terms`` has
    just validated it), given its matchExpressions: the same text, without validating them again."""
    return _joined(
        [_requirement_text(e["key"], NODE_OP_TO_SEL[e["operator"]], e.get("values") or []) for e in expressions]
    )


def _joined(parts: list[str]) -> str:
    # liqoctl keeps one value per key written with "=", so repeated keys use the "in (...)" form.
    eq_keys = [p.split("=", 1)[0] for p in parts if _is_equality(p)]
    return ",".join(_as_set_form(p) if _is_equality(p) and eq_keys.count(p.split("=", 1)[0]) > 1 else p for p in parts)


def _is_equality(text: str) -> bool:
    return "=" in text and " " not in text


def _as_set_form(text: str) -> str:
    key, value = text.split("=", 1)
    return f"{key} in ({value})"


def describe_expr(expr: dict[str, Any], max_values: int | None = None) -> str:
    """Human form of a NodeSelectorRequirement, e.g. `region In (eu,us)`; with ``max_values``, a longer
    list of values is cut after that many (`region In (a,b,… 98 more)`), as a reason repeated for every
    excluded cluster must stay short."""
    key = expr.get("key")
    op = expr.get("operator")
    values = expr.get("values") or []
    if op in (c.OP_EXISTS, c.OP_DOES_NOT_EXIST) and not values:
        return f"{key} {op}"
    if not isinstance(values, list):
        return f"{key} {op} ({values})"
    shown = ",".join(str(v) for v in values[:max_values])
    if max_values is not None and len(values) > max_values:
        shown += f",… {len(values) - max_values} more"
    return f"{key} {op} ({shown})"


def term_text(term: Any) -> str:
    try:
        return format_term(term)
    except UnformattableTermError:
        if not isinstance(term, dict):
            return repr(term)
        parts = [describe_expr(e) for e in term.get("matchExpressions") or [] if isinstance(e, dict)]
        parts += ["field " + describe_expr(e) for e in term.get("matchFields") or [] if isinstance(e, dict)]
        return " AND ".join(parts)
