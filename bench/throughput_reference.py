"""The reference of the throughput run (``bench/throughput.py``): one API request's time alone and 32 at
once (the sandbox must overlap them), ``kubectl apply -f`` of the manifests with its requests counted by
the sandbox, the time those requests imply, and the flags of a reference that ran slower than that."""

from __future__ import annotations

import os
import resource
import statistics
import subprocess
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from bench.throughput_procs import SandboxProcess, cpu_s

SPEC = {"namespaceMappingStrategy": "DefaultName", "podOffloadingStrategy": "LocalAndRemote"}
SLOW_REFERENCE = 1.5  # a reference slower than this many times what its requests imply is flagged
WRITE_VERBS = ("get", "create", "update", "patch", "delete")


def manifests(names: list[str]) -> str:
    documents = [
        {
            "apiVersion": "offloading.liqo.io/v1beta1",
            "kind": "NamespaceOffloading",
            "metadata": {"name": "offloading", "namespace": name},
            "spec": SPEC,
        }
        for name in names
    ]
    import yaml

    return yaml.safe_dump_all(documents)


def kubectl(kubeconfig: Path, *args: str, stdin: str | None = None) -> float:
    started = time.perf_counter()
    done = subprocess.run(
        ["kubectl", "--kubeconfig", str(kubeconfig), *args], input=stdin, capture_output=True, text=True, check=False
    )
    elapsed = time.perf_counter() - started
    if done.returncode != 0:
        raise RuntimeError(f"kubectl {' '.join(args)} failed: {done.stderr[-1000:]}")
    return elapsed


def _kubeconfig_auth(kubeconfig: Path) -> tuple[str, str]:
    import yaml

    data = yaml.safe_load(kubeconfig.read_text())
    return data["clusters"][0]["cluster"]["server"], data["users"][0]["user"]["token"]


def request_times(kubeconfig: Path) -> tuple[float, float]:
    """One GET alone (median of 20), and 32 GETs at once (until the last answered)."""
    server, token = _kubeconfig_auth(kubeconfig)

    def get(_: int = 0) -> float:
        started = time.perf_counter()
        request = urllib.request.Request(
            f"{server}/api/v1/namespaces/default", headers={"Authorization": f"Bearer {token}"}
        )
        with urllib.request.urlopen(request, timeout=30) as response:
            response.read()
        return time.perf_counter() - started

    single = statistics.median(get() for _ in range(20))
    with ThreadPoolExecutor(32) as pool:
        started = time.perf_counter()
        list(pool.map(get, range(32)))
        together = time.perf_counter() - started
    return single, together


@dataclass
class KubectlRun:
    seconds: float = 0.0
    requests: int = 0
    resource_calls: int = 0
    sandbox_cpu_s: float = 0.0
    own_cpu_s: float = 0.0
    calls: dict[str, int] = field(default_factory=dict)


def kubectl_apply(sandbox: SandboxProcess, names: list[str], total: KubectlRun) -> None:
    """``kubectl apply -f -`` of ``names``' manifests, adding its time, requests and CPU to ``total``."""
    sandbox.admin("stats", "DELETE")
    sandbox_cpu = cpu_s(sandbox.proc.pid)
    children = resource.getrusage(resource.RUSAGE_CHILDREN)
    total.seconds += kubectl(sandbox.kubeconfig, "apply", "-f", "-", stdin=manifests(names))
    after = resource.getrusage(resource.RUSAGE_CHILDREN)
    total.own_cpu_s += (after.ru_utime - children.ru_utime) + (after.ru_stime - children.ru_stime)
    total.sandbox_cpu_s += cpu_s(sandbox.proc.pid) - sandbox_cpu
    stats = sandbox.admin("stats")
    client = stats["clients"].get("sandbox-admin", {})
    total.requests += int(client.get("requests", 0))
    calls = stats["calls"].get("sandbox-admin", {})
    total.resource_calls += sum(n for key, n in calls.items() if key.endswith(" namespaceoffloadings"))
    for key, n in calls.items():
        if key.split(" ")[0] in WRITE_VERBS:
            total.calls[key] = total.calls.get(key, 0) + n


def flags(run: KubectlRun, expected_s: float, single_s: float, together_s: float) -> list[str]:
    flags = []
    if together_s > 3 * single_s:
        flags.append(
            f"32 requests at once took {together_s * 1000:.0f} ms against {single_s * 1000:.0f} ms for one: the "
            "sandbox does not overlap them (threaded server, latency as a sleep without a lock?)"
        )
    if expected_s and run.seconds > SLOW_REFERENCE * expected_s:
        busy = run.sandbox_cpu_s / run.seconds
        if busy > 0.8:
            why = f"the sandbox was CPU-bound ({busy:.0%} of a core)"
        elif run.own_cpu_s / run.seconds > 0.5:
            why = f"kubectl itself was busy on the CPU ({run.own_cpu_s:.0f} s of {run.seconds:.0f} s)"
        else:
            load = os.getloadavg()[0]
            why = (
                f"neither the sandbox ({busy:.0%} of a core) nor kubectl ({run.own_cpu_s:.0f} s CPU) was busy: "
                f"the machine's other load (load average {load:.1f} on {os.cpu_count()} cores) slowed it"
            )
        flags.append(
            f"kubectl apply took {run.seconds:.1f} s, {run.seconds / expected_s:.1f}x the {expected_s:.1f} s its "
            f"{run.requests:,} requests imply at {single_s * 1000:.0f} ms each: the reference ran slower than the "
            f"latency allows ({why}); compare with bulk_vs_kubectl_expected_ratio"
        )
    return flags
