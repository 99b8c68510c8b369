"""A namespace followed across the domain (issue 28): the namespace page's "Across the domain" section
reads each managed provider's own API for the twin (its phase, the pods running there, what else is
there), shows a provider that does not answer as unreachable without holding the page, and lists peers
that are not managed; the collision check of a proposed offload against a managed provider's real
namespaces. Against a real two-cluster sandbox domain (rome, milan) over HTTP: the dashboard's default
cluster is rome, milan is registered as a managed cluster on its own kubeconfig context."""

from __future__ import annotations

import socket
import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest
from cryptography.fernet import Fernet
from django.contrib.auth.models import Group
from django.core.cache import cache
from django.urls import reverse
from kubernetes import client as k8s_client
from kubernetes import config as k8s_config
from kubernetes.client.rest import ApiException

from liqo_rules import constants as c
from offloading.changes.checks import refuse_remote_collisions
from offloading.changes.errors import ChangeRejected
from offloading.choices import Source
from offloading.cluster import kube, remote, twins
from offloading.cluster import managed as managedclient
from offloading.context import Actor
from offloading.models import ClusterOffloading, ManagedCluster, MappingEntry, Namespace, PeerNamespaceMap
from offloading.models.managed import Credentials, ensure_configured
from offloading.snapshot.refresh import refresh
from offloading.whatif.preview import preview
from sandbox.domain import Domain
from tests.sandbox.conftest import GROUP, NSOFF, VERSION, expr, selector

HTMX = {"HTTP_HX_REQUEST": "true"}
TO_MILAN = selector([expr(c.REMOTE_CLUSTER_ID_LABEL, "In", "milan")])


def eventually(check: Callable[[], Any], timeout: float = 10.0) -> Any:
    deadline = time.monotonic() + timeout
    while True:
        answer = check()
        if answer or time.monotonic() > deadline:
            assert answer, f"still {answer!r} after {timeout}s"
            return answer
        time.sleep(0.05)


@dataclass
class World:
    dom: Domain
    rome: k8s_client.CoreV1Api
    rome_custom: k8s_client.CustomObjectsApi
    milan: k8s_client.CoreV1Api
    managed_milan: ManagedCluster

    def offload(self, namespace: str, spec: dict[str, Any]) -> None:
        self.rome.create_namespace({"metadata": {"name": namespace}})
        body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "NamespaceOffloading", "metadata": {"name": "offloading"}}
        self.rome_custom.create_namespaced_custom_object(GROUP, VERSION, namespace, NSOFF, {**body, "spec": spec})

    def phase(self, namespace: str) -> str:
        try:
            nsoff = self.rome_custom.get_namespaced_custom_object(GROUP, VERSION, namespace, NSOFF, "offloading")
        except ApiException:
            return ""
        return str((nsoff.get("status") or {}).get("offloadingPhase") or "")

    def milan_pods(self, namespace: str) -> dict[str, Any]:
        return {pod.metadata.name: pod for pod in self.milan.list_namespaced_pod(namespace).items}


@pytest.fixture
def world(tmp_path: Path, settings: Any, db: Any) -> Iterator[World]:
    """rome and milan; the dashboard's default cluster is rome (the kubeconfig's current context), and
    milan a managed cluster on its own context, discovered (its Liqo cluster id is milan)."""
    managedclient.forget_clients()
    with Domain("domain:rome,milan", controller_delay=0.0, port=0) as dom:
        kubeconfig = dom.write_kubeconfig(tmp_path / "kubeconfig")
        settings.LIQO_DASH = {**settings.LIQO_DASH, "KUBECONFIG": str(kubeconfig), "KUBE_CONFIG_MODE": "kubeconfig"}
        kube.reset_client()
        ensure_configured([])
        milan = managedclient.refresh(ManagedCluster.objects.create(name="milan-eu", context="milan"))
        assert (milan.health, milan.liqo_cluster_id) == ("reachable", "milan")
        clients = [k8s_config.new_client_from_config(config_file=str(kubeconfig), context=n) for n in ("rome", "milan")]
        yield World(
            dom,
            k8s_client.CoreV1Api(clients[0]),
            k8s_client.CustomObjectsApi(clients[0]),
            k8s_client.CoreV1Api(clients[1]),
            milan,
        )
        for api in clients:
            api.close()
        managedclient.forget_clients()
    kube.reset_client()


