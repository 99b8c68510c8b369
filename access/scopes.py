"""Operator scopes, pure: does a namespace (name + labels) fall inside a set of scopes?

A scope is a namespace name glob (``team-a-*``, matched case-sensitively with ``fnmatch.fnmatchcase``)
or a label selector in kubectl syntax (``team=a``, parsed by liqo_rules.selectors, the same parser
as every other selector in the dashboard). A namespace is in scope when any one scope matches.
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

# A namespace name is a DNS label; a glob adds the fnmatch wildcards * ? [ ] and ! inside brackets.
_GLOB_RE = re.compile(r"^[a-z0-9*?\[\]!-]{1,63}$")


class ScopeError(ValueError):
    """A scope value that cannot be used."""


@dataclass(frozen=True)
class Scope:
    kind: str
    value: str

    def __str__(self) -> str:
        return self.value if self.kind == GLOB else f"label {self.value}"


def validate(kind: str, value: str) -> None:
    """Raise ScopeError unless ``value`` is a usable scope of ``kind``."""
    if kind == GLOB:
        if not _GLOB_RE.match(value or ""):
            raise ScopeError(
                f"{value!r} is not a namespace name glob: use lowercase letters, digits, '-' and the "
                "wildcards * ? [ ] (at most 63 characters)"
            )
        if value.count("[") != value.count("]"):
            raise ScopeError(f"{value!r} has unbalanced brackets")
        return
    if kind == SELECTOR:
        if not (value or "").strip():
            raise ScopeError("an empty label selector would match every namespace: use the glob * instead")
        try:
            _requirements(value)
        except SelectorError as exc:
            raise ScopeError(f"{value!r} is not a label selector: {exc}") from exc
        return
    raise ScopeError(f"unknown scope kind {kind!r} (expected one of {', '.join(KINDS)})")


@lru_cache(maxsize=1024)
def _requirements(selector: str) -> tuple[Requirement, ...]:
    return tuple(parse_requirements(selector))


def matches(scope: Scope, name: str, labels: Mapping[str, str]) -> bool:
    """Whether one scope covers the namespace. An invalid scope covers nothing."""
    if scope.kind == GLOB:
        return fnmatch.fnmatchcase(name, scope.value)
    if scope.kind == SELECTOR:
        try:
            requirements = _requirements(scope.value)
        except SelectorError:
            return False
        return bool(requirements) and all(r.matches(dict(labels)) for r in requirements)
    return False


def in_scope(scopes: Iterable[Scope], name: str, labels: Mapping[str, str] | None = None) -> bool:
    return any(matches(scope, name, labels or {}) for scope in scopes)


def describe(scopes: Iterable[Scope]) -> str:
    """``team-a-*, label team=a`` (sorted, de-duplicated), or ``none``."""
    names = sorted({str(scope) for scope in scopes})
    return ", ".join(names) if names else "none"


def out_of_scope_reason(scopes: Iterable[Scope], name: str) -> str:
    """Why a namespace is out of reach, naming the user's scopes."""
    scopes = list(scopes)
    if not scopes:
        return f'namespace "{name}" is out of scope: you have no scopes (an admin grants them)'
    return f'namespace "{name}" is out of scope (your scopes: {describe(scopes)})'
