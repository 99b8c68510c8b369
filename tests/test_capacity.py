"""Room on the peers (offloading.whatif.capacity): allocatable from the virtual nodes' quotas, what the
running pods request, the "nearly full" threshold, and a constant number of queries."""

from __future__ import annotations

from typing import Any

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from offloading.models import VirtualNode
from offloading.models.inventory import Pod
from offloading.whatif.capacity import NEARLY_FULL_PERCENT, room_of, rooms


def test_room_adds_up_the_virtual_nodes_and_computes_shares() -> None:
    room = room_of(
        "milan",
        [{"cpu": "4", "memory": "8Gi", "pods": "100"}, {"cpu": "4000m", "memory": "8Gi", "pods": "10"}],
        {"cpu_millis": 6500, "memory_bytes": 2 * 1024**3, "pods": 11},
    )
    assert room.allocatable == {"cpu": 8.0, "memory": 16 * 1024**3, "pods": 110.0}
    assert room.percent == {"cpu": 81, "memory": 12, "pods": 10}
    assert room.full == ["cpu"] and room.nearly_full
    assert room.requested_cpu_millis == 6500
    api = room.as_api()
    assert api["allocatable"]["cpu"] == 8 and api["requested"]["cpu"] == 6.5 and api["nearlyFull"] is True


def test_the_threshold_is_inclusive_and_unknown_resources_have_no_share() -> None:
    at = room_of("a", [{"cpu": "10", "pods": "10"}], {"cpu_millis": 7900, "pods": NEARLY_FULL_PERCENT // 10})
    assert at.percent["cpu"] == 79 and at.percent["pods"] == NEARLY_FULL_PERCENT and at.full == ["pods"]
    assert at.percent["memory"] is None, "no memory declared: no share, never 'full'"
    empty = room_of("b", [], None)
    assert not empty.known and not empty.nearly_full and empty.percent == {"cpu": None, "memory": None, "pods": None}


@pytest.mark.django_db
def test_rooms_takes_two_queries_whatever_the_number_of_peers() -> None:
    for i in range(30):
        VirtualNode.objects.create(
            namespace=f"liqo-tenant-p{i}", name=f"p{i}", cluster_id=f"p{i}", capacity={"cpu": "2", "pods": "10"}
        )
        Pod.objects.create(namespace="shop", name=f"w{i}", cluster_id=f"p{i}", phase="Running", cpu_millis=1800)
    Pod.objects.create(namespace="shop", name="pending", cluster_id="p0", phase="Pending", cpu_millis=5000)
    Pod.objects.create(namespace="shop", name="local", cluster_id="", phase="Running", cpu_millis=5000)
    with CaptureQueriesContext(connection) as queries:
        found = rooms()
    assert len(queries) == 2
    assert len(found) == 30 and found["p0"].percent["cpu"] == 90 and found["p0"].requested["pods"] == 1
    with CaptureQueriesContext(connection) as queries:
        some: Any = rooms(["p1", "nowhere"])
    assert len(queries) == 2
    assert set(some) == {"p1", "nowhere"} and not some["nowhere"].known and some["p1"].nearly_full
