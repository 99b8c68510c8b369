"""Friction found in a user test: lists that cap their rows say how many there are and link to the rest;
and the other items of the issue (see each test)."""

from __future__ import annotations

from typing import Any

import pytest
from django.urls import reverse

from offloading.models import ChangeRequest, Namespace, StatusTransition
from offloading.models.inventory import KubeEvent, Pod

pytestmark = pytest.mark.django_db


def _pods(n: int, namespace: str = "shop", cluster_id: str = "milan") -> None:
    Pod.objects.bulk_create(
        Pod(namespace=namespace, name=f"web-{i:04d}", node_name=cluster_id, cluster_id=cluster_id, phase="Running")
        for i in range(n)
    )


def test_a_namespace_with_300_pods_says_so_and_links_to_the_rest(admin_client: Any, fleet: Any) -> None:
    _pods(300)
    url = reverse("offloading:namespace_detail", args=["shop"])
    page = admin_client.get(url).content.decode()
    assert "1–200 of 300 pods" in page and 'href="?pods=2#pods"' in page
    assert "web-0199" in page and "web-0200" not in page
    rest = admin_client.get(url + "?pods=2").content.decode()
    assert "201–300 of 300 pods" in rest and "web-0299" in rest and "web-0199" not in rest


def test_events_history_and_changes_of_a_namespace_say_what_is_not_shown(admin_client: Any, fleet: Any) -> None:
    KubeEvent.objects.bulk_create(
        KubeEvent(uid=f"e{i}", namespace="shop", involved_kind="Namespace", involved_name="shop", type="Normal")
        for i in range(60)
    )
    StatusTransition.objects.bulk_create(
        StatusTransition(namespace="shop", old="InProgress", new="Ready") for _ in range(35)
    )
    for _ in range(12):
        ChangeRequest.objects.create(namespace="shop", action="update", state="applied", requester_name="admin")
    page = admin_client.get(reverse("offloading:namespace_detail", args=["shop"]) + "?history=1").content.decode()
    assert "1–50 of 60 events" in page and 'href="?history=1&amp;events=2#events"' in page
    assert "1–30 of 35 transitions" in page and 'href="?history=2#history"' in page
    assert "The 10 newest of 12 changes" in page and "/audit/?namespace=shop" in page


def test_a_peer_page_says_how_many_pods_run_there(admin_client: Any, fleet: Any) -> None:
    _pods(301)
    page = admin_client.get(reverse("offloading:cluster_detail", args=["milan"])).content.decode()
    assert "1–300 of 301 pods" in page and 'href="?pods=2#pods"' in page


def test_the_overview_says_what_its_short_lists_leave_out(admin_client: Any, fleet: Any) -> None:
    for i in range(25):
        Namespace.objects.create(name=f"broken-{i:02d}", offloaded=True, offloading_phase="AllFailed")
    for i in range(12):
        ChangeRequest.objects.create(namespace="shop", action="update", state="failed", requester_name="admin")
        KubeEvent.objects.create(
            uid=f"w{i}", namespace=f"broken-{i % 3:02d}", involved_kind="Namespace", type="Warning"
        )
    page = admin_client.get(reverse("offloading:home")).content.decode()
    assert "20 of 25 namespaces not Ready shown" in page and "/namespaces/?phase=AllFailed" in page
    assert "10 newest of 12 failed or conflicting changes" in page and "/changes/?state=failed" in page
    assert "The 10 newest of 12 warnings, about 3 namespaces" in page
    assert 'The 10 newest of 12: <a href="/changes/">all changes</a>' in page


