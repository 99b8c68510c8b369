"""Request id and request context for the audit trail; the request-body limit; live polls answered
before the session and page middleware."""

from __future__ import annotations

import datetime
import functools
import json
import logging
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.contrib.auth.models import Group
from django.contrib.sessions.backends.db import SessionStore
from django.contrib.sessions.models import Session
from django.core.exceptions import ValidationError
from django.core.signals import setting_changed
from django.db import connection
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.urls import Resolver404, ResolverMatch, get_resolver
from django.utils import timezone
from django.utils.crypto import constant_time_compare
from django.utils.dateparse import parse_datetime

from access import roles
from access.models import Scope
from liqo_dash.statusbody import status_data
from offloading import context
from offloading.models import livetriggers
from offloading.views import freshness, live, liveaside, livetags
from offloading.views.livememory import ViewerMemory

log = logging.getLogger(__name__)


def _body_refusal(request: HttpRequest) -> HttpResponse | None:
    """A 413 for a declared body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (400 for a malformed length),
    as a ``Status`` on the API, before anything reads the body."""
    declared = request.META.get("CONTENT_LENGTH") or "0"
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if not declared.isascii() or not declared.isdigit():
        code, message = 400, "Content-Length must be a number of bytes"
    elif int(declared) > limit:
        code, message = 413, f"the request body is over {limit} bytes"
    else:
        return None
    if not request.path.startswith("/api/"):
        return HttpResponse(message, status=code, content_type="text/plain; charset=utf-8")
    return _status_response(code, message)


def _status_response(code: int, message: str) -> HttpResponse:
    return HttpResponse(json.dumps(status_data(code, message)), status=code, content_type="application/json")


