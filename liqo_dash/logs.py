"""Log records that say who and what they are about.

Every record gets, when known, the request id, user and client address (``access.clientip``: the
address ``TRUSTED_PROXIES`` yields, the same the throttles and the login lockout use) of the HTTP
request being served, and the change id and namespace of the Celery task being run (or of an ``extra={...}`` the caller passed).
``LOG_FORMAT=json`` prints one JSON object a line (python-json-logger); the default is readable text.
"""

from __future__ import annotations

import contextvars
import logging
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from typing import Any

from pythonjsonlogger.json import JsonFormatter as _BaseJsonFormatter

from access.clientip import client_address

CONTEXT_FIELDS = ("request_id", "user", "client", "change_id", "namespace")

# What the records of a Celery task say about it, by task name: the app that defines a task names its
# fields (offloading.tasks: the change and its namespace); the Celery app binds them around each run.
TaskFields = Callable[[tuple[Any, ...]], dict[str, Any]]
_task_fields: dict[str, TaskFields] = {}

_request: contextvars.ContextVar[Any] = contextvars.ContextVar("liqo_dash_log_request", default=None)
_fields: contextvars.ContextVar[dict[str, Any]] = contextvars.ContextVar("liqo_dash_log_fields", default={})  # noqa: B039


@contextmanager
def bound(**fields: Any) -> Iterator[None]:
    """Add fields (e.g. change_id, namespace) to every record logged inside the block."""
    token = bind(**fields)
    try:
        yield
    finally:
        unbind(token)


def bind(**fields: Any) -> contextvars.Token:
    merged = {**_fields.get(), **{key: value for key, value in fields.items() if value not in (None, "")}}
    return _fields.set(merged)


def unbind(token: contextvars.Token) -> None:
    _fields.reset(token)


def describe_task(name: str, fields: TaskFields) -> None:
    """Have every record logged while task ``name`` runs carry ``fields(args)`` (its positional arguments)."""
    _task_fields[name] = fields


def task_fields(name: str, args: tuple[Any, ...]) -> dict[str, Any]:
    """The fields the records of task ``name`` run with ``args`` carry (none for a task nobody described).
    Logging context never breaks a task: a describer that fails gives no fields."""
    describe = _task_fields.get(name)
    if describe is None:
        return {}
    try:
        return describe(args)
    except Exception:  # noqa: BLE001 - logging context must never break a task
        logging.getLogger(__name__).debug("no log fields for task %s%r", name, args, exc_info=True)
        return {}


def _request_user(request: Any) -> str | None:
    """The user's name if authentication already ran; never triggers it (no query from a log call)."""
    user = request.__dict__.get("user")
    if user is None:
        return None
    wrapped = getattr(user, "_wrapped", user)  # SimpleLazyObject until something evaluated it
    if wrapped is None or type(wrapped).__name__ == "object":
        return None
    if not getattr(wrapped, "is_authenticated", False):
        return "anonymous"
    return str(wrapped.get_username())


def _request_client(request: Any) -> str | None:
    """The client's address as the throttles see it; None for an object that is not a request."""
    meta = getattr(request, "META", None)
    return client_address(request) if isinstance(meta, dict) and meta.get("REMOTE_ADDR") else None


class ContextFilter(logging.Filter):
    """Copies the current request / task context onto each record (never overwriting an extra)."""

    def filter(self, record: logging.LogRecord) -> bool:
        values: dict[str, Any] = dict(_fields.get())
        # Django's own request logs (django.request, django.security) pass the request as an extra
        # and are emitted after the middleware returned.
        request = getattr(record, "request", None) or _request.get()
        if request is not None:
            values.setdefault("request_id", getattr(request, "request_id", None))
            values.setdefault("user", _request_user(request))
            values.setdefault("client", _request_client(request))
        for key in CONTEXT_FIELDS:
            if getattr(record, key, None) is None and values.get(key) not in (None, ""):
                setattr(record, key, values[key])
        return True


class DisallowedHostFilter(logging.Filter):
    """A ``Host`` header outside ALLOWED_HOSTS is a client's mistake or a scanner, not an error of the
    server: Django logs it at ERROR with a traceback (``django.security.DisallowedHost``); this makes it
    one WARNING line that names the host (the 400 answer is unchanged)."""

    def filter(self, record: logging.LogRecord) -> bool:
        record.levelno = logging.WARNING
        record.levelname = logging.getLevelName(logging.WARNING)
        record.exc_info = None
        record.exc_text = None
        record.stack_info = None
        return True


class TextFormatter(logging.Formatter):
    """``time level logger message [request_id=... user=... client=... change_id=... namespace=...]``."""

    def __init__(self) -> None:
        super().__init__("%(asctime)s %(levelname)s %(name)s %(message)s")

    def format(self, record: logging.LogRecord) -> str:
        text = super().format(record)
        known = [f"{key}={getattr(record, key)}" for key in CONTEXT_FIELDS if getattr(record, key, None) is not None]
        if not known:
            return text
        first, newline, rest = text.partition("\n")
        return f"{first} [{' '.join(known)}]{newline}{rest}"


class JsonFormatter(_BaseJsonFormatter):
    """One JSON object a line: time, level, logger, message, then the context fields and extras."""

    def __init__(self) -> None:
        super().__init__(
            ["levelname", "name", "message"],
            rename_fields={"levelname": "level", "name": "logger"},
            timestamp="time",
        )

    def add_fields(self, log_record: dict[str, Any], record: logging.LogRecord, message_dict: dict[str, Any]) -> None:
        super().add_fields(log_record, record, message_dict)
        # Objects Django passes as extras; their repr is noise (the context fields say what matters).
        for key in ("request", "server_time"):
            log_record.pop(key, None)
        # The timestamp first for readability (json keeps insertion order).
        time = log_record.pop("time", None)
        ordered = {"time": time, **log_record}
        log_record.clear()
        log_record.update(ordered)


class LogContextMiddleware:
    """Makes the current request visible to :class:`ContextFilter` (after the request id is set)."""

    def __init__(self, get_response: Callable[[Any], Any]) -> None:
        self.get_response = get_response

    def __call__(self, request: Any) -> Any:
        token = _request.set(request)
        try:
            return self.get_response(request)
        finally:
            _request.reset(token)
