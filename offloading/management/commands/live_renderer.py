"""The render process beside a web process (offloading/views/liveaside.py): started by the web process
itself when its first live poll needs a render, never by hand. Reads render jobs as JSON lines on stdin,
answers each on stdout, and exits when stdin ends (its web process is gone)."""

from __future__ import annotations

import os
import signal
import sys
from typing import Any

from django.core.management.base import BaseCommand

from liqo_dash.warmup import freeze_heap, warm
from offloading.views import liveaside


class Command(BaseCommand):
    help = "Render live regions for the web process that started this one (JSON lines on stdin and stdout)."

    def handle(self, *args: Any, **options: Any) -> None:
        # The answers go on a copy of stdout; whatever else writes to stdout (a log handler set up on it)
        # writes to stderr, the web process's log, and never into the answers.
        # It ends with its web process (stdin closed), not with a terminal's Ctrl-C to the process group.
        signal.signal(signal.SIGINT, signal.SIG_IGN)
        sys.stdout.flush()
        answers = os.fdopen(os.dup(1), "wb")
        os.dup2(2, 1)
        liveaside.serve(sys.stdin.buffer, answers, warm=_settle)


def _settle() -> None:
    """Load what a render needs, then keep it out of the collector's walks (as the web worker does)."""
    warm()
    freeze_heap()
