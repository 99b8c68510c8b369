"""Single sign-on: mozilla-django-oidc's backend, keyed by the provider's issuer and the account's
``sub``, with the groups claim mapped to a role and to the Django groups that carry scopes.

Who is who: an SSO user is the dashboard user recorded for the ID token's (``iss``, ``sub``) in
``OidcIdentity``; the first sign-in creates both. Usernames and email addresses are never used to find
a user, so a provider account called ``admin`` (or claiming the local admin's address) gets a new user
of its own, never the local account. The new user's username comes from the claims
(``preferred_username``, else the email's local part, else ``sub``), with a suffix when any existing
user already has that name. SSO users have no usable password and are never staff or superusers; an
identity whose user has become one of those (or was given a password) is refused, both at sign-in and
for sessions already open.

Roles: OIDC_ROLE_GROUPS (``admin=dash-admins,operator=dash-operators,viewer=dash-viewers``) names the
claim groups that give each role (the highest wins). Every other claim group that names an existing
Django group makes the user a member, so that group's scopes apply. At every login the user's role and
those memberships are set from the claim: the identity provider is the source of truth for SSO users.
"""

from __future__ import annotations

import logging
import re
from collections.abc import Callable
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.contrib.auth.models import Group
from django.core.exceptions import SuspiciousOperation
from django.db import IntegrityError, transaction
from django.urls import reverse
from django.utils import timezone
from django.utils.functional import cached_property
from mozilla_django_oidc.auth import OIDCAuthenticationBackend
from mozilla_django_oidc.middleware import SessionRefresh

from access import roles
from access.models import OidcIdentity

LOGGER = logging.getLogger(__name__)

USERNAME_MAX = 150  # django.contrib.auth's User.username
_NOT_IN_USERNAME = re.compile(r"[^\w.@+-]")  # what UnicodeUsernameValidator refuses


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


def base_username(claims: dict[str, Any]) -> str:
    """The name the claims suggest: preferred_username, else the email's local part, else sub; only
    the characters Django allows in a username, short enough to take a suffix."""
    email = str(claims.get("email") or "")
    for candidate in (claims.get("preferred_username"), email.partition("@")[0], claims.get("sub")):
        name = _NOT_IN_USERNAME.sub("_", str(candidate or "").strip())[: USERNAME_MAX - 8]
        if name.strip("_"):
            return name
    return "sso-user"


def free_username(base: str, taken: Callable[[str], bool]) -> str:
    """``base`` if no user has it (in any letter case), else ``base-2``, ``base-3`` ..."""
    if not taken(base):
        return base
    number = 2
    while taken(f"{base}-{number}"):
        number += 1
    return f"{base}-{number}"


def is_sso_only(user: Any) -> bool:
    """A user SSO may sign in: no password, not staff, not superuser."""
    return not (user.is_staff or user.is_superuser or user.has_usable_password())


def expected_issuer(token_issuer: str) -> str:
    """The issuer identities are keyed by, after checking the ID token's ``iss`` (``token_issuer``).

    With OIDC_OP_ISSUER set, ``iss`` must equal it exactly (OpenID Connect Core 3.1.3.7). Unset, ``iss``
    must be an https (or http) URL on the same origin (scheme, host and port) as
    OIDC_OP_AUTHORIZATION_ENDPOINT, and identities are keyed by that ``iss``: the keys stay the same
    when OIDC_OP_ISSUER is set later to the provider's real issuer.
    """
    configured = settings.OIDC_OP_ISSUER
    if configured:
        if token_issuer != configured:
            raise SuspiciousOperation(f"ID token issuer {token_issuer!r} is not OIDC_OP_ISSUER {configured!r}")
        return configured
    if _origin(token_issuer) != _origin(settings.OIDC_OP_AUTHORIZATION_ENDPOINT) or not _origin(token_issuer):
        raise SuspiciousOperation(
            f"ID token issuer {token_issuer!r} is not on the authorization endpoint's origin (set OIDC_OP_ISSUER)"
        )
    return token_issuer


def _origin(url: str) -> str:
    parts = urlsplit(url)
    if parts.scheme not in ("https", "http") or not parts.hostname:
        return ""
    return f"{parts.scheme}://{parts.netloc.lower()}"


def check_audience(payload: dict[str, Any], client_id: str) -> None:
    """The ID token is for this client (mozilla-django-oidc does not check ``aud``)."""
    audience = payload.get("aud")
    audiences = [audience] if isinstance(audience, str) else list(audience or [])
    if client_id not in audiences:
        raise SuspiciousOperation("ID token audience does not include OIDC_RP_CLIENT_ID")
    if len(audiences) > 1 and payload.get("azp", client_id) != client_id:
        raise SuspiciousOperation("ID token azp is not OIDC_RP_CLIENT_ID")


