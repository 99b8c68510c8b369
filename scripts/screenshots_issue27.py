"""Screenshots of how the pages say what issue 27 is about, and of the destructive-change confirmations.

    .venv/bin/python scripts/screenshots_issue27.py [OUT_DIR]          # default OUT_DIR: screenshots/
    .venv/bin/python scripts/screenshots_issue27.py --only confirm     # one group: demo, tenancy, runtime, confirm

Like scripts/screenshots.py --fleet, each group starts its own sandbox (``python -m sandbox serve``), the
watcher and gunicorn on a fresh database in a temporary directory, makes the state it shows through the
Kubernetes API and the sandbox's admin endpoints, and stops them all at the end. Changes apply in the web
process (CELERY_TASK_ALWAYS_EAGER: no Redis, no worker).

* demo scenario (plus a namespace liqoctl offloaded with a 64-character remote name): issue27-1 (a de-selected cluster's stale Ready), issue27-2 (a peer whose NamespaceMap Liqo
  could not patch), issue27-3 (CreationLoopBackOff: a remote name over 63 characters, a name taken on the peer);
* runtime (demo with LIQO_DASH_RUNTIME_CLASS=liqo-fast): issue27-4, the preview's RuntimeClass warning;
* tenancy scenario (Liqo v1.1.2): issue27-5 (the version), issue27-6 (cordoned tenant, quota, slices on the
  peer page; the preview's capacity), issue27-7 (stuck pods and the fix), issue27-8 (a DaemonSet pod on a
  virtual node and the affinity patch);
* confirm (demo): the edit form's confirmation checkbox, the unoffload page, the bulk page's typed count and
  the re-apply confirmation page.

Each is 1440 px wide, from the top of the page down to the region that says it. Takes about 3 minutes.
"""

from __future__ import annotations

import argparse
import json
import os
import re
import secrets
import shutil
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from playwright.sync_api import sync_playwright

sys.path.insert(0, str(Path(__file__).resolve().parent))
from screenshots import ARGS, _free_port, _synced, _wait  # noqa: E402 - the sibling script's helpers

ROOT = Path(__file__).resolve().parent.parent


