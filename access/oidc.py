"""Single sign-on: mozilla-django-oidc's backend, with the groups claim mapped to a role and to the
Django groups that carry scopes.

OIDC_ROLE_GROUPS (``admin=dash-admins,operator=dash-operators,viewer=dash-viewers``) names the claim
groups that give each role (the highest wins). Every other claim group that names an existing Django
group makes the user a member, so that group's scopes apply. At every login the user's role and those
memberships are set from the claim: the identity provider is the source of truth for SSO users.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.contrib.auth.models import Group
from mozilla_django_oidc.auth import OIDCAuthenticationBackend

from access import roles


def claim_groups(claims: dict[str, Any]) -> list[str]:
    value = claims.get(settings.OIDC_GROUPS_CLAIM) or []
    if isinstance(value, str):
        value = [value]
    return [str(item) for item in value]


def role_from_claims(claims: dict[str, Any]) -> str | None:
    mapping = roles.parse_role_map(settings.OIDC_ROLE_GROUPS, "OIDC_ROLE_GROUPS")
    present = set(claim_groups(claims))
    granted = [role for role, group in mapping.items() if group in present]
    return max(granted, key=roles.rank) if granted else None


def apply_claims(user: Any, claims: dict[str, Any]) -> None:
    """Set the user's role group and scope-carrying group memberships from the claims."""
    role = role_from_claims(claims)
    wanted = set(Group.objects.filter(name__in=[g for g in claim_groups(claims) if g not in roles.ROLES]))
    if role is not None:
        wanted.add(Group.objects.get_or_create(name=role)[0])
    user.groups.set(wanted)
    roles.forget(user)


class RoleMappingOIDCBackend(OIDCAuthenticationBackend):
    def get_username(self, claims: dict[str, Any]) -> str:
        return str(claims.get("preferred_username") or claims.get("email") or claims["sub"])

    def filter_users_by_claims(self, claims: dict[str, Any]) -> Any:
        return self.UserModel.objects.filter(username=self.get_username(claims))

    def create_user(self, claims: dict[str, Any]) -> Any:
        user = self.UserModel.objects.create_user(self.get_username(claims), email=claims.get("email") or "")
        apply_claims(user, claims)
        return user

    def update_user(self, user: Any, claims: dict[str, Any]) -> Any:
        apply_claims(user, claims)
        return user
