"""``manage.py verify_audit`` needs only the database: an auditor verifying a restored backup has no
Redis. With REDIS_URL pointing at a closed port it reports what it reports with Redis up (the same
output and exit status, intact or tampered), and says on stderr that the verdict was not kept."""

from __future__ import annotations

import os
import shutil
import sqlite3
import subprocess
import sys
from pathlib import Path

import pytest

from tests.fixtures.waits import ROOT, free_port

MAKE_TRAIL = """
from offloading.choices import AuditAction, Source
from offloading.models import AuditEvent
for i in range(4):
    AuditEvent(user_name="alice", source=Source.WEB, action=AuditAction.REQUESTED, namespace=f"ns-{i}",
               after={"podOffloadingStrategy": "Remote"}).save()
print(AuditEvent.objects.count())
"""


def _env(tmp_path: Path, redis_url: str) -> dict[str, str]:
    return {
        "PATH": os.environ.get("PATH", "/usr/bin:/bin"),
        "HOME": str(tmp_path),
        "DJANGO_SETTINGS_MODULE": "liqo_dash.settings",
        "LIQO_DASH_VAR_DIR": str(tmp_path / "var"),
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "REDIS_URL": redis_url,
        "KUBE_CONFIG_MODE": "kubeconfig",
        "KUBECONFIG": str(tmp_path / "no-such-kubeconfig"),
    }


def _manage(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "manage.py", *args], cwd=ROOT, env=env, capture_output=True, text=True, timeout=120
    )


def _closed_port_url() -> str:
    return f"redis://127.0.0.1:{free_port()}/0"  # bound then released: nothing listens there


@pytest.fixture(scope="module")
def _trail_made(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A migrated SQLite database with a trail of four sealed events (and its var/ with the seal key),
    all made without Redis; each test works on a copy."""
    where = tmp_path_factory.mktemp("trail")
    env = _env(where, _closed_port_url())
    migrated = _manage(env, "migrate", "--noinput", "-v", "0")
    assert migrated.returncode == 0, migrated.stderr
    made = _manage(env, "shell", "-c", MAKE_TRAIL)
    assert made.returncode == 0 and made.stdout.split()[-1:] == ["4"], made.stderr
    return where


@pytest.fixture
def prepared(_trail_made: Path, tmp_path: Path) -> dict[str, str]:
    shutil.copytree(_trail_made / "var", tmp_path / "var")
    shutil.copy(_trail_made / "db.sqlite3", tmp_path / "db.sqlite3")
    return _env(tmp_path, _closed_port_url())


def _tamper(tmp_path: Path) -> None:
    with sqlite3.connect(tmp_path / "db.sqlite3") as db:
        db.execute("UPDATE offloading_auditevent SET user_name = 'mallory' WHERE seq = 2")


def test_an_intact_trail_verifies_without_redis(prepared: dict[str, str], tmp_path: Path, redis_url: str) -> None:
    env = prepared
    offline = _manage(env, "verify_audit")
    assert offline.returncode == 0, offline.stderr
    assert "audit trail intact: 4 events, head #4" in offline.stdout
    assert "Traceback" not in offline.stderr
    assert "cache is unreachable" in offline.stderr
    # The same answer with Redis up (where the verdict is kept), and with --no-cache (nothing said).
    online = _manage({**env, "REDIS_URL": redis_url}, "verify_audit")
    assert (online.returncode, online.stdout) == (offline.returncode, offline.stdout)
    assert "cache is unreachable" not in online.stderr
    quiet = _manage(env, "verify_audit", "--no-cache")
    assert (quiet.returncode, quiet.stdout) == (0, offline.stdout)
    assert "cache" not in quiet.stderr and "Traceback" not in quiet.stderr


def test_a_tampered_trail_fails_without_redis(prepared: dict[str, str], tmp_path: Path, redis_url: str) -> None:
    env = prepared
    _tamper(tmp_path)
    offline = _manage(env, "verify_audit")
    assert offline.returncode == 1, offline.stdout + offline.stderr
    assert "audit trail broken: event #2 was edited" in offline.stderr
    assert "Traceback" not in offline.stderr
    online = _manage({**env, "REDIS_URL": redis_url}, "verify_audit")
    assert online.returncode == 1 and online.stdout == offline.stdout == ""
    assert "audit trail broken: event #2 was edited" in online.stderr
    quiet = _manage(env, "verify_audit", "--no-cache")
    assert quiet.returncode == 1 and "audit trail broken: event #2 was edited" in quiet.stderr


def test_with_redis_up_the_verdict_is_kept_for_metrics(
    prepared: dict[str, str], tmp_path: Path, redis_url: str
) -> None:
    env = {**prepared, "REDIS_URL": redis_url}
    _tamper(tmp_path)
    assert _manage(env, "verify_audit").returncode == 1
    read = _manage(
        env,
        "shell",
        "-c",
        "from offloading.audit.events import last_verification; v = last_verification(); "
        "print(v['ok'], v['first_bad_seq'], v['count'])",
    )
    assert read.returncode == 0, read.stderr
    assert read.stdout.split()[-3:] == ["False", "2", "1"]
