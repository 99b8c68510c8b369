"""Every page at a phone's width (420 px) and a desktop's (1440 px) in Chromium: no sideways page
scroll (wide tables scroll in their own box), and axe-core (npm, used only here) finds no serious or
critical accessibility violation. Screenshots go to ``screenshots/layout-*.png``."""

from __future__ import annotations

import json
import shutil
from pathlib import Path
from typing import Any

import pytest

from offloading.choices import AuditAction, ChangeAction, ChangeState
from offloading.models import AuditEvent, BulkRequest, ChangeRequest, ManagedCluster, Namespace
from tests.browser import SCREENSHOTS, TRACK_INPUT, htmx_idle
from tests.fixtures.personas import ADMIN_PASSWORD

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

AXE = Path(__file__).resolve().parent.parent / "node_modules" / "axe-core" / "axe.min.js"
LONG_KEY = "example.com/" + "a-very-long-label-key-" * 2 + "x" * 20
LONG_VALUE = "v" * 63
LONG_NAMESPACE = "payments-" + "n" * 54  # 63 characters


@pytest.fixture
def context(chromium: Any) -> Any:
    # axe is injected as a script; the pages' CSP would (rightly) refuse it.
    ctx = chromium.new_context(bypass_csp=True)
    ctx.add_init_script(TRACK_INPUT)
    return ctx


def _data(admin_user: Any) -> dict[str, Any]:
    Namespace.objects.create(name="labels-galore", labels={LONG_KEY: LONG_VALUE, "team": "pay", "env": "prod"})
    change = ChangeRequest.objects.create(
        namespace="shop",
        action=ChangeAction.UPDATE,
        desired_spec={"namespaceMappingStrategy": "EnforceSameName", "podOffloadingStrategy": "Local"},
        base_spec={"namespaceMappingStrategy": "EnforceSameName", "podOffloadingStrategy": "LocalAndRemote"},
        conflict_spec={"namespaceMappingStrategy": "EnforceSameName", "podOffloadingStrategy": "Remote"},
        state=ChangeState.CONFLICT,
        message="the offloading changed in the cluster since it was loaded",
        requester=admin_user,
        requester_name="admin",
        source="web",
    )
    bulk = BulkRequest.objects.create(
        action="offload", namespace_selector="team=pay", requester_name="admin", source="web", total=1
    )
    AuditEvent.objects.create(
        user_name="admin", source="web", action=AuditAction.REQUESTED, namespace="shop", change=change
    )
    # A second managed cluster with an event of its own: the audit trail shows its cluster column.
    milan = ManagedCluster.objects.create(name="milan-" + "e" * 40, context="milan")
    AuditEvent.objects.create(
        managed=milan,
        user_name="kubectl-client-side-apply",
        source="external",
        action=AuditAction.DRIFT_UPDATED,
        namespace=LONG_NAMESPACE,
        before={"podOffloadingStrategy": "Local"},
        after={"podOffloadingStrategy": "Remote"},
        outcome="observed",
    )
    return {"change": change.pk, "bulk": bulk.pk, "milan": milan.name}


PAGES = [
    ("home", "/"),
    ("namespaces", "/namespaces/"),
    ("matrix", "/matrix/"),
    ("clusters", "/clusters/"),
    ("cluster", "/clusters/milan/"),
    ("namespace", "/namespaces/shop/"),
    ("namespace-labels", "/namespaces/labels-galore/"),
    ("offload", "/namespaces/payments/offload/"),
    ("unoffload", "/namespaces/shop/unoffload/"),
    ("changes", "/changes/"),
    ("change", "/changes/{change}/"),
    ("bulk", "/bulk/"),
    ("bulk-detail", "/bulk/{bulk}/"),
    ("audit", "/audit/"),
    ("audit-cluster", "/audit/?cluster={milan}"),
    ("managed-clusters", "/managed-clusters/"),
    ("fleet-namespaces", "/fleet/namespaces/"),
    ("fleet-changes", "/fleet/changes/"),
    # Another managed cluster's page (offloading/switcher.py), its cluster switcher open.
    ("cluster-namespaces", "/m/{milan}/namespaces/"),
    ("tokens", "/tokens/"),
    ("not-found", "/no-such-page/"),
    ("api-docs", "/api/docs/"),
]


def _axe(page: Any) -> list[dict[str, Any]]:
    page.evaluate(AXE.read_text())
    found = page.evaluate(
        "async () => (await axe.run(document, {resultTypes: ['violations']})).violations"
        ".map(v => ({id: v.id, impact: v.impact, help: v.help, nodes: v.nodes.map(n => n.target.join(' ')).slice(0, 5)}))"
    )
    return [v for v in found if v["impact"] in ("serious", "critical")]


@pytest.mark.parametrize("width", [420, 1440])
def test_no_page_scrolls_sideways_and_axe_finds_nothing_serious(
    context: Any,
    live_server: Any,
    admin_user: Any,
    fleet: Any,
    width: int,
) -> None:
    assert AXE.exists(), "run `npm ci` (package-lock.json) to get axe-core"
    ids = _data(admin_user)
    page = context.new_page()
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{live_server.url}/accounts/login/")
    problems: dict[str, Any] = {"login": _axe(page)}
    page.fill("input[name=username]", "admin")
    page.fill("input[name=password]", ADMIN_PASSWORD)
    page.click("main button[type=submit]")
    page.wait_for_url(f"{live_server.url}/")  # signing in lands on the overview
    page.goto(f"{live_server.url}/namespaces/")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    overflow: dict[str, int] = {}
    for name, path in PAGES:
        page.goto(live_server.url + path.format(**ids))
        # What the page loads by itself (a preview, the reflection section) is in; "networkidle" would
        # never come on a slow machine where the 1 s polls of the change and bulk pages take half of it.
        htmx_idle(page)
        if name == "cluster-namespaces":
            page.click("#cluster-switcher summary")  # open, as a keyboard or a pointer opens it
        if name == "api-docs":  # Swagger UI draws itself from the schema after the page has loaded
            page.wait_for_selector(".swagger-ui .opblock", timeout=20_000)
        extra = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
        if extra > 0:
            overflow[name] = extra
        problems[name] = _axe(page)
        page.screenshot(path=str(SCREENSHOTS / f"layout-{width}-{name}.png"), full_page=True)
    assert overflow == {}, f"pages wider than {width}px (by px): {overflow}"
    serious = {name: found for name, found in problems.items() if found}
    assert serious == {}, json.dumps(serious, indent=1)


def test_axe_is_installed_from_the_lockfile() -> None:
    lock = json.loads((AXE.parents[2] / "package-lock.json").read_text())
    assert (
        lock["packages"]["node_modules/axe-core"]["version"]
        == json.loads((AXE.parent / "package.json").read_text())["version"]
    )
    assert shutil.which("npm") is not None