def test_the_make_run_banner_waits_for_readyz() -> None:
    """`make run` says "is up" once /readyz answers 200, not when the port opens (10-15 s before)."""
    import threading
    import time
    from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

    from offloading.management.commands.run_demo import wait_for_ready

    ready_at = time.monotonic() + 1.0
    asked: list[int] = []

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            status = 200 if self.path == "/readyz" and time.monotonic() >= ready_at else 503
            asked.append(status)
            self.send_response(status)
            self.end_headers()

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        port = server.server_address[1]
        assert wait_for_ready(port, 0.3, interval=0.05) is False, "the port is open, /readyz is 503"
        assert wait_for_ready(port, 10, interval=0.05) is True
        assert time.monotonic() >= ready_at and asked[-1] == 200 and 503 in asked
    finally:
        server.shutdown()
        server.server_close()


def test_a_signed_in_non_admin_gets_a_refusal_at_admin(client: Any, django_user_model: Any, admin_user: Any) -> None:
    from django.contrib.auth.models import Group

    user = django_user_model.objects.create_user("viewer", password="pw-viewer-123")
    user.groups.add(Group.objects.get(name="viewer"))
    client.force_login(user)
    for path in ("/admin/", "/admin/login/", "/admin/auth/user/"):
        response = client.get(path)
        assert response.status_code == 403, path
        assert "Admins only" in response.content.decode()
    # Anonymous: the admin's login page; staff: the admin itself.
    client.logout()
    assert client.get("/admin/").status_code == 302
    client.force_login(admin_user)
    assert client.get("/admin/").status_code == 200


def test_a_cluster_in_creating_says_what_liqo_does_from_the_start(admin_client: Any, fleet: Any) -> None:
    from offloading.insight.diagnosis import CREATING_CHECK, CREATING_DOING, diagnose
    from offloading.models import ClusterOffloading

    ClusterOffloading.objects.filter(cluster_id="milan").update(state="Creating")
    Namespace.objects.filter(name="shop").update(offloading_phase="InProgress")
    shop = Namespace.objects.get(name="shop")
    assert "creating" in [f.rule for f in diagnose(shop, notes=True)], "from the first second"
    assert "creating" not in [f.rule for f in diagnose(shop)], "a note, never an alert"
    page = admin_client.get(reverse("offloading:namespace_detail", args=["shop"])).content.decode()
    assert "Creating the remote namespace on milan" in page and "<em>Check:</em>" in page
    status = admin_client.get(reverse("offloading:namespace_status", args=["shop"])).content.decode()
    assert 'class="small creating-hint"' in status
    assert CREATING_DOING.split(":")[0] in status and "CreationLoopBackOff" in CREATING_CHECK


@pytest.mark.django_db(transaction=True)
def test_a_bulk_is_one_entry_of_the_trail_with_its_namespaces_folded(sandbox: Any, k8s: Any, admin_client: Any) -> None:
    """The audit trail: one sealed entry per bulk request (its namespaces, the selector in liqoctl
    syntax), the events of its changes folded under it; selectors never as raw JSON."""
    from offloading.audit.trail import verify
    from offloading.changes.bulk import request_bulk
    from offloading.choices import AuditAction, Source
    from offloading.context import Actor
    from offloading.models import AuditEvent
    from offloading.snapshot.refresh import refresh
    from offloading.whatif.impact import _term_text

    for name in ("team-a-1", "team-a-2", "team-b-1"):
        k8s.core.create_namespace({"metadata": {"name": name, "labels": {"team": name.rsplit("-", 1)[0]}}})
    refresh()
    spec: dict[str, Any] = {
        "namespaceMappingStrategy": "DefaultName",
        "podOffloadingStrategy": "Remote",
        "clusterSelector": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "topology.kubernetes.io/region", "operator": "In", "values": ["eu-west"]}
                    ]
                },
                {"matchFields": [{"key": "metadata.name", "operator": "In", "values": ["milan"]}]},
            ]
        },
    }
    bulk = request_bulk("offload", "team=team-a", spec, Actor(None, "alice", Source.WEB, "req-1"))
    entry = AuditEvent.objects.get(action=AuditAction.BULK_REQUESTED)
    assert isinstance(entry.after, dict) and entry.seq is not None
    assert entry.after["bulk"] == bulk.pk and entry.after["namespaces"] == ["team-a-1", "team-a-2"]
    children = AuditEvent.objects.filter(change__bulk=bulk, action=AuditAction.REQUESTED)
    assert children.count() == 2 and all((child.seq or 0) > entry.seq for child in children), "the bulk entry first"
    assert verify().ok, "sealed like every event"

    page = admin_client.get("/audit/").content.decode()
    assert page.count('class="inline-details bulk-children"') == 1 and "2 namespaces" in page
    assert f"bulk #{bulk.pk}" in page and "team=team-a" in page
    assert _term_text(spec["clusterSelector"]["nodeSelectorTerms"][0]) in page, "liqoctl syntax"
    assert '"nodeSelectorTerms"' not in page and "nodeSelectorTerms" not in page, "no raw selector JSON"
    assert "liqoctl cannot print this term" in page, "matchFields: its JSON form, saying so"
    assert "Change requested<div" not in page, "the children's requested events are inside the bulk's details"
    details = page[page.index('class="inline-details bulk-children"') :]
    details = details[: details.index("</details>")]
    assert ">team-a-1</a>" in details and ">team-a-2</a>" in details and "change #" in details


