"""The processes of a deployment for the viewers run (bench/viewers.py), as the Procfile runs them: the
web pod (gunicorn), a Celery worker and beat on Redis, and the watcher keeping the snapshot, all on the
benchmark's SQLite database and the sandbox holding the generated fleet; a bulk offload submitted to
the web pod's REST API, as a client would, then applied by the worker; and the viewers' side of HTTP
(signed-in sessions, one GET per connection)."""

from __future__ import annotations

import asyncio
import json
import os
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from bench import harness
from bench.recovery import _Pipeline
from bench.throughput import SPEC, _Watcher

BULK_SIZE = 100
BULK_TIMEOUT_S = 600.0


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def cpu_s(pids: list[int]) -> float:
    """utime + stime of ``pids``, in seconds (/proc/<pid>/stat; a process gone counts 0)."""
    ticks = os.sysconf("SC_CLK_TCK")
    total = 0
    for pid in pids:
        try:
            fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
        except OSError:
            continue
        total += int(fields[11]) + int(fields[12])  # utime, stime (fields 14 and 15 of stat)
    return total / ticks


def children(parent: int) -> list[int]:
    """The processes whose parent is ``parent``, and theirs (gunicorn's workers and their live renderers,
    a Celery worker's pool)."""
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            try:
                fields = (entry / "stat").read_text().rsplit(")", 1)[1].split()
            except OSError:
                continue
            parents[int(entry.name)] = int(fields[1])
    found: list[int] = []
    wanted = {parent}
    while wanted:
        below = [pid for pid, ppid in parents.items() if ppid in wanted]
        found.extend(below)
        wanted = set(below)
    return found


def _benchmark_web(port: int) -> list[str]:
    """gunicorn with the first viewers runs' flags (2 workers x 4 threads, access log on)."""
    return [
        sys.executable,
        "-m",
        "gunicorn",
        "liqo_dash.wsgi",
        "-c",
        "deploy/gunicorn.conf.py",
        "--bind",
        f"127.0.0.1:{port}",
        "--workers",
        "2",
        "--threads",
        "4",
        "--access-logfile",
        "-",
    ]


class WebPod:
    """The Procfile's web process on the benchmark's database (its own process group)."""

    def __init__(self, var_dir: Path, command: Callable[[int], list[str]] | None = None, **extra_env: str) -> None:
        """``command``: the argv for a port (default: gunicorn with the benchmark's own workers, threads
        and access log, as the first viewers runs measured)."""
        from django.db import connection

        self.port = _free_port()
        env = {
            **os.environ,
            "DJANGO_SETTINGS_MODULE": "liqo_dash.settings",
            "DATABASE_URL": f"sqlite:///{connection.settings_dict['NAME']}",
            "LIQO_DASH_LOCAL_CACHE": "true",  # without a deployment (extra_env): no Redis, the pages only read
            "INSECURE_HTTP": "true",
            "LOG_LEVEL": "WARNING",
            **extra_env,
        }
        self.log = var_dir / "web.log"
        with open(self.log, "wb") as out:
            self.proc = subprocess.Popen(
                (command or _benchmark_web)(self.port),
                cwd=harness.ROOT,
                env=env,
                stdout=out,
                stderr=subprocess.STDOUT,
                start_new_session=True,
            )
        deadline = time.monotonic() + 120
        while self.log.read_text(errors="replace").count("Booting worker") < 2:
            if self.proc.poll() is not None or time.monotonic() > deadline:
                self.stop()
                raise RuntimeError(f"gunicorn did not start:\n{self.log.read_text(errors='replace')[-2000:]}")
            time.sleep(0.2)
        # Each worker then loads the application and warms it (liqo_dash.warmup: views imported, templates
        # compiled): a few seconds of CPU that are no viewer's. Measured from when the pod is quiet.
        used = self.cpu_s()
        while time.monotonic() < deadline:
            time.sleep(1.0)
            used, before = self.cpu_s(), used
            if used - before < 0.05:
                break

    def cpu_s(self) -> float:
        """utime + stime of gunicorn's master and workers (and their live renderers), in seconds."""
        return cpu_s([self.proc.pid, *children(self.proc.pid)])

    def rss_mb(self) -> float:
        """The resident memory of gunicorn's master, workers and their live renderers, in MiB (what the
        web container's memory limit must hold)."""
        pages = 0
        for pid in [self.proc.pid, *children(self.proc.pid)]:
            try:
                pages += int(Path(f"/proc/{pid}/statm").read_text().split()[1])
            except (OSError, IndexError, ValueError):
                continue
        return pages * os.sysconf("SC_PAGE_SIZE") / 2**20

    def stop(self) -> None:
        if self.proc.poll() is None:
            self.proc.terminate()
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait(10)


