"""DRF throttles: requests with a token, requests without credentials, and failed token attempts.

Each answers ``429`` with ``Retry-After`` (DRF's Throttled exception). Session users (the pages' own
htmx calls) are not throttled here; their logins are guarded by django-axes.
"""

from __future__ import annotations

from typing import Any

from rest_framework.throttling import AnonRateThrottle, SimpleRateThrottle, UserRateThrottle


class TokenRateThrottle(UserRateThrottle):
    """Per user, for requests authenticated with a token (``request.auth`` set)."""

    scope = "token"

    def allow_request(self, request: Any, view: Any) -> bool:
        if request.auth is None:
            return True
        return super().allow_request(request, view)


class AnonymousThrottle(AnonRateThrottle):
    """Per client address, for requests without any credentials (checked by the authenticator, since
    DRF would answer 401 before its throttles run)."""

    scope = "anon"

    def allow_request(self, request: Any, view: Any) -> bool:
        return super().allow_request(request, view)

    def get_cache_key(self, request: Any, view: Any) -> str:
        # No request.user here: this runs inside authentication, which request.user would re-enter.
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class TokenFailureThrottle(SimpleRateThrottle):
    """Per client address: failed token attempts. ``blocked`` looks without counting; ``record``
    counts one failure."""

    scope = "token_failures"
    num_requests: int
    duration: int

    def get_cache_key(self, request: Any, view: Any) -> str:
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}

    def _load(self, request: Any) -> None:
        self.key = self.get_cache_key(request, None)
        self.history = self.cache.get(self.key, [])
        self.now = self.timer()
        while self.history and self.history[-1] <= self.now - self.duration:
            self.history.pop()

    def blocked(self, request: Any) -> bool:
        self._load(request)
        return len(self.history) >= self.num_requests

    def record(self, request: Any) -> None:
        self._load(request)
        self.throttle_success()
