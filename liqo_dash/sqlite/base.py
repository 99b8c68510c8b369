"""Django's SQLite backend, waiting for the write lock in short steps.

Several processes share the embedded database (web, worker, watcher, beat), and SQLite lets one of
them write at a time. A transaction that finds the lock taken waits in SQLite's busy handler, which
sleeps 1, 2, 5, 10, 15, 20, 25, 25, 25, 50, 50 and then 100 ms between looks: two processes that write
often (the watcher bringing a bulk's events, the worker recording its pushes) keep finding the lock
just taken and sleep tens of milliseconds while it is free most of that time. Here the write
transaction (``BEGIN IMMEDIATE``, the only statement that waits for the lock: the writes inside it
already hold it, and readers never wait under WAL) looks again after 0.5 ms, doubling up to 4 ms,
until the same ``timeout`` as before has passed. Other statements keep SQLite's handler.
"""

from __future__ import annotations

import sqlite3
import time

from django.db.backends.sqlite3 import base

# The steps between looks at the write lock: from the first to the longest.
FIRST_STEP = 0.0005
LONGEST_STEP = 0.004


class DatabaseWrapper(base.DatabaseWrapper):
    def _start_transaction_under_autocommit(self) -> None:
        mode = getattr(self, "transaction_mode", None)
        begin = "BEGIN" if mode is None else f"BEGIN {mode}"
        timeout = float(self.settings_dict.get("OPTIONS", {}).get("timeout", 5))
        raw = self.connection
        with self.wrap_database_errors:
            raw.execute("PRAGMA busy_timeout = 0")
            try:
                deadline = time.monotonic() + timeout
                step = FIRST_STEP
                while True:
                    try:
                        raw.execute(begin)
                        return
                    except sqlite3.OperationalError as exc:
                        if "locked" not in str(exc) or time.monotonic() >= deadline:
                            raise
                    time.sleep(step)
                    step = min(step * 2, LONGEST_STEP)
            finally:
                raw.execute(f"PRAGMA busy_timeout = {int(timeout * 1000)}")