# --------------------------------------------------------------------------------------------------
# The clients: signed-in viewers, one request per connection


def regions() -> list[tuple[str, str, float]]:
    """(name, URL, poll interval in s) of the live regions the viewers keep open."""
    from offloading.models import Cluster, Namespace

    cluster = Cluster.objects.order_by("cluster_id").values_list("cluster_id", flat=True).first() or "none"
    offloaded = Namespace.objects.filter(offloaded=True).order_by("name").values_list("name", flat=True).first()
    return [
        ("namespace list", "/namespaces/", 2.0),
        ("namespace list, filtered", "/namespaces/?phase=Ready&page=2", 2.0),
        ("overview", "/", 5.0),
        ("matrix", "/matrix/", 2.0),
        ("cluster list", "/clusters/", 2.0),
        ("cluster page", f"/clusters/{cluster}/", 5.0),
        ("namespace status", f"/namespaces/{offloaded or 'default'}/status/", 2.0),
        ("audit", "/audit/", 5.0),
    ]


def sessions(count: int) -> list[str]:
    """``count`` session cookies of signed-in users (an admin and viewers, round robin)."""
    from django.contrib.auth import get_user_model
    from django.contrib.auth.models import Group
    from django.test import Client

    users = get_user_model().objects
    people = []
    for i in range(5):
        user, _ = users.get_or_create(username=f"bench-viewer-{i}")
        if i == 0:
            user.is_superuser, user.is_staff = True, True
            user.save()
        else:
            user.groups.add(Group.objects.get_or_create(name="viewer")[0])  # gone after a flush
        people.append(user)
    cookies = []
    for i in range(count):
        client = Client()
        client.force_login(people[i % len(people)])
        cookies.append(client.cookies["sessionid"].value)
    return cookies


async def get(port: int, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], float]:
    """One GET on a new connection: (status, headers, seconds until the whole answer was read)."""
    started = time.perf_counter()
    reader, writer = await asyncio.open_connection("127.0.0.1", port)
    try:
        lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1", "Connection: close"]
        lines += [f"{k}: {v}" for k, v in headers.items()]
        writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
        await writer.drain()
        head = await reader.readuntil(b"\r\n\r\n")
        status_line, *rest = head.decode("latin-1").split("\r\n")
        answer = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in rest if line)}
        length = int(answer.get("content-length") or 0)
        if length:
            await reader.readexactly(length)
        elif "chunked" in answer.get("transfer-encoding", "") or int(status_line.split()[1]) not in (204, 304):
            await reader.read()  # until the server closes
        return int(status_line.split()[1]), answer, time.perf_counter() - started
    finally:
        writer.close()


# --------------------------------------------------------------------------------------------------
# The deployment and its bulk


@dataclass
class BulkRun:
    """One bulk offload through the API, from the POST until the snapshot shows every namespace offloaded."""

    namespaces: int
    request_s: float  # the POST (access reviews and dry-runs, in the web pod)
    applied_s: float  # until the worker applied the last change
    visible_s: float  # until the watcher brought the last one into the snapshot (the pages can show it)
    applied: int
    failed: int
    worker_cpu_s: float
    watcher_cpu_s: float


