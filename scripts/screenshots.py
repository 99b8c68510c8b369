"""Take screenshots of liqo-dash with Debian's Chromium, to look at what we build at realistic sizes.

    .venv/bin/python scripts/screenshots.py URL USER PASSWORD [OUT_DIR]   # a running liqo-dash (make run)
    .venv/bin/python scripts/screenshots.py --fleet demo [OUT_DIR]         # its own sandbox and dashboard
    .venv/bin/python scripts/screenshots.py --fleet 10000x50 [OUT_DIR]     # 10,000 namespaces, 50 peers

Pages, each at 1440 px and at 420 px wide (`<page>-<width>.png`): the overview, the cluster list, the
busiest peer's page, the first consumer peer's page (what it offloads here), the namespace list, the
matrix, a namespace in trouble, the audit page; at 1440 px also the offload form with a live preview,
changes and bulk. With --fleet the script starts the sandbox (`python -m sandbox serve --scenario demo`
or `generated:NxK`), the watcher and gunicorn on a fresh database in a temporary directory, waits until
the watcher has listed everything, and stops them all at the end; a generated fleet (all healthy) gets
one peer with its offloading module down first, so the pages show an unhealthy peer and a namespace
diagnosed on it. Default OUT_DIR: screenshots/<fleet> (gitignored).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

ROOT = Path(__file__).resolve().parent.parent
ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]
WIDTHS = (1440, 420)
# The link of the peer hosting the most namespaces (the last column of the cluster list).
BUSIEST_PEER = """() => {
  let best = null, most = -1;
  for (const row of document.querySelectorAll("main tbody tr")) {
    const link = row.querySelector("td a"), cells = row.querySelectorAll("td");
    const hosted = parseInt(cells[cells.length - 1].innerText, 10);
    if (link && hosted > most) { most = hosted; best = link.getAttribute("href"); }
  }
  return best;
}"""


def _shot(page: Any, out: Path, name: str, width: int) -> None:
    page.wait_for_load_state("networkidle")
    page.screenshot(path=str(out / f"{name}-{width}.png"), full_page=True)


def _first_link(page: Any, base: str, path: str, selector: str) -> str | None:
    page.goto(f"{base}{path}")
    link = page.locator(selector).first
    return link.get_attribute("href") if link.count() else None


def insight_pages(page: Any, base: str, out: Path, width: int) -> None:
    """The pages every size must keep readable, at one width."""
    page.set_viewport_size({"width": width, "height": 900})
    for path, name in (
        ("/", "overview"),
        ("/clusters/", "clusters"),
        ("/namespaces/", "namespaces"),
        ("/matrix/", "matrix"),
        ("/audit/", "audit"),
    ):
        page.goto(f"{base}{path}")
        _shot(page, out, name, width)
    page.goto(f"{base}/clusters/")
    peer = page.evaluate(BUSIEST_PEER)
    if peer:
        page.goto(f"{base}{peer}")
        _shot(page, out, "cluster-detail", width)
    consumer = _first_link(page, base, "/clusters/", "main td a[href$='#tenant']")  # what a consumer offloads here
    if consumer:
        page.goto(f"{base}{consumer.split('#')[0]}")
        _shot(page, out, "cluster-consumer", width)
    troubled = None
    # A namespace in trouble: a phase that is not Ready, else one on an unhealthy peer, else any.
    unhealthy = _first_link(page, base, "/", "a.badge.bad[href^='/clusters/']")
    filters = ["phase=SomeFailed", "phase=AllFailed", "phase=InProgress"]
    filters += [f"cluster={unhealthy.strip('/').split('/')[-1]}"] if unhealthy else []
    for query in [*filters, "phase=Ready"]:
        troubled = _first_link(page, base, f"/namespaces/?{query}", "#namespace-table td:first-child a")
        if troubled:
            break
    if troubled:
        page.goto(f"{base}{troubled}")
        _shot(page, out, "namespace-detail", width)


def flow_pages(page: Any, base: str, out: Path) -> None:
    """The offload form with its live preview, the changes and bulk pages (wide only)."""
    page.set_viewport_size({"width": 1440, "height": 900})
    page.goto(f"{base}/namespaces/?phase=none")
    name = page.locator("#namespace-table td:first-child a").nth(3).inner_text()
    page.goto(f"{base}/namespaces/{name}/offload/")
    page.fill("textarea[name=cluster_selector]", "topology.kubernetes.io/region in (eu-west-1, eu-south-1)\n!staging")
    page.locator("#preview").get_by_text("clusters selected").wait_for()
    page.screenshot(path=str(out / "offload-form.png"), full_page=True)
    for path, shot in (("/changes/", "changes"), ("/bulk/", "bulk")):
        page.goto(f"{base}{path}")
        page.screenshot(path=str(out / f"{shot}.png"), full_page=True)


def capture(base: str, user: str, password: str, out: Path) -> list[Path]:
    out.mkdir(parents=True, exist_ok=True)
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium", args=ARGS)
        page = browser.new_page(viewport={"width": 1440, "height": 900})
        page.set_default_timeout(60_000)
        page.goto(f"{base}/accounts/login/")
        page.fill("input[name=username]", user)
        page.fill("input[name=password]", password)
        page.click("main button[type=submit]")
        page.wait_for_url(f"{base}/")  # signing in lands on the overview
        for width in WIDTHS:
            insight_pages(page, base, out, width)
        flow_pages(page, base, out)
        browser.close()
    return sorted(out.glob("*.png"))


# -- --fleet: a sandbox, the watcher and the web server of our own --------------------------------------
def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _wait(what: str, predicate: Any, timeout: float) -> Any:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(0.5)
    raise SystemExit(f"timed out after {timeout:.0f}s waiting for {what}")


def _synced(db: Path, last: list[int]) -> bool:
    """The watcher listed every kind (it marked the snapshot fresh) and the namespace count holds still."""
    try:
        with sqlite3.connect(db) as conn:
            fresh = conn.execute("SELECT last_success_at FROM offloading_snapshotstate").fetchone()
            count = conn.execute("SELECT count(*) FROM offloading_namespace").fetchone()[0]
    except sqlite3.Error:
        return False
    settled = bool(fresh and fresh[0]) and count > 0 and last[-1:] == [count]
    last.append(count)
    return settled


def _unhealthy_peer(work: Path, cluster_id: str) -> None:
    """Turn a peer's offloading module unhealthy (the sandbox's admin endpoint); wait for the watcher."""
    found = re.search(r"listening on (\S+)", (work / "sandbox.log").read_text())
    assert found, "the sandbox did not say where it listens"
    body = json.dumps({"cluster": cluster_id, "offloadingHealthy": False}).encode()
    request = urllib.request.Request(f"{found.group(1)}/sandbox/peers", data=body, method="PATCH")
    with urllib.request.urlopen(request, timeout=30):
        pass

    def seen() -> bool:
        with sqlite3.connect(work / "db.sqlite3") as conn:
            query = "SELECT offloading_status FROM offloading_cluster WHERE cluster_id = ?"
            row = conn.execute(query, (cluster_id,)).fetchone()
        return bool(row and row[0] == "Unhealthy")

    _wait(f"{cluster_id} unhealthy in the snapshot", seen, 60)


@contextmanager
def fleet_dashboard(fleet: str) -> Iterator[tuple[str, str]]:
    """(URL, admin password) of a dashboard on a fresh database, watching a sandbox with ``fleet``."""
    if fleet != "demo" and not re.fullmatch(r"\d+x\d+", fleet):
        raise SystemExit(f"--fleet takes demo or NAMESPACESxCLUSTERS (10000x50), not {fleet!r}")
    work = Path(tempfile.mkdtemp(prefix="liqo-dash-shots-"))
    password = secrets.token_urlsafe(12)
    env = {
        **os.environ,
        "LIQO_DASH_VAR_DIR": str(work),
        "DATABASE_URL": f"sqlite:///{work / 'db.sqlite3'}",
        "LIQO_DASH_LOCAL_CACHE": "true",  # no Redis: nothing is queued, the pages only read
        "INSECURE_HTTP": "true",
        "KUBECONFIG": str(work / "kubeconfig"),
        "KUBE_CONFIG_MODE": "kubeconfig",
        "LIQO_DASH_LEADER_ELECTION": "false",
        "LIQO_DASH_ADMIN_PASSWORD": password,
        "PYTHONUNBUFFERED": "1",
    }
    procs: list[subprocess.Popen[bytes]] = []
    logs = []

    def start(name: str, *args: str) -> subprocess.Popen[bytes]:
        log = open(work / f"{name}.log", "wb")  # noqa: SIM115 - closed at the end
        logs.append(log)
        proc = subprocess.Popen([sys.executable, *args], cwd=ROOT, env=env, stdout=log, stderr=subprocess.STDOUT)
        procs.append(proc)
        return proc

    try:
        scenario = "demo" if fleet == "demo" else f"generated:{fleet}"
        started = time.monotonic()
        start(
            "sandbox",
            "-m",
            "sandbox",
            "serve",
            "--port",
            "0",
            "--scenario",
            scenario,
            "--kubeconfig",
            str(work / "kubeconfig"),
        )
        for command in (
            ["migrate", "--verbosity", "0"],
            ["collectstatic", "--noinput", "--verbosity", "0"],
            ["ensure_admin"],
        ):
            subprocess.run([sys.executable, "manage.py", *command], cwd=ROOT, env=env, check=True)
        _wait("the sandbox", lambda: "listening on" in (work / "sandbox.log").read_text(), 600)
        print(f"sandbox up in {time.monotonic() - started:.0f}s", flush=True)
        start("watcher", "manage.py", "watch_cluster")
        seen: list[int] = []
        _wait("the watcher's first sync", lambda: _synced(work / "db.sqlite3", seen), 900)
        print(f"snapshot synced: {seen[-1]} namespaces, {time.monotonic() - started:.0f}s", flush=True)
        if fleet != "demo":  # a generated fleet is all healthy: one peer's offloading module goes down
            _unhealthy_peer(work, "cluster-0003")
        port = _free_port()
        start(
            "web",
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
            "--timeout",
            "120",
        )
        _wait("gunicorn", lambda: "Booting worker" in (work / "web.log").read_text(), 60)
        yield f"http://127.0.0.1:{port}", password
    finally:
        for proc in reversed(procs):
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        for log in logs:
            log.close()
        shutil.rmtree(work, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--fleet", help="demo, or NAMESPACESxCLUSTERS such as 10000x50")
    parser.add_argument("args", nargs="*", help="URL USER PASSWORD [OUT_DIR], or with --fleet only [OUT_DIR]")
    options = parser.parse_args(argv)
    if options.fleet:
        if len(options.args) > 1:
            parser.error("with --fleet, give only OUT_DIR")
        out = Path(options.args[0] if options.args else ROOT / "screenshots" / options.fleet)
        with fleet_dashboard(options.fleet) as (base, password):
            shots = capture(base, "admin", password, out)
    else:
        if len(options.args) not in (3, 4):
            parser.error("give URL USER PASSWORD [OUT_DIR], or --fleet")
        base, user, password = options.args[:3]
        out = Path(options.args[3] if len(options.args) > 3 else ROOT / "screenshots" / "demo")
        shots = capture(base.rstrip("/"), user, password, out)
    print("\n".join(str(p) for p in shots))
    return 0


if __name__ == "__main__":
    sys.exit(main())
