"""Who may change which namespace: the question the change-request contract asks before queuing.

``can_change(user, namespace, labels, action)`` answers with a Decision carrying the reason shown on
the form or in the API's 403. The cluster still has the last word (access.review asks it).

Managed clusters (issue 28): ``can_change(..., cluster="milan")`` asks about a namespace of that managed
cluster; without ``cluster`` the namespace is in the default cluster (what every caller addresses until
namespaces carry their cluster). Scopes can name clusters (``access.scopes``); a scope without a cluster
part covers the default cluster only. When matching needs the default cluster's name it is read once
per user object (the request, or a bulk run's user) and kept on it, never once per namespace.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from access import roles, scopes
from offloading.models import ManagedCluster

ACTIONS = ("offload", "edit", "unoffload", "reapply")


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.allowed


_DEFAULT_CLUSTER_ATTR = "_access_default_cluster"


def default_cluster_name() -> str:
    """The default managed cluster's name ("" when there is none: then only scopes without a cluster
    part, and those naming every cluster with ``*``, cover the default cluster's namespaces). One query."""
    return ManagedCluster.objects.filter(is_default=True).values_list("name", flat=True).first() or ""


def _default_cluster_for(user: Any) -> str:
    """default_cluster_name(), cached on the user object like its role and scopes (``forget`` drops it)."""
    cached = getattr(user, _DEFAULT_CLUSTER_ATTR, None)
    if cached is None:
        cached = default_cluster_name()
        setattr(user, _DEFAULT_CLUSTER_ATTR, cached)
    return cached


def forget(user: Any) -> None:
    """Drop what is cached on the user object: role, scopes and the default cluster's name."""
    roles.forget(user)
    if hasattr(user, _DEFAULT_CLUSTER_ATTR):
        delattr(user, _DEFAULT_CLUSTER_ATTR)


def can_change(
    user: Any,
    namespace_name: str,
    namespace_labels: Mapping[str, str] | None,
    action: str,
    *,
    cluster: str | None = None,
) -> Decision:
    """May ``user`` ``action`` the namespace ``namespace_name`` of managed cluster ``cluster`` (None: the
    default cluster)?"""
    if action not in ACTIONS:
        raise ValueError(f"unknown action {action!r} (expected one of {', '.join(ACTIONS)})")
    if user is None or not getattr(user, "is_authenticated", False):
        return Decision(False, "you are not logged in")
    role = roles.role_of(user)
    if role is None:
        return Decision(False, "your account has no role: ask an admin to grant you one")
    if role == roles.ADMIN:
        return Decision(True, "admins may change every namespace")
    if role == roles.VIEWER:
        return Decision(False, f"viewers may not {action} namespaces (your role: viewer)")
    user_scopes = roles.scopes_of(user)
    default = _default_cluster_for(user) if scopes.needs_default_cluster(user_scopes, cluster) else None
    if scopes.in_scope(user_scopes, namespace_name, namespace_labels, cluster, default_cluster=default):
        return Decision(True, f"in your scopes ({scopes.describe(user_scopes)})")
    return Decision(False, scopes.out_of_scope_reason(user_scopes, namespace_name, cluster, default_cluster=default))


def default_action(namespace: Any) -> str:
    """What changing ``namespace`` means when nothing says otherwise: edit its offloading if it is
    offloaded, else offload it."""
    return "edit" if getattr(namespace, "offloaded", False) else "offload"


def partition(
    user: Any,
    namespaces: Iterable[tuple[str, Mapping[str, str] | None]],
    action: str,
    *,
    cluster: str | None = None,
) -> tuple[list[str], list[tuple[str, str]]]:
    """For bulk: (namespaces the user may change, [(namespace, reason)] left out), in input order, all
    in managed cluster ``cluster`` (None: the default). The role, scopes and default cluster are read once."""
    allowed: list[str] = []
    left_out: list[tuple[str, str]] = []
    for name, labels in namespaces:
        decision = can_change(user, name, labels, action, cluster=cluster)
        if decision.allowed:
            allowed.append(name)
        else:
            left_out.append((name, decision.reason))
    return allowed, left_out