class Deployment:
    """Redis, a Celery worker and beat, and the watcher (``manage.py watch_cluster``) for ``fleet``: the
    snapshot is kept by the watcher's cold sync and watches, as deployed. ``web_env()`` is what the web
    pod needs to queue work and reach the API server. Stop it with :meth:`stop`."""

    def __init__(self, fleet: harness.Fleet, var_dir: Path, log: Callable[[str], None]) -> None:
        from offloading.models import SnapshotState

        assert fleet.kubeconfig is not None
        self.kubeconfig = fleet.kubeconfig
        self.pipeline = _Pipeline(var_dir, fleet.kubeconfig)
        self.pipeline.env.update({"DATABASE_URL": os.environ["DATABASE_URL"], "LIQO_DASH_VAR_DIR": str(var_dir)})
        self.pipeline.env.pop("KUBE_REQUEST_TIMEOUT", None)  # the default, as deployed (the recovery run's is 2 s)
        self.watcher: _Watcher | None = None
        self._token = ""
        try:
            self.pipeline.start()
            started = time.monotonic()
            self.watcher = _Watcher(var_dir, fleet.kubeconfig, self.pipeline.env)
            deadline = started + 900
            while not SnapshotState.objects.filter(last_success_at__isnull=False).exists():
                if self.watcher.proc.poll() is not None or time.monotonic() > deadline:
                    text = self.watcher.log.read_text(errors="replace")[-3000:]
                    raise RuntimeError(f"the watcher did not sync the fleet:\n{text}")
                time.sleep(0.5)
            log(f"viewers: the watcher synced {fleet.label} in {time.monotonic() - started:.0f} s")
        except BaseException:
            self.stop()
            raise

    def web_env(self) -> dict[str, str]:
        keys = ("REDIS_URL", "KUBECONFIG", "KUBE_CONFIG_MODE", "CELERY_TASK_ALWAYS_EAGER", "LIQO_DASH_LOCAL_CACHE")
        return {key: self.pipeline.env[key] for key in keys}

    def worker_pids(self) -> list[int]:
        worker = next(p for p in self.pipeline.procs if isinstance(p.args, list) and "worker" in p.args)
        return [worker.pid, *children(worker.pid)]

    def token(self) -> str:
        """An API token of an admin (the bulk's author), issued once."""
        if not self._token:
            from django.contrib.auth import get_user_model

            from access.models import ApiToken

            model = get_user_model()
            user = model.objects.filter(username="bench-bulk").first() or model.objects.create_superuser(
                "bench-bulk", "bench-bulk@example.com", "bench-bulk-password"
            )
            self._token = ApiToken.issue(user, "viewers bench")[1]
        return self._token

    def bulk(self, port: int, size: int = BULK_SIZE) -> BulkRun:
        """Offload ``size`` namespaces that are not offloaded (the first by name) through the web pod's
        REST API (``POST /api/v1/bulk/``, a selector on their names), then wait until the worker applied
        every change and the watcher brought every NamespaceOffloading into the snapshot."""
        from django.db import connection
        from django.db.models import Count

        from offloading.choices import ChangeState
        from offloading.models import ChangeRequest, Namespace

        assert self.watcher is not None
        names = candidates()[:size]
        if len(names) < size:
            raise RuntimeError(f"only {len(names)} namespaces left to offload, {size} wanted")
        body = {
            "action": "offload",
            "namespaceSelector": f"kubernetes.io/metadata.name in ({','.join(names)})",
            "spec": SPEC,
        }
        cpu_before = cpu_s(self.worker_pids()), cpu_s([self.watcher.proc.pid])
        started = time.monotonic()
        request = urllib.request.Request(
            f"http://127.0.0.1:{port}/api/v1/bulk/",
            data=json.dumps(body).encode(),
            method="POST",
            headers={"Content-Type": "application/json", "Authorization": f"Bearer {self.token()}"},
        )
        try:
            with urllib.request.urlopen(request, timeout=BULK_TIMEOUT_S) as response:
                created = json.loads(response.read())
        except urllib.error.HTTPError as exc:
            raise RuntimeError(f"POST /api/v1/bulk/ answered {exc.code}: {exc.read()[:2000]!r}") from None
        request_s = time.monotonic() - started
        if created.get("total") != size:
            raise RuntimeError(f"the bulk selected {created.get('total')} namespaces, {size} expected: {created}")
        changes = ChangeRequest.objects.filter(bulk_id=created["id"])
        offloaded = Namespace.objects.filter(name__in=names, offloaded=True)
        applied_s = 0.0
        try:
            while True:
                now = time.monotonic() - started
                if not applied_s and not changes.filter(state__in=ChangeState.pending()).exists():
                    applied_s = now
                if applied_s and offloaded.count() >= changes.filter(state=ChangeState.APPLIED).count():
                    break
                if now > BULK_TIMEOUT_S:
                    states = dict(changes.values_list("state").annotate(n=Count("id")))
                    raise RuntimeError(
                        f"the bulk did not finish in {BULK_TIMEOUT_S:.0f} s: changes by state {states}, "
                        f"{offloaded.count()} of {size} offloaded in the snapshot"
                    )
                time.sleep(0.1)
            return BulkRun(
                namespaces=size,
                request_s=round(request_s, 2),
                applied_s=round(applied_s, 2),
                visible_s=round(time.monotonic() - started, 2),
                applied=changes.filter(state=ChangeState.APPLIED).count(),
                failed=changes.filter(state=ChangeState.FAILED).count(),
                worker_cpu_s=round(cpu_s(self.worker_pids()) - cpu_before[0], 2),
                watcher_cpu_s=round(cpu_s([self.watcher.proc.pid]) - cpu_before[1], 2),
            )
        finally:
            connection.close()  # called from a thread of its own

    def stop(self) -> None:
        if self.watcher is not None:
            self.watcher.stop()
        self.pipeline.stop()


