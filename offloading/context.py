"""Who is acting, from where, under which request id: set per request by the middleware and per task
by the tasks, read by the services when they write audit events."""

from __future__ import annotations

import contextvars
import random
import re
from dataclasses import dataclass
from typing import Any

from offloading.choices import Source


@dataclass(frozen=True)
class Actor:
    user_id: int | None
    user_name: str
    source: str
    request_id: str


_current: contextvars.ContextVar[Any] = contextvars.ContextVar("liqo_dash_request", default=None)
_REQUEST_ID = re.compile(r"[A-Za-z0-9._-]{1,64}")


def new_request_id(candidate: str | None = None) -> str:
    """Keep a caller's X-Request-ID when it matches ``[A-Za-z0-9._-]{1,64}``, else make one."""
    if candidate and _REQUEST_ID.fullmatch(candidate):
        return candidate
    # 128 random bits as uuid4().hex gives, without a system call for each: an id to follow a request
    # through the logs, not a secret (every live poll gets one). The module's generator is seeded again
    # in each forked process (gunicorn's workers), so two workers never draw the same ids.
    return f"{random.getrandbits(128):032x}"


def set_request(request: Any) -> contextvars.Token:
    return _current.set(request)


def reset_request(token: contextvars.Token) -> None:
    _current.reset(token)


def current_actor(source: str | None = None) -> Actor:
    """The actor of the current request. The user is read lazily because DRF authenticates after
    the middleware ran."""
    request = _current.get()
    if request is None:
        return Actor(None, "system", source or Source.TASK, new_request_id())
    user = getattr(request, "user", None)
    if source is None:
        source = Source.API if request.path.startswith("/api/") else Source.WEB
    authenticated = user is not None and user.is_authenticated
    return Actor(
        user.pk if user is not None and authenticated else None,
        user.get_username() if user is not None and authenticated else "anonymous",
        source,
        getattr(request, "request_id", "") or new_request_id(),
    )
