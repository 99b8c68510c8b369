"""NodeSelector validation and matching (component-helpers nodeaffinity) and Liqo's cluster selection (c.5)."""

from __future__ import annotations

from collections.abc import Hashable
from dataclasses import dataclass
from typing import Any

from liqo_rules import constants as c
from liqo_rules.selectors.format import describe_expr, term_text, valid_term_text
from liqo_rules.selectors.labels import parse_go_int64
from liqo_rules.selectors.requirements import (
    NODE_OP_TO_SEL,
    SelectorError,
    quote,
    quote_list,
    requirement_errors,
    requirement_matches,
)


@dataclass
class _ParsedTerm:
    index: int
    empty: bool
    exprs: list[dict[str, Any]]
    fields: list[dict[str, Any]]
    errors: list[str]


def _terms_of(node_selector: Any) -> list[Any]:
    if node_selector is None:
        return []
    if not isinstance(node_selector, dict):
        raise SelectorError("a NodeSelector must be an object with nodeSelectorTerms")
    terms = node_selector.get("nodeSelectorTerms")
    if terms is None:
        return []
    if not isinstance(terms, list):
        raise SelectorError("nodeSelectorTerms must be a list", path="nodeSelectorTerms")
    return terms


def _parse_term(term: Any, index: int) -> _ParsedTerm:
    path = f"nodeSelectorTerms[{index}]"
    if not isinstance(term, dict):
        return _ParsedTerm(index, False, [], [], [f"{path}: Invalid value: {term!r}: must be an object"])
    exprs = term.get("matchExpressions") or []
    flds = term.get("matchFields") or []
    errors: list[str] = []
    if not isinstance(exprs, list):
        errors.append(f"{path}.matchExpressions: must be a list")
        exprs = []
    if not isinstance(flds, list):
        errors.append(f"{path}.matchFields: must be a list")
        flds = []
    if not exprs and not flds and not errors:
        return _ParsedTerm(index, True, [], [], [])
    for i, expr in enumerate(exprs):
        p = f"{path}.matchExpressions[{i}]"
        if not isinstance(expr, dict):
            errors.append(f"{p}: Invalid value: {expr!r}: must be an object")
            continue
        op = expr.get("operator")
        sel = NODE_OP_TO_SEL.get(op) if isinstance(op, str) else None
        if sel is None:
            errors.append(
                f'{p}.operator: Unsupported value: {quote(op)}: supported values: "DoesNotExist", "Exists", '
                '"Gt", "In", "Lt", "NotIn"'
            )
            continue
        values = expr.get("values") or []
        if not isinstance(values, list):
            errors.append(f"{p}.values: Invalid value: {values!r}: must be a list")
            continue
        errors.extend(requirement_errors(expr.get("key"), sel, values, p))
    for i, expr in enumerate(flds):
        p = f"{path}.matchFields[{i}]"
        if not isinstance(expr, dict):
            errors.append(f"{p}: Invalid value: {expr!r}: must be an object")
            continue
        op = expr.get("operator")
        values = expr.get("values") or []
        if op in (c.OP_IN, c.OP_NOT_IN):
            if not isinstance(values, list) or len(values) != 1 or not isinstance(values[0], str):
                errors.append(
                    f"{p}.values: Invalid value: {quote_list(values if isinstance(values, list) else [values])}: "
                    "must have one element"
                )
        else:
            errors.append(f'{p}.operator: Unsupported value: {quote(op)}: supported values: "In", "NotIn"')
        if not isinstance(expr.get("key"), str):
            errors.append(f"{p}.key: Invalid value: {expr.get('key')!r}: must be a string")
    return _ParsedTerm(index, False, list(exprs), list(flds), errors)


def validate_term(term: dict[str, Any], index: int = 0) -> list[str]:
    """The errors Kubernetes reports for one NodeSelectorTerm (empty list when valid; empty terms are valid)."""
    return _parse_term(term, index).errors