def candidates() -> list[str]:
    """The namespaces a bulk may offload: not offloaded, not a system namespace; by name."""
    from liqo_rules.spec import is_system_namespace
    from offloading.models import Namespace

    names = Namespace.objects.filter(offloaded=False).order_by("name").values_list("name", flat=True)
    return [name for name in names if not is_system_namespace(name)]


# --------------------------------------------------------------------------------------------------
# The viewers' connections: kept alive, as a browser keeps them


class KeptConnection:
    """One HTTP/1.1 connection reused for a poller's requests (opened again when the server closed it)."""

    def __init__(self, port: int) -> None:
        self.port = port
        self.streams: tuple[asyncio.StreamReader, asyncio.StreamWriter] | None = None
        self.opened = 0  # how many times it was (re)opened

    def close(self) -> None:
        if self.streams is not None:
            self.streams[1].close()
            self.streams = None

    async def get(self, path: str, headers: dict[str, str]) -> tuple[int, dict[str, str], float]:
        """(status, headers, seconds until the whole answer was read), as viewers_pod.get."""
        started = time.perf_counter()
        for attempt in range(2):
            reused = self.streams is not None
            if self.streams is None:
                self.streams = await asyncio.open_connection("127.0.0.1", self.port)
                self.opened += 1
            reader, writer = self.streams
            try:
                lines = [f"GET {path} HTTP/1.1", "Host: 127.0.0.1", *(f"{k}: {v}" for k, v in headers.items())]
                writer.write(("\r\n".join(lines) + "\r\n\r\n").encode())
                await writer.drain()
                head = await reader.readuntil(b"\r\n\r\n")
                status_line, *rest = head.decode("latin-1").split("\r\n")
                answer = {k.lower(): v.strip() for k, _, v in (line.partition(":") for line in rest if line)}
                status = int(status_line.split()[1])
                if "chunked" in answer.get("transfer-encoding", ""):
                    while size := int((await reader.readuntil(b"\r\n")).split(b";")[0], 16):
                        await reader.readexactly(size + 2)
                    while await reader.readuntil(b"\r\n") != b"\r\n":
                        pass  # trailers
                elif status not in (204, 304):
                    await reader.readexactly(int(answer.get("content-length") or 0))
                if answer.get("connection", "").lower() == "close":
                    self.close()
                return status, answer, time.perf_counter() - started
            except (OSError, asyncio.IncompleteReadError):
                self.close()
                if not reused or attempt:
                    raise
                started = time.perf_counter()  # the server had closed it while idle: once more, anew
        raise AssertionError("unreachable")
