"""Which changes need a second person, and when changes of a namespace may be applied: the governance
settings, read per scope.

``LIQO_DASH["APPROVAL_POLICY"]`` and ``LIQO_DASH["CHANGE_WINDOWS"]`` are lists of rules separated by ``;``,
each ``SCOPE => VALUE``; the first rule whose scope covers the namespace decides, and a rule without
``SCOPE =>`` covers every namespace. A scope is written as an operator's scope is (``access.scopes``): a
namespace name glob (``prod-*``) or ``label`` and a label selector (``label tier=critical``).

Managed clusters (issue 28): a scope may name the clusters it covers, as an operator's scope does, with a
glob on the cluster's name in front: ``prod-eu/prod-*``, ``prod-*/web-*``, ``prod-eu: label tier=critical``
(``prod-eu/*`` is every namespace of prod-eu: a freeze window on one cluster). A scope without a cluster
part covers its namespaces in **every** managed cluster: a rule restricts, so the safe reading of an
existing rule is the one that keeps holding when a cluster is added (an operator's scope grants, and reads
the other way: the default cluster only). A change of cluster B is held only by the rules that cover B.

- Approval policy values: ``none`` (no approval), ``destructive`` (the changes
  ``offloading.whatif.destructive`` calls destructive: an unoffload, an edit that loses a cluster or makes
  the pod strategy stricter) or ``all`` (every change). A namespace no rule covers needs none.
  Recommended: ``destructive``. Shipped default: ``none`` (nothing changes until it is configured).
- Change windows values: windows as ``offloading.governance.windows`` reads them, separated by ``|``
  (``prod-* => Mon-Fri 22:00-02:00 Europe/Rome | Sat-Sun 00:00-24:00 Europe/Rome``). A namespace no rule
  covers may be changed at any time; ``always`` says so for a scope explicitly.
- ``LIQO_DASH["APPROVAL_TTL"]``: seconds an approval request waits before it expires (24 h).

A setting that cannot be read raises ``ImproperlyConfigured`` naming the rule, on first use.
"""

from __future__ import annotations

import re
import time
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import timedelta
from functools import lru_cache

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from access import policy as access_policy
from access import scopes
from offloading.governance.windows import Window, WindowError, parse_windows

NONE, DESTRUCTIVE, ALL = "none", "destructive", "all"
APPROVAL_MODES = (NONE, DESTRUCTIVE, ALL)
ALWAYS = "always"
EVERY_NAMESPACE = scopes.Scope(scopes.GLOB, "*")


@dataclass(frozen=True)
class Rule:
    scope: scopes.Scope
    value: str

    def covers(self, name: str, labels: Mapping[str, str], cluster: str | None = None) -> bool:
        """Whether the rule covers namespace ``name`` of managed cluster ``cluster`` (its name; None: the
        default cluster, whose name is looked up only when the rule names clusters)."""
        glob = self.scope.cluster
        if glob is None:  # every managed cluster's namespaces (the module's docstring)
            return scopes.matches(self.scope, name, labels)
        target = cluster if cluster is not None else (None if glob == "*" else _default_cluster())
        return scopes.matches(self.scope, name, labels, target or "", default_cluster=target)


_DEFAULT_CLUSTER: list[tuple[float, str]] = []  # (read at, name): a bulk asks once, not per namespace
_DEFAULT_CLUSTER_TTL = 5.0


def _default_cluster() -> str:
    now = time.monotonic()
    if not _DEFAULT_CLUSTER or now - _DEFAULT_CLUSTER[0][0] > _DEFAULT_CLUSTER_TTL:
        _DEFAULT_CLUSTER[:] = [(now, access_policy.default_cluster_name())]
    return _DEFAULT_CLUSTER[0][1]


_CLUSTER_LABEL = re.compile(r"^([^\s:/]+)\s*:\s*label\s+(.+)$")


