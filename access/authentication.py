"""API authentication: ``Authorization: Bearer <token>`` with the tokens of access.models.ApiToken.

``Token <key>`` is accepted too: an ApiToken, or a key of DRF's authtoken app for the clients that
already use one. Missing or bad credentials answer ``401`` with ``WWW-Authenticate: Bearer
realm="liqo-dash"`` (this class is the first authenticator, so DRF takes the header from it); so
does any other scheme (Basic, Digest, ...), counted by the anonymous throttle like no credentials.
Failed attempts are braked by access.throttles.TokenFailureThrottle, whose module says how a valid
token keeps working from an address where someone else guesses.
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
UNSUPPORTED_SCHEME = "unsupported authorization scheme: send 'Authorization: Bearer <token>'"


class ApiTokenAuthentication(BaseAuthentication):
    keywords = ("bearer", "token")

    def authenticate(self, request: Any) -> tuple[Any, Any] | None:
        header = get_authorization_header(request).split()
        if not header:
            self._throttle_anonymous(request)
            return None
        keyword = header[0].decode("latin-1").lower()
        if keyword not in self.keywords:
            # Another scheme (Basic, Digest, garbage): no credentials of ours, so counted as anonymous,
            # and refused clearly rather than left to look like a request without any header.
            if self._session_user(request):
                return None  # e.g. a Basic header a proxy in front adds: the session decides
            self._throttle_anonymous(request)
            raise exceptions.AuthenticationFailed(UNSUPPORTED_SCHEME)
        text: str | None = None
        problem = "invalid Authorization header: expected '<scheme> <token>'"
        if len(header) == 2:
            try:
                text, problem = header[1].decode("ascii"), ""
            except UnicodeDecodeError:
                problem = "invalid token"
        parts = tokens.split(text) if text is not None else None
        # The row, if the prefix names an existing token: its failures have their own bucket.
        row = ApiToken.objects.select_related("user").filter(prefix=parts[0]).first() if parts else None
        failures = TokenFailureThrottle(row.prefix if row is not None else "")
        if failures.blocked(request):
            raise exceptions.Throttled(failures.wait(), "too many failed token attempts")
        try:
            if text is None:
                raise exceptions.AuthenticationFailed(problem)
            if keyword == "token" and parts is None:
                return TokenAuthentication().authenticate_credentials(text)
            return self._api_token(row, text)
        except exceptions.AuthenticationFailed:
            failures.record(request)
            raise

    def authenticate_header(self, request: Any) -> str:
        return f'Bearer realm="{REALM}"'

    @staticmethod
    def _api_token(row: ApiToken | None, text: str) -> tuple[Any, ApiToken]:
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
    def _session_user(request: Any) -> bool:
        django_user = getattr(request._request, "user", None)
        return django_user is not None and bool(django_user.is_authenticated)

    @classmethod
    def _throttle_anonymous(cls, request: Any) -> None:
        if cls._session_user(request):
            return  # a session: SessionAuthentication takes it from here
        throttle = AnonymousThrottle()
        if not throttle.allow_request(request, None):
            raise exceptions.Throttled(throttle.wait())
