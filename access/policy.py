"""Who may change which namespace: the question the change-request contract asks before queuing.

``can_change(user, namespace, labels, action)`` answers with a Decision carrying the reason shown on
the form or in the API's 403. The cluster still has the last word (access.review asks it).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

from access import roles, scopes

ACTIONS = ("offload", "edit", "unoffload", "reapply")


@dataclass(frozen=True)
class Decision:
    allowed: bool
    reason: str = ""

    def __bool__(self) -> bool:
        return self.allowed


def can_change(user: Any, namespace_name: str, namespace_labels: Mapping[str, str] | None, action: str) -> Decision:
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
    if scopes.in_scope(user_scopes, namespace_name, namespace_labels):
        return Decision(True, f"in your scopes ({scopes.describe(user_scopes)})")
    return Decision(False, scopes.out_of_scope_reason(user_scopes, namespace_name))


def default_action(namespace: Any) -> str:
    """What changing ``namespace`` means when nothing says otherwise: edit its offloading if it is
    offloaded, else offload it."""
    return "edit" if getattr(namespace, "offloaded", False) else "offload"


def partition(
    user: Any, namespaces: Iterable[tuple[str, Mapping[str, str] | None]], action: str
) -> tuple[list[str], list[tuple[str, str]]]:
    """For bulk: (namespaces the user may change, [(namespace, reason)] left out), in input order.
    The role and scopes are read once."""
    allowed: list[str] = []
    left_out: list[tuple[str, str]] = []
    for name, labels in namespaces:
        decision = can_change(user, name, labels, action)
        if decision.allowed:
            allowed.append(name)
        else:
            left_out.append((name, decision.reason))
    return allowed, left_out
