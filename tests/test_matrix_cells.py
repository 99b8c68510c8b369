"""The fleet matrix's cells, built in Python (offloading/views/fleet.py matrix_cells; the decision and
its figures are there): what the cluster reports stays escaped, in the cell's title attribute too."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from offloading.models import Cluster, ClusterOffloading, Namespace
from offloading.views.fleet import matrix_cells

pytestmark = pytest.mark.django_db

HOSTILE = "\"' onmouseover=alert(1) x=<b>"
ESCAPED = "&quot;&#x27; onmouseover=alert(1) x=&lt;b&gt;"


def test_a_hostile_cluster_id_is_escaped_in_the_matrix(admin_client: Any, fleet: Any) -> None:
    cluster_id = f"aaa{HOSTILE}"  # sorts first: on the first page of columns
    Cluster.objects.create(cluster_id=cluster_id, name="aaa", offloading_status="Healthy")
    shop = Namespace.objects.get(name="shop")
    ClusterOffloading.objects.create(namespace=shop, cluster_id=cluster_id, selected=False, state="Terminating")
    body = admin_client.get(reverse("offloading:fleet_matrix")).content.decode()
    assert HOSTILE not in body and "<b>" not in body
    assert f'<th class="rot"><span>aaa{ESCAPED}</span></th>' in body  # the column head (the template)
    # The cell (built in Python): its title holds the id and the state, nothing breaks out of it.
    assert f'<td class="cell purple" title="aaa{ESCAPED}: Terminating (not selected)">…</td>' in body
    cells = re.findall(r"<td class=\"cell[^\"]*\" title=\"[^\"]*\">[^<]*</td>", body)
    assert len(cells) == 3  # aaa…, milan, naples: each a whole cell


def test_matrix_cells_escape_every_attribute() -> None:
    row = ClusterOffloading(cluster_id=HOSTILE, selected=True, state=HOSTILE)
    html = str(matrix_cells([HOSTILE, "empty"], {HOSTILE: row}))
    assert html == (
        f'<td class="cell muted" title="{ESCAPED}: {ESCAPED}">•</td>'  # an unknown state: muted, a dot
        '<td class="cell" title=""></td>'
    )
