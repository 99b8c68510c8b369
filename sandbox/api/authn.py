"""Who a request is: the bearer token's user (401 without a known one; the policy's `anonymous` user
without a token), then impersonation (`Impersonate-User`, `Impersonate-Group`) where the policy lets
that user impersonate."""

from __future__ import annotations

from sandbox import errors
from sandbox.api.context import Api
from sandbox.api.request import Exchange
from sandbox.rbac import Attributes, User


def authenticate(api: Api, exchange: Exchange) -> User:
    user = api.policy.authenticate(exchange.headers.get("Authorization"))
    if user is None:
        exchange.body()
        raise errors.unauthorized()
    return user


def impersonate(api: Api, exchange: Exchange, user: User) -> User:
    """The user the request acts as: `user` itself, or whom it impersonates (403 when not allowed)."""
    imp_user = exchange.headers.get("Impersonate-User")
    imp_groups = exchange.headers.get_all("Impersonate-Group") or []
    if not imp_user and not imp_groups:
        return user
    if not imp_user:
        raise errors.bad_request("requested [Impersonate-Group] without impersonating a user")
    checks = [("users", imp_user)] + [("groups", g) for g in imp_groups]
    for resource, name in checks:
        attrs = Attributes("impersonate", "", resource, "", "", name)
        if not api.policy.allowed(user, attrs):
            exchange.body()
            raise errors.forbidden(
                f'{resource} "{name}" is forbidden: User "{user.name}" cannot impersonate '
                f'resource "{resource}" in API group "" at the cluster scope'
            )
    groups = tuple(dict.fromkeys(tuple(imp_groups) + ("system:authenticated",)))
    return User(imp_user, groups)
