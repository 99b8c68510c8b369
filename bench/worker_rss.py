"""The worker's memory during a cold refresh: ``python -m bench.worker_rss`` in a new process empties the
snapshot and runs the worker's refresh task (``offloading.tasks.refresh``, the one the worker runs when
no watcher keeps the snapshot), then prints its peak RSS (VmHWM) before and after as JSON.
The database, settings and cluster come from the environment the benchmark set."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

from bench.harness import ROOT


def _vmhwm_mb() -> float:
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return 0.0


def measure(kubeconfig: Path) -> dict[str, Any]:
    done = subprocess.run(
        [sys.executable, "-m", "bench.worker_rss"],
        capture_output=True,
        text=True,
        cwd=ROOT,
        env={**os.environ, "LOG_LEVEL": "WARNING", "KUBECONFIG": str(kubeconfig), "KUBE_CONFIG_MODE": "kubeconfig"},
        check=False,
        timeout=900,
    )
    if done.returncode != 0:
        raise RuntimeError(f"the worker's cold refresh failed:\n{done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout.strip().splitlines()[-1])
    return result


def _run() -> dict[str, Any]:
    import time

    import django

    django.setup()
    from django.core.management import call_command

    from liqo_dash.celery import app  # noqa: F401 - the worker's Celery app, as in a worker process
    from offloading.tasks import refresh

    call_command("flush", interactive=False, verbosity=0)
    before = _vmhwm_mb()
    started = time.perf_counter()
    report = refresh()
    return {
        "before_mb": round(before, 1),
        "peak_mb": round(_vmhwm_mb(), 1),
        "seconds": round(time.perf_counter() - started, 2),
        "namespaces": (report or {}).get("namespaces"),
        "ok": (report or {}).get("ok"),
    }


if __name__ == "__main__":
    print(json.dumps(_run()))
