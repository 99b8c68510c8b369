"""The Procfile's web process (gunicorn) for the tests that need the real one: on a free port and the
test database, its output in a log file; the caller stops it."""

from __future__ import annotations

import os
import shlex
import socket
import subprocess
import sys
from pathlib import Path

from django.conf import settings

from tests.fixtures.celery import database_url
from tests.fixtures.waits import ROOT, free_port


def web(tmp_path: Path, name: str, **extra: str) -> tuple[subprocess.Popen[bytes], int, Path]:
    """The Procfile's web command on a free port, on the test database (the caller stops it)."""
    line = next(x for x in (ROOT / "Procfile").read_text().splitlines() if x.startswith("web:"))
    port = free_port()
    command = shlex.split(line.partition(":")[2].replace("${PORT:-8000}", str(port)).replace("0.0.0.0", "127.0.0.1"))
    env = {
        **os.environ,
        "DJANGO_SETTINGS_MODULE": "liqo_dash.settings_test",
        "DATABASE_URL": database_url(),
        "LIQO_DASH_VAR_DIR": str(settings.VAR_DIR),
        "LIQO_DASH_LOCAL_CACHE": "true",
        "INSECURE_HTTP": "true",
        "PYTHONUNBUFFERED": "1",
        "PATH": f"{Path(sys.executable).parent}:{os.environ.get('PATH', '')}",
        **extra,
    }
    if "GUNICORN_CMD_ARGS" not in extra:
        env.pop("GUNICORN_CMD_ARGS", None)
    log = tmp_path / f"{name}.log"
    with open(log, "wb") as out:
        proc = subprocess.Popen(command, cwd=ROOT, env=env, stdout=out, stderr=subprocess.STDOUT)
    return proc, port, log


def stop(proc: subprocess.Popen[bytes]) -> None:
    proc.terminate()
    try:
        proc.wait(15)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


def answers(port: int) -> bool:
    """Whether the web process answers /healthz."""
    try:
        with socket.create_connection(("127.0.0.1", port), timeout=2) as sock:
            sock.sendall(b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\nConnection: close\r\n\r\n")
            return sock.recv(64).startswith(b"HTTP/1.1 200")
    except OSError:
        return False
