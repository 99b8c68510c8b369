"""DRF throttles: requests with a token, requests without credentials, and failed token attempts.

Each answers ``429`` with ``Retry-After`` (DRF's Throttled exception). Session users (the pages' own
htmx calls) are not throttled here; their logins are guarded by django-axes. Every throttle counts the
client address of access.clientip (``REMOTE_ADDR``, or the ``X-Forwarded-For`` entry the trusted
proxies wrote when ``TRUSTED_PROXIES`` > 0; an IPv6 client by its /64), never an address the client
wrote itself.

The failure brake (``TokenFailureThrottle``) must stop guessing without locking out the victim, and
must not tell a blocked guesser which guesses are right. An API token reads ``ldt_<prefix>_<secret>``
(access.tokens): the prefix names a token and is not secret, the secret is. So failures are counted
in buckets:

* a token whose prefix belongs to an existing token: per (address, prefix). Guessing the secret of
  that one token is blocked after the limit: every further attempt from that address with that
  prefix answers 429, right or wrong, so the blocked guesser learns nothing.
* everything else (an unknown prefix, a malformed token, a key of DRF's authtoken app, which has no
  public part): per address.

A portal's valid token keeps working from an address (a shared NAT, the Ingress) where someone else
sends bad tokens: their failures land in the address bucket or in other tokens' buckets, never in
the portal's, which only failures naming the portal's own prefix fill. The remaining case is an
attacker behind the same address who knows the portal's prefix and guesses its secret: that blocks
the portal's token from that address for the window, which is what the brake is for (a 256-bit
secret is not guessed anyway). A blocked attempt is answered without being counted, so a block ends
one window after the last counted failure.
"""

from __future__ import annotations

from typing import Any

from rest_framework.throttling import AnonRateThrottle, SimpleRateThrottle, UserRateThrottle

from access.clientip import client_network


class _ClientAddress:
    """DRF's ``get_ident`` reads ``X-Forwarded-For`` as the client wrote it: ours asks access.clientip."""

    def get_ident(self, request: Any) -> str:
        return client_network(request)


class TokenRateThrottle(_ClientAddress, UserRateThrottle):
    """Per user, for requests authenticated with a token (``request.auth`` set)."""

    scope = "token"

    def allow_request(self, request: Any, view: Any) -> bool:
        if request.auth is None:
            return True
        return super().allow_request(request, view)


class AnonymousThrottle(_ClientAddress, AnonRateThrottle):
    """Per client address, for requests without usable credentials: none, or a scheme other than
    ours (checked by the authenticator, since DRF would answer 401 before its throttles run)."""

    scope = "anon"

    def allow_request(self, request: Any, view: Any) -> bool:
        # The authenticator calls this without a view.
        return super().allow_request(request, view)

    def get_cache_key(self, request: Any, view: Any) -> str:
        # No request.user here: this runs inside authentication, which request.user would re-enter.
        return self.cache_format % {"scope": self.scope, "ident": self.get_ident(request)}


class TokenFailureThrottle(_ClientAddress, SimpleRateThrottle):
    """Failed token attempts, per (address, prefix of an existing token) or per address (see the
    module's docstring). ``blocked`` looks without counting; ``record`` counts one failure."""

    scope = "token_failures"
    num_requests: int
    duration: int

    def __init__(self, prefix: str = "") -> None:
        super().__init__()
        # The prefix of an existing token, or "" for the address's own bucket.
        self.prefix = prefix

    def get_cache_key(self, request: Any, view: Any) -> str:
        ident = self.get_ident(request)
        if self.prefix:
            ident = f"{ident}_{self.prefix}"
        return self.cache_format % {"scope": self.scope, "ident": ident}

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
