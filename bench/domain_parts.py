"""The parts of the managed-cluster fleet run (bench/domain.py): the sandbox domain in its own process,
the watcher holding several managed clusters, and what the snapshot of each cluster weighs in the
database."""

from __future__ import annotations

import os
import re
import sqlite3
import subprocess
import time
from pathlib import Path
from typing import Any

from bench import harness, offloading_mix
from bench.sync import WatcherProcess, _rss_mb

DOMAIN_START_TIMEOUT = 600


class DomainSandbox:
    """``python -m sandbox serve --scenario domain:N/NSxK@F`` (sandbox/domain.py): N clusters in one
    process, one port and one kubeconfig context each, every cluster holding a generated fleet of NS
    namespaces and K simulated peers besides the domain's other clusters; the controllers frozen once
    the domain converged, so nothing moves unless the benchmark moves it."""

    def __init__(self, clusters: int, namespaces: int, peers: int, var_dir: Path) -> None:
        self.scenario = f"domain:{clusters}/{namespaces}x{peers}{offloading_mix(namespaces)}"
        self.kubeconfig = var_dir / "domain.kubeconfig"
        self.service_kubeconfig = var_dir / "domain.service.kubeconfig"
        self.log = var_dir / "domain-sandbox.log"
        self.count = clusters
        self.urls: dict[str, str] = {}  # cluster name -> API URL, the first the default cluster
        self.start_s = 0.0
        self.proc: subprocess.Popen[bytes] | None = None
        self._clients: dict[str, Any] = {}

    def __enter__(self) -> DomainSandbox:
        started = time.perf_counter()
        self.proc = harness.serve_sandbox(
            self.log,
            "--scenario",
            self.scenario,
            "--kubeconfig",
            str(self.kubeconfig),
            "--service-kubeconfig",
            str(self.service_kubeconfig),
            "--controller-delay",
            str(harness.FROZEN),
        )
        self.urls = harness.await_log(
            self.proc, self.log, self._every_url, DOMAIN_START_TIMEOUT, "the sandbox domain", self.__exit__
        )
        found = re.search(r"domain of \d+ clusters started in ([\d.]+)s", self.log.read_text(errors="replace"))
        self.start_s = float(found.group(1)) if found else time.perf_counter() - started
        return self

    def __exit__(self, *exc: object) -> None:
        for api in self._clients.values():
            api.close()
        self._clients.clear()
        harness.stop_process(self.proc, 60)
        self.proc = None

    def _every_url(self, text: str) -> dict[str, str] | None:
        """Each cluster's API URL (cluster name -> URL) once the log names every cluster's, else None."""
        urls = dict(re.findall(r"sandbox (\S+) listening on (\S+)", text))
        return urls if len(urls) >= self.count else None

    @property
    def names(self) -> list[str]:
        return list(self.urls)

    def api(self, cluster: str) -> Any:
        """A client of the sandbox admin for one cluster's context (the benchmark's own changes)."""
        if cluster not in self._clients:
            from kubernetes import config

            self._clients[cluster] = config.new_client_from_config(config_file=str(self.kubeconfig), context=cluster)
        return self._clients[cluster]


class FleetWatcher(WatcherProcess):
    """``manage.py watch_cluster`` as the Procfile runs it (leader election on: one Lease per managed
    cluster on the default cluster's API server), managing the kubeconfig contexts ``clusters`` (the
    first the default; none: the current context alone), as the dashboard's service account."""

    stop_wait_s = 30.0  # it releases its leases on SIGTERM

    def __init__(self, kubeconfig: Path, clusters: list[str], log: Path) -> None:
        env = dict(
            os.environ,
            KUBECONFIG=str(kubeconfig),
            KUBE_CONFIG_MODE="kubeconfig",
            LIQO_DASH_LEADER_ELECTION="true",
            LIQO_DASH_CLUSTERS=",".join(clusters),
        )
        super().__init__(env, log)

    def rss_mb(self) -> float:
        return _rss_mb(self.proc.pid, "VmRSS")

    def threads(self) -> int:
        try:
            found = re.search(r"^Threads:\s+(\d+)", Path(f"/proc/{self.proc.pid}/status").read_text(), re.M)
        except OSError:
            return 0
        return int(found.group(1)) if found else 0

    def _open(self) -> list[str]:
        fds = Path(f"/proc/{self.proc.pid}/fd")
        found = []
        for fd in fds.iterdir() if fds.is_dir() else []:
            try:
                found.append(os.readlink(fd))
            except OSError:
                continue
        return found

    def sockets(self) -> int:
        """Open sockets: its connections to the API servers (the database is a file, the cache in-process)."""
        return sum(1 for target in self._open() if target.startswith("socket:"))

    def database_connections(self, database: str) -> int:
        """Its connections to the SQLite database: each holds the file open once (its WAL and shared
        memory files apart), so they count what it would hold on PostgreSQL."""
        real = os.path.realpath(database)
        return sum(1 for target in self._open() if target == real)

    def alive(self) -> bool:
        return self.proc.poll() is None


def synced(names: list[str] | None) -> bool:
    """Whether every named managed cluster's snapshot (None: the default cluster's) had its cold sync."""
    from offloading.models import SnapshotState

    fresh = SnapshotState.objects.filter(last_success_at__isnull=False)
    if names is None:
        return fresh.filter(managed__is_default=True).exists()
    return fresh.filter(managed__name__in=names).count() == len(names)


def footprint(clusters: int) -> dict[str, Any]:
    """What the snapshot weighs: rows of every table whose rows carry their managed cluster, by table
    and per cluster, and their pages (tables and indexes, SQLite's ``dbstat``) per cluster."""
    from django.apps import apps
    from django.db import connection
    from django.db.models import Count

    tables: dict[str, Any] = {}
    for model in apps.get_models():
        if not any(field.name == "managed" for field in model._meta.concrete_fields):
            continue
        per = list(
            model._default_manager.order_by().values("managed_id").annotate(n=Count("pk")).values_list("n", flat=True)
        )
        if sum(per):
            tables[model._meta.db_table] = {"rows": sum(per), "max_rows_of_a_cluster": max(per)}
    connection.close()
    db = sqlite3.connect(connection.settings_dict["NAME"])
    try:
        owner = dict(db.execute("SELECT name, tbl_name FROM sqlite_master WHERE type IN ('table', 'index')"))
        pages = db.execute("SELECT name, SUM(pgsize) FROM dbstat GROUP BY name").fetchall()
        file_bytes = sum(int(size) for _, size in pages)
    finally:
        db.close()
    for name, size in pages:
        table = tables.get(owner.get(name, name))
        if table is not None:
            table["bytes"] = table.get("bytes", 0) + int(size)
    rows = sum(t["rows"] for t in tables.values())
    weight = sum(t.get("bytes", 0) for t in tables.values())
    return {
        "rows_per_cluster": round(rows / clusters),
        "bytes_per_cluster": round(weight / clusters),
        "database_bytes": file_bytes,
        "tables": dict(sorted(tables.items(), key=lambda item: -item[1].get("bytes", 0))),
    }
