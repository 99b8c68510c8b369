"""Plumbing shared by the benchmarks: the throwaway Django environment, the processes they start and the
sandbox fleet (the counters of API requests, SQL queries and times: bench/counters.py)."""

from __future__ import annotations

import argparse
import json
import math
import os
import re
import shutil
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, TypeVar

from bench import offloading_mix

ROOT = Path(__file__).resolve().parent.parent

T = TypeVar("T")


def fleet_size(text: str) -> tuple[int, int]:
    """An argparse type: "1000x20" as (namespaces, clusters), both at least one."""
    try:
        namespaces, clusters = (int(part) for part in text.lower().split("x"))
    except ValueError:
        raise argparse.ArgumentTypeError(f"expected NAMESPACESxCLUSTERS, e.g. 1000x20, not {text!r}") from None
    if namespaces < 1 or clusters < 1:
        raise argparse.ArgumentTypeError("a fleet needs at least one namespace and one cluster")
    return namespaces, clusters


def setup_django(var_dir: Path) -> None:
    """Point Django at a fresh SQLite file in ``var_dir`` (never the project's var/ nor DATABASE_URL),
    with the test settings (eager Celery, local-memory cache, no real cluster), and migrate it."""
    os.environ["LIQO_DASH_VAR_DIR"] = str(var_dir)
    os.environ["DATABASE_URL"] = f"sqlite:///{var_dir / 'bench.sqlite3'}"
    os.environ["DJANGO_SETTINGS_MODULE"] = "liqo_dash.settings_test"
    os.environ.setdefault("LOG_LEVEL", "WARNING")
    import django

    django.setup()
    from django.core.management import call_command

    call_command("migrate", verbosity=0)


_MAIN_DATABASE: list[str] = []  # the benchmark's own SQLite file, while use_database points elsewhere


def keep_database(path: Path) -> str:
    """Copy the current SQLite database to ``path`` (SQLite's online backup: the same pages in the same
    order, not a compacted copy) and return the path, for ``use_database``."""
    import sqlite3

    from django.db import connection

    connection.close()
    source, copy = sqlite3.connect(connection.settings_dict["NAME"]), sqlite3.connect(path)
    try:
        source.backup(copy)
    finally:
        source.close()
        copy.close()
    return str(path)


def use_database(path: str | None) -> None:
    """Point Django's default database at the SQLite file ``path`` (None: back at the benchmark's own)."""
    from django.db import connection

    connection.close()
    if not _MAIN_DATABASE:
        _MAIN_DATABASE.append(connection.settings_dict["NAME"])
    connection.settings_dict["NAME"] = path or _MAIN_DATABASE[0]


def reset_database() -> None:
    """Empty every table (the next refresh is a cold one, as on a fresh install)."""
    from django.core.management import call_command

    call_command("flush", interactive=False, verbosity=0)


class Run:
    """A benchmark run from the command line: its scratch directory (the database, kubeconfigs and
    logs; removed at the end unless kept) and its progress log, lines on stderr stamped with the
    seconds since the start."""

    def __init__(self, prefix: str) -> None:
        self.var_dir = Path(tempfile.mkdtemp(prefix=prefix))
        self.started = time.perf_counter()

    def elapsed(self) -> float:
        return time.perf_counter() - self.started

    def log(self, message: str) -> None:
        print(f"[{self.elapsed():6.1f}s] {message}", file=sys.stderr, flush=True)

    def end(self, keep: bool) -> None:
        if keep:
            print(f"kept {self.var_dir}", file=sys.stderr)
        else:
            shutil.rmtree(self.var_dir, ignore_errors=True)


# --------------------------------------------------------------------------------------------------
# The sandbox fleet


def serve_sandbox(log: Path, *args: str) -> subprocess.Popen[bytes]:
    """``python -m sandbox serve --port 0 ARGS`` in its own process from the project root, its output in
    ``log`` (where it says what it listens on): how every benchmark starts its sandbox."""
    with open(log, "wb") as out:
        return subprocess.Popen(
            [sys.executable, "-m", "sandbox", "serve", "--port", "0", *args],
            cwd=ROOT,
            stdout=out,
            stderr=subprocess.STDOUT,
        )


