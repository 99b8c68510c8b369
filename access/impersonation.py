"""The Kubernetes identity a push is made as: the user who asked, through impersonation.

``Impersonate-User`` is KUBE_IMPERSONATE_USER_PREFIX + username and ``Impersonate-Group`` the group
KUBE_IMPERSONATE_GROUPS maps the user's role to. With KUBE_IMPERSONATE=false, ``identity_for`` answers
None and the dashboard acts as its own identity.

Per managed cluster (issue 28): a cluster other than the default may turn impersonation on or off and map
the roles to groups of its own (``ManagedCluster.impersonation`` and ``impersonation_groups``; empty, as
they start, inherits the settings above), since two clusters run by different teams rarely share their
RBAC's group names, or both want the person. The default cluster follows the settings: they are its
own, so a single-cluster install reads nothing more than before.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model

from access import roles
from offloading.models import ManagedCluster
from offloading.models.managed import Impersonation


@dataclass(frozen=True)
class Identity:
    user: str
    groups: tuple[str, ...] = ()

    def headers(self) -> dict[str, str]:
        """The HTTP headers that make the API server act as this identity (one group at most: the
        client sends each header name once)."""
        result = {"Impersonate-User": self.user}
        if self.groups:
            result["Impersonate-Group"] = self.groups[0]
        return result


def _own(cluster: ManagedCluster | None) -> ManagedCluster | None:
    """``cluster`` when its own settings apply (another cluster than the default), else None."""
    return None if cluster is None or cluster.is_default else cluster


def enabled(cluster: ManagedCluster | None = None) -> bool:
    """Whether pushes to ``cluster`` (None: the default cluster) impersonate the user who asked."""
    own = _own(cluster)
    if own is not None and own.impersonation:
        return own.impersonation == Impersonation.ON
    return bool(settings.KUBE_IMPERSONATE)


def role_map(cluster: ManagedCluster | None = None) -> str:
    """The role-to-group map in force on ``cluster`` ("" for KUBE_IMPERSONATE_GROUPS)."""
    own = _own(cluster)
    return own.impersonation_groups if own is not None else ""


def identity_for(username: str | None, cluster: ManagedCluster | None = None) -> Identity | None:
    """The identity to push to ``cluster`` (None: the default cluster) as for ``username`` (the actor
    recorded on a change), or None when impersonation is off there. An unknown or role-less user gets no
    group, so the cluster grants it only what it grants that user name alone (normally nothing)."""
    if not enabled(cluster):
        return None
    if not username:
        raise ValueError("impersonation needs the user who asked; the change has no actor")
    user = get_user_model().objects.filter(username=username).first()
    groups = roles.kubernetes_groups(roles.role_of(user), role_map(cluster)) if user is not None else ()
    return Identity(f"{settings.KUBE_IMPERSONATE_USER_PREFIX}{username}", groups)


def identity_per_cluster(username: str) -> Callable[[ManagedCluster | None], Identity | None]:
    """:func:`identity_for` ``username`` as a function of the cluster, the user and role read once (the
    reads of a namespace's twins on several managed providers, each as that provider sees the user)."""
    found: list[str | None] = []

    def on(cluster: ManagedCluster | None) -> Identity | None:
        if not enabled(cluster):
            return None
        if not found:
            user = get_user_model().objects.filter(username=username).first()
            found.append(roles.role_of(user) if user is not None else None)
        groups = roles.kubernetes_groups(found[0], role_map(cluster))
        return Identity(f"{settings.KUBE_IMPERSONATE_USER_PREFIX}{username}", groups)

    return on
