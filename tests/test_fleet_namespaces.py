"""Every managed cluster's namespaces in one list (offloading/views/fleetwide.py, issue 28): each row
names its cluster, the filters narrow by cluster, name and offloading, each cluster's snapshot state
shows above, each row links to its namespace's page in its own cluster (``/m/<name>/``), and a
filter that names no managed cluster is an error on its field, not every cluster's rows."""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.urls import reverse
from django.utils import timezone

from offloading.models import ManagedCluster, SnapshotState
from tests.fixtures.personas import viewer_client
from tests.fleet_snapshot import write_turin

URL = reverse("offloading:fleet_namespaces")


@pytest.fixture
def viewer(django_user_model: Any) -> Client:
    return viewer_client(django_user_model)


def _rows(html: str) -> list[tuple[str, str]]:
    """(cluster, namespace) of each row of the namespaces table."""
    table = html.split('aria-label="Namespaces"', 1)[1]
    found = re.findall(r"<tr>\s*<td>([^<]+)</td>\s*<td>(?:<a [^>]+>)?([^<]+)", table)
    return [(cluster.strip(), name.strip()) for cluster, name in found]


def test_every_clusters_namespaces_with_their_cluster(fleet: Any, viewer: Client) -> None:
    write_turin()
    default = ManagedCluster.objects.get(is_default=True).name
    response = viewer.get(URL)
    assert response.status_code == 200
    rows = _rows(response.content.decode())
    assert (default, "shop") in rows and ("turin", "shop") in rows and ("turin", "etl") in rows
    assert ("turin", "payments") in rows and (default, "payments") in rows
    assert rows.index((default, "shop")) < rows.index(("turin", "etl")), "the default cluster's rows first"
    html = response.content.decode()
    assert f'href="{reverse("offloading:namespace_detail", args=["shop"])}"' in html
    # Each row links to its namespace's page in its own cluster (turin's under /m/turin/, offloading/switcher.py).
    assert f'href="/m/turin{reverse("offloading:namespace_detail", args=["etl"])}"' in html
    assert f'href="{reverse("offloading:namespace_detail", args=["etl"])}"' not in html  # etl is turin's only


def test_the_filters_narrow_by_cluster_name_and_offloading(fleet: Any, viewer: Client) -> None:
    write_turin()
    default = ManagedCluster.objects.get(is_default=True).name
    assert {c for c, _ in _rows(viewer.get(URL, {"cluster": "turin"}).content.decode())} == {"turin"}
    assert _rows(viewer.get(URL, {"q": "ET"}).content.decode()) == [("turin", "etl")]
    offloaded = _rows(viewer.get(URL, {"offloaded": "yes"}).content.decode())
    assert {("turin", "shop"), ("turin", "etl"), ("turin", "payments"), (default, "shop")} <= set(offloaded)
    assert ("turin", "default") not in offloaded and (default, "payments") not in offloaded
    assert ("turin", "default") in _rows(viewer.get(URL, {"offloaded": "no", "cluster": "turin"}).content.decode())
    unknown = viewer.get(URL, {"cluster": "nowhere"})
    assert unknown.status_code == 200 and _rows(unknown.content.decode()) == []
    assert "cluster: Select a valid choice" in unknown.content.decode()


def test_each_clusters_snapshot_state_shows_with_its_error(fleet: Any, viewer: Client) -> None:
    turin = write_turin()
    SnapshotState.touch(
        turin, last_error="turin: the API server did not answer", last_attempt_at=timezone.now() + timedelta(seconds=1)
    )
    html = viewer.get(URL).content.decode()
    summary = html.split('aria-label="Managed clusters"', 1)[1].split("</table>", 1)[0]
    turin_row = summary.split(">turin<", 1)[1].split("</tr>", 1)[0]
    assert "the API server did not answer" in turin_row and "refresh failing" in turin_row
    default_row = summary.split("default</span>", 1)[1].split("</tr>", 1)[0]
    assert "did not answer" not in default_row and "refresh failing" not in default_row


def test_it_needs_a_signed_in_user(fleet: Any) -> None:
    response = Client().get(URL)
    assert response.status_code == 302 and "/accounts/login/" in response["Location"]


def test_the_page_asks_as_many_queries_with_ten_clusters_as_with_two(fleet: Any, viewer: Client, settings: Any) -> None:
    """The configured clusters' rows are made once (models.managed.configured), not locked and read again
    per cluster at every request: the fleet-wide page costs no query more per managed cluster."""

    def queries() -> int:
        viewer.get(URL)  # the session and the rows made, then counted
        with CaptureQueriesContext(connection) as captured:
            assert viewer.get(URL).status_code == 200
        return len(captured)

    default = ManagedCluster.objects.get(is_default=True)
    settings.LIQO_DASH_CLUSTERS = [default.context or "rome", "ctx-0"]
    two = queries()  # two: the banner names each cluster's state once there is more than one
    settings.LIQO_DASH_CLUSTERS = [default.context or "rome", *[f"ctx-{i}" for i in range(9)]]
    ten = queries()
    assert set(ManagedCluster.objects.values_list("context", flat=True)) >= {f"ctx-{i}" for i in range(9)}
    assert ten == two, (two, ten)