def _section(client: Any, namespace: str) -> tuple[str, float]:
    started = time.monotonic()
    response = client.get(reverse("offloading:namespace_twins", args=[namespace]), **HTMX)
    elapsed = time.monotonic() - started
    assert response.status_code == 200, response.content.decode()[:1000]
    assert response["Cache-Control"] == "no-store"
    return response.content.decode(), elapsed


def _row(page: str, cluster_id: str) -> str:
    start = page.index(f'id="twin-{cluster_id}"')
    return page[start : page.index("</tr>", start)]


def _offload_shop_with_pods(world: World) -> None:
    world.offload("shop", {"podOffloadingStrategy": "Remote", "clusterSelector": TO_MILAN})
    eventually(lambda: world.phase("shop") == "Ready")
    for name in ("cart-1", "cart-2"):
        body = {
            "metadata": {"name": name, "labels": {"app": "cart"}},
            "spec": {"containers": [{"name": "c", "image": "nginx"}]},
        }
        world.rome.create_namespaced_pod("shop", body)

    def started() -> bool:
        # A reflected pod is created unbound and without a status; milan's scheduler and kubelet write them.
        pods = world.milan_pods("shop-rome").values()
        return len(pods) == 2 and all(p.status and p.status.phase == "Running" and p.spec.node_name for p in pods)

    eventually(started)
    # What Liqo's reflectors put in the twin besides pods (the sandbox reflects only pods).
    world.milan.create_namespaced_config_map("shop-rome", {"metadata": {"name": "cart-settings"}, "data": {"a": "b"}})
    refresh()


@pytest.mark.sandbox
def test_the_section_follows_a_namespace_into_its_twin_in_milan(world: World, admin_client: Any) -> None:
    _offload_shop_with_pods(world)
    detail = admin_client.get(reverse("offloading:namespace_detail", args=["shop"])).content.decode()
    assert f'hx-get="{reverse("offloading:namespace_twins", args=["shop"])}" hx-trigger="load"' in detail

    page, elapsed = _section(admin_client, "shop")
    row = _row(page, "milan")
    assert 'data-state="Active"' in row and "managed cluster milan-eu" in row
    assert "<code>shop-rome</code>" in row
    assert ">Active<" in row  # the phase there
    assert "here: " in row and ">NamespaceCreated<" in row  # what this cluster's offloading says of milan
    for pod in ("cart-1", "cart-2"):
        assert f"<code>{pod}</code>" in row
    assert row.count(">Running<") == 2
    nodes = {pod.spec.node_name for pod in world.milan_pods("shop-rome").values()}
    assert all(node.startswith("milan-") and f"on {node}" in row for node in nodes)
    assert "configmaps: 1" in row and "cart-settings" in row and "services: <span" in row
    assert "not managed by this dashboard" not in page  # milan is managed: its side is visible
    assert elapsed < 3

    # The same, as data: the twin is this namespace's own, read in one go.
    across = twins.twins(Namespace.objects.get(name="shop"))
    (twin,) = across.twins
    assert (twin.cluster_id, twin.cluster, twin.remote_name, twin.state, twin.ours) == (
        "milan",
        "milan-eu",
        "shop-rome",
        "Active",
        True,
    )
    assert [(p.name, p.phase) for p in twin.reading.pods] == [("cart-1", "Running"), ("cart-2", "Running")]

    # Unoffloaded: milan's namespace controller removes the twin. Before this cluster's snapshot catches
    # up (it still says milan holds the twin), the section shows what milan says: it is gone.
    world.rome_custom.delete_namespaced_custom_object(GROUP, VERSION, "shop", NSOFF, "offloading")
    eventually(lambda: "shop-rome" not in {ns.metadata.name for ns in world.milan.list_namespace().items})
    cache.clear()
    page, _ = _section(admin_client, "shop")
    assert 'data-state="missing"' in _row(page, "milan")


