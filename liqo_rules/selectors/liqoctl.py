"""The clusterSelector `liqoctl offload namespace --selector ...` builds from selector strings (d.1)."""

from __future__ import annotations

from typing import Any

from liqo_rules import constants as c
from liqo_rules.selectors.parse import parse_requirements
from liqo_rules.selectors.requirements import (
    SEL_DOUBLE_EQUALS,
    SEL_EQUALS,
    SEL_GT,
    SEL_LT,
    SEL_NOT_EQUALS,
    SelectorError,
)


def _liqoctl_term(text: str) -> tuple[dict[str, Any], list[str]]:
    reqs = parse_requirements(text)
    exprs: list[dict[str, Any]] = []
    equals: dict[str, str] = {}
    notes: list[str] = []
    for r in reqs:
        if r.operator in (SEL_EQUALS, SEL_DOUBLE_EQUALS):
            if r.key in equals and equals[r.key] != r.values[0]:
                notes.append(
                    f"{text!r}: {r.key} is compared with = more than once; liqoctl keeps only the last value "
                    f"({r.key}={r.values[0]})"
                )
            equals[r.key] = r.values[0]
            continue
        expr: dict[str, Any] = {"key": r.key, "operator": r.node_operator}
        if r.values:
            expr["values"] = list(r.values)
        if r.operator == SEL_NOT_EQUALS:
            notes.append(
                f"{text!r}: liqoctl rejects '!=' (\"!=\" is not a valid label selector operator); "
                f"it is stored as {r.key} NotIn ({r.values[0]}), which Liqo accepts"
            )
        elif r.operator in (SEL_GT, SEL_LT):
            notes.append(
                f"{text!r}: liqoctl rejects '{'>' if r.operator == SEL_GT else '<'}' "
                f'("{r.operator}" isn\'t supported in label selectors); it is stored as {r.key} '
                f"{r.node_operator} ({r.values[0]}), which Liqo accepts"
            )
        exprs.append(expr)
    # liqoctl appends the equality requirements after the others (from a Go map: random order; we keep key order).
    for key, value in equals.items():
        exprs.append({"key": key, "operator": c.OP_IN, "values": [value]})
    term: dict[str, Any] = {"matchExpressions": exprs} if exprs else {}
    if not exprs:
        notes.append(f"{text!r}: an empty selector gives an empty term, which selects no cluster")
    return term, notes


def cluster_selector(texts: list[str]) -> dict[str, Any]:
    """The clusterSelector `liqoctl offload namespace --selector T1 --selector T2 ...` builds.

    One NodeSelectorTerm per text (ORed); [] gives no terms (all clusters). Also accepts != and >/<,
    which liqoctl rejects (see cluster_selector_notes). Raises SelectorError on invalid text, with
    the index of the offending text in `.path`.
    """
    return cluster_selector_with_notes(texts)[0]


def cluster_selector_with_notes(texts: list[str]) -> tuple[dict[str, Any], list[str]]:
    """``cluster_selector(texts)`` and ``cluster_selector_notes(texts)`` from one parse of each text."""
    terms: list[dict[str, Any]] = []
    notes: list[str] = []
    for i, text in enumerate(texts):
        try:
            term, said = _liqoctl_term(text)
        except SelectorError as err:
            raise SelectorError(
                f"selector #{i + 1} {text!r}: {err.message}",
                text=text,
                position=err.position,
                token=err.token,
                path=f"nodeSelectorTerms[{i}]",
            ) from err
        terms.append(term)
        notes.extend(said)
    return {"nodeSelectorTerms": terms}, notes


def cluster_selector_notes(texts: list[str]) -> list[str]:
    """Things to tell the user about cluster_selector(texts): where liqoctl would differ or reject it."""
    notes: list[str] = []
    for text in texts:
        try:
            notes.extend(_liqoctl_term(text)[1])
        except SelectorError:
            continue
    return notes
