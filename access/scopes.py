"""Operator scopes, pure: does a namespace (name + labels, in a managed cluster) fall inside a set of scopes?

A scope is a namespace name glob (``team-a-*``, matched case-sensitively with ``fnmatch.fnmatchcase``)
or a label selector in kubectl syntax (``team=a``, parsed by liqo_rules.selectors, the same parser
as every other selector in the dashboard). A namespace is in scope when any one scope matches.

A scope may name the managed clusters it covers (issue 28) with a glob on the cluster's name, in front:

- a name glob takes ``CLUSTER/``: ``prod-eu/team-a-*``, ``prod-*/team-a-*``, ``*/team-a-*`` (every
  managed cluster). A namespace name never contains ``/``, so the ``/`` is unambiguous.
- a label selector takes ``CLUSTER:``: ``prod-eu: team=a``, ``*: example.com/team=a``. Not ``/``:
  label keys contain one (``example.com/team``). A ``:`` is valid nowhere in a label selector (not in
  a key, not in a value), so whatever precedes the first ``:`` is the cluster part.

Both separators were invalid in every scope before, so every scope stored before keeps its meaning.

A scope without a cluster part covers the **default managed cluster only** (the one the
single-cluster pages address: the only cluster with data until namespaces carry their cluster), not
every managed cluster. Both readings agree while the default cluster is the only one with data; they
part when a second cluster is added, and then this reading is the safe one: an existing scope keeps
working exactly where it worked, and adding a cluster grants nobody anything there until an admin
writes ``*/team-a-*`` or ``milan/team-a-*`` (a scope is a grant: a namespace name like ``team-a-web``
in a cluster someone else runs is not necessarily team A's). It also keeps ``*/team-a-*`` meaningful
instead of a synonym. If the default cluster changes (``LIQO_DASH_CLUSTERS`` names another first),
scopes without a cluster part follow it.

Matching is pure: the caller says which cluster the namespace is in (``cluster``, ``None`` for the
default cluster) and what the default cluster's name is (``default_cluster``) when it knows;
``access.policy`` looks that name up once per user object (request or bulk run).
"""

from __future__ import annotations

import fnmatch
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from functools import lru_cache

from liqo_rules.selectors.parse import parse_requirements
from liqo_rules.selectors.requirements import Requirement, SelectorError

GLOB = "glob"
SELECTOR = "selector"
KINDS = (GLOB, SELECTOR)

# The separators between the cluster part and the rest, per kind (see the module docstring).
GLOB_CLUSTER_SEP = "/"
SELECTOR_CLUSTER_SEP = ":"

# A namespace name is a DNS label; a glob adds the fnmatch wildcards * ? [ ] and ! inside brackets.
_GLOB_RE = re.compile(r"^[a-z0-9*?\[\]!-]{1,63}$")
# A managed cluster's name is a slug (ManagedCluster.name: letters, digits, '-' and '_', at most 63).
_CLUSTER_GLOB_RE = re.compile(r"^[A-Za-z0-9_*?\[\]!-]{1,63}$")


class ScopeError(ValueError):
    """A scope value that cannot be used."""


@dataclass(frozen=True)
class Parsed:
    """A scope value taken apart: the cluster glob (None: no cluster part, the default cluster) and
    the namespace part (the name glob or the label selector)."""

    cluster: str | None
    rest: str


@lru_cache(maxsize=4096)
def split(kind: str, value: str) -> Parsed:
    """``prod-eu/team-a-*`` -> Parsed("prod-eu", "team-a-*"); ``prod-eu: team=a`` -> Parsed("prod-eu",
    "team=a"); ``team-a-*`` -> Parsed(None, "team-a-*"). Does not validate (see :func:`validate`)."""
    value = value or ""
    sep = GLOB_CLUSTER_SEP if kind == GLOB else SELECTOR_CLUSTER_SEP if kind == SELECTOR else ""
    if sep and sep in value:
        cluster, _, rest = value.partition(sep)
        return Parsed(cluster.strip(), rest.strip())
    return Parsed(None, value)


@dataclass(frozen=True)
class Scope:
    kind: str
    value: str

    @property
    def cluster(self) -> str | None:
        """The cluster glob, or None for a scope without a cluster part (the default cluster)."""
        return split(self.kind, self.value).cluster

    @property
    def rest(self) -> str:
        """The namespace part: the name glob or the label selector, without the cluster part."""
        return split(self.kind, self.value).rest

    def __str__(self) -> str:
        parsed = split(self.kind, self.value)
        if self.kind == GLOB:
            return self.value if parsed.cluster is None else f"{parsed.cluster}/{parsed.rest}"
        return f"label {parsed.rest}" if parsed.cluster is None else f"{parsed.cluster}: label {parsed.rest}"


def validate_cluster_glob(glob: str) -> None:
    """Raise ScopeError unless ``glob`` is a usable glob on managed cluster names."""
    if not glob:
        raise ScopeError("the cluster part is empty: write * for every managed cluster, or leave the part out")
    if not _CLUSTER_GLOB_RE.match(glob):
        raise ScopeError(
            f"cluster part {glob!r} is not a managed cluster name glob: use letters, digits, '-', '_' and "
            "the wildcards * ? [ ] (at most 63 characters)"
        )
    if glob.count("[") != glob.count("]"):
        raise ScopeError(f"cluster part {glob!r} has unbalanced brackets")


