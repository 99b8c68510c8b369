"""In Chromium against the live server and the sandbox (over HTTP): the unoffload page counts the
running pods that go with the remote namespace, the offload preview flags the nearly-full peer, the
edit and bulk previews count the pods they hit, and the namespace page loads its reflection section.
Each page is kept as a screenshot (screenshots/insight-*.png)."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import expect

from liqo_rules.constants import GROUP, PLURAL, VERSION
from offloading.cluster import kube
from offloading.models.inventory import Pod
from offloading.snapshot import informer
from offloading.snapshot import inventory as _inventory  # noqa: F401 - registers pods
from offloading.snapshot.refresh import refresh
from tests.browser import SCREENSHOTS, htmx_idle, login
from tests.fixtures.waits import wait_until

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

MILAN = {
    "nodeSelectorTerms": [
        {"matchExpressions": [{"key": "topology.kubernetes.io/region", "operator": "In", "values": ["eu-south-1"]}]}
    ]
}


def _sync_pods() -> None:
    sync = informer.SYNCED["pods"]
    items = [obj for page_items, _ in kube.list_pages("pods") for obj in page_items]
    sync.apply([("ADDED", obj) for obj in items], timezone.now(), relist=True)


def _fleet(k8s: Any) -> None:
    """alpha offloaded to milan (Remote) with three pods asking 9 CPUs each: 27 of milan's 32 (84 %).
    One of them reads a ConfigMap that opts out of reflection."""
    spec = {"podOffloadingStrategy": "Remote", "namespaceMappingStrategy": "EnforceSameName", "clusterSelector": MILAN}
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "NamespaceOffloading", "metadata": {"name": "offloading"}}
    k8s.custom.create_namespaced_custom_object(GROUP, VERSION, "alpha", PLURAL, {**body, "spec": spec})
    wait_until(lambda: (k8s.core.read_namespace("alpha").metadata.labels or {}).get("liqo.io/scheduling-enabled"), 60)
    k8s.core.create_namespaced_config_map(
        "alpha", {"metadata": {"name": "local-flags", "annotations": {"liqo.io/skip-reflection": "true"}}}
    )
    for i in range(3):
        container = {"name": "app", "image": "x", "resources": {"requests": {"cpu": "9", "memory": "2Gi"}}}
        if i == 0:
            container["envFrom"] = [{"configMapRef": {"name": "local-flags"}}]
        k8s.core.create_namespaced_pod("alpha", {"metadata": {"name": f"web-{i}"}, "spec": {"containers": [container]}})
    refresh()

    def running() -> bool:
        _sync_pods()
        return Pod.objects.filter(namespace="alpha", phase="Running", cluster_id="milan").count() == 3

    wait_until(running, 60, message="three pods running on milan")


def test_previews_show_the_pods_hit_and_the_room_and_the_page_its_reflection(
    browser_page: Any,
    live_server: Any,
    admin_user: Any,
    sandbox: Any,
    k8s: Any,
) -> None:
    _fleet(k8s)
    SCREENSHOTS.mkdir(exist_ok=True)
    page = browser_page
    login(page, live_server)

    page.goto(f"{live_server.url}/namespaces/alpha/unoffload/")
    impact = page.locator("#pod-impact")
    expect(impact).to_contain_text("3 running pods on milan: 3 will be deleted there, with the remote namespace.")
    page.screenshot(path=str(SCREENSHOTS / "insight-unoffload.png"), full_page=True)

    page.goto(f"{live_server.url}/namespaces/beta/offload/")
    expect(page.locator("#nearly-full-summary")).to_have_text("1 of them nearly full")
    milan_row = page.locator("#preview tr", has_text="milan")
    expect(milan_row).to_contain_text("nearly full: cpu 84%")
    expect(milan_row).to_contain_text("CPU 27 of 32 (84%)")
    expect(page.locator("#preview tr", has_text="florence")).not_to_contain_text("nearly full")
    page.screenshot(path=str(SCREENSHOTS / "insight-offload-preview.png"), full_page=True)

    page.goto(f"{live_server.url}/namespaces/alpha/offload/")
    page.fill("#id_cluster_selector", "topology.kubernetes.io/region=europe-west8")
    expect(page.locator("#pod-impact")).to_contain_text("3 running pods on milan: 3 will be deleted there")
    htmx_idle(page)
    page.screenshot(path=str(SCREENSHOTS / "insight-edit-preview.png"), full_page=True)

    page.goto(f"{live_server.url}/bulk/")
    page.check("input[name=action][value=unoffload]")
    page.fill("input[name=namespace_selector]", "team=payments")
    expect(page.locator("#bulk-impact")).to_contain_text("3 running pods on those clusters will be deleted there.")
    htmx_idle(page)
    page.screenshot(path=str(SCREENSHOTS / "insight-bulk-preview.png"), full_page=True)
    page.check("input[name=action][value=offload]")
    page.fill("input[name=namespace_selector]", "env=prod")
    # Clicking the radio left the selector box (a change: one more preview), the radio sent one, and the
    # new selector one more after its delay: judge the preview of what was typed last.
    htmx_idle(page)
    rooms = page.locator("#bulk-rooms")
    expect(rooms).to_contain_text("The spec selects 2 clusters 1 of them nearly full")
    expect(rooms.locator("tr", has_text="milan")).to_contain_text("nearly full: cpu 84%")
    page.screenshot(path=str(SCREENSHOTS / "insight-bulk-offload-preview.png"), full_page=True)

    page.goto(f"{live_server.url}/namespaces/alpha/")
    warnings = page.locator("#reflection-warnings")
    expect(warnings).to_contain_text("Pods use 1 object that will not be on the peers")
    expect(warnings).to_contain_text("pod web-0 uses configmap local-flags (envFrom): not reflected")
    page.locator("#reflection").scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / "insight-reflection.png"), full_page=True)

    page.goto(f"{live_server.url}/clusters/milan/")
    expect(page.locator("main")).to_contain_text("nearly full: cpu 84%")
    page.screenshot(path=str(SCREENSHOTS / "insight-peer.png"), full_page=True)
