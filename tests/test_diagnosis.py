"""Each stuck-state rule fires on the snapshot state that produces it, and not on a healthy one."""

from __future__ import annotations

from datetime import timedelta
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from liqo_rules.constants import SCHEDULING_LABEL
from offloading.insight.diagnosis import diagnose
from offloading.models import Cluster, ClusterOffloading, Namespace, StatusTransition
from offloading.models.inventory import Pod

pytestmark = pytest.mark.django_db


def _rules(name: str = "shop") -> set[str]:
    return {f.rule for f in diagnose(Namespace.objects.get(name=name))}


def _healthy(name: str = "shop") -> None:
    Namespace.objects.filter(name=name).update(labels={SCHEDULING_LABEL: "true"})
    Cluster.objects.filter(cluster_id="naples").update(offloading_status="Healthy")


def test_a_healthy_offloading_has_no_finding(fleet: Any) -> None:
    _healthy()
    assert _rules() == set()
    assert _rules("payments") == set(), "not offloaded: nothing to diagnose"


def test_the_scheduling_label_missing(fleet: Any) -> None:
    assert "scheduling-label" in _rules()


def test_a_selector_that_matches_no_cluster_names_the_closest(fleet: Any) -> None:
    _healthy()
    spec = {
        "clusterSelector": {
            "nodeSelectorTerms": [
                {
                    "matchExpressions": [
                        {"key": "topology.kubernetes.io/region", "operator": "In", "values": ["us-east"]}
                    ]
                }
            ]
        }
    }
    Namespace.objects.filter(name="shop").update(offloading_spec=spec, offloading_phase="NoClusterSelected")
    (finding,) = [f for f in diagnose(Namespace.objects.get(name="shop")) if f.rule == "no-cluster"]
    assert "The closest is milan" in finding.explanation and "us-east" in finding.explanation


def test_not_ready_for_too_long_gives_the_per_cluster_reason(fleet: Any) -> None:
    _healthy()
    Namespace.objects.filter(name="shop").update(offloading_phase="SomeFailed")
    ClusterOffloading.objects.filter(cluster_id="milan").update(state="CreationLoopBackOff", message="name taken")
    StatusTransition.objects.create(namespace="shop", new="SomeFailed", time=timezone.now() - timedelta(minutes=30))
    rules = _rules()
    assert {"not-ready", "creation-loop-backoff"} <= rules
    (finding,) = [f for f in diagnose(Namespace.objects.get(name="shop")) if f.rule == "not-ready"]
    assert "milan: CreationLoopBackOff – name taken" in finding.explanation
    StatusTransition.objects.all().update(time=timezone.now())
    assert "not-ready" not in _rules(), "not yet stuck"


def test_terminating_for_too_long_names_what_holds_it(fleet: Any) -> None:
    _healthy()
    Namespace.objects.filter(name="shop").update(offloading_deleting=True, offloading_phase="Terminating")
    StatusTransition.objects.create(namespace="shop", new="Terminating", time=timezone.now() - timedelta(hours=1))
    (finding,) = [f for f in diagnose(Namespace.objects.get(name="shop")) if f.rule == "terminating"]
    assert "still held on milan" in finding.explanation


def test_an_unhealthy_selected_peer_and_a_stale_generation(fleet: Any) -> None:
    _healthy()
    Cluster.objects.filter(cluster_id="milan").update(offloading_status="Unhealthy")
    Namespace.objects.filter(name="shop").update(offloading_generation=4)
    assert {"peer-unhealthy", "generation-stale"} <= _rules()


def test_pods_pending_for_room(fleet: Any, admin_client: Any) -> None:
    _healthy()
    Pod.objects.create(
        namespace="shop", name="big", phase="Pending", reason="Unschedulable: 0/4 nodes: Insufficient cpu"
    )
    assert "pods-no-room" in _rules()
    page = admin_client.get(reverse("offloading:namespace_detail", args=["shop"])).content.decode()
    assert 'id="diagnosis"' in page and "no selected node has room" in page and "<em>Fix:</em>" in page
