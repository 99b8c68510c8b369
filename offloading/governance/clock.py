"""The one "now" of change governance: approvals expire and windows open by it, so tests set it instead of
waiting.

``now()`` is, in order: the time set by :func:`frozen` (a context manager, for tests and scripts), the
setting ``LIQO_DASH["GOVERNANCE_NOW"]`` (an aware ``datetime`` or an ISO 8601 string with an offset, for
a test's ``settings`` fixture or a demo), else the real time.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime

from django.conf import settings
from django.utils import timezone

_frozen: list[datetime] = []


def _aware(value: datetime) -> datetime:
    if timezone.is_naive(value):
        raise ValueError(f"governance time must carry its offset: {value.isoformat()}")
    return value


def now() -> datetime:
    """The current time as governance sees it (aware)."""
    if _frozen:
        return _frozen[-1]
    configured = settings.LIQO_DASH.get("GOVERNANCE_NOW")
    if isinstance(configured, datetime):
        return _aware(configured)
    if isinstance(configured, str) and configured:
        return _aware(datetime.fromisoformat(configured))
    return timezone.now()


@contextmanager
def frozen(at: datetime) -> Iterator[datetime]:
    """Within the block, :func:`now` answers ``at`` (nested blocks: the innermost)."""
    _frozen.append(_aware(at))
    try:
        yield at
    finally:
        _frozen.pop()
