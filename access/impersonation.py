"""The Kubernetes identity a push is made as: the user who asked, through impersonation.

``Impersonate-User`` is KUBE_IMPERSONATE_USER_PREFIX + username and ``Impersonate-Group`` the group
KUBE_IMPERSONATE_GROUPS maps the user's role to. With KUBE_IMPERSONATE=false, ``identity_for`` answers
None and the dashboard acts as its own identity.
"""

from __future__ import annotations

from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model

from access import roles


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


def enabled() -> bool:
    return bool(settings.KUBE_IMPERSONATE)


def identity_for(username: str | None) -> Identity | None:
    """The identity to push as for ``username`` (the actor recorded on a change), or None when
    impersonation is off. An unknown or role-less user gets no group, so the cluster grants it only
    what it grants that user name alone (normally nothing)."""
    if not enabled():
        return None
    if not username:
        raise ValueError("impersonation needs the user who asked; the change has no actor")
    user = get_user_model().objects.filter(username=username).first()
    groups = roles.kubernetes_groups(roles.role_of(user)) if user is not None else ()
    return Identity(f"{settings.KUBE_IMPERSONATE_USER_PREFIX}{username}", groups)