@dataclass
class Dashboard:
    """A sandbox, its watcher and one web server, on a fresh database in ``work``."""

    work: Path
    env: dict[str, str]
    sandbox_url: str = ""
    base: str = ""
    password: str = ""
    procs: list[subprocess.Popen[bytes]] = field(default_factory=list)

    def start(self, name: str, *args: str, env: dict[str, str] | None = None) -> subprocess.Popen[bytes]:
        with open(self.work / f"{name}.log", "wb") as log:  # the child keeps its own descriptor
            proc = subprocess.Popen(
                [sys.executable, *args], cwd=ROOT, env=env or self.env, stdout=log, stderr=subprocess.STDOUT
            )
        self.procs.append(proc)
        return proc

    def kubectl(self, *args: str, stdin: str | None = None) -> str:
        """kubectl against the sandbox (client-go sends no token over http: the policy's anonymous admin)."""
        env = {**os.environ, "KUBECONFIG": str(self.work / "kubeconfig")}
        done = subprocess.run(["kubectl", *args], env=env, input=stdin, capture_output=True, text=True, check=False)
        if done.returncode:
            raise SystemExit(f"kubectl {' '.join(args)}: {done.stderr.strip()}")
        return done.stdout

    def admin(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        """The sandbox's own endpoints (/sandbox/peers, /sandbox/idle, /sandbox/faults)."""
        data = json.dumps(body).encode() if body is not None else None
        request = urllib.request.Request(f"{self.sandbox_url}/sandbox/{path}", data=data, method=method)
        with urllib.request.urlopen(request, timeout=60) as answer:
            return json.loads(answer.read() or b"null")

    def idle(self) -> None:
        self.admin("POST", "idle", {"timeout": 20})

    def web(self, extra_env: dict[str, str] | None = None) -> str:
        """Start a gunicorn on this database (``extra_env`` on top of the dashboard's): its URL."""
        port = _free_port()
        name = f"web-{port}"
        self.start(
            name,
            "-m",
            "gunicorn",
            "liqo_dash.wsgi",
            "-c",
            "deploy/gunicorn.conf.py",
            "--bind",
            f"127.0.0.1:{port}",
            "--workers",
            "1",
            "--threads",
            "4",
            "--timeout",
            "120",
            env={**self.env, **(extra_env or {})},
        )
        _wait("gunicorn", lambda: "Booting worker" in (self.work / f"{name}.log").read_text(), 60)
        return f"http://127.0.0.1:{port}"


@contextmanager
def dashboard(scenario: str | Callable[[Path], str]) -> Iterator[Dashboard]:
    """A dashboard watching a sandbox with ``scenario`` (a name, or what writes a scenario file into the
    work directory and returns its path), everything stopped and removed at the end."""
    work = Path(tempfile.mkdtemp(prefix="liqo-dash-issue27-"))
    if callable(scenario):
        scenario = scenario(work)
    password = secrets.token_urlsafe(12)
    env = {
        **os.environ,
        "LIQO_DASH_VAR_DIR": str(work),
        "DATABASE_URL": f"sqlite:///{work / 'db.sqlite3'}",
        "LIQO_DASH_LOCAL_CACHE": "true",
        "CELERY_TASK_ALWAYS_EAGER": "true",  # a change applies in the web process: no Redis, no worker
        "INSECURE_HTTP": "true",
        "KUBECONFIG": str(work / "kubeconfig"),
        "KUBE_CONFIG_MODE": "kubeconfig",
        "LIQO_DASH_LEADER_ELECTION": "false",
        "LIQO_DASH_ADMIN_PASSWORD": password,
        "PYTHONUNBUFFERED": "1",
    }
    dash = Dashboard(work=work, env=env, password=password)
    try:
        started = time.monotonic()
        kubeconfig = str(work / "kubeconfig")
        dash.start(
            "sandbox", "-m", "sandbox", "serve", "--port", "0", "--scenario", scenario, "--kubeconfig", kubeconfig
        )
        for command in (
            ["migrate", "--verbosity", "0"],
            ["collectstatic", "--noinput", "--verbosity", "0"],
            ["ensure_admin"],
        ):
            subprocess.run([sys.executable, "manage.py", *command], cwd=ROOT, env=env, check=True)
        _wait("the sandbox", lambda: "listening on" in (work / "sandbox.log").read_text(), 600)
        found = re.search(r"listening on (\S+)", (work / "sandbox.log").read_text())
        assert found, "the sandbox did not say where it listens"
        dash.sandbox_url = found.group(1)
        dash.start("watcher", "manage.py", "watch_cluster")
        seen: list[int] = []
        _wait("the watcher's first sync", lambda: _synced(work / "db.sqlite3", seen), 600)
        print(f"{Path(scenario).stem}: {seen[-1]} namespaces synced in {time.monotonic() - started:.0f}s", flush=True)
        dash.base = dash.web()
        yield dash
    finally:
        for proc in reversed(dash.procs):
            proc.terminate()
            try:
                proc.wait(20)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait(10)
        shutil.rmtree(work, ignore_errors=True)


# -- the browser side ----------------------------------------------------------------------------------
# Idle: nothing in flight (htmx marks the element that sent a request with ``htmx-request``) and the last
# keystroke older than the longest trigger delay on these pages (300 ms) plus a margin.
TRACK_INPUT = """(() => {
  window.__typedAt = -Infinity;
  const mark = () => { window.__typedAt = performance.now(); };
  document.addEventListener("input", mark, true);
  document.addEventListener("change", mark, true);
})();"""
IDLE = """() => document.readyState === "complete" && !document.querySelector(".htmx-request")
  && performance.now() - window.__typedAt > 1200"""
MAX_BYTES = 400_000


def settle(page: Any) -> None:
    page.wait_for_timeout(100)
    page.wait_for_function(IDLE, polling=100)


def sign_in(page: Any, base: str, password: str) -> None:
    page.goto(f"{base}/accounts/login/")
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", password)
    page.click("main button[type=submit]")
    page.wait_for_url(f"{base}/")


def until(page: Any, url: str, text: str, timeout: float = 90) -> None:
    """Open ``url`` and reload until the page says ``text`` (the watcher writes the snapshot meanwhile)."""
    page.goto(url)
    deadline = time.monotonic() + timeout
    while text not in page.locator("main").inner_text():
        if time.monotonic() > deadline:
            raise SystemExit(f"{url} did not say {text!r} within {timeout:.0f}s")
        page.wait_for_timeout(1000)
        page.goto(url)
    settle(page)


def region(page: Any, last: str, first: str | None = None, pad: int = 16) -> dict[str, float]:
    """The page's full width from ``first``'s top (the page's top when None) to ``last``'s bottom."""
    box = page.evaluate(
        """([first, last]) => {
          const top = (sel) => sel ? document.querySelector(sel).getBoundingClientRect().top + scrollY : 0;
          const el = document.querySelector(last);
          return {top: top(first), bottom: el.getBoundingClientRect().bottom + scrollY,
                  width: document.documentElement.clientWidth};
        }""",
        [first, last],
    )
    top = max(0.0, box["top"] - (pad if first else 0))
    return {"x": 0, "y": top, "width": box["width"], "height": box["bottom"] + pad / 2 - top}


def save(page: Any, out: Path, name: str, clip: dict[str, float] | None = None) -> Path:
    """A PNG of ``clip`` (a region of the whole page) or of the viewport; say when it is large."""
    settle(page)
    path = out / f"{name}.png"
    if clip:
        page.screenshot(path=str(path), clip=clip, full_page=True)
    else:
        page.screenshot(path=str(path))
    size = path.stat().st_size
    print(f"{path.name}: {size // 1000} kB{'  (over 400 kB)' if size > MAX_BYTES else ''}", flush=True)
    return path


def offload_form(page: Any, base: str, name: str, selector: str, strategy: str | None = None) -> None:
    """The offload (or edit) form of ``name`` with the selector typed in and its preview settled."""
    page.goto(f"{base}/namespaces/{name}/offload/")
    if strategy:
        page.select_option("select[name=pod_offloading_strategy]", strategy)
    page.fill("textarea[name=cluster_selector]", selector)
    # Leaving the box fires one more preview, which re-renders the confirmation box out of band: a tick
    # made before that preview lands is lost, so leave the box and wait for it first.
    page.locator("textarea[name=cluster_selector]").blur()
    settle(page)
    page.locator("#preview").get_by_text("selected").first.wait_for()


def submit(page: Any, *, label: bool = False, confirm: bool = False) -> None:
    """Submit the offload form (ticking the label and the destructive-change boxes when asked): the change
    applies in the web process, its page opens."""
    if label:
        page.check("input[name=label_namespace]")
    if confirm:
        page.check("#id_confirm")
        settle(page)
    page.click("#offload-form button[type=submit]")
    page.wait_for_url(re.compile(r"/changes/\d+/$"))
    page.locator("main").get_by_text("NamespaceOffloading").first.wait_for()


# -- the groups ----------------------------------------------------------------------------------------
LONG_NAME = "recommendation-engine-feature-store-materialization-eu-prod"  # 59 + "-rome": 64 characters


def demo_scenario(work: Path) -> str:
    """The demo fleet plus a namespace liqoctl offloaded whose DefaultName remote name is 64 characters
    (liqo-dash's own form refuses it, liqoctl does not): a scenario file in ``work``."""
    import yaml

    data = yaml.safe_load((ROOT / "sandbox" / "scenarios" / "demo.yaml").read_text())
    data["namespaces"].append(
        {
            "name": LONG_NAME,
            "labels": {"team": "ml", "env": "prod"},
            "offloading": {"podOffloadingStrategy": "Remote", "selector": ["liqo.io/provider=eks"]},
        }
    )
    path = work / "demo-issue27.yaml"
    path.write_text(yaml.safe_dump(data, sort_keys=False))
    return str(path)


def status_region(page: Any) -> dict[str, float]:
    """A namespace page from its top to the per-cluster table."""
    return region(page, "#ns-status table")


def demo_group(page: Any, dash: Dashboard, out: Path) -> list[Path]:
    """Issue 27 items 1-3 on the demo fleet."""
    base, shots = dash.base, []
    # 1. web-backend offloaded by liqo-dash to eu-south-1 (milan, turin), then the staging peer left out:
    # turin keeps Liqo's Ready=False (Terminating) next to OffloadingRequired=False.
    offload_form(page, base, "web-backend", "topology.kubernetes.io/region=eu-south-1")
    submit(page)
    until(page, f"{base}/namespaces/web-backend/", "Namespace correctly offloaded", 120)
    dash.idle()
    offload_form(page, base, "web-backend", "topology.kubernetes.io/region=eu-south-1,!staging")
    submit(page, confirm=True)  # turin loses the twin namespace: destructive
    until(page, f"{base}/namespaces/web-backend/", "still says Terminating")
    shots.append(save(page, out, "issue27-1-stale-ready", status_region(page)))

    # 2. milan refuses the NamespaceMap patch (only Liqo's log says it): mobile-api's status looks settled
    # on turin, milan is never taken up.
    dash.admin("PATCH", "peers", {"cluster": "milan", "namespaceMapWritable": False})
    offload_form(page, base, "mobile-api", "topology.kubernetes.io/region=eu-south-1")
    submit(page, label=True)
    dash.idle()
    dash.admin("PATCH", "peers", {"cluster": "milan", "namespaceMapWritable": True})  # no retry until a change
    until(page, f"{base}/namespaces/mobile-api/", "Liqo has not taken up milan")
    page.wait_for_timeout(20_000)  # "since" a little while ago
    page.reload()
    shots.append(save(page, out, "issue27-2-not-taken-up", status_region(page)))

    # 3. CreationLoopBackOff: EnforceSameName where milan already has the name (the demo's checkout-prod),
    # and a DefaultName remote name of 64 characters.
    until(page, f"{base}/namespaces/checkout-prod/", "CreationLoopBackOff")
    shots.append(save(page, out, "issue27-3-loopbackoff-name-taken", status_region(page)))
    until(page, f"{base}/namespaces/{LONG_NAME}/", "no more than 63 characters")
    shots.append(save(page, out, "issue27-3-loopbackoff-name-too-long", status_region(page)))
    return shots


def runtime_group(page: Any, dash: Dashboard, out: Path) -> list[Path]:
    """Issue 27 item 4: a web server configured with a renamed RuntimeClass (liqo-fast), the offload
    form's preview of what the webhook adds to a pod."""
    base = dash.web({"LIQO_DASH_RUNTIME_CLASS": "liqo-fast"})
    sign_in(page, base, dash.password)
    offload_form(page, base, "notifications", "topology.kubernetes.io/region=eu-south-1", strategy="Remote")
    page.locator("#preview-webhook summary").click()
    settle(page)
    return [save(page, out, "issue27-4-runtime-class", region(page, "#preview-webhook"))]


def confirm_group(page: Any, dash: Dashboard, out: Path) -> list[Path]:
    """The destructive-change confirmations: the edit form's box, unoffload, bulk's typed count, and the
    page that asks before re-applying."""
    base, shots = dash.base, []
    # The edit form: LocalAndRemote to Remote (3 pods run on local nodes).
    offload_form(page, base, "web-frontend", "liqo.io/provider=eks", strategy="Remote")
    page.locator("#destructive-box .confirm-box").wait_for()
    page.check("#id_confirm")
    shots.append(save(page, out, "confirm-edit-checkbox", region(page, "#offload-form")))
    # Unoffload: the twin namespace on milan and the pod running there go.
    page.goto(f"{base}/namespaces/web-frontend/unoffload/")
    page.fill("input[name=confirm]", "web-frontend")
    shots.append(save(page, out, "confirm-unoffload", region(page, "main article")))
    # Bulk: team=web in prod to Remote on milan; web-frontend's local pods no longer satisfy it.
    page.goto(f"{base}/bulk/")
    page.check("input[name=action][value=offload]")
    page.fill("[name=namespace_selector]", "team=web,env=prod")
    page.select_option("select[name=pod_offloading_strategy]", "Remote")
    page.fill("textarea[name=cluster_selector]", "liqo.io/provider=eks")
    page.locator("textarea[name=cluster_selector]").blur()
    settle(page)
    page.locator("#bulk-destructive").wait_for()
    count = page.locator("#bulk-impact header strong").first.inner_text().split()[0]
    page.fill("#id_confirm_count", count)
    page.locator("#id_confirm_count").blur()
    settle(page)
    assert page.input_value("#id_confirm_count") == count, "the typed count was lost"
    shots.append(save(page, out, "confirm-bulk-typed-count", region(page, ".two-col")))
    # Re-apply mine: liqo-dash set media-staging to Remote, someone set it back with kubectl; re-applying
    # mine asks first, with why.
    offload_form(page, base, "media-staging", "staging", strategy="Remote")
    submit(page, confirm=True)
    dash.idle()
    patch = {"spec": {"podOffloadingStrategy": "LocalAndRemote"}}
    dash.kubectl("-n", "media-staging", "patch", "nsoff", "offloading", "--type", "merge", "-p", json.dumps(patch))
    until(page, f"{base}/namespaces/media-staging/", "Re-apply mine")
    page.get_by_role("button", name=re.compile("Re-apply mine")).click()
    page.locator("#confirm-destructive").wait_for()
    shots.append(save(page, out, "confirm-reapply-page", region(page, "main article")))
    return shots


ORPHANED_MAP = """apiVersion: v1
kind: Namespace
metadata: {name: liqo-tenant-venice}
---
apiVersion: offloading.liqo.io/v1beta1
kind: NamespaceMap
metadata:
  name: venice
  namespace: liqo-tenant-venice
  labels: {liqo.io/replication: "true", liqo.io/remoteID: venice, liqo.io/remote-cluster-id: venice}
spec: {}
---
apiVersion: v1
kind: Namespace
metadata: {name: payments, labels: {team: payments}}
"""


def tenancy_group(page: Any, dash: Dashboard, out: Path) -> list[Path]:
    """Issue 27 items 5-8 on the tenancy scenario (Liqo v1.1.2, florence has cordoned our tenant, milan's
    Hard quota, the consumer bologna cordoned here, stuck pods, a DaemonSet pod on a virtual node)."""
    base, shots = dash.base, []
    # 6. Resources, quota and cordons: on a provider's page, on a consumer's, and in the preview.
    until(page, f"{base}/clusters/florence/", "refuses new pods from this cluster")
    shots.append(save(page, out, "issue27-6-peer-cordoned", region(page, "#peer-resources")))
    until(page, f"{base}/clusters/bologna/", "is cordoned")
    shots.append(save(page, out, "issue27-6-consumer-cordoned", region(page, "#peer-resources")))
    offload_form(page, base, "batch", "topology.kubernetes.io/region in (europe-west8, eu-south-1)")
    page.locator("#preview").get_by_text("refuses new pods").wait_for()
    shots.append(save(page, out, "issue27-6-preview-capacity", region(page, "#preview article.preview")))
    # 7. Stuck pods and their fix: a pod bound to a virtual node in a namespace that is not offloaded.
    until(page, f"{base}/namespaces/legacy/", "Stuck pods")
    shots.append(save(page, out, "issue27-7-stuck-pods", region(page, "#stuck-pods")))
    until(page, f"{base}/namespaces/shop/", "stuck by Liqo")
    shots.append(save(page, out, "issue27-7-stuck-pods-cordoned", region(page, "#diagnosis")))
    # 8. A DaemonSet's pod placed on a virtual node, and the patch that keeps it local.
    until(page, f"{base}/namespaces/monitoring/", "DaemonSet node-exporter")
    shots.append(save(page, out, "issue27-8-daemonset", region(page, "#stuck-pods")))
    # 5. The version (the controller manager's image tag), then what v1.1 does with an orphaned
    # NamespaceMap (a peer gone, its map left): a new offloading selects nothing.
    until(page, f"{base}/", "Liqo v1.1.2")
    shots.append(save(page, out, "issue27-5-version", region(page, ".page-head")))
    dash.kubectl("apply", "-f", "-", stdin=ORPHANED_MAP)
    until(page, f"{base}/namespaces/payments/", "not offloaded")
    offload_form(page, base, "payments", "topology.kubernetes.io/region=eu-south-1")
    submit(page, label=True)
    until(page, f"{base}/namespaces/payments/", "Liqo v1.1.2 selects no cluster")
    shots.append(save(page, out, "issue27-5-v11-orphaned-namespacemap", region(page, "#ns-status")))
    return shots


GROUPS: dict[str, tuple[str | Callable[[Path], str], tuple[Callable[[Any, Dashboard, Path], list[Path]], ...]]] = {
    "demo": (demo_scenario, (demo_group, confirm_group, runtime_group)),
    "tenancy": ("tenancy", (tenancy_group,)),
}


def capture(group: str, out: Path, only: str | None) -> list[Path]:
    scenario, steps = GROUPS[group]
    shots: list[Path] = []
    with dashboard(scenario) as dash, sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=shutil.which("chromium") or "/usr/bin/chromium", args=ARGS)
        try:
            page = browser.new_page(viewport={"width": 1440, "height": 900})
            page.set_default_timeout(60_000)
            page.add_init_script(TRACK_INPUT)
            sign_in(page, dash.base, dash.password)
            for step in steps:
                if only in (None, step.__name__.removesuffix("_group")):
                    try:
                        shots += step(page, dash, out)
                    except Exception:
                        print(f"{step.__name__} failed on {page.url}:\n{page.locator('main').inner_text()[:3000]}")
                        raise
        finally:
            browser.close()
    return shots


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("out", nargs="?", default=str(ROOT / "screenshots"), help="where the PNGs go")
    parser.add_argument("--only", choices=("demo", "confirm", "runtime", "tenancy"), help="one group")
    options = parser.parse_args(argv)
    out = Path(options.out)
    out.mkdir(parents=True, exist_ok=True)
    shots: list[Path] = []
    for group in GROUPS:
        names = [s.__name__.removesuffix("_group") for s in GROUPS[group][1]]
        if options.only is None or options.only in names:
            shots += capture(group, out, options.only)
    print("\n".join(str(p) for p in shots))
    return 0


if __name__ == "__main__":
    sys.exit(main())
