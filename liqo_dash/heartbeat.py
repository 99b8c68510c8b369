"""Liveness heartbeats for the processes that have no HTTP port (beat and the watcher).

The process calls ``touch(name)`` from a loop that runs every few seconds even when there is nothing
to do; the container's liveness probe runs ``python -m liqo_dash.heartbeat check <name> <max-age>``,
which exits non-zero when the file is missing or older than max-age seconds (the loop is stuck or
dead). The files live in ``LIQO_DASH_HEARTBEAT_DIR`` (default ``/tmp``, an emptyDir in the pods).

beat touches its heartbeat through ``BeatScheduler``, celery's default scheduler whose every tick
touches "beat" (liqo_dash/celery.py makes it beat's scheduler).
"""

from __future__ import annotations

import argparse
import logging
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

from celery.beat import PersistentScheduler

ENV = "LIQO_DASH_HEARTBEAT_DIR"
DEFAULT_DIR = "/tmp"
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_-]*")

log = logging.getLogger(__name__)


def directory() -> Path:
    return Path(os.environ.get(ENV) or DEFAULT_DIR)


def path(name: str) -> Path:
    if not _NAME.fullmatch(name):
        raise ValueError(f"not a heartbeat name: {name!r}")
    return directory() / f"liqo-dash-{name}.heartbeat"


def touch(name: str) -> None:
    """Record that ``name`` is alive now. Never raises: a heartbeat must not stop the loop it reports
    on (a file that cannot be written goes stale, and the probe says so)."""
    try:
        target = path(name)
        target.parent.mkdir(parents=True, exist_ok=True)
        target.touch()
    except OSError:
        log.warning("heartbeat %s: cannot write in %s", name, directory(), exc_info=True)


def age(name: str) -> float | None:
    """Seconds since the last ``touch(name)``; None when it never happened (or cannot be read)."""
    target = path(name)
    try:
        return max(0.0, time.time() - target.stat().st_mtime)
    except OSError:
        return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m liqo_dash.heartbeat", description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest="command", required=True)
    check = commands.add_parser("check", help="exit 1 when the heartbeat is missing or older than max-age")
    check.add_argument("name")
    check.add_argument("max_age", type=float, metavar="max-age-seconds")
    options = parser.parse_args(argv)
    seconds = age(options.name)
    if seconds is None:
        print(f"heartbeat {options.name}: none yet at {path(options.name)}", file=sys.stderr)
        return 1
    if seconds > options.max_age:
        print(f"heartbeat {options.name}: stale, {seconds:.0f} s old (max {options.max_age:g})", file=sys.stderr)
        return 1
    return 0


class BeatScheduler(PersistentScheduler):
    """celery beat's default scheduler (the schedule kept in the -s file) that touches the "beat"
    heartbeat on every tick. Beat ticks at least every ``max_interval`` seconds, idle or not."""

    max_interval = 30

    def tick(self, *args: Any, **kwargs: Any) -> float:
        touch("beat")
        return super().tick(*args, **kwargs)


if __name__ == "__main__":
    sys.exit(main())
