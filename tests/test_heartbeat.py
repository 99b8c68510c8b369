"""Liveness heartbeats of beat and the watcher (liqo_dash/heartbeat.py), the probes' entry point and
the two processes' hooks."""

from __future__ import annotations

import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from celery.beat import PersistentScheduler

from liqo_dash import heartbeat

ROOT = Path(__file__).resolve().parent.parent


@pytest.fixture
def beat_dir(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    directory = tmp_path / "heartbeats"
    monkeypatch.setenv(heartbeat.ENV, str(directory))
    return directory


def test_touch_writes_the_file_under_the_configured_directory(beat_dir: Path) -> None:
    assert heartbeat.age("watcher") is None
    heartbeat.touch("watcher")
    assert heartbeat.path("watcher").parent == beat_dir  # created when missing
    assert heartbeat.path("watcher").exists()
    age = heartbeat.age("watcher")
    assert age is not None and age < 5


def test_touch_updates_an_old_heartbeat(beat_dir: Path) -> None:
    heartbeat.touch("beat")
    old = time.time() - 600
    os.utime(heartbeat.path("beat"), (old, old))
    assert heartbeat.age("beat") > 590  # type: ignore[operator]
    heartbeat.touch("beat")
    assert heartbeat.age("beat") < 5  # type: ignore[operator]


def test_default_directory_is_tmp(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(heartbeat.ENV, raising=False)
    assert heartbeat.path("beat") == Path("/tmp/liqo-dash-beat.heartbeat")


@pytest.mark.parametrize("name", ["", "../etc/passwd", "a/b", ".hidden", "x y"])
def test_names_cannot_escape_the_directory(beat_dir: Path, name: str) -> None:
    with pytest.raises(ValueError):
        heartbeat.path(name)


def test_touch_never_raises_when_the_directory_is_not_writable(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("")
    monkeypatch.setenv(heartbeat.ENV, str(blocker / "below-a-file"))
    heartbeat.touch("watcher")  # logs, does not stop the loop
    assert heartbeat.age("watcher") is None


def test_check_fresh_stale_and_missing(beat_dir: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert heartbeat.main(["check", "beat", "60"]) == 1
    assert "none yet" in capsys.readouterr().err
    heartbeat.touch("beat")
    assert heartbeat.main(["check", "beat", "60"]) == 0
    old = time.time() - 120
    os.utime(heartbeat.path("beat"), (old, old))
    assert heartbeat.main(["check", "beat", "60"]) == 1
    assert "stale" in capsys.readouterr().err
    assert heartbeat.main(["check", "beat", "300"]) == 0


def probe(*args: str, directory: Path) -> subprocess.CompletedProcess[str]:
    """The command line the manifests' exec probes run."""
    env = {**os.environ, heartbeat.ENV: str(directory)}
    return subprocess.run(
        [sys.executable, "-m", "liqo_dash.heartbeat", *args],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
    )


def test_the_module_entry_point_exits_non_zero_when_stale(beat_dir: Path) -> None:
    assert probe("check", "watcher", "30", directory=beat_dir).returncode == 1
    heartbeat.touch("watcher")
    assert probe("check", "watcher", "30", directory=beat_dir).returncode == 0
    old = time.time() - 31
    os.utime(heartbeat.path("watcher"), (old, old))
    result = probe("check", "watcher", "30", directory=beat_dir)
    assert result.returncode == 1, result.stdout + result.stderr
    assert probe("check", directory=beat_dir).returncode != 0  # a probe typo fails, never passes


def test_beat_uses_the_heartbeat_scheduler_and_each_tick_touches(
    beat_dir: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from celery.apps.beat import Beat
    from celery.utils.imports import symbol_by_name

    from liqo_dash.celery import app

    assert app.conf.beat_scheduler == "liqo_dash.heartbeat:BeatScheduler"
    # `celery beat` without -S (the Procfile, the manifests) takes the configured scheduler.
    assert symbol_by_name(Beat(app=app, quiet=True).scheduler_cls) is heartbeat.BeatScheduler
    assert issubclass(heartbeat.BeatScheduler, PersistentScheduler)  # the -s schedule file still works

    monkeypatch.setattr(PersistentScheduler, "tick", lambda self, *a, **k: 4.5)
    scheduler = heartbeat.BeatScheduler(app=app, schedule_filename=str(tmp_path / "schedule"), lazy=True)
    assert scheduler.max_interval <= 30  # ticks at least this often when idle (the probe allows 120 s)
    assert heartbeat.age("beat") is None
    assert scheduler.tick() == 4.5
    assert heartbeat.age("beat") is not None


class _AliveWatcher:
    def is_alive(self) -> bool:
        return True


def test_the_watcher_loop_touches_its_heartbeat_while_idle(
    beat_dir: Path, settings: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    from offloading.management.commands import watch_cluster

    settings.LIQO_DASH = {**settings.LIQO_DASH, "LEADER_ELECTION": False}
    monkeypatch.setattr(watch_cluster.Command, "_start", lambda self, timeout: (threading.Event(), [_AliveWatcher()]))
    monkeypatch.setattr(watch_cluster.Command, "_stop", lambda self, running, why: None)
    sleeps: list[float] = []

    def sleep(seconds: float) -> None:
        sleeps.append(seconds)
        assert heartbeat.age("watcher") is not None, "touched before every sleep"
        if len(sleeps) == 3:
            raise KeyboardInterrupt

    monkeypatch.setattr(watch_cluster.time, "sleep", sleep)
    watch_cluster.Command().handle(timeout_seconds=5)
    assert len(sleeps) == 3 and max(sleeps) <= 5  # a loop of a few seconds: the probe allows 60 s