def test_a_bulk_of_150_says_how_many_changes_and_links_to_the_rest(admin_client: Any, fleet: Any) -> None:
    from offloading.models import BulkRequest

    bulk = BulkRequest.objects.create(
        action="offload", namespace_selector="team=pay", requester_name="admin", total=150
    )
    ChangeRequest.objects.bulk_create(
        ChangeRequest(namespace=f"ns-{i:03d}", action="offload", state="applied", requester_name="admin", bulk=bulk)
        for i in range(150)
    )
    progress = reverse("offloading:bulk_progress", args=[bulk.pk])
    first = admin_client.get(progress).content.decode()
    assert "1–100 of 150 changes" in first and 'href="?rows=2#bulk-progress"' in first
    detail = admin_client.get(reverse("offloading:bulk_detail", args=[bulk.pk]) + "?rows=2").content.decode()
    assert f'{progress}?rows=2"' in detail, "the page passes the page of rows on to its poll"
    rest = admin_client.get(progress + "?rows=2").content.decode()
    assert "101–150 of 150 changes" in rest and "ns-149" in rest and "ns-000" not in rest


@pytest.mark.parametrize("count", [3, 20, 50, 100, 200])
def test_topology_names_are_never_under_12_units_and_never_overlap(count: int) -> None:
    import math

    from offloading.models import Cluster
    from offloading.views.insight import RADIAL_FROM, ring, topology

    clusters = [Cluster(cluster_id=f"peer-{i:03d}", offloading_status="Healthy") for i in range(count)]
    clusters[7 % count].offloading_status = "Unhealthy"
    radius, _node, size = ring(count)
    assert size >= 12
    nodes = topology(clusters, {}, {})
    named = [i for i, node in enumerate(nodes) if node.labelled]
    assert nodes[7 % count].labelled, "an unhealthy peer is always named"
    if count >= RADIAL_FROM:
        healthy = [i for i in named if nodes[i].healthy]
        gaps = [b - a for a, b in zip(healthy, healthy[1:], strict=False)]
        assert min(gaps, default=count) * 2 * math.pi * radius / count >= size, "side by side along the circle"


def test_the_namespace_list_says_how_many_it_holds_and_which_are_on_the_page(admin_client: Any, fleet: Any) -> None:
    Namespace.objects.bulk_create(Namespace(name=f"team-{i:03d}") for i in range(60))
    page = admin_client.get(reverse("offloading:namespace_list")).content.decode()
    assert "62 namespaces ·" in page and "62 shown" not in page
    assert "Page 1 of 2 (1–50 of 62)" in page and "page=2" in page
