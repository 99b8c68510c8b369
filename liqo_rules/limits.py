"""How big a selector the dashboard accepts: the same limits for the form, the preview, the API and bulk.

Kubernetes itself bounds only the lengths of label keys and values (``selectors.labels``); these caps on
the number of terms, expressions and values keep a selector's preview fast (see ``bench/``) and a
hostile one from tying up the server.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

MAX_TERMS = 50
MAX_EXPRESSIONS = 50
MAX_VALUES = 100


def _too_many(what: str, count: int, limit: int, where: str) -> str:
    return f"{where} has {count} {what}; at most {limit} are allowed"


def _sized(value: Any) -> list[Any]:
    return value if isinstance(value, list) else []


def node_selector_limit_problems(selector: Any) -> list[str]:
    """Messages for a NodeSelector over the limits (empty when within them). Shapes it cannot read
    are left to the schema check, which names them."""
    if not isinstance(selector, dict):
        return []
    problems: list[str] = []
    terms = _sized(selector.get("nodeSelectorTerms"))
    if len(terms) > MAX_TERMS:
        return [_too_many("terms", len(terms), MAX_TERMS, "nodeSelectorTerms")]
    for t, term in enumerate(terms):
        if not isinstance(term, dict):
            continue
        for kind in ("matchExpressions", "matchFields"):
            expressions = _sized(term.get(kind))
            where = f"nodeSelectorTerms[{t}].{kind}"
            if len(expressions) > MAX_EXPRESSIONS:
                problems.append(_too_many("expressions", len(expressions), MAX_EXPRESSIONS, where))
                continue
            for e, expression in enumerate(expressions):
                values = _sized(expression.get("values")) if isinstance(expression, dict) else []
                if len(values) > MAX_VALUES:
                    problems.append(_too_many("values", len(values), MAX_VALUES, f"{where}[{e}].values"))
    return problems


def requirement_limit_problems(requirements: Sequence[Any]) -> list[str]:
    """Messages for a parsed label selector (``kubectl -l``) over the limits: it is one term, so at most
    ``MAX_EXPRESSIONS`` requirements of at most ``MAX_VALUES`` values each."""
    if len(requirements) > MAX_EXPRESSIONS:
        return [_too_many("expressions", len(requirements), MAX_EXPRESSIONS, "the label selector")]
    return [
        _too_many("values", len(r.values), MAX_VALUES, f"requirement {r.key!r}")
        for r in requirements
        if len(r.values) > MAX_VALUES
    ]


def selector_count_problems(selectors: Sequence[Any]) -> list[str]:
    """Messages for a list of liqoctl selector strings (one term each) over the limit of terms."""
    if len(selectors) > MAX_TERMS:
        return [_too_many("terms", len(selectors), MAX_TERMS, "selectors")]
    return []
