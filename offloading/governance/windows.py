"""Change windows: recurring weekly periods, each in its own time zone, when changes of a scope may be
applied (``LIQO_DASH["CHANGE_WINDOWS"]``, read by ``offloading.governance.policy``).

A window is written ``DAYS HH:MM-HH:MM [ZONE]``: ``DAYS`` is ``daily`` (or ``*``), a day (``Mon``), a
range (``Mon-Fri``, ``Fri-Mon`` wraps) or a comma list of those (``Mon,Wed,Fri-Sun``); the times are the
wall clock of ``ZONE`` (an IANA name read with ``zoneinfo``, UTC when left out). A window whose end is not
after its start crosses midnight and belongs to the day it opens on: ``Mon-Fri 22:00-02:00 Europe/Rome``
is open from Monday 22:00 to Tuesday 02:00 ... and from Friday 22:00 to Saturday 02:00. ``24:00`` ends a
window at midnight. Several windows of a scope are separated by ``|``; it is open when one of them is.

Wall-clock times follow daylight saving time: a window opens at 22:00 local on both sides of the change,
so its length in real time differs on the night the clocks move (an hour shorter or longer). A wall time
that does not exist that night (02:30 on the spring change) is read as the same offset from the start of
the gap (03:30), as ``zoneinfo`` does.
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from datetime import UTC, date, datetime, time, timedelta
from zoneinfo import ZoneInfo, ZoneInfoNotFoundError

DAYS = ("mon", "tue", "wed", "thu", "fri", "sat", "sun")
MINUTES_A_DAY = 24 * 60
_TIME = re.compile(r"^(\d{1,2}):(\d{2})$")


class WindowError(ValueError):
    """A window that cannot be read; the message says which and why."""


@dataclass(frozen=True)
class Window:
    days: frozenset[int]  # 0 = Monday
    start: int  # minutes after local midnight, 0..1439
    end: int  # 1..1440; not after start: the window ends the next day
    zone: str
    text: str

    @property
    def crosses_midnight(self) -> bool:
        return self.end <= self.start

    @property
    def tz(self) -> ZoneInfo:
        return ZoneInfo(self.zone)

    def __str__(self) -> str:
        return self.text


def _day(token: str, text: str) -> int:
    name = token.strip().lower()[:3]
    if name not in DAYS or len(token.strip()) < 3:
        raise WindowError(f"{text!r}: {token!r} is not a day (Mon, Tue ... Sun)")
    return DAYS.index(name)


def _days(field: str, text: str) -> frozenset[int]:
    if field.lower() in ("daily", "*"):
        return frozenset(range(7))
    found: set[int] = set()
    for part in field.split(","):
        first, dash, last = part.partition("-")
        start = _day(first, text)
        stop = _day(last, text) if dash else start
        day = start
        while True:
            found.add(day)
            if day == stop:
                break
            day = (day + 1) % 7
    return frozenset(found)


def _minutes(value: str, text: str, *, end: bool) -> int:
    match = _TIME.match(value)
    if not match:
        raise WindowError(f"{text!r}: {value!r} is not a time (HH:MM)")
    hours, minutes = int(match.group(1)), int(match.group(2))
    total = hours * 60 + minutes
    if minutes > 59 or total > MINUTES_A_DAY or (total == MINUTES_A_DAY and not end):
        raise WindowError(f"{text!r}: {value!r} is not a time of day")
    return total


def parse_window(text: str) -> Window:
    """One window, ``DAYS HH:MM-HH:MM [ZONE]``; raises WindowError."""
    fields = text.split()
    if len(fields) not in (2, 3):
        raise WindowError(
            f"{text!r} is not a window: write DAYS HH:MM-HH:MM ZONE (e.g. Mon-Fri 22:00-02:00 Europe/Rome)"
        )
    start_text, dash, end_text = fields[1].partition("-")
    if not dash:
        raise WindowError(f"{text!r}: {fields[1]!r} is not a period (HH:MM-HH:MM)")
    zone = fields[2] if len(fields) == 3 else "UTC"
    try:
        ZoneInfo(zone)
    except (ZoneInfoNotFoundError, ValueError) as exc:
        raise WindowError(f"{text!r}: unknown time zone {zone!r}") from exc
    start = _minutes(start_text, text, end=False)
    end = _minutes(end_text, text, end=True)
    return Window(_days(fields[0], text), start, end, zone, " ".join(fields))


def parse_windows(text: str) -> tuple[Window, ...]:
    """Windows separated by ``|`` (empty: none)."""
    return tuple(parse_window(part.strip()) for part in text.split("|") if part.strip())


def _local(day: date, minutes: int, tz: ZoneInfo) -> datetime:
    """The instant of ``minutes`` after midnight of ``day`` on the wall clock of ``tz``."""
    if minutes >= MINUTES_A_DAY:
        return _local(day + timedelta(days=1), minutes - MINUTES_A_DAY, tz)
    wall = datetime.combine(day, time(minutes // 60, minutes % 60), tzinfo=tz)
    # A wall time in a gap is read with the offset before it; the round trip through UTC names the real instant.
    return wall.astimezone(UTC).astimezone(tz)


def _periods(window: Window, around: datetime) -> list[tuple[datetime, datetime]]:
    """The window's periods that open from two days before ``around`` to eight days after."""
    tz = window.tz
    today = around.astimezone(tz).date()
    periods = []
    for offset in range(-2, 9):
        day = today + timedelta(days=offset)
        if day.weekday() not in window.days:
            continue
        opens = _local(day, window.start, tz)
        closes = _local(day, window.end + (MINUTES_A_DAY if window.crosses_midnight else 0), tz)
        periods.append((opens, closes))
    return periods


def open_period(windows: tuple[Window, ...], at: datetime) -> tuple[datetime, datetime] | None:
    """The period (opens, closes) of ``windows`` that ``at`` is in, the one closing last; None when closed."""
    found = [(o, c) for w in windows for o, c in _periods(w, at) if o <= at < c]
    return max(found, key=lambda period: period[1]) if found else None


def is_open(windows: tuple[Window, ...], at: datetime) -> bool:
    """Whether a change may be applied at ``at``: no windows (no restriction), or inside one of them."""
    return not windows or open_period(windows, at) is not None


def next_period(windows: tuple[Window, ...], at: datetime) -> tuple[datetime, datetime] | None:
    """The period a change asked for at ``at`` is applied in: the one open now, else the next to open
    (None when ``windows`` has none, or names no day)."""
    current = open_period(windows, at)
    if current is not None:
        return current
    upcoming = [(o, c) for w in windows for o, c in _periods(w, at) if o > at]
    return min(upcoming) if upcoming else None


def next_opening(windows: tuple[Window, ...], at: datetime) -> datetime | None:
    """When a change asked for at ``at`` may be applied: ``at`` itself when a window is open (or there
    are none), else the next opening."""
    if is_open(windows, at):
        return at
    period = next_period(windows, at)
    return period[0] if period else None


def spread(windows: tuple[Window, ...], at: datetime, count: int) -> list[datetime]:
    """When each of ``count`` changes of a bulk asked for at ``at`` is released: evenly over the first
    half of the period they fall in (from ``at`` when a window is open now), so that a large bulk does
    not land at once when the window opens and is done well before it closes."""
    period = next_period(windows, at)
    if period is None or count <= 0:
        return [at] * max(count, 0)
    opens, closes = max(period[0], at), period[1]
    step = (closes - opens) / 2 / count
    return [opens + step * i for i in range(count)]