@pytest.mark.sandbox
def test_milan_down_shows_unreachable_while_the_page_answers_quickly(world: World, admin_client: Any) -> None:
    _offload_shop_with_pods(world)
    page, _ = _section(admin_client, "shop")
    assert 'data-state="Active"' in _row(page, "milan")

    world.dom["milan"].faults.set(outage=True)
    # Within a few seconds a reload asks no cluster: the answer is the cached one.
    page, elapsed = _section(admin_client, "shop")
    assert 'data-state="Active"' in _row(page, "milan") and elapsed < 1

    cache.clear()
    page, elapsed = _section(admin_client, "shop")
    row = _row(page, "milan")
    assert 'data-state="unreachable"' in row and ">unreachable<" in row
    assert "cart-1" not in row
    assert elapsed < remote.DEADLINE
    # rome keeps answering: the namespace page itself is unaffected.
    assert admin_client.get(reverse("offloading:namespace_detail", args=["shop"])).status_code == 200

    # A milan that hangs rather than drops: the section gives up at the deadline.
    world.dom["milan"].faults.set(outage=False, timeout_rate=1.0, timeout_seconds=6.0)
    cache.clear()
    page, elapsed = _section(admin_client, "shop")
    row = _row(page, "milan")
    assert 'data-state="unreachable"' in row and f"no answer within {remote.DEADLINE:g} s" in row
    assert remote.DEADLINE - 0.2 < elapsed < remote.DEADLINE + 1.5
    # ... and the late answer is cached as unreachable: a reload at once does not wait again.
    page, elapsed = _section(admin_client, "shop")
    assert 'data-state="unreachable"' in _row(page, "milan") and elapsed < 1
    world.dom["milan"].faults.set(timeout_rate=0.0)


@pytest.mark.sandbox
def test_the_collision_check_finds_a_name_milan_already_has(world: World, admin_client: Any) -> None:
    world.milan.create_namespace({"metadata": {"name": "reports", "labels": {"owner": "milan"}}})
    world.offload("web2", {"clusterSelector": TO_MILAN})
    eventually(lambda: world.phase("web2") == "Ready")
    refresh()
    same_name = {"namespaceMappingStrategy": "EnforceSameName", "clusterSelector": TO_MILAN}

    (taken,) = twins.remote_collisions("reports", same_name, ["milan", "paris"])
    assert (taken.cluster_id, taken.cluster, taken.remote_name, taken.verdict) == (
        "milan",
        "milan-eu",
        "reports",
        "taken",
    )
    assert taken.fails and "CreationLoopBackOff" in taken.message() and "not made by Liqo" in taken.message()
    # web2's twin in milan is web2's own; a new DefaultName namespace's name is free there; another
    # namespace asking for web2's twin by name would share it; a peer not managed is not checked.
    (ours,) = twins.remote_collisions("web2", {"clusterSelector": TO_MILAN}, ["milan"])
    assert (ours.remote_name, ours.verdict, ours.fails) == ("web2-rome", "ours", False)
    (free,) = twins.remote_collisions("fresh", {}, ["milan"])
    assert (free.remote_name, free.verdict) == ("fresh-rome", "free")
    selected = {"namespaceMappingStrategy": "SelectedName", "remoteNamespaceName": "web2-rome"}
    (shared,) = twins.remote_collisions("other", selected, ["milan"])
    assert (shared.verdict, shared.detail) == ("shared", "web2")
    assert twins.remote_collisions("reports", same_name, ["paris"]) == []
    assert twins.remote_collisions("fresh", {}, ["milan"], local_id="") == []  # DefaultName: name not known

    # Offloaded anyway, Liqo fails as foreseen, and the section says why: that namespace is not the twin.
    world.offload("reports", same_name)
    eventually(lambda: world.phase("reports") == "AllFailed")
    refresh()
    page, _ = _section(admin_client, "reports")
    row = _row(page, "milan")
    assert 'data-state="Active"' in row and "CreationLoopBackOff" in row
    assert "not this cluster&#x27;s twin: a namespace of its own" in row


# -- without a domain: the snapshot alone -----------------------------------------------------------------------
def _offloaded(name: str, *peers: str) -> Namespace:
    ns = Namespace.objects.create(
        name=name, offloaded=True, offloading_spec={"namespaceMappingStrategy": "EnforceSameName"}
    )
    for peer in peers:
        ClusterOffloading.objects.create(namespace=ns, cluster_id=peer, selected=True, state="Ready")
    return ns


