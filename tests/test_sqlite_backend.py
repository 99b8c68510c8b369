"""Our SQLite backend (liqo_dash/sqlite): a write transaction that finds the lock taken waits in short
steps for it (instead of SQLite's busy handler, which sleeps up to 100 ms between looks), gives up with
Django's "database is locked" after the configured timeout, and leaves the connection's busy timeout as
configured for every other statement."""

from __future__ import annotations

import sqlite3
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from django.conf import settings
from django.db import OperationalError
from django.db.utils import ConnectionHandler


def _connection(path: Path, timeout: float) -> Any:
    handler = ConnectionHandler(
        {
            "default": {
                "ENGINE": "liqo_dash.sqlite",
                "NAME": str(path),
                "OPTIONS": {"timeout": timeout, "transaction_mode": "IMMEDIATE"},
                "TIME_ZONE": None,
                "CONN_MAX_AGE": 0,
                "CONN_HEALTH_CHECKS": False,
                "AUTOCOMMIT": True,
                "ATOMIC_REQUESTS": False,
                "USER": "",
                "PASSWORD": "",
                "HOST": "",
                "PORT": "",
                "TEST": {},
            }
        }
    )
    return handler["default"]


@pytest.fixture
def unblocked(django_db_blocker: Any) -> Iterator[None]:
    """These tests open their own connections to their own file, not the test database."""
    with django_db_blocker.unblock():
        yield


@pytest.fixture
def database(tmp_path: Path) -> Path:
    path = tmp_path / "lock.sqlite3"
    raw = sqlite3.connect(path)
    raw.execute("PRAGMA journal_mode=WAL")
    raw.execute("CREATE TABLE t (x INTEGER)")
    raw.commit()
    raw.close()
    return path


def test_the_embedded_default_uses_it() -> None:
    engine = settings.DATABASES["default"]["ENGINE"]
    # Ours for every SQLite database (the embedded default), PostgreSQL's own under DATABASE_URL.
    assert engine in ("liqo_dash.sqlite", "django.db.backends.postgresql")
    assert engine != "django.db.backends.sqlite3"


def test_a_write_transaction_waits_for_the_lock_and_keeps_the_busy_timeout(database: Path, unblocked: None) -> None:
    holder = sqlite3.connect(database, isolation_level=None, check_same_thread=False)
    holder.execute("BEGIN IMMEDIATE")
    holder.execute("INSERT INTO t VALUES (1)")
    released = threading.Event()

    def release() -> None:
        time.sleep(0.3)
        holder.execute("COMMIT")
        released.set()

    threading.Thread(target=release, daemon=True).start()
    connection = _connection(database, timeout=10)
    try:
        connection.ensure_connection()
        connection._start_transaction_under_autocommit()  # what atomic() runs: waits for the holder's commit
        assert released.is_set()
        with connection.cursor() as cursor:
            cursor.execute("INSERT INTO t VALUES (2)")
            cursor.execute("PRAGMA busy_timeout")
            assert cursor.fetchone()[0] == 10_000  # restored for the statements inside and after
        with connection.cursor() as cursor:
            cursor.execute("COMMIT")
        with connection.cursor() as cursor:
            cursor.execute("SELECT x FROM t ORDER BY x")
            assert [row[0] for row in cursor.fetchall()] == [1, 2]
    finally:
        connection.close()
        holder.close()


def test_it_gives_up_after_the_timeout(database: Path, unblocked: None) -> None:
    holder = sqlite3.connect(database, isolation_level=None)
    holder.execute("BEGIN IMMEDIATE")
    connection = _connection(database, timeout=0.3)
    try:
        connection.ensure_connection()
        started = time.monotonic()
        with pytest.raises(OperationalError, match="locked"):
            connection._start_transaction_under_autocommit()
        assert time.monotonic() - started >= 0.3
        with connection.cursor() as cursor:
            cursor.execute("PRAGMA busy_timeout")
            assert cursor.fetchone()[0] == 300
    finally:
        connection.close()
        holder.execute("ROLLBACK")
        holder.close()