def await_log(
    proc: subprocess.Popen[bytes],
    log: Path,
    found: Callable[[str], T | None],
    timeout: float,
    what: str,
    stop: Callable[[], object],
    interval: float = 0.2,
) -> T:
    """Poll ``log`` until ``found`` finds what it looks for in its text (say, the URL the sandbox
    listens on) and return that; when the process exits or ``timeout`` passes first, ``stop`` it and
    raise RuntimeError with the log's tail."""
    deadline = time.monotonic() + timeout
    while True:
        text = log.read_text(errors="replace")
        result = found(text)
        if result is not None:
            return result
        if proc.poll() is not None or time.monotonic() > deadline:
            stop()
            raise RuntimeError(f"{what} did not start:\n{text[-2000:]}")
        time.sleep(interval)  # polling the log, not synchronising: the deadline bounds it


def listening_url(text: str) -> str | None:
    """The URL a single sandbox says it listens on, or None before it does."""
    match = re.search(r"sandbox listening on (\S+)", text)
    return match.group(1) if match else None


def stop_process(proc: subprocess.Popen[bytes] | None, wait_s: float) -> None:
    """SIGTERM (the sandbox and the watcher stop cleanly on it, the watcher releasing its leases), then
    SIGKILL when it has not exited after ``wait_s``."""
    if proc is None or proc.poll() is not None:
        return
    proc.terminate()
    try:
        proc.wait(wait_s)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait(10)


