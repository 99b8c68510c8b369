"""Table rows rendered once for what they show (offloading.views.rows): a row is rendered again as soon
as anything it shows changes, and never shows one user what another may do."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from offloading.models import ClusterOffloading, Namespace, VirtualNode
from offloading.views import rows

pytestmark = pytest.mark.django_db


def _row(body: str, anchor: str) -> str:
    row = body[body.index(anchor) :]
    return row[: row.index("</tr>")]


def _body(page: str) -> str:
    return page[page.index("<tbody>") : page.index("</tbody>")]


def test_a_polled_page_reuses_its_rows_until_they_change(admin_client: Any, fleet: Any) -> None:
    url = reverse("offloading:cluster_list")
    first = admin_client.get(url).content.decode()
    hits = rows.render_row.cache_info().hits
    again = admin_client.get(url).content.decode()
    assert _body(again) == _body(first)
    assert rows.render_row.cache_info().hits == hits + 2  # milan and naples, not rendered again

    VirtualNode.objects.filter(cluster_id="milan").update(labels={"topology.kubernetes.io/region": "eu-north"})
    changed = admin_client.get(url).content.decode()
    assert "topology.kubernetes.io/region=eu-north" in _row(changed, 'href="/clusters/milan/"')
    assert "eu-west" not in _row(changed, 'href="/clusters/milan/"')
    assert _row(changed, 'href="/clusters/naples/"') == _row(first, 'href="/clusters/naples/"')


def test_every_value_a_cluster_row_shows_is_part_of_its_key(admin_client: Any, fleet: Any) -> None:
    url = reverse("offloading:cluster_list")
    admin_client.get(url)
    VirtualNode.objects.filter(cluster_id="milan").update(capacity={"cpu": "7"}, healthy=False)
    ClusterOffloading.objects.filter(cluster_id="milan").update(selected=False)
    milan = _row(admin_client.get(url).content.decode(), 'href="/clusters/milan/"')
    assert "cpu: 7" in milan and "unhealthy" in milan
    assert re.search(r'\?cluster=milan">0</a>', milan)


def test_a_namespace_row_follows_its_status_chips_and_pods(admin_client: Any, fleet: Any) -> None:
    url = reverse("offloading:namespace_list")
    before = _row(admin_client.get(url).content.decode(), 'href="/namespaces/shop/"')
    assert "Ready" in before
    Namespace.objects.filter(name="shop").update(offloading_phase="SomeFailed")
    ClusterOffloading.objects.filter(namespace__name="shop", cluster_id="milan").update(state="CreationLoopBackOff")
    after = _row(admin_client.get(url).content.decode(), 'href="/namespaces/shop/"')
    assert "SomeFailed" in after and "Ready" not in after
    assert re.search(r'<span class="chip bad" title="CreationLoopBackOff">milan</span>', after)


def test_a_cached_row_never_shows_another_user_what_they_may_do(
    admin_client: Any,
    client: Any,
    django_user_model: Any,
    fleet: Any,
) -> None:
    from django.contrib.auth.models import Group

    url = reverse("offloading:namespace_list")
    assert ">Edit</a>" in _row(admin_client.get(url).content.decode(), 'href="/namespaces/shop/"')
    viewer = django_user_model.objects.create_user("vera", password="vera-password-123")
    viewer.groups.add(Group.objects.get(name="viewer"))
    client.force_login(viewer)
    row = _row(client.get(url).content.decode(), 'href="/namespaces/shop/"')
    assert "read only" in row and ">Edit</a>" not in row


def test_the_status_rows_follow_each_cluster_state(admin_client: Any, fleet: Any) -> None:
    url = reverse("offloading:namespace_status", args=["shop"])
    assert "CreationLoopBackOff" not in admin_client.get(url).content.decode()
    ClusterOffloading.objects.filter(namespace__name="shop", cluster_id="milan").update(
        state="CreationLoopBackOff", message="quota exceeded"
    )
    body = admin_client.get(url).content.decode()
    milan = _row(body, 'href="/clusters/milan/"')
    assert "CreationLoopBackOff" in milan and "quota exceeded" in milan


def test_row_values_are_immutable_and_hashable() -> None:
    """The cache key is the row itself: every field type must be hashable, nothing mutable inside."""
    row = rows.NamespaceRow(
        name="a",
        offloaded=True,
        deleting=False,
        phase="Ready",
        warnings=0,
        reconciling=False,
        chips=(("milan", "NamespaceCreated"),),
        more_clusters=2,
        mapping="DefaultName",
        pod_strategy="LocalAndRemote",
        pods_local=1,
        pods_remote=2,
        remote_name="a-rome",
        is_system=False,
        allowed=True,
        refusal="",
    )
    assert hash(row) == hash(rows.NamespaceRow(*row))
    html = rows.render_row("offloading/_namespace_row.html", row)
    assert html is rows.render_row("offloading/_namespace_row.html", rows.NamespaceRow(*row))
    assert "+2 more" in html and "a-rome" in html