def _api_error(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """Django's own error pages (an URL no route matches, say) as a ``Status`` on the API."""
    if (
        request.path.startswith("/api/v1/")
        and 400 <= response.status_code < 500
        and not response.get("Content-Type", "").startswith("application/json")
    ):
        return _status_response(response.status_code, f"{request.method} {request.path}: {response.reason_phrase}")
    return response


class RequestContextMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.request_id = context.new_request_id(request.headers.get("X-Request-ID"))  # type: ignore[attr-defined]
        token = context.set_request(request)
        try:
            response = _body_refusal(request) or _api_error(request, self.get_response(request))
        finally:
            context.reset_request(token)
        response["X-Request-ID"] = request.request_id  # type: ignore[attr-defined]
        return response


# --------------------------------------------------------------------------------------------------
# Live polls answered early. An open page polls every 2-5 s, and most polls get a 304 (or, while a bulk
# applies, another viewer's render): the answer needs only who asks and the region's counters. Through
# the whole chain it cost the session, the user and the role's groups as three querysets (each costing
# several times its indexed read), the counters, and every middleware. This one comes before the
# session middleware: it reads the session row, the user and their role groups with plain indexed
# reads, checks them as django.contrib.auth and access.roles do, and asks offloading.views.live.early
# for a 304 or a reusable shared render. Anything it does not recognise exactly (no or an expired
# session, another session engine or authentication backend, a session hash that does not match,
# an inactive or role-less user, an operator's scopes when needed, a poll the page must render) goes
# through the whole chain as before, which then decides as it always did.

_SESSION_ENGINE = "django.contrib.sessions.backends.db"
_MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"


@dataclass(frozen=True)
class _Viewer:
    pk: Any
    role: str

    @property
    def who(self) -> str:  # as offloading.views.livetags.who_of
        return f"{self.pk}:{self.role}"


@functools.lru_cache(maxsize=1024)
def _resolve(path: str, urlconf: str) -> ResolverMatch:
    """What ``resolve`` finds for a polled path (each page polls the same few): a match is the same
    object every time, the views never change it. Emptied when a setting changes (a test's override)."""
    return get_resolver(urlconf).resolve(path)


@receiver(setting_changed)
def _forget_resolved(**kwargs: Any) -> None:
    _resolve.cache_clear()


@functools.cache
def _tables() -> dict[str, str]:
    """The quoted table and column names the early reads use."""
    quote = connection.ops.quote_name
    user_model: Any = get_user_model()
    through: Any = user_model.groups.through

    def column(model: Any, name: str) -> str:
        return quote(str(model._meta.get_field(name).column))

    return {
        "session": quote(Session._meta.db_table),
        "user": quote(user_model._meta.db_table),
        "user_pk": quote(str(user_model._meta.pk.column)),
        "group": quote(Group._meta.db_table),
        "member": quote(through._meta.db_table),
        "member_user": column(through, "user"),
        "member_group": column(through, "group"),
        "scope": quote(Scope._meta.db_table),
    }


def _one(sql: str, params: list[Any]) -> list[tuple[Any, ...]]:
    with connection.cursor() as cursor:
        cursor.execute(sql, params)
        return list(cursor.fetchall())


# Who sent each session's last polls, per web process (offloading/views/livememory.py): a poll then
# costs one read, its region's counters and the identity counters together.
viewers = ViewerMemory(max_entries=10_000)


def _viewer(request: HttpRequest, marks: tuple[int, ...]) -> tuple[_Viewer, str] | None:
    """Who sends this poll, as AuthenticationMiddleware and access.roles.role_of would find them, and
    the shared key's access (as offloading.views.livetags.access_key); None: not recognised here, the whole
    chain decides. ``marks``: the identity counters (live.IDENTITY), read before anything else here."""
    key = request.COOKIES.get(settings.SESSION_COOKIE_NAME)
    if not key or settings.SESSION_ENGINE != _SESSION_ENGINE:
        return None
    user_model: Any = get_user_model()
    if user_model.get_session_auth_hash is not AbstractBaseUser.get_session_auth_hash:
        return None  # a user model with its own session hash: only the chain knows how to check it
    now = timezone.now()
    remembered: Any = viewers.get(key, marks, now.timestamp()) if _may_remember(marks) else None
    if remembered is not None:
        return cast("tuple[_Viewer, str]", remembered)
    names = _tables()
    rows = _one(
        f"SELECT session_data, expire_date FROM {names['session']} WHERE session_key = %s AND expire_date > %s",
        [key, connection.ops.adapt_datetimefield_value(now)],
    )
    if not rows:
        return None
    viewer = _checked(rows[0][0])
    if viewer is None:
        return None
    found = (viewer, _access(viewer))
    expires = _expiry(rows[0][1])
    if expires is not None:
        viewers.keep(key, marks, expires, found)
    return found


_highest: list[tuple[int, ...]] = [()]  # the highest identity counters this process has read


def _may_remember(marks: tuple[int, ...]) -> bool:
    """Whether a remembered viewer may answer: only while the triggers that move the identity counters
    exist (a database migrated by an older version, or not migrated since, has none: then every poll
    reads its rows), and only while the counters never went back (a database restored from a backup, a
    failover that lost commits, a flush): an entry kept under a value the counters reach again would
    match. Going back forgets every entry."""
    if not _identity_triggers():
        return False
    previous = _highest[0]
    if len(previous) == len(marks) and any(now < before for now, before in zip(marks, previous, strict=True)):
        viewers.forget()  # (two polls' reads out of order only cost their viewers a read again)
        _highest[0] = marks
    else:
        _highest[0] = tuple(max(pair) for pair in zip(marks, previous, strict=True)) if previous else marks
    return True


@functools.cache
def _identity_triggers() -> bool:
    """Whether every trigger that bumps the identity counters is installed (read once per process)."""
    expected = {
        livetriggers.trigger_name(table, event)
        for table in livetriggers.IDENTITY_TABLES
        for event in livetriggers.EVENTS
    }
    with connection.cursor() as cursor:
        if connection.vendor == "sqlite":
            cursor.execute("SELECT name FROM sqlite_master WHERE type = 'trigger'")
        elif connection.vendor == "postgresql":
            cursor.execute("SELECT tgname FROM pg_trigger WHERE NOT tgisinternal")
        else:
            return False
        found = {str(row[0]) for row in cursor.fetchall()}
    if not expected <= found:
        log.warning("live polls: the identity triggers are missing (run manage.py migrate); viewers are not remembered")
        return False
    return True


def _expiry(value: Any) -> float | None:
    """The session row's expiry, in seconds since the epoch (None: not understood, nothing kept)."""
    if isinstance(value, str):
        value = parse_datetime(value)
    if not isinstance(value, datetime.datetime):
        return None
    if timezone.is_naive(value):
        value = timezone.make_aware(value, datetime.UTC)
    return value.timestamp()


def _checked(session_data: str) -> _Viewer | None:
    """The session's user and role, checked as django.contrib.auth and access.roles check them."""
    names = _tables()
    session = SessionStore().decode(session_data)
    backend, session_hash = session.get(BACKEND_SESSION_KEY), session.get(HASH_SESSION_KEY)
    if backend != _MODEL_BACKEND or backend not in settings.AUTHENTICATION_BACKENDS or not session_hash:
        return None
    user_model: Any = get_user_model()
    try:
        pk = user_model._meta.pk.to_python(session.get(SESSION_KEY))
    except ValidationError:
        return None
    # The user and their groups in one read: one row per group (one row with no group name if none).
    found = _one(
        f"SELECT u.password, u.is_active, u.is_superuser, g.name FROM {names['user']} u "
        f"LEFT JOIN {names['member']} m ON m.{names['member_user']} = u.{names['user_pk']} "
        f"LEFT JOIN {names['group']} g ON g.id = m.{names['member_group']} WHERE u.{names['user_pk']} = %s",
        [pk],
    )
    if not found or not found[0][1]:
        return None  # gone or inactive: ModelBackend finds no user
    password, _active, superuser, _group = found[0]
    # The hash of the password the session was opened with (a changed password logs the session out).
    if not constant_time_compare(session_hash, user_model(pk=pk, password=password).get_session_auth_hash()):
        return None  # a stale or a fallback key's hash: the chain flushes or cycles the session
    if superuser:
        return _Viewer(pk, roles.ADMIN)
    held = {row[3] for row in found if row[3] in roles.ROLES}
    return _Viewer(pk, max(held, key=roles.rank)) if held else None


def _access(viewer: _Viewer) -> str:
    """The shared key's access, as offloading.views.livetags.access_key: the role, and an operator's scopes
    (their own and their groups')."""
    if viewer.role != roles.OPERATOR:
        return viewer.role
    names = _tables()
    rows = _one(
        f"SELECT kind, value FROM {names['scope']} WHERE user_id = %s OR group_id IN "
        f"(SELECT {names['member_group']} FROM {names['member']} WHERE {names['member_user']} = %s)",
        [viewer.pk, viewer.pk],
    )
    return livetags.access_of(viewer.role, [(str(kind), str(value)) for kind, value in rows])


class LivePollMiddleware:
    """A live poll's 304 or shared render before the session and page middleware (above)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        poll = request.headers.get("X-Live-Poll") == "1" and liveaside.ASIDE not in request.META  # aside: render it
        answer = self._early(request) if poll else None
        return answer if answer is not None else self.get_response(request)

    @staticmethod
    def _early(request: HttpRequest) -> HttpResponse | None:
        # OIDC sessions are refreshed on pages that can follow a redirect: htmx polls never are.
        if request.method != "GET" or (settings.OIDC_ENABLED and request.headers.get("HX-Request") != "true"):
            return None
        try:
            match = _resolve(request.path_info, settings.ROOT_URLCONF)
        except Resolver404:
            return None
        badge = getattr(match.func, "live_badge", False)
        if not (badge or getattr(match.func, "live_page", False)) or not match.url_name:
            return None
        # One read: the region's counters (none for the badge) in the cluster of the path (under /m/<name>/,
        # that cluster's primary key with them) and those under which a viewer is remembered.
        read_ms = live.now_ms()
        read = live.early_counters(None if badge else match.url_name, match.kwargs.get("cluster"), live.IDENTITY)
        if read is None:
            return None  # no managed cluster of that name: the view answers its 404
        counters, managed = read
        found = _viewer(request, tuple(counters[kind] for kind in live.IDENTITY))
        if found is None:
            return None
        viewer, access = found
        if badge:
            answer: HttpResponse | None = freshness.badge(request, viewer.who, managed)
        else:
            answer = live.early(request, match.url_name, viewer.who, lambda: access, (counters, read_ms), managed)
        if answer is not None:
            request.resolver_match = match  # the request metrics count it by its view
            # What the chain behind would have added: the request id, Vary: Cookie (the session
            # middleware), X-Frame-Options (the clickjacking middleware); and no cache keeps it.
            livetags.private(answer)
            answer.setdefault("X-Frame-Options", getattr(settings, "X_FRAME_OPTIONS", "DENY"))
            if answer.status_code != 304 and not answer.has_header("Content-Length"):
                # As the common middleware would: a kept-alive connection then needs no chunked framing.
                answer["Content-Length"] = str(len(answer.content))
            answer["X-Request-ID"] = context.new_request_id(request.headers.get("X-Request-ID"))
        return answer
