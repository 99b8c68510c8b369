"""Memory is said in Kubernetes' binary units everywhere (a 128Gi quota is never "128.0 GB")."""

from __future__ import annotations

import re
from typing import Any

import pytest
from django.urls import reverse

from offloading.models import VirtualNode
from offloading.models.inventory import Pod
from offloading.templatetags.offloading_extras import binary_bytes

pytestmark = pytest.mark.django_db


@pytest.mark.parametrize(
    ("value", "text"),
    [
        (0, "0B"),
        (512, "512B"),
        (1024, "1Ki"),
        (1536 * 1024**2, "1.5Gi"),
        (128 * 1024**3, "128Gi"),
        (1024**4, "1Ti"),
        (1023.99 * 1024**2, "1Gi"),  # never "1024Mi"
        (250 * 1024**2, "250Mi"),
        (None, "0B"),
        ("not a number", ""),
    ],
)
def test_bytes_in_binary_units(value: Any, text: str) -> None:
    assert binary_bytes(value) == text


def test_the_peer_page_says_the_quota_as_it_is_written(admin_client: Any, fleet: Any) -> None:
    VirtualNode.objects.filter(name="milan").update(capacity={"cpu": "8", "memory": "128Gi"})
    Pod.objects.create(
        namespace="shop",
        name="web-1",
        node_name="milan",
        cluster_id="milan",
        phase="Running",
        cpu_millis=500,
        memory_bytes=512 * 1024**2,
    )
    page = admin_client.get(reverse("offloading:cluster_detail", args=["milan"])).content.decode()
    assert "memory: 128Gi" in page, "the virtual node's quota"
    assert "<strong>512Mi</strong> of 128Gi" in page, "the room, in the same units"
    assert "0.5Gi" not in page and not re.search(r"\d\s?[KMGT]B\b", page), "no decimal units anywhere"


def test_the_namespace_page_says_pod_requests_in_binary_units(admin_client: Any, fleet: Any) -> None:
    Pod.objects.create(
        namespace="shop",
        name="web-1",
        node_name="milan",
        cluster_id="milan",
        phase="Running",
        cpu_millis=250,
        memory_bytes=64 * 1024**2,
    )
    page = admin_client.get(reverse("offloading:namespace_detail", args=["shop"])).content.decode()
    assert "250m CPU · 64Mi" in page and not re.search(r"\d\s?[KMGT]B\b", page)


def test_a_pod_without_requests_says_so_instead_of_zero_bytes(admin_client: Any, fleet: Any) -> None:
    Pod.objects.create(namespace="shop", name="bare", node_name="milan", cluster_id="milan", phase="Running")
    page = admin_client.get(reverse("offloading:namespace_detail", args=["shop"])).content.decode()
    assert "none requested" in page and "0m CPU" not in page
    peer = admin_client.get(reverse("offloading:cluster_detail", args=["milan"])).content.decode()
    assert "none requested" in peer and "0m · 0B" not in peer
