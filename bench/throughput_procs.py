"""The processes of the throughput run (``bench/throughput.py``): the sandbox API server and the watcher,
each in its own process, the worker's memory sampled while it pushes, and the CPU each process used."""

from __future__ import annotations

import json
import subprocess
import sys
import threading
import urllib.request
from pathlib import Path
from typing import Any

from bench.harness import ROOT, await_log, listening_url, serve_sandbox, stop_process


class SandboxProcess:
    """``python -m sandbox serve`` (minimal scenario, controllers reacting at once) in its own process."""

    def __init__(self, var_dir: Path) -> None:
        self.kubeconfig = var_dir / "throughput.kubeconfig"
        self.log = var_dir / "throughput-sandbox.log"
        self.proc = serve_sandbox(self.log, "--scenario", "minimal", "--kubeconfig", str(self.kubeconfig))
        self.url = await_log(self.proc, self.log, listening_url, 60, "the sandbox", self.stop, interval=0.1)

    def admin(self, path: str, method: str = "GET", body: Any = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            f"{self.url}/sandbox/{path}", data=data, method=method, headers={"Content-Type": "application/json"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            return json.loads(response.read())

    def stop(self) -> None:
        stop_process(self.proc, 30)


class RssSampler:
    """Peak memory of a process and its children: the largest RSS of one process, and the sum of their
    PSS (proportional set size: pages shared after the fork counted once, not once per child)."""

    def __init__(self, pid: int) -> None:
        import psutil

        self.root = psutil.Process(pid)
        self.peak_one = 0
        self.peak_total = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        import psutil

        while not self._stop.wait(0.2):
            try:
                processes = [self.root, *self.root.children(recursive=True)]
                sizes = [p.memory_info().rss for p in processes]
                shared = [p.memory_full_info().pss for p in processes]
            except psutil.Error:
                continue
            self.peak_one = max(self.peak_one, *sizes)
            self.peak_total = max(self.peak_total, sum(shared))

    def stop(self) -> tuple[float, float]:
        self._stop.set()
        self._thread.join()
        return self.peak_one / 2**20, self.peak_total / 2**20


def cpu_s(pid: int, children: bool = False) -> float:
    """CPU seconds a process used so far (with ``children``: and its living children, a worker's pool)."""
    import psutil

    root = psutil.Process(pid)
    total = 0.0
    for process in [root, *(root.children(recursive=True) if children else [])]:
        try:
            times = process.cpu_times()
        except psutil.Error:
            continue
        total += float(times.user + times.system)
    return total


class WatcherProcess:
    """``manage.py watch_cluster`` in its own process, as deployed (no leader election here)."""

    def __init__(self, var_dir: Path, kubeconfig: Path, env: dict[str, str]) -> None:
        self.log = var_dir / "throughput-watcher.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                [sys.executable, "manage.py", "watch_cluster", "--timeout-seconds", "300"],
                cwd=ROOT,
                stdout=out,
                stderr=subprocess.STDOUT,
                env={**env, "KUBECONFIG": str(kubeconfig), "LIQO_DASH_LEADER_ELECTION": "false"},
            )

    def stop(self) -> None:
        stop_process(self.proc, 20)