def validate(kind: str, value: str) -> None:
    """Raise ScopeError unless ``value`` is a usable scope of ``kind`` (with or without a cluster part)."""
    if kind not in KINDS:
        raise ScopeError(f"unknown scope kind {kind!r} (expected one of {', '.join(KINDS)})")
    parsed = split(kind, value)
    if kind == GLOB and (value or "").count(GLOB_CLUSTER_SEP) > 1:
        raise ScopeError(f"{value!r} has more than one '/': write CLUSTER/NAME-GLOB (a namespace name has no '/')")
    if parsed.cluster is not None:
        validate_cluster_glob(parsed.cluster)
    value = parsed.rest
    if kind == GLOB:
        if not _GLOB_RE.match(value or ""):
            raise ScopeError(
                f"{value!r} is not a namespace name glob: use lowercase letters, digits, '-' and the "
                "wildcards * ? [ ] (at most 63 characters)"
            )
        if value.count("[") != value.count("]"):
            raise ScopeError(f"{value!r} has unbalanced brackets")
        return
    if not (value or "").strip():
        raise ScopeError("an empty label selector would match every namespace: use the glob * instead")
    try:
        _requirements(value)
    except SelectorError as exc:
        raise ScopeError(f"{value!r} is not a label selector: {exc}") from exc


@lru_cache(maxsize=1024)
def _requirements(selector: str) -> tuple[Requirement, ...]:
    return tuple(parse_requirements(selector))


def covers_cluster(scope: Scope, cluster: str | None = None, default_cluster: str | None = None) -> bool:
    """Whether the scope's cluster part covers a namespace in ``cluster`` (None: the default cluster).

    A scope without a cluster part covers the default cluster only: ``cluster`` None, or equal to
    ``default_cluster``. A cluster glob is matched against ``cluster``, or ``default_cluster`` when
    ``cluster`` is None; when neither is known only a glob matching every name (``*``) covers it."""
    glob = scope.cluster
    if glob is None:
        return cluster is None or (default_cluster is not None and cluster == default_cluster)
    target = cluster if cluster is not None else default_cluster
    return fnmatch.fnmatchcase(target or "", glob)


def matches(
    scope: Scope,
    name: str,
    labels: Mapping[str, str],
    cluster: str | None = None,
    *,
    default_cluster: str | None = None,
) -> bool:
    """Whether one scope covers the namespace ``name`` (with ``labels``) in managed cluster ``cluster``
    (None: the default cluster, whose name is ``default_cluster`` when known). An invalid scope covers
    nothing."""
    if scope.kind not in KINDS or not covers_cluster(scope, cluster, default_cluster):
        return False
    rest = scope.rest
    if scope.kind == GLOB:
        return fnmatch.fnmatchcase(name, rest)
    try:
        requirements = _requirements(rest)
    except SelectorError:
        return False
    return bool(requirements) and all(r.matches(dict(labels)) for r in requirements)


def in_scope(
    scopes: Iterable[Scope],
    name: str,
    labels: Mapping[str, str] | None = None,
    cluster: str | None = None,
    *,
    default_cluster: str | None = None,
) -> bool:
    return any(matches(scope, name, labels or {}, cluster, default_cluster=default_cluster) for scope in scopes)


def needs_default_cluster(scopes: Iterable[Scope], cluster: str | None) -> bool:
    """Whether matching these scopes for a namespace in ``cluster`` needs the default cluster's name:
    a scope naming clusters against a namespace in the default cluster (unless its glob is ``*``), or
    a scope without a cluster part against a namespace in a named cluster. Lets the caller skip the
    look-up for the scopes every install had before issue 28."""
    for scope in scopes:
        glob = scope.cluster
        if cluster is None and glob is not None and glob != "*":
            return True
        if cluster is not None and glob is None:
            return True
    return False


def describe(scopes: Iterable[Scope]) -> str:
    """``team-a-*, label team=a, prod-eu/team-b-*`` (sorted, de-duplicated), or ``none``."""
    names = sorted({str(scope) for scope in scopes})
    return ", ".join(names) if names else "none"


def out_of_scope_reason(
    scopes: Iterable[Scope], name: str, cluster: str | None = None, *, default_cluster: str | None = None
) -> str:
    """Why a namespace is out of reach, naming the user's scopes (and the cluster, when the caller
    names it)."""
    scopes = list(scopes)
    where = f'namespace "{name}"' if cluster is None else f'namespace "{name}" in cluster {cluster}'
    if not scopes:
        return f"{where} is out of scope: you have no scopes (an admin grants them)"
    note = ""
    if cluster is not None and cluster != default_cluster and any(scope.cluster is None for scope in scopes):
        default = f" ({default_cluster})" if default_cluster else ""
        note = f"; scopes without a cluster cover the default cluster{default} only"
    return f"{where} is out of scope (your scopes: {describe(scopes)}{note})"