def validate_node_selector(node_selector: dict[str, Any] | None) -> list[str]:
    """All errors of all terms, as NewNodeSelector (the strict constructor) would report them."""
    errs: list[str] = []
    for i, term in enumerate(_terms_of(node_selector)):
        errs.extend(_parse_term(term, i).errors)
    return errs


def _field_expr_matches(expr: dict[str, Any], fields: dict[str, str]) -> bool:
    have = fields.get(expr["key"], "")
    want: str = expr["values"][0]
    return have == want if expr["operator"] == c.OP_IN else have != want


def _expr_matches(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    return requirement_matches(expr["key"], NODE_OP_TO_SEL[expr["operator"]], expr.get("values") or [], labels)


def _first_failure(pt: _ParsedTerm, labels: dict[str, str], fields: dict[str, str]) -> str | None:
    """None when a valid, non-empty term matches; otherwise the human reason for the first failure."""
    if pt.empty:
        return "the term is empty, and an empty term never matches"
    if pt.errors:
        return "the term is invalid: " + "; ".join(pt.errors)
    for expr in pt.exprs:
        if not _expr_matches(expr, labels):
            return _why_not(expr, labels)
    if fields:
        for expr in pt.fields:
            if not _field_expr_matches(expr, fields):
                have = fields.get(expr["key"])
                shown = f"{expr['key']}={have}" if have is not None else f"no field {expr['key']}"
                return f"field {describe_expr(expr)} but the cluster has {shown}"
    return None


# The values a reason quotes: the cluster's own value is what tells why, not a list of a hundred.
REASON_VALUES = 10


def _why_not(expr: dict[str, Any], labels: dict[str, str]) -> str:
    key = expr["key"]
    op = expr["operator"]
    desc = describe_expr(expr, REASON_VALUES)
    has = key in labels
    have = f"{key}={labels[key]}" if has else ""
    if op == c.OP_IN:
        return f"{desc} but the cluster has {have}" if has else f"{desc} but the cluster has no label {key}"
    if op == c.OP_NOT_IN:
        return f"{desc} but the cluster has {have}"
    if op == c.OP_EXISTS:
        return f"{desc} but the cluster has no label {key}"
    if op == c.OP_DOES_NOT_EXIST:
        return f"{desc} but the cluster has {have}"
    if not has:
        return f"{desc} but the cluster has no label {key}"
    if parse_go_int64(labels[key]) is None:
        return f"{desc} but the cluster has {have}, which is not an integer"
    return f"{desc} but the cluster has {have}"


def matches(node_selector: dict[str, Any] | None, labels: dict[str, str], fields: dict[str, str] | None = None) -> bool:
    """Kubernetes MatchNodeSelectorTerms: terms ORed, expressions ANDed, empty terms never match.

    A missing selector or one without terms matches nothing. Raises SelectorError (listing every
    error) only when some term is invalid and no valid term matches.
    """
    fields = {k: v for k, v in (fields or {}).items() if v}
    errors: list[str] = []
    for i, term in enumerate(_terms_of(node_selector)):
        pt = _parse_term(term, i)
        if pt.empty:
            continue
        if pt.errors:
            errors.extend(pt.errors)
            continue
        if _first_failure(pt, labels, fields) is None:
            return True
    if errors:
        msg = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        raise SelectorError(msg, path="nodeSelectorTerms")
    return False


def cluster_matches(
    cluster_selector: dict[str, Any] | None, labels: dict[str, str], fields: dict[str, str] | None = None
) -> bool:
    """Liqo's MatchVirtualNodeSelectorTerms: no selector or no terms selects every cluster, else matches()."""
    if not _terms_of(cluster_selector):
        return True
    return matches(cluster_selector, labels, fields)


PreparedTerms = list[tuple[_ParsedTerm, str]]


def prepare_terms(cluster_selector: dict[str, Any] | None) -> PreparedTerms:
    """Each term of ``cluster_selector`` parsed and written as text, once: ``explain`` of many clusters
    against one selector then only matches."""
    prepared: PreparedTerms = []
    for i, term in enumerate(_terms_of(cluster_selector)):
        pt = _parse_term(term, i)
        # A term _parse_term found valid is written without validating its expressions a second time.
        prepared.append((pt, valid_term_text(pt.exprs) if not pt.errors and not pt.fields else term_text(term)))
    return prepared


def explanation_reads(prepared: PreparedTerms) -> tuple[frozenset[str], bool]:
    """The label keys ``explain`` of ``prepared`` reads, and whether it reads the node's name."""
    keys = frozenset(e["key"] for pt, _ in prepared for e in pt.exprs if isinstance(e.get("key"), str))
    return keys, any(pt.fields for pt, _ in prepared)


def explanation_key(reads: tuple[frozenset[str], bool], labels: dict[str, str], vn_name: str) -> Hashable:
    """What ``explain`` reads of a virtual node (``reads``: ``explanation_reads``): the labels its
    expressions name (sorted by key), and the name when a term matches fields. Nodes with one key get one
    explanation. Walks the node's labels, not the selector's keys: a selector at the limits names
    thousands of keys, a node has a dozen labels."""
    keys, uses_fields = reads
    return tuple(sorted((k, v) for k, v in labels.items() if k in keys)), vn_name if uses_fields else None


def explain(
    cluster_selector: dict[str, Any] | None,
    labels: dict[str, str],
    fields: dict[str, str] | None = None,
    *,
    prepared: PreparedTerms | None = None,
) -> dict[str, Any]:
    """Why a cluster is (not) selected: the matching term, or for each term its first failing expression.

    Returns {"selected", "matched_term", "error", "all_clusters", "terms": [{"index", "matched",
    "failed", "invalid", "text"}]}. `error` is set when Liqo would fail (invalid term, nothing matched).
    ``prepared``: ``prepare_terms(cluster_selector)``, when the caller explains many clusters.
    """
    if prepared is None:
        prepared = prepare_terms(cluster_selector)
    out_terms: list[dict[str, Any]] = []
    result: dict[str, Any] = {
        "selected": False,
        "matched_term": None,
        "error": None,
        "all_clusters": not prepared,
        "terms": out_terms,
    }
    if not prepared:
        result["selected"] = True
        return result
    flds = {k: v for k, v in (fields or {}).items() if v}
    errors: list[str] = []
    for i, (pt, text) in enumerate(prepared):
        failed = _first_failure(pt, labels, flds)
        matched = failed is None
        if pt.errors:
            errors.extend(pt.errors)
        if matched and result["matched_term"] is None:
            result["matched_term"] = i
            result["selected"] = True
        out_terms.append(
            {
                "index": i,
                "matched": matched,
                "failed": failed,
                "invalid": "; ".join(pt.errors) if pt.errors else None,
                "text": text,
            }
        )
    if not result["selected"] and errors:
        result["error"] = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return result


def virtual_node_labels(virtual_node: dict[str, Any], node: dict[str, Any] | None) -> dict[str, str]:
    """The labels Liqo matches a ClusterSelector against for a VirtualNode (liqo-semantics.md c.5).

    The Node's labels when the Node exists; otherwise VirtualNode spec.labels plus the remote cluster id
    and storage.liqo.io/available = "true" when the VirtualNode has *no* storage classes (Liqo's inversion).
    """
    if node is not None:
        return dict((node.get("metadata") or {}).get("labels") or {})
    spec = virtual_node.get("spec") or {}
    labels = dict(spec.get("labels") or {})
    labels[c.REMOTE_CLUSTER_ID_LABEL] = str(spec.get("clusterID") or "")
    labels[c.STORAGE_AVAILABLE_LABEL] = "true" if not spec.get("storageClasses") else "false"
    return labels