def _scope(text: str, setting: str) -> scopes.Scope:
    """A rule's scope: ``GLOB``, ``CLUSTER/GLOB``, ``label SELECTOR`` or ``CLUSTER: label SELECTOR``."""
    named = _CLUSTER_LABEL.match(text)
    if named:
        kind, value = scopes.SELECTOR, f"{named.group(1)}{scopes.SELECTOR_CLUSTER_SEP} {named.group(2).strip()}"
    elif text.startswith("label "):
        kind, value = scopes.SELECTOR, text[len("label ") :].strip()
    else:
        kind, value = scopes.GLOB, text
    try:
        scopes.validate(kind, value)
    except scopes.ScopeError as exc:
        raise ImproperlyConfigured(f"{setting}: {exc}") from exc
    return scopes.Scope(kind, value)


def parse_rules(text: str, setting: str) -> tuple[Rule, ...]:
    """``SCOPE => VALUE; ...`` as rules (values not checked here)."""
    rules = []
    for part in (p.strip() for p in text.split(";")):
        if not part:
            continue
        scope_text, arrow, value = part.partition("=>")
        if not arrow:
            rules.append(Rule(EVERY_NAMESPACE, part))
            continue
        if not scope_text.strip() or not value.strip():
            raise ImproperlyConfigured(f"{setting}: {part!r} is not SCOPE => VALUE")
        rules.append(Rule(_scope(scope_text.strip(), setting), value.strip()))
    return tuple(rules)


@lru_cache(maxsize=16)
def approval_rules(text: str) -> tuple[Rule, ...]:
    rules = parse_rules(text, "APPROVAL_POLICY")
    for rule in rules:
        if rule.value not in APPROVAL_MODES:
            raise ImproperlyConfigured(
                f"APPROVAL_POLICY: {rule.value!r} is not a policy (one of {', '.join(APPROVAL_MODES)})"
            )
    return rules


@lru_cache(maxsize=16)
def window_rules(text: str) -> tuple[tuple[Rule, tuple[Window, ...]], ...]:
    parsed = []
    for rule in parse_rules(text, "CHANGE_WINDOWS"):
        try:
            windows = () if rule.value == ALWAYS else parse_windows(rule.value)
        except WindowError as exc:
            raise ImproperlyConfigured(f"CHANGE_WINDOWS: {exc}") from exc
        parsed.append((rule, windows))
    return tuple(parsed)


def approval_mode(name: str, labels: Mapping[str, str] | None, cluster: str | None = None) -> str:
    """none, destructive or all: what the first rule covering the namespace (of managed cluster
    ``cluster``, by name; None: the default) says (none without one)."""
    for rule in approval_rules(str(settings.LIQO_DASH.get("APPROVAL_POLICY") or "")):
        if rule.covers(name, labels or {}, cluster):
            return rule.value
    return NONE


def approval_reason(
    name: str, labels: Mapping[str, str] | None, destructive: str | None, cluster: str | None = None
) -> str:
    """Why a change of namespace ``name`` (of managed cluster ``cluster``) needs a second person ("" when
    it does not): ``destructive`` is why the change is destructive (``offloading.whatif.destructive``),
    None when it is not."""
    mode = approval_mode(name, labels, cluster)
    if mode == ALL:
        return f"every change of namespace {name} needs a second person's approval"
    if mode == DESTRUCTIVE and destructive:
        return f"a destructive change needs a second person's approval: {destructive}"
    return ""


def windows_of(name: str, labels: Mapping[str, str] | None, cluster: str | None = None) -> tuple[Window, ...]:
    """The change windows of a namespace of managed cluster ``cluster`` (by name; None: the default)
    (empty: it may be changed at any time)."""
    for rule, windows in window_rules(str(settings.LIQO_DASH.get("CHANGE_WINDOWS") or "")):
        if rule.covers(name, labels or {}, cluster):
            return windows
    return ()


def approval_ttl() -> timedelta:
    return timedelta(seconds=float(settings.LIQO_DASH.get("APPROVAL_TTL") or 86400))