def test_peers_that_are_not_managed_are_listed_as_not_visible(admin_client: Any) -> None:
    ensure_configured([])
    _offloaded("catalog", "paris", "berlin")
    nsmap = PeerNamespaceMap.objects.create(cluster_id="vienna", namespace="liqo-tenant-vienna", name="vienna")
    MappingEntry.objects.create(
        namespace_map=nsmap, cluster_id="vienna", namespace="catalog", desired="catalog", current_phase="Accepted"
    )
    page, elapsed = _section(admin_client, "catalog")
    assert "<table" not in page  # no managed provider: nothing was asked
    for peer in ("paris", "berlin", "vienna"):
        line = page[page.index(f'id="twin-{peer}"') :].split("</li>")[0]
        assert "not managed by this dashboard: its side is not visible" in line and "<code>catalog</code>" in line
    assert elapsed < 1
    Namespace.objects.create(name="quiet")
    page, _ = _section(admin_client, "quiet")
    assert "Not offloaded: this namespace has no twin on any peer." in page


def test_who_may_see_the_section_is_who_may_see_the_namespace_page(client: Any, django_user_model: Any) -> None:
    _offloaded("catalog", "paris")
    url = reverse("offloading:namespace_twins", args=["catalog"])
    assert client.get(url, **HTMX).status_code == 302  # signed out: to the login page
    nobody = django_user_model.objects.create_user("nora", password="nora-password-123")
    client.force_login(nobody)
    assert client.get(url, **HTMX).status_code == 403  # no role: refused as on every page
    viewer = django_user_model.objects.create_user("vera", password="vera-password-123")
    viewer.groups.add(Group.objects.get(name="viewer"))
    client.force_login(viewer)
    assert client.get(url, **HTMX).status_code == 200
    assert client.get(reverse("offloading:namespace_twins", args=["nowhere"]), **HTMX).status_code == 404
    assert client.post(url, **HTMX).status_code == 405


def test_whose_namespace_it_is_decides_the_verdict() -> None:
    milan = ManagedCluster(name="milan-eu", liqo_cluster_id="milan")
    mine = remote.Reading("Active", owner="rome", managed_by="liqo-tenant-rome/milan", original_name="shop")
    naples = remote.Reading("Active", owner="naples", managed_by="liqo-tenant-naples/milan", original_name="shop")
    unmarked = remote.Reading("Active", owner="rome")  # labelled, but no NamespaceMap manages it
    verdicts = {
        name: twins._verdict("shop", "milan", milan, "shop", reading, "rome")
        for name, reading in {
            "mine": mine,
            "naples": naples,
            "unmarked": unmarked,
            "gone": remote.Reading("missing"),
            "down": remote.Reading("unreachable", error="no answer within 3 s"),
            "refused": remote.Reading("refused", error="forbidden"),
        }.items()
    }
    assert {k: v.verdict for k, v in verdicts.items()} == {
        "mine": "ours",
        "naples": "taken",
        "unmarked": "taken",
        "gone": "free",
        "down": "unchecked",
        "refused": "unchecked",
    }
    assert "the twin of a namespace of cluster naples" in verdicts["naples"].message()
    assert "not managed by its NamespaceMap" in verdicts["unmarked"].message()
    assert "could not be checked: unreachable: no answer within 3 s" in verdicts["down"].message()
    assert twins._verdict("cart", "milan", milan, "shop", mine, "rome").verdict == "shared"


