"""Every managed cluster's changes in one list (offloading/views/fleetwide.py, issue 28): each row names
its cluster and links to the change's page and the namespace's page in that cluster; the filters narrow
by cluster, state and namespace; a filter naming no managed cluster is an error on its field."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.test import Client
from django.urls import reverse

from offloading.choices import ChangeAction, ChangeState
from offloading.models import ChangeRequest, ManagedCluster
from tests.fixtures.personas import viewer_client
from tests.fleet_snapshot import write_turin

URL = reverse("offloading:fleet_changes")


@pytest.fixture
def viewer(django_user_model: Any) -> Client:
    return viewer_client(django_user_model)


def _change(managed: ManagedCluster, namespace: str, state: str = ChangeState.APPLIED) -> ChangeRequest:
    return ChangeRequest.objects.create(
        managed=managed, namespace=namespace, action=ChangeAction.OFFLOAD, state=state, requester_name="alice"
    )


def _rows(html: str) -> list[tuple[str, str]]:
    """(cluster, change id) of each row of the changes table."""
    table = html.split('aria-label="Changes"', 1)[1]
    return re.findall(r"<tr>\s*<td>([^<]+)</td>\s*<td><a [^>]+>(\d+)</a>", table)


def test_every_clusters_changes_newest_first_each_linked_in_its_cluster(fleet: Any, viewer: Client) -> None:
    turin = write_turin()
    default = ManagedCluster.objects.get(is_default=True)
    first = _change(default, "shop")
    second = _change(turin, "etl", ChangeState.FAILED)
    third = _change(turin, "shop", ChangeState.QUEUED)
    response = viewer.get(URL)
    assert response.status_code == 200
    html = response.content.decode()
    assert _rows(html) == [("turin", str(third.pk)), ("turin", str(second.pk)), (default.name, str(first.pk))]
    assert f'href="/m/turin{reverse("offloading:change_detail", args=[second.pk])}"' in html
    assert f'href="/m/turin{reverse("offloading:namespace_detail", args=["etl"])}"' in html
    assert f'href="{reverse("offloading:change_detail", args=[first.pk])}"' in html  # the default's: no prefix


def test_the_filters_narrow_and_a_cluster_that_is_not_managed_is_a_field_error(fleet: Any, viewer: Client) -> None:
    turin = write_turin()
    default = ManagedCluster.objects.get(is_default=True)
    _change(default, "shop")
    failed = _change(turin, "etl", ChangeState.FAILED)
    shop = _change(turin, "shop")
    assert {c for c, _ in _rows(viewer.get(URL, {"cluster": "turin"}).content.decode())} == {"turin"}
    assert _rows(viewer.get(URL, {"state": "failed"}).content.decode()) == [("turin", str(failed.pk))]
    found = _rows(viewer.get(URL, {"cluster": "turin", "q": "SHO"}).content.decode())
    assert found == [("turin", str(shop.pk))]
    refused = viewer.get(URL, {"cluster": "atlantis"})
    assert refused.status_code == 200 and "cluster: Select a valid choice" in refused.content.decode()
    assert _rows(refused.content.decode()) == []  # not every cluster's rows
    assert viewer.get(URL, {"state": "nonsense"}).status_code == 200


def test_the_page_is_fleet_wide_only_and_asks_a_signed_in_user(fleet: Any, viewer: Client) -> None:
    assert Client().get(URL).status_code == 302  # the sign-in page
    write_turin()
    assert viewer.get("/m/turin" + URL).status_code == 404  # no copy under a cluster's prefix
