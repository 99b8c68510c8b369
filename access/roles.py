"""Roles (Django groups created by a migration), their Kubernetes groups, and a user's role and scopes.

``viewer`` reads everything; ``operator`` also offloads, edits, unoffloads, runs bulk changes and
re-applies, on the namespaces in its scopes; ``admin`` does everything, everywhere, and manages users,
tokens and the audit export. Superusers are admins. A user in several role groups has the highest.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db.models import Q

from access import scopes as scope_rules
from access.conf import ROLE_NAMES

# The maps of roles to groups (KUBE_IMPERSONATE_GROUPS, OIDC_ROLE_GROUPS, a managed cluster's): the rule is
# access.conf's, a leaf, so that the settings check LIQO_DASH_CLUSTER_ACCESS with it at start.
from access.conf import RoleConfigError as RoleConfigError
from access.conf import parse_role_map as parse_role_map
from access.models import Scope

VIEWER, OPERATOR, ADMIN = ROLE_NAMES
ROLES = ROLE_NAMES  # lowest to highest

_CACHE_ATTR = "_access_role_cache"


def kubernetes_groups(role: str | None, role_map: str = "") -> tuple[str, ...]:
    """The Kubernetes groups impersonated for a role (empty for no role or an unmapped one), by
    ``role_map`` (a managed cluster's own, ``ROLE=GROUP,...``) or, when it is empty, by
    KUBE_IMPERSONATE_GROUPS."""
    if role is None:
        return ()
    group = parse_role_map(role_map or settings.KUBE_IMPERSONATE_GROUPS).get(role)
    return (group,) if group else ()


def rank(role: str | None) -> int:
    """0 for no role, then 1, 2, 3 from viewer to admin."""
    return ROLES.index(role) + 1 if role in ROLES else 0


def role_of(user: Any) -> str | None:
    """The user's role, or None (anonymous, inactive or in no role group). Cached on the user object
    for the request; ``forget(user)`` after changing groups."""
    if user is None or not getattr(user, "is_authenticated", False) or not user.is_active:
        return None
    cached = getattr(user, _CACHE_ATTR, None)
    if cached is not None:
        return cached[0]
    if user.is_superuser:
        role: str | None = ADMIN
    else:
        names = set(user.groups.filter(name__in=ROLES).values_list("name", flat=True))
        role = max(names, key=rank) if names else None
    setattr(user, _CACHE_ATTR, (role, None))
    return role


def scopes_of(user: Any) -> list[scope_rules.Scope]:
    """The user's operator scopes: their own plus those of every group they are in."""
    if user is None or not getattr(user, "is_authenticated", False):
        return []
    role = role_of(user)  # fills the cache
    cached = getattr(user, _CACHE_ATTR, (role, None))
    if cached[1] is not None:
        return list(cached[1])
    rows = Scope.objects.filter(Q(user=user) | Q(group__in=user.groups.all())).values_list("kind", "value")
    found = sorted({scope_rules.Scope(kind, value) for kind, value in rows}, key=lambda s: (s.kind, s.value))
    setattr(user, _CACHE_ATTR, (role, tuple(found)))
    return found


def forget(user: Any) -> None:
    if hasattr(user, _CACHE_ATTR):
        delattr(user, _CACHE_ATTR)


def has_role(user: Any, minimum: str) -> bool:
    return rank(role_of(user)) >= rank(minimum)


def summary(user: Any) -> str:
    """What the user may do, in one sentence (the grant command prints it; the user menu shows it)."""
    role = role_of(user)
    if role is None:
        return "no role: may not use the dashboard or the API"
    if role == VIEWER:
        return "viewer: may read everything, may change nothing"
    if role == ADMIN:
        return "admin: may read and change every namespace, and manage users, tokens and the audit export"
    return (
        "operator: may read everything; may offload, edit, unoffload, bulk-change and re-apply the "
        f"namespaces in scope (scopes: {scope_rules.describe(scopes_of(user))})"
    )
