"""Pages and API resources per managed cluster (offloading/switcher.py, issue 28): another cluster's under
``/m/<name>/`` and ``/api/v1/m/<name>/``, the default's where they always were; links that stay in the
page's cluster; the header's switcher; scopes judged in the cluster of the path."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.test import Client
from django.urls import reverse
from rest_framework.test import APIClient

from access.models import ApiToken, Scope
from offloading.choices import ChangeState
from offloading.models import ChangeRequest, ManagedCluster, Namespace
from tests.fleet_snapshot import write_turin

pytestmark = pytest.mark.django_db

NAMESPACES = reverse("offloading:namespace_list")


def _names(html: str) -> set[str]:
    """The namespaces of the namespace list's table body (each row's first link)."""
    body = html.split("<tbody", 1)[1].split("</tbody>", 1)[0]
    return set(re.findall(r'<tr>\s*<td><a href="[^"]+">([^<]+)</a>', body))


def _hrefs(html: str) -> list[str]:
    return re.findall(r'href="(/[^"]*)"', html)


def test_a_prefixed_page_shows_only_its_clusters_rows(admin_client: Client, fleet: Any) -> None:
    write_turin()
    turin = _names(admin_client.get(f"/m/turin{NAMESPACES}").content.decode())
    default = _names(admin_client.get(NAMESPACES).content.decode())
    assert "etl" in turin and "etl" not in default  # etl is turin's only
    assert {"shop", "payments"} <= turin and {"shop", "payments"} <= default
    peers = admin_client.get(f"/m/turin{reverse('offloading:cluster_list')}").content.decode()
    assert ">genoa<" in peers  # a peer of turin's only
    assert ">genoa<" not in admin_client.get(reverse("offloading:cluster_list")).content.decode()


def test_the_links_of_a_clusters_pages_stay_in_that_cluster(admin_client: Client, fleet: Any) -> None:
    write_turin()
    etl = reverse("offloading:namespace_detail", args=["etl"])
    for path, link in (
        (NAMESPACES, etl),
        (etl, reverse("offloading:namespace_offload", args=["etl"])),
        (reverse("offloading:home"), reverse("offloading:namespace_list")),
    ):
        hrefs = _hrefs(admin_client.get(f"/m/turin{path}").content.decode())
        assert f"/m/turin{link}" in hrefs and link not in hrefs, path
        assert f"/m/turin{reverse('offloading:fleet_matrix')}" in hrefs, path
        assert reverse("offloading:fleet_matrix") not in hrefs, path
        # Pages across the fleet have no per-cluster copy: their links are unprefixed.
        assert reverse("offloading:managed_cluster_list") in hrefs, path
    detail = admin_client.get(f"/m/turin{reverse('offloading:namespace_detail', args=['shop'])}").content.decode()
    assert f"/m/turin{reverse('offloading:namespace_offload', args=['shop'])}" in _hrefs(detail)
    peers = admin_client.get(f"/m/turin{reverse('offloading:cluster_list')}").content.decode()
    assert f"/m/turin{reverse('offloading:cluster_detail', args=['genoa'])}" in _hrefs(peers)
    # The domain map is the page's cluster's: its peers' nodes link to their pages in that cluster.
    domain = admin_client.get(f"/m/turin{reverse('offloading:domain_map')}").content.decode()
    assert f"/m/turin{reverse('offloading:cluster_detail', args=['genoa'])}" in _hrefs(domain)
    assert reverse("offloading:cluster_detail", args=["genoa"]) not in _hrefs(domain)


def test_an_unknown_cluster_is_a_404_page_and_a_status_404_on_the_api(admin_client: Client, fleet: Any) -> None:
    page = admin_client.get(f"/m/nowhere{NAMESPACES}")
    assert page.status_code == 404 and page["Content-Type"].startswith("text/html")
    api = admin_client.get("/api/v1/m/nowhere/namespaces/")
    body = api.json()
    assert api.status_code == 404 and body["kind"] == "Status" and body["reason"] == "NotFound"
    assert body["details"] == {"causes": [], "name": "nowhere", "kind": "managedclusters"}
    assert admin_client.get("/m/Not A Slug/namespaces/").status_code == 404
    # Not signed in: whether a name is a managed cluster is not told (as for a known one: sign in, 401).
    for name in ("nowhere", ManagedCluster.objects.get(is_default=True).name):
        assert Client().get(f"/m/{name}{NAMESPACES}").status_code == 302, name
        assert Client().get(f"/api/v1/m/{name}/namespaces/").status_code == 401, name
    write_turin()  # two clusters: the 404 page's switcher leads to each cluster's overview
    hrefs = _hrefs(_switcher(admin_client.get(f"/m/nowhere{NAMESPACES}").content.decode()))
    assert {reverse("offloading:home"), f"/m/turin{reverse('offloading:home')}"} <= set(hrefs)


def test_an_offload_posted_under_a_cluster_is_that_clusters_change(
    admin_client: Client, fleet: Any, django_capture_on_commit_callbacks: Any
) -> None:
    turin = write_turin()
    with django_capture_on_commit_callbacks(execute=False):
        response = admin_client.post(
            f"/m/turin{reverse('offloading:namespace_offload', args=['etl'])}",
            {"namespace_mapping_strategy": "DefaultName", "pod_offloading_strategy": "LocalAndRemote"},
        )
    change = ChangeRequest.objects.get()
    assert change.managed_id == turin.pk and change.namespace == "etl"
    assert response.status_code == 302
    assert response["Location"] == f"/m/turin{reverse('offloading:change_detail', args=[change.pk])}"
    assert admin_client.get(response["Location"]).status_code == 200
    # Its page without the prefix is the default cluster's path: it leads to turin's.
    moved = admin_client.get(reverse("offloading:change_detail", args=[change.pk]))
    assert moved.status_code == 302 and moved["Location"] == response["Location"]
    listed = admin_client.get(f"/m/turin{reverse('offloading:change_list')}").content.decode()
    assert f"/m/turin{reverse('offloading:change_detail', args=[change.pk])}" in listed
    assert (
        reverse("offloading:change_detail", args=[change.pk])
        not in admin_client.get(reverse("offloading:change_list")).content.decode()
    ), "the default cluster's change list has none of turin's changes"


def _operator(django_user_model: Any, glob: str) -> Client:
    user = django_user_model.objects.create_user("olga", password="olga-password-123")
    user.groups.add(Group.objects.get(name="operator"))
    Scope.objects.create(user=user, kind="glob", value=glob)
    client = Client()
    client.force_login(user)
    return client


@pytest.mark.parametrize(("glob", "allowed_in"), [("turin/team-a-*", "turin"), ("team-a-*", "default")])
def test_an_operator_changes_a_namespace_only_in_the_cluster_their_scope_names(
    django_user_model: Any, fleet: Any, glob: str, allowed_in: str
) -> None:
    turin = write_turin()
    Namespace.objects.create(managed=turin, name="team-a-x")
    Namespace.objects.create(name="team-a-x")
    client = _operator(django_user_model, glob)
    form = reverse("offloading:namespace_offload", args=["team-a-x"])
    status = {"turin": client.get(f"/m/turin{form}").status_code, "default": client.get(form).status_code}
    assert status == {c: 200 if c == allowed_in else 403 for c in ("turin", "default")}
    # The namespace list says the same: an Offload link in one cluster, "read only" in the other.
    for cluster, base in (("turin", "/m/turin"), ("default", "")):
        html = client.get(f"{base}{NAMESPACES}", {"q": "team-a"}).content.decode()
        assert (f'href="{base}{form}"' in html) == (cluster == allowed_in), cluster


def test_the_api_lists_and_changes_per_cluster(admin_user: Any, fleet: Any) -> None:
    turin = write_turin()
    api = APIClient()
    _, token = ApiToken.issue(admin_user, "switch")
    api.credentials(HTTP_AUTHORIZATION=f"Bearer {token}")
    names = {n["name"] for n in api.get("/api/v1/m/turin/namespaces/").json()["results"]}
    default = {n["name"] for n in api.get("/api/v1/namespaces/").json()["results"]}
    assert "etl" in names and "etl" not in default
    assert api.get("/api/v1/m/turin/namespaces/etl/").status_code == 200
    assert api.get("/api/v1/namespaces/etl/").status_code == 404
    peers = {c["clusterId"] for c in api.get("/api/v1/m/turin/clusters/").json()["results"]}
    assert "genoa" in peers
    ChangeRequest.objects.create(managed=turin, namespace="etl", action="offload", state=ChangeState.QUEUED)
    ChangeRequest.objects.create(namespace="shop", action="offload", state=ChangeState.QUEUED)
    in_turin = api.get("/api/v1/m/turin/changes/").json()["results"]
    in_default = api.get("/api/v1/changes/").json()["results"]
    assert [(c["namespace"], c["managedCluster"]) for c in in_turin] == [("etl", "turin")]
    assert [c["namespace"] for c in in_default] == ["shop"]
    assert in_default[0]["managedCluster"] == ManagedCluster.objects.get(is_default=True).name
    assert api.get("/api/v1/m/nowhere/changes/").status_code == 404


def test_the_openapi_schema_has_the_per_cluster_paths(admin_user: Any) -> None:
    api = APIClient()
    api.force_authenticate(admin_user)
    paths = api.get("/api/schema/", {"format": "json"}).json()["paths"]
    for path in ("namespaces/", "namespaces/{name}/offloading/", "changes/", "bulk/", "clusters/", "audit/"):
        assert f"/api/v1/{path}" in paths and f"/api/v1/m/{{cluster}}/{path}" in paths, path
    parameters = paths["/api/v1/m/{cluster}/namespaces/"]["get"]["parameters"]
    cluster = next(p for p in parameters if p["name"] == "cluster" and p["in"] == "path")
    assert cluster["required"] and cluster["schema"]["type"] == "string"
    assert "managed cluster" in cluster["description"]
    # Their own operation ids (an explicit id on a view would collide with its copy's: drf-spectacular then
    # warns and numbers them).
    ids = [op["operationId"] for path, ops in paths.items() if path.startswith("/api/v1/m/") for op in ops.values()]
    assert ids and all(i.startswith("v1_m_") for i in ids), [i for i in ids if not i.startswith("v1_m_")]


def _switcher(html: str) -> str:
    return html.split('id="cluster-switcher"', 1)[1].split("</details>", 1)[0]


def test_the_switcher_links_the_same_page_in_each_other_cluster(admin_client: Client, fleet: Any) -> None:
    assert 'id="cluster-switcher"' not in admin_client.get(NAMESPACES).content.decode(), "one cluster: none"
    write_turin()
    default = ManagedCluster.objects.get(is_default=True).name
    shop = reverse("offloading:namespace_detail", args=["shop"])
    switcher = _switcher(admin_client.get(f"/m/turin{shop}").content.decode())
    assert 'class="switcher-name">turin</strong>' in switcher.split("</summary>", 1)[0]
    assert f'href="{shop}">{default}<' in switcher and f'href="/m/turin{shop}"' in switcher
    # etl is turin's only: the default cluster's link goes to its overview.
    etl = _switcher(
        admin_client.get(f"/m/turin{reverse('offloading:namespace_detail', args=['etl'])}").content.decode()
    )
    assert f'href="{reverse("offloading:home")}">{default}<' in etl and "(its overview)" in etl
    # The query is kept, the page number is not.
    listed = _switcher(admin_client.get(NAMESPACES, {"q": "sh", "page": "2"}).content.decode())
    assert f'href="/m/turin{NAMESPACES}?q=sh"' in listed


POLL = {"HTTP_X_LIVE_POLL": "1", "HTTP_HX_REQUEST": "true"}


def test_a_clusters_live_regions_poll_with_their_own_renders(admin_client: Client, fleet: Any) -> None:
    write_turin()
    for path in (NAMESPACES, reverse("offloading:namespace_status", args=["etl"]), reverse("offloading:home")):
        first = admin_client.get(f"/m/turin{path}", **POLL)
        assert first.status_code in (200, 286) and first["ETag"], path
        again = admin_client.get(f"/m/turin{path}", HTTP_IF_NONE_MATCH=first["ETag"], **POLL)
        assert again.status_code == 304, path
    turin = admin_client.get(f"/m/turin{NAMESPACES}", **POLL).content.decode()
    default = admin_client.get(NAMESPACES, **POLL).content.decode()
    assert "etl" in _names(f"<tbody>{turin.split('<tbody', 1)[1]}") and "etl" not in default
    assert f'href="/m/turin{reverse("offloading:namespace_detail", args=["etl"])}"' in turin