@pytest.fixture
def silent_server() -> Iterator[str]:
    """An address that takes connections and never answers (a hung API server)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen(16)
        yield f"https://127.0.0.1:{sock.getsockname()[1]}"


def test_hung_providers_are_asked_at_once_and_given_up_at_the_deadline(
    admin_client: Any, settings: Any, silent_server: str
) -> None:
    settings.LIQO_DASH_CREDENTIALS_KEY = [Fernet.generate_key().decode()]
    ensure_configured([])
    for name in ("milan", "naples", "turin"):
        cluster = ManagedCluster(name=f"{name}-eu", source="credentials", api_server_url=silent_server)
        cluster.liqo_cluster_id = name
        cluster.set_credentials(Credentials(token="not-used"))
        cluster.save()
    _offloaded("catalog", "milan", "naples", "turin")
    # DefaultName before this cluster's Liqo id is known: the twin's name cannot be told, nobody is asked.
    Namespace.objects.create(name="early", offloaded=True, offloading_spec={})
    ClusterOffloading.objects.create(namespace=Namespace.objects.get(name="early"), cluster_id="milan", selected=True)
    try:
        page, elapsed = _section(admin_client, "catalog")
        assert elapsed < remote.DEADLINE + 1.0, "three hung providers are waited for together, not one after another"
        for name in ("milan", "naples", "turin"):
            assert 'data-state="unreachable"' in _row(page, name)
        page, elapsed = _section(admin_client, "early")
        assert "not known yet" in _row(page, "milan") and elapsed < 1
    finally:
        managedclient.forget_clients()


@pytest.mark.sandbox
def test_from_another_managed_clusters_namespace_the_default_cluster_is_its_managed_provider(
    world: World, admin_client: Any
) -> None:
    """milan's namespace offloaded to rome: on milan's page (/m/milan-eu/) the twin is read from rome's own
    API (rome is the default cluster, and a managed provider here), and judged milan's twin."""
    custom = k8s_client.CustomObjectsApi(world.milan.api_client)
    world.milan.create_namespace({"metadata": {"name": "ledger"}})
    body = {"apiVersion": f"{GROUP}/{VERSION}", "kind": "NamespaceOffloading", "metadata": {"name": "offloading"}}
    spec = {
        "podOffloadingStrategy": "Remote",
        "clusterSelector": selector([expr(c.REMOTE_CLUSTER_ID_LABEL, "In", "rome")]),
    }
    custom.create_namespaced_custom_object(GROUP, VERSION, "ledger", NSOFF, {**body, "spec": spec})

    def ready() -> bool:
        found = custom.get_namespaced_custom_object(GROUP, VERSION, "ledger", NSOFF, "offloading")
        return (found.get("status") or {}).get("offloadingPhase") == "Ready"

    eventually(ready)
    eventually(lambda: any(ns.metadata.name == "ledger-milan" for ns in world.rome.list_namespace().items))
    assert refresh(world.managed_milan).ok and refresh().ok  # both snapshots, as the watcher keeps them
    response = admin_client.get("/m/milan-eu" + reverse("offloading:namespace_twins", args=["ledger"]), **HTMX)
    assert response.status_code == 200
    page = response.content.decode()
    row = _row(page, "rome")
    assert "ledger-milan" in row and "not this cluster's twin" not in row, row
    assert 'id="twin-milan"' not in page  # milan is the namespace's own cluster, never its provider


@pytest.mark.sandbox
def test_from_another_managed_clusters_namespace_the_collision_check_asks_the_default_cluster(
    world: World, admin_client: Any
) -> None:
    """milan's namespace proposed for rome under its own name, which rome already has (not a twin): the
    check asks rome (the default cluster, a managed provider of milan's namespaces), in the preview and in
    the request, which refuses it; a name rome does not have is free there."""
    world.rome.create_namespace({"metadata": {"name": "books", "labels": {"owner": "rome"}}})
    world.milan.create_namespace({"metadata": {"name": "books"}})
    world.milan.create_namespace({"metadata": {"name": "novel"}})
    assert refresh(world.managed_milan).ok and refresh().ok
    to_rome = selector([expr(c.REMOTE_CLUSTER_ID_LABEL, "In", "rome")])
    same_name = {"namespaceMappingStrategy": "EnforceSameName", "clusterSelector": to_rome}
    milan = world.managed_milan

    (taken,) = twins.remote_collisions("books", same_name, ["rome"], own=milan.pk)
    assert (taken.cluster_id, taken.remote_name, taken.verdict, taken.fails) == ("rome", "books", "taken", True)
    (free,) = twins.remote_collisions("novel", same_name, ["rome"], own=milan.pk)
    assert (free.cluster_id, free.verdict) == ("rome", "free")

    books = Namespace.objects.get(managed=milan, name="books")
    checks = preview(books, same_name, providers=True).remote_checks
    assert [(check.cluster_id, check.verdict) for check in checks] == [("rome", "taken")]
    with pytest.raises(ChangeRejected) as refused:
        refuse_remote_collisions(books, same_name, Actor(None, "test", Source.API, "r1"))
    assert "CreationLoopBackOff" in str(refused.value.errors["namespaceMappingStrategy"])
    refuse_remote_collisions(
        Namespace.objects.get(managed=milan, name="novel"), same_name, Actor(None, "t", Source.API, "")
    )
