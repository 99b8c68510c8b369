"""NamespaceOffloading spec: field names, defaults, canonical form, naming and system namespaces (a, b.1)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, TypeVar, cast

from liqo_rules import constants as c

_T = TypeVar("_T")

FIELD_MAPPING = "namespaceMappingStrategy"
FIELD_REMOTE_NAME = "remoteNamespaceName"
FIELD_POD = "podOffloadingStrategy"
FIELD_SELECTOR = "clusterSelector"
FIELD_NAMESPACE = "namespace"

SOURCE_SCHEMA = "schema"
SOURCE_WEBHOOK = "webhook"
SOURCE_DASHBOARD = "dashboard"

_DNS1123_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?")


@dataclass(frozen=True)
class Problem:
    """One validation error or warning, attached to a form field, with where it comes from."""

    field: str
    message: str
    source: str


def is_dns1123_label(name: str) -> bool:
    """Whether name is a valid namespace name (RFC 1123 label, at most 63 characters)."""
    return isinstance(name, str) and len(name) <= 63 and _DNS1123_LABEL.fullmatch(name) is not None


def dns1123_problems(name: str) -> list[str]:
    msgs = []
    if len(name) > 63:
        msgs.append(f"must be no more than 63 characters (it has {len(name)})")
    if not _DNS1123_LABEL.fullmatch(name):
        msgs.append(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
            "and must start and end with an alphanumeric character (e.g. 'my-name', or '123-abc')"
        )
    return msgs


# --------------------------------------------------------------------------------------------------
# Defaults and canonical form.


def json_copy(value: _T) -> _T:
    """A deep copy of JSON data (dicts, lists and scalars): what ``copy.deepcopy`` gives, several times
    faster on a selector of thousands of expressions (no memo, no dispatch on types JSON never holds)."""
    if isinstance(value, dict):
        return cast(_T, {key: json_copy(item) for key, item in value.items()})
    if isinstance(value, list):
        return cast(_T, [json_copy(item) for item in value])
    return value


def mapping_strategy(spec: dict[str, Any] | None) -> str:
    """The spec's namespaceMappingStrategy, defaulted as the API server does."""
    value = spec.get(FIELD_MAPPING) if isinstance(spec, dict) else None
    return c.DEFAULT_MAPPING_STRATEGY if value is None else str(value)


def apply_defaults(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec as the API server defaults it (DefaultName, LocalAndRemote); a new dict, clusterSelector as given."""
    return json_copy(defaults_view(spec))


def defaults_view(spec: dict[str, Any]) -> dict[str, Any]:
    """``apply_defaults`` for readers: a new top-level dict whose nested values (the clusterSelector) are
    the spec's own, not copies. For code that only reads them: copying a selector of thousands of
    expressions costs more than the rest of a preview."""
    out = dict(spec) if isinstance(spec, dict) else {}
    if out.get(FIELD_MAPPING) is None:
        out[FIELD_MAPPING] = c.DEFAULT_MAPPING_STRATEGY
    if out.get(FIELD_POD) is None:
        out[FIELD_POD] = c.DEFAULT_POD_STRATEGY
    return out


def _normalize_requirement(expr: Any) -> Any:
    if not isinstance(expr, dict):
        return expr
    out: dict[str, Any] = {"key": expr.get("key"), "operator": expr.get("operator")}
    if expr.get("values"):
        out["values"] = list(expr["values"])
    return out


def _normalize_term(term: Any) -> Any:
    if not isinstance(term, dict):
        return term
    out: dict[str, Any] = {}
    if term.get("matchExpressions"):
        out["matchExpressions"] = [_normalize_requirement(e) for e in term["matchExpressions"]]
    if term.get("matchFields"):
        out["matchFields"] = [_normalize_requirement(e) for e in term["matchFields"]]
    return out


def normalize_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """apply_defaults plus the canonical form we store and compare.

    Keys in Go struct order; remoteNamespaceName dropped when empty; clusterSelector always
    {"nodeSelectorTerms": [...]}; empty values / matchExpressions / matchFields omitted (as Go's omitempty).
    """
    d = defaults_view(spec)
    out: dict[str, Any] = {FIELD_MAPPING: d[FIELD_MAPPING]}
    if d.get(FIELD_REMOTE_NAME):
        out[FIELD_REMOTE_NAME] = d[FIELD_REMOTE_NAME]
    out[FIELD_POD] = d[FIELD_POD]
    selector = d.get(FIELD_SELECTOR) or {}
    terms = selector.get("nodeSelectorTerms") if isinstance(selector, dict) else None
    out[FIELD_SELECTOR] = {"nodeSelectorTerms": [_normalize_term(t) for t in terms or []]}
    return out


def remote_namespace_name(namespace: str, local_cluster_id: str, spec: dict[str, Any]) -> str:
    """The remote namespace name Liqo computes (b.1): no hashing or truncation for DefaultName."""
    strategy = mapping_strategy(spec)
    if strategy == c.ENFORCE_SAME_NAME:
        return namespace
    if strategy == c.SELECTED_NAME:
        return str(spec.get(FIELD_REMOTE_NAME) or "")
    return f"{namespace}-{local_cluster_id}"


def local_cluster_id_from(namespace: str, spec: dict[str, Any], remote_name: str) -> str | None:
    """The local cluster id, read back from a DefaultName offloading's remote name (``<ns>-<id>``);
    None when the offloading does not tell (another strategy, or no remote name yet)."""
    if mapping_strategy(spec) != c.DEFAULT_NAME or not remote_name.startswith(namespace + "-"):
        return None
    return remote_name[len(namespace) + 1 :] or None


def is_system_namespace(namespace: str) -> bool:
    """Kubernetes' and Liqo's own namespaces (and Liqo tenant namespaces): never to be offloaded."""
    return namespace in c.SYSTEM_NAMESPACES or namespace.startswith(c.TENANT_NAMESPACE_PREFIX)
