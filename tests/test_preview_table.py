"""The offload preview's cluster table at fleet size (offloading/views/previewhtml.py): the selected
clusters a row each, the excluded ones grouped by their reason with every id still on the page, the
notes kept; the room line against the template it replaced; the labels and quotas read through caches
keyed by their JSON text (read-only, never stale)."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.db import connection
from django.template import Context, Template
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from offloading.models import Cluster, Namespace, VirtualNode
from offloading.views.previewhtml import SHOWN_IDS, cluster_table, room_html
from offloading.whatif.capacity import Room, quota_of, room_of
from offloading.whatif.preview import labels_of, preview
from tests.fixtures.snapshot import READY_SPEC

pytestmark = pytest.mark.django_db

REGION = "topology.kubernetes.io/region"
FORM = {"namespace_mapping_strategy": "DefaultName", "pod_offloading_strategy": "LocalAndRemote"}


def _peer(cluster_id: str, region: str, *, vn_names: tuple[str, ...] = (), status: str = "Healthy") -> None:
    Cluster.objects.create(cluster_id=cluster_id, name=cluster_id, offloading_status=status)
    for name in vn_names or (cluster_id,):
        VirtualNode.objects.create(
            namespace=f"liqo-tenant-{cluster_id}",
            name=name,
            cluster_id=cluster_id,
            labels={REGION: region if name != "twin-1" else "eu-west"},
            capacity={"cpu": "4", "memory": "8Gi", "pods": "110"},
        )


def _rows(body: str) -> list[str]:
    table = body.split('id="preview-clusters"', 1)[1].split("</table>", 1)[0]
    return re.findall(r"<tr class=\"(?:sel|dim)\">.*?</tr>", table, re.S)


def _grown_fleet() -> list[str]:
    """Next to milan (eu-west) and naples (eu-south, module Unhealthy): twelve peers in us-east, two in
    ap-south, one without a virtual node, one whose two virtual nodes disagree."""
    us_east = [f"east-{i:02}" for i in range(12)]
    for cluster_id in us_east:
        _peer(cluster_id, "us-east")
    _peer("south-a", "ap-south")
    _peer("south-b", "ap-south", status="Disabled")
    Cluster.objects.create(cluster_id="ghost", name="ghost", offloading_status="Healthy")
    _peer("twin", "us-east", vn_names=("twin-1", "twin-2"))  # twin-1 in eu-west: the last one decides
    return us_east


def test_excluded_clusters_are_grouped_by_reason_and_every_id_stays_on_the_page(admin_client: Any, fleet: Any) -> None:
    us_east = _grown_fleet()
    url = reverse("offloading:namespace_offload_preview", args=["payments"])
    body = admin_client.post(url, {**FORM, "cluster_selector": f"{REGION} in (eu-west)"}).content.decode()
    assert "1 of 17 clusters selected" in body  # 17 peers with a virtual node; ghost has none
    rows = _rows(body)
    assert rows[0].startswith('<tr class="sel">') and "milan" in rows[0] and "room-line" in rows[0]
    assert "CPU <strong>0</strong> of 8 (0%)" in rows[0]
    assert all(row.startswith('<tr class="dim">') for row in rows[1:]), "selected first, then the excluded"
    # The twelve in us-east: one row, folded under its count, naming every one of them.
    (east,) = [row for row in rows if "east-00" in row]
    assert f"<summary>{len(us_east)} clusters</summary>" in east and "has topology.kubernetes.io/region=us-east" in east
    assert all(cluster_id in east for cluster_id in us_east)
    # Two sharing a reason are listed as they are, the module status of each kept.
    (south,) = [row for row in rows if "south-a" in row]
    assert "<details" not in south and "south-a, south-b" in south and ">disabled</span>" in south
    assert SHOWN_IDS >= 2, "two clusters sharing a reason are listed, not folded"
    # The notes and a cluster's own reasons stay rows of their own.
    (naples,) = [row for row in rows if "naples" in row]
    assert ">unhealthy</span>" in naples and "region=eu-south" in naples
    (ghost,) = [row for row in rows if "ghost" in row]
    assert "no virtual node: Liqo cannot offload to this cluster" in ghost
    (twin,) = [row for row in rows if ">twin" in row]
    assert "virtual nodes disagree" in twin and "(twin-1)" in twin and "(twin-2)" in twin
    assert len(rows) == 1 + 5  # milan; us-east, ap-south, naples, ghost, twin
    assert "17 clusters excluded, for 5 reasons (a row each)." in body
    for cluster_id in Cluster.objects.values_list("cluster_id", flat=True):
        assert cluster_id in body, f"{cluster_id} can be found on the page"


def test_a_selector_error_and_the_clusters_not_reached_keep_their_words(fleet: Any) -> None:
    # An integer comparison on a value that is not an integer: Liqo's evaluation fails at milan's node
    # (the first listed) and stops there; naples is not reached.
    VirtualNode.objects.filter(name="milan").update(labels={REGION: "eu-west", "size": "big"})
    shop = Namespace.objects.get(name="shop")
    spec = {
        **READY_SPEC,
        "clusterSelector": {
            "nodeSelectorTerms": [{"matchExpressions": [{"key": "size", "operator": "Gt", "values": ["x"]}]}]
        },
    }
    result = preview(shop, spec)
    rows = {row["cluster_id"]: row for row in result.clusters}
    assert rows["milan"]["error"] and not rows["naples"]["reached"]
    html = str(cluster_table(result.clusters, result.rooms).html)
    assert "Invalid ClusterSelector:" in html and "(Liqo stops evaluating here)" in html
    assert "not evaluated: Liqo stopped at an earlier cluster" in html


def test_what_the_snapshot_says_is_escaped(admin_client: Any, fleet: Any) -> None:
    VirtualNode.objects.filter(name="naples").update(labels={REGION: "<b>south</b>"})
    url = reverse("offloading:namespace_offload_preview", args=["payments"])
    body = admin_client.post(url, {**FORM, "cluster_selector": f"{REGION} in (eu-west)"}).content.decode()
    assert "region=&lt;b&gt;south&lt;/b&gt;" in body and "<b>south</b>" not in body


def test_the_preview_page_costs_the_same_queries_for_two_or_forty_clusters(admin_client: Any, fleet: Any) -> None:
    url = reverse("offloading:namespace_offload_preview", args=["shop"])
    form = {"pod_offloading_strategy": "LocalAndRemote", "cluster_selector": f"{REGION} in (eu-west, us-east)"}
    with CaptureQueriesContext(connection) as few:
        admin_client.post(url, form)
    for i in range(40):
        _peer(f"p{i:02}", "us-east" if i % 2 else "ap-south")
    with CaptureQueriesContext(connection) as many:
        body = admin_client.post(url, form).content.decode()
    assert "21 of 42 clusters selected" in body
    assert len(many) == len(few)


def test_labels_and_quotas_are_read_only_and_follow_their_content(fleet: Any) -> None:
    labels = labels_of('{"a": "1"}')
    assert labels == {"a": "1"} and labels_of('{"a": "1"}') is labels, "the same text: the same mapping"
    with pytest.raises(TypeError):
        labels["a"] = "2"  # type: ignore[index]
    assert labels_of("not json") == {} and labels_of("[1]") == {} and labels_of(None) == {}
    assert quota_of('{"cpu": "500m", "memory": "1Gi", "pods": "10"}') == (0.5, 1024.0**3, 10.0)
    assert quota_of("{") == (0.0, 0.0, 0.0) and quota_of('{"cpu": "lots"}') == (0.0, 0.0, 0.0)
    # A virtual node that changes is read anew: the cache is keyed by what the row holds.
    shop = Namespace.objects.get(name="shop")
    assert preview(shop, READY_SPEC).selected == ["milan"]
    VirtualNode.objects.filter(name="naples").update(labels={REGION: "eu-west"}, capacity={"cpu": "3"})
    result = preview(shop, READY_SPEC)
    assert result.selected == ["milan", "naples"] and result.rooms["naples"].allocatable["cpu"] == 3.0


# The room line as the template drew it before it was built in Python (templates/offloading/_room.html).
ROOM_TEMPLATE = """{% load offloading_extras %}{% if room.known %}<span class="room"><span>CPU <strong>{{ room.requested.cpu|floatformat:"-2" }}</strong>{% if room.allocatable.cpu %} of {{ room.allocatable.cpu|floatformat:"-2" }} ({{ room.percent.cpu }}%){% else %} <span class="muted">(none declared)</span>{% endif %}</span>
<span>memory <strong>{{ room.requested.memory|binary_bytes }}</strong>{% if room.allocatable.memory %} of {{ room.allocatable.memory|binary_bytes }} ({{ room.percent.memory }}%){% else %} <span class="muted">(none declared)</span>{% endif %}</span>
<span>pods <strong>{{ room.requested.pods|floatformat:0 }}</strong>{% if room.allocatable.pods %} of {{ room.allocatable.pods|floatformat:0 }} ({{ room.percent.pods }}%){% else %} <span class="muted">(none declared)</span>{% endif %}</span></span>
{% if room.nearly_full %}<span class="badge warn" title="The running pods request at least {{ room.threshold }}% of this peer's allocatable {{ room.full|join:', ' }}">nearly full: {% for key in room.full %}{{ key }} {{ room.percent|get_item:key }}%{% if not forloop.last %}, {% endif %}{% endfor %}</span>{% endif %}
{% else %}<span class="muted">no capacity declared (no virtual node with a resource quota)</span>{% endif %}"""


@pytest.mark.parametrize(
    "room",
    [
        room_of(
            "a", [{"cpu": "8", "memory": "32Gi", "pods": "110"}], {"cpu_millis": 6500, "memory_bytes": 3 * 1024**3}
        ),
        room_of("b", [{"cpu": "3500m", "pods": "10"}], {"cpu_millis": 3125, "pods": 9}),  # nearly full twice
        room_of("c", [{"memory": "1500Mi"}], {"cpu_millis": 1250, "memory_bytes": 1536 * 1024**2, "pods": 3}),
        room_of("d", [], None),
        room_of("e", [{"cpu": "1", "memory": "1Ti"}, {"cpu": "2"}], {"cpu_millis": 1, "memory_bytes": 1023}),
    ],
)
def test_the_room_line_says_what_the_template_said(room: Room) -> None:
    def words(html: str) -> str:
        return " ".join(html.split())

    assert words(str(room_html(room))) == words(Template(ROOM_TEMPLATE).render(Context({"room": room})))


HOSTILE = '"><img src=x onerror=alert(1)>'
ESCAPED = "&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"
# A module status is at most 16 characters (Cluster.offloading_status; PostgreSQL enforces it).
HOSTILE_STATUS = '"><b>x'
ESCAPED_STATUS = "&quot;&gt;&lt;b&gt;x"


def test_a_hostile_cluster_id_and_label_value_are_escaped_on_the_page(admin_client: Any, fleet: Any) -> None:
    # One peer selected (in eu-west) and one excluded, both named by a hostile id, with a hostile
    # module status and a hostile region on the excluded one's virtual node.
    for cluster_id, region in ((f"sel{HOSTILE}", "eu-west"), (f"exc{HOSTILE}", HOSTILE)):
        Cluster.objects.create(cluster_id=cluster_id, name=cluster_id, offloading_status=f"bad{HOSTILE_STATUS}")
        VirtualNode.objects.create(
            namespace="liqo-tenant-x", name=f"vn-{cluster_id}", cluster_id=cluster_id, labels={REGION: region}
        )
    url = reverse("offloading:namespace_offload_preview", args=["payments"])
    body = admin_client.post(url, {**FORM, "cluster_selector": f"{REGION} in (eu-west)"}).content.decode()
    assert "2 of 4 clusters selected" in body
    rows = _rows(body)
    (selected,) = [row for row in rows if row.startswith('<tr class="sel">') and "sel&quot;" in row]
    assert f"sel{ESCAPED} <span" in selected  # the id, then its module badge
    assert f'title="Offloading module bad{ESCAPED_STATUS}"' in selected
    assert f">bad{ESCAPED_STATUS.lower()}</span>" in selected
    (excluded,) = [row for row in rows if "exc&quot;" in row]
    assert f"has {REGION}={ESCAPED}" in excluded
    assert "<img" not in body


def test_every_value_of_the_cluster_table_is_escaped() -> None:
    """Each field ``preview`` gives the table, hostile: the id, the module status, the note, the
    selector error, the virtual node names, a term's text and reasons, why a peer refuses pods."""
    verdict = {"all_clusters": False, "selected": False, "matched_term": None}
    lines = [{"text": f"t{n}{HOSTILE}", "failed": f"f{n}{HOSTILE}"} for n in (1, 2)]
    rows = [
        {
            "cluster_id": f"a{HOSTILE}",
            "module_status": f"m{HOSTILE}",
            "selected": True,
            "error": None,
            "note": "",
            "disagree": True,
            "explanations": [
                (f"vn1{HOSTILE}", {"all_clusters": False, "selected": True, "matched_term": 0, "terms": lines}),
                (f"vn2{HOSTILE}", {**verdict, "terms": [{"text": "x", "invalid": f"i{HOSTILE}"}]}),
            ],
            "refuses": (f"r{HOSTILE}",),
        },
        {**_excluded(f"b{HOSTILE}"), "explanations": [("vn", {**verdict, "terms": lines})]},
        {**_excluded(f"c{HOSTILE}"), "note": f"n{HOSTILE}"},
        {**_excluded(f"d{HOSTILE}"), "error": f"e{HOSTILE}"},
        *(_excluded(f"g{n}{HOSTILE}") | {"note": "same"} for n in range(SHOWN_IDS + 1)),  # folded
    ]
    room = room_of(f"a{HOSTILE}", [{"cpu": "1"}], {"cpu_millis": 990})
    html = str(cluster_table(rows, {f"a{HOSTILE}": room}).html)
    assert "<img" not in html and HOSTILE not in html
    for value in (
        f"a{ESCAPED}",
        f"m{ESCAPED}",
        f"vn1{ESCAPED}",
        f"vn2{ESCAPED}",
        f"t1{ESCAPED}",
        f"i{ESCAPED}",
        f"r{ESCAPED}",
        f"b{ESCAPED}",
        f"line 2 <code>t2{ESCAPED}</code>: f2{ESCAPED}",
        f"n{ESCAPED}",
        f"e{ESCAPED}",
        f"g{SHOWN_IDS}{ESCAPED}",
    ):
        assert value in html, value
    assert "nearly full: cpu 99%" in html and f"<summary>{SHOWN_IDS + 1} clusters</summary>" in html


def _excluded(cluster_id: str) -> dict[str, Any]:
    return {
        "cluster_id": cluster_id,
        "module_status": "",
        "selected": False,
        "error": None,
        "note": "",
        "disagree": False,
        "explanations": [],
        "refuses": (),
    }
