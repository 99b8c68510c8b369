"""Kubernetes API errors and results as the rest of liqo-dash sees them: classified (transient or not,
no answer at all, Retry-After) and with the API server's warnings. ``offloading.cluster.kube`` raises them; this
module does not import the client (it reads an ApiException by its attributes)."""

from __future__ import annotations

import json
import re
from dataclasses import dataclass, field
from typing import Any


class KubeError(Exception):
    """A failed Kubernetes call. ``kind`` is one of: transient, conflict, exists, not_found, invalid,
    forbidden, gone."""

    def __init__(
        self,
        kind: str,
        message: str,
        status: int | None = None,
        reason: str = "",
        *,
        unreachable: bool = False,
        retry_after: float | None = None,
    ) -> None:
        super().__init__(message)
        self.kind = kind
        self.message = message
        self.status = status
        self.reason = reason
        # No answer at all (connection refused or dropped, timeout): the API server is unreachable.
        self.unreachable = unreachable
        # Seconds the API server asked us to wait (429/503 with Retry-After).
        self.retry_after = retry_after

    @property
    def transient(self) -> bool:
        return self.kind == "transient"


def classify(exc: Any) -> KubeError:
    """A KubeError for a client ``ApiException`` (read by its status, body and headers)."""
    status = exc.status or 0
    message, reason = exc.reason or "", ""
    try:
        body = json.loads(exc.body) if exc.body else {}
        if isinstance(body, dict):
            message = body.get("message") or message
            reason = body.get("reason") or ""
    except (TypeError, ValueError):
        if exc.body:
            message = str(exc.body)[:500]
    if status == 0 or status >= 500 or status in (408, 429):
        kind = "transient"
    elif status == 409:
        kind = "exists" if reason == "AlreadyExists" else "conflict"
    elif status == 404:
        kind = "not_found"
    elif status == 410:
        kind = "gone"
    elif status in (401, 403):
        kind = "forbidden"
    else:
        kind = "invalid"
    return KubeError(kind, message or f"HTTP {status}", status, reason, retry_after=_retry_after(exc))


def _retry_after(exc: Any) -> float | None:
    """The Retry-After header in seconds (the API server sends seconds, never a date), capped at 5 min."""
    value = (exc.headers or {}).get("Retry-After") if exc.headers else None
    try:
        seconds = float(value) if value is not None else None
    except ValueError:
        return None
    return None if seconds is None or seconds < 0 else min(seconds, 300.0)


_WARNING = re.compile(r'^\s*\d{3}\s+\S+\s+"(?P<text>(?:[^"\\]|\\.)*)"')


def parse_warnings(values: list[str]) -> list[str]:
    """Texts of RFC 7234 ``Warning`` headers as the API server sends them (``299 - "text"``)."""
    texts = []
    for value in values:
        match = _WARNING.match(value)
        texts.append(match.group("text").replace('\\"', '"') if match else value)
    return texts


@dataclass
class Result:
    """The object an API call returned (or None) and the warnings the API server attached."""

    obj: dict[str, Any] | None
    warnings: list[str] = field(default_factory=list)
