"""API authentication: ``Authorization: Bearer <token>`` with the tokens of access.models.ApiToken.

``Token <key>`` is accepted too: an ApiToken, or a key of DRF's authtoken app for the clients that
already use one. Missing or bad credentials answer ``401`` with ``WWW-Authenticate: Bearer
realm="liqo-dash"`` (this class is the first authenticator, so DRF takes the header from it).
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from django.utils import timezone
from rest_framework import exceptions
from rest_framework.authentication import BaseAuthentication, TokenAuthentication, get_authorization_header

from access import tokens
from access.models import ApiToken
from access.throttles import AnonymousThrottle, TokenFailureThrottle

REALM = "liqo-dash"
LAST_USED_EVERY = timedelta(minutes=1)


class ApiTokenAuthentication(BaseAuthentication):
    keywords = ("bearer", "token")

    def authenticate(self, request: Any) -> tuple[Any, Any] | None:
        header = get_authorization_header(request).split()
        if not header:
            self._throttle_anonymous(request)
            return None
        keyword = header[0].decode("latin-1").lower()
        if keyword not in self.keywords:
            return None  # another scheme (e.g. Basic): not ours
        if len(header) != 2:
            raise exceptions.AuthenticationFailed("invalid Authorization header: expected '<scheme> <token>'")
        try:
            text = header[1].decode("ascii")
        except UnicodeDecodeError:
            raise exceptions.AuthenticationFailed("invalid token") from None
        failures = TokenFailureThrottle()
        if failures.blocked(request):
            raise exceptions.Throttled(failures.wait(), "too many failed token attempts")
        try:
            if keyword == "token" and tokens.split(text) is None:
                return TokenAuthentication().authenticate_credentials(text)
            return self._api_token(text)
        except exceptions.AuthenticationFailed:
            failures.record(request)
            raise

    def authenticate_header(self, request: Any) -> str:
        return f'Bearer realm="{REALM}"'

    @staticmethod
    def _api_token(text: str) -> tuple[Any, ApiToken]:
        parts = tokens.split(text)
        row = ApiToken.objects.select_related("user").filter(prefix=parts[0]).first() if parts else None
        if row is None or not row.matches(text):
            raise exceptions.AuthenticationFailed("invalid token")
        if row.revoked is not None:
            raise exceptions.AuthenticationFailed("token revoked")
        now = timezone.now()
        if row.expires is not None and row.expires <= now:
            raise exceptions.AuthenticationFailed("token expired")
        if not row.user.is_active:
            raise exceptions.AuthenticationFailed("user inactive or deleted")
        if row.last_used is None or now - row.last_used >= LAST_USED_EVERY:
            ApiToken.objects.filter(pk=row.pk).update(last_used=now)
            row.last_used = now
        return row.user, row

    @staticmethod
    def _throttle_anonymous(request: Any) -> None:
        django_user = getattr(request._request, "user", None)
        if django_user is not None and django_user.is_authenticated:
            return  # a session: SessionAuthentication takes it from here
        throttle = AnonymousThrottle()
        if not throttle.allow_request(request, None):
            raise exceptions.Throttled(throttle.wait())