class RoleMappingOIDCBackend(OIDCAuthenticationBackend):
    """Users keyed by (issuer, sub); role and scope groups from the groups claim (module docstring)."""

    def authenticate(self, request: Any, **kwargs: Any) -> Any:
        """Only for the callback: a password sign-in with ``?code=&state=`` in its URL is not SSO."""
        if request is None or request.path != reverse(settings.OIDC_AUTHENTICATION_CALLBACK_URL):
            return None
        return super().authenticate(request, **kwargs)

    def get_or_create_user(self, access_token: Any, id_token: Any, payload: dict[str, Any]) -> Any:
        # ``payload`` is the ID token's, its signature and nonce already verified by the library.
        issuer = expected_issuer(str(payload.get("iss") or ""))
        check_audience(payload, self.OIDC_RP_CLIENT_ID)
        subject = str(payload.get("sub") or "")
        if not subject:
            raise SuspiciousOperation("ID token without sub")
        claims = self.get_userinfo(access_token, id_token, payload)
        if str(claims.get("sub")) != subject:  # OpenID Connect Core 5.3.2
            raise SuspiciousOperation("userinfo sub differs from the ID token's")
        with transaction.atomic():
            identity = OidcIdentity.objects.select_related("user").filter(issuer=issuer, subject=subject).first()
            if identity is None:
                identity = self._create_identity(issuer, subject, claims)
            elif not is_sso_only(identity.user):
                raise SuspiciousOperation(
                    f"SSO refused for {identity.user.username!r}: a staff, superuser or password account"
                )
            user = identity.user
            if claims.get("email"):
                user.email = str(claims["email"])
                user.save(update_fields=["email"])
            apply_claims(user, claims)
            identity.last_login = timezone.now()
            identity.save(update_fields=["last_login"])
        return user

    def _create_identity(self, issuer: str, subject: str, claims: dict[str, Any]) -> OidcIdentity:
        base = base_username(claims)
        for _attempt in range(5):
            username = free_username(base, lambda name: self.UserModel.objects.filter(username__iexact=name).exists())
            try:
                with transaction.atomic():
                    # No password (an unusable one), not staff, not superuser.
                    user = self.UserModel.objects.create_user(username, email=str(claims.get("email") or ""))
                    return OidcIdentity.objects.create(issuer=issuer, subject=subject, user=user)
            except IntegrityError:
                # A concurrent sign-in took the name, or created this identity: look again.
                existing = OidcIdentity.objects.select_related("user").filter(issuer=issuer, subject=subject).first()
                if existing is not None:
                    return existing
        raise SuspiciousOperation(f"could not create a user for {subject!r} at {issuer!r}")

    def get_userinfo(self, access_token: Any, id_token: Any, payload: dict[str, Any]) -> dict[str, Any]:
        """The userinfo endpoint's claims, or the ID token's when OIDC_OP_USER_ENDPOINT is not set."""
        if not self.OIDC_OP_USER_ENDPOINT:
            return dict(payload)
        return dict(super().get_userinfo(access_token, id_token, payload))

    def verify_claims(self, claims: dict[str, Any]) -> bool:
        return bool(claims.get("sub"))  # no email needed: users are keyed by sub

    def filter_users_by_claims(self, claims: dict[str, Any]) -> Any:
        return self.UserModel.objects.none()  # never by name or email (get_or_create_user)

    def get_user(self, user_id: Any) -> Any:
        """The user of an SSO session, while it is still an SSO-only user with an identity."""
        user = self.UserModel.objects.filter(pk=user_id, oidc_identity__isnull=False, is_active=True).first()
        return user if user is not None and is_sso_only(user) else None


class OidcSessionRefresh(SessionRefresh):
    """mozilla-django-oidc's SessionRefresh for URLs in the ``access`` namespace.

    The library exempts its own views by their global names (``oidc_authentication_init`` ...), which do
    not exist here: every authenticated GET raised NoReverseMatch. Requests that cannot follow a
    redirect to the provider (htmx swaps, the API, probes) are not refreshed; the next page is.
    """

    NOT_REFRESHED = ("/api/", "/healthz", "/readyz", "/metrics")

    @cached_property
    def exempt_urls(self) -> set[str]:
        names = [url for url in self.OIDC_EXEMPT_URLS if isinstance(url, str)]
        names += ["access:oidc_authentication_init", "access:oidc_authentication_callback", "access:oidc_logout"]
        return {url if url.startswith("/") else reverse(url) for url in names}

    def is_refreshable_url(self, request: Any) -> bool:
        if request.headers.get("HX-Request") or request.path.startswith(self.NOT_REFRESHED):
            return False
        static_url = "/" + settings.STATIC_URL.lstrip("/")
        return not request.path.startswith(static_url) and bool(super().is_refreshable_url(request))