@dataclass
class Fleet:
    """A sandbox API server (``python -m sandbox serve``, its own process, as in production the API
    server is not in the worker's process) holding a generated fleet, with the dashboard's kube
    client pointed at it.

    Its simulated Liqo controller converges the initial fleet at once and is then frozen (a huge
    ``--controller-delay``): nothing moves between two refreshes unless the benchmark changes it."""

    namespaces: int
    clusters: int
    var_dir: Path
    proc: subprocess.Popen[bytes] | None = None
    url: str = ""
    kubeconfig: Path | None = None
    startup_s: float = 0.0
    _client: Any = None
    pods: int = 0  # demo pods in every namespace (bench/pods.py)

    @property
    def service_kubeconfig(self) -> Path:
        """A kubeconfig as the dashboard's own identity (the sandbox counts bytes per identity)."""
        return self.var_dir / f"fleet-{self.namespaces}x{self.clusters}.service.kubeconfig"

    @property
    def label(self) -> str:
        return f"{_short(self.namespaces)} ns / {self.clusters} cl"

    def __enter__(self) -> Fleet:
        from django.conf import settings

        from offloading.cluster import kube

        started = time.perf_counter()
        name = f"fleet-{self.namespaces}x{self.clusters}"
        # The sandbox generates it (same seed); @F is the fraction of namespaces offloaded.
        scenario = f"generated:{self.namespaces}x{self.clusters}{offloading_mix(self.namespaces)}"
        if self.pods:
            scenario += f"+{self.pods}"
        self.kubeconfig = self.var_dir / f"{name}.kubeconfig"
        out = self.var_dir / f"{name}.log"
        self.proc = serve_sandbox(
            out,
            "--scenario",
            str(scenario),
            "--kubeconfig",
            str(self.kubeconfig),
            "--service-kubeconfig",
            str(self.service_kubeconfig),
            "--controller-delay",
            str(FROZEN),
        )
        self.url = await_log(self.proc, out, listening_url, SANDBOX_START_TIMEOUT, "the sandbox", self.__exit__)
        self.startup_s = time.perf_counter() - started
        settings.LIQO_DASH = {
            **settings.LIQO_DASH,
            "KUBECONFIG": str(self.kubeconfig),
            "KUBE_CONFIG_MODE": "kubeconfig",
        }
        kube.reset_client()
        return self

    def __exit__(self, *exc: object) -> None:
        from offloading.cluster import kube

        kube.reset_client()
        if self._client is not None:
            self._client.close()
            self._client = None
        stop_process(self.proc, 30)
        self.proc = None

    # A second client of our own, so that the benchmark's own calls are never counted.
    def _api(self) -> Any:
        if self._client is None:
            from kubernetes import config

            self._client = config.new_client_from_config(config_file=str(self.kubeconfig))
        return self._client

    def _get(self, path: str, **query: Any) -> dict[str, Any]:
        response = self._api().call_api(
            path,
            "GET",
            query_params=list(query.items()),
            auth_settings=["BearerToken"],
            _preload_content=False,
            _return_http_data_only=True,
        )
        return json.loads(response.data)

    def object_counts(self) -> dict[str, int]:
        """How many objects of each kind the refresh lists (one-item LISTs: items + remainingItemCount)."""
        from liqo_rules import constants as liqo

        paths = {
            "foreignclusters": ("/apis/core.liqo.io/v1beta1/foreignclusters", {}),
            "virtualnodes": ("/apis/offloading.liqo.io/v1beta1/virtualnodes", {}),
            "nodes": ("/api/v1/nodes", {"labelSelector": f"{liqo.VIRTUAL_NODE_TYPE_LABEL}=virtual-node"}),
            "namespaces": ("/api/v1/namespaces", {}),
            "namespaceoffloadings": (f"/apis/{liqo.GROUP}/{liqo.VERSION}/namespaceoffloadings", {}),
        }
        counts = {}
        for kind, (path, query) in paths.items():
            page = self._get(path, limit=1, **query)
            counts[kind] = len(page.get("items") or []) + int(
                (page.get("metadata") or {}).get("remainingItemCount") or 0
            )
        return counts

    def expected_list_calls(self) -> int:
        """One LIST page per started 500 items of each kind (an empty list still takes one call), the
        NamespaceOffloadings in smaller pages (offloading.snapshot.offloadings: one page held at a time)."""
        from offloading.cluster import kube
        from offloading.snapshot.offloadings import offloading_page_size

        offloadings = offloading_page_size(self.clusters)
        return sum(
            max(1, math.ceil(n / (offloadings if kind == "namespaceoffloadings" else kube.LIST_PAGE_SIZE)))
            for kind, n in self.object_counts().items()
        )

    def change_offloading_status(self, fraction: float) -> list[str]:
        """Make Liqo report a creation failure on one selected cluster for ``fraction`` of the
        NamespaceOffloadings (through the status subresource, as Liqo's controller writes it),
        spread over the whole fleet. Returns the namespaces changed."""
        from kubernetes import client

        from liqo_rules import constants as liqo

        items = self._get(f"/apis/{liqo.GROUP}/{liqo.VERSION}/namespaceoffloadings")["items"]
        items.sort(key=lambda o: o["metadata"]["namespace"])
        candidates = [o for o in items if _ready_condition(o) is not None and not _failing(o)]
        count = min(len(candidates), max(1, round(len(items) * fraction)))
        step = max(1, len(candidates) // count) if count else 1
        custom = client.CustomObjectsApi(self._api())
        changed = []
        for obj in candidates[::step][:count]:
            ready = _ready_condition(obj)
            assert ready is not None
            ready.update(
                status="False", reason=liqo.MAPPING_CREATION_LOOP_BACKOFF, message="bench: simulated creation failure"
            )
            obj["status"]["offloadingPhase"] = liqo.PHASE_SOME_FAILED
            namespace = obj["metadata"]["namespace"]
            custom.replace_namespaced_custom_object_status(
                liqo.GROUP,
                liqo.VERSION,
                namespace,
                "namespaceoffloadings",
                liqo.OFFLOADING_NAME,
                obj,
                field_manager="liqo-controller-manager",
                _preload_content=False,
            )
            changed.append(namespace)
        return changed


# The sandbox's simulated controllers wait this long (s) before reacting to a change: never, here.
FROZEN = 10**7
SANDBOX_START_TIMEOUT = 300


def _ready_condition(obj: dict[str, Any]) -> dict[str, Any] | None:
    """The first Ready=True remote namespace condition of an offloading (a cluster where it works)."""
    for conditions in ((obj.get("status") or {}).get("remoteNamespacesConditions") or {}).values():
        for condition in conditions or []:
            if condition.get("type") == "Ready" and condition.get("status") == "True":
                return condition
    return None


def _failing(obj: dict[str, Any]) -> bool:
    return (obj.get("status") or {}).get("offloadingPhase") != "Ready"


def _short(n: int) -> str:
    return f"{n // 1000}k" if n >= 1000 and n % 1000 == 0 else str(n)
