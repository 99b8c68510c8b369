"""Alerts carry their managed cluster (issue 28): the periodic check looks at every managed cluster that
has a snapshot; the default cluster's subjects keep the keys of the single-cluster versions (an upgrade
opens no second alert), another cluster's name it (``stuck:<cluster>:<namespace>:<rule>``,
``peer:<cluster>:<peer>``), and the webhook's message names the cluster when it is not the default."""

from __future__ import annotations

from typing import Any

import pytest
from django.utils import timezone

from offloading.alerts import rules as alerts
from offloading.alerts.delivery import payload
from offloading.choices import AlertKind, AlertState
from offloading.models import Alert, Cluster, ManagedCluster, Namespace, SnapshotState
from offloading.models.managed import ensure_configured

pytestmark = pytest.mark.django_db
DASHBOARD = "https://dash.example.com"


@pytest.fixture(autouse=True)
def _webhook(settings: Any) -> None:
    settings.LIQO_DASH = {
        **settings.LIQO_DASH,
        "ALERT_WEBHOOK_URL": "http://127.0.0.1:9/hook",  # enabled; nothing is sent by these tests
        "ALERT_GRACE": 0.0,
        "ALERT_DASHBOARD_URL": DASHBOARD,
    }


def _troubled(managed: ManagedCluster) -> None:
    """A namespace offloaded without the scheduling label, and a peer whose offloading module is down."""
    Namespace.objects.create(
        managed=managed,
        name="shop",
        offloaded=True,
        offloading_phase="Ready",
        offloading_spec={"podOffloadingStrategy": "LocalAndRemote"},
    )
    Cluster.objects.create(managed=managed, cluster_id="naples", name="naples", offloading_status="Unhealthy")


def test_each_clusters_subjects_are_alerts_of_their_own_and_the_default_keeps_its_keys() -> None:
    (default,) = ensure_configured([])
    milan = ManagedCluster.objects.create(name="milan", context="milan")
    for managed in (default, milan):
        _troubled(managed)
        SnapshotState.touch(managed, last_success_at=timezone.now())
    # An alert the single-cluster version opened (0028 gave it the default cluster): not opened twice.
    Alert.objects.create(
        key="peer:naples", kind=AlertKind.PEER_UNHEALTHY, severity="critical", title="Peer naples is unhealthy"
    )
    alerts.detect()
    keys = dict(Alert.objects.values_list("key", "managed_id"))
    stuck = sorted(key for key in keys if key.startswith("stuck:"))
    assert stuck and all(key.startswith(("stuck:shop:", "stuck:milan:shop:")) for key in stuck), stuck
    rules = {key.split(":")[-1] for key in stuck}
    assert set(stuck) == {f"stuck:shop:{r}" for r in rules} | {f"stuck:milan:shop:{r}" for r in rules}
    assert {k: v for k, v in keys.items() if k.startswith("peer:")} == {
        "peer:naples": default.pk,
        "peer:milan:naples": milan.pk,
    }
    assert all(keys[key] == (milan.pk if ":milan:" in key else default.pk) for key in stuck)

    # The webhook is told which cluster, when it is not the default; the default's message is as before.
    theirs, ours = Alert.objects.get(key="peer:milan:naples"), Alert.objects.get(key="peer:naples")
    told = payload(theirs, AlertState.OPEN)
    assert told["text"].startswith("[liqo-dash] CRITICAL in managed cluster milan: Peer naples is unhealthy.")
    assert told["managed_cluster"] == "milan" and told["key"] == "peer:milan:naples"
    assert told["url"] == f"{DASHBOARD}/fleet/namespaces/?cluster=milan"  # the default's pages are not milan's
    mine = payload(ours, AlertState.OPEN)
    assert mine["text"].startswith("[liqo-dash] CRITICAL: Peer naples") and mine["managed_cluster"] == default.name
    shop = Alert.objects.filter(managed=milan, kind=AlertKind.STUCK).first()
    assert shop is not None and shop.path == "/fleet/namespaces/?cluster=milan&q=shop"

    # milan's peer heals: only milan's alert resolves.
    Cluster.objects.filter(managed=milan).update(offloading_status="Healthy")
    assert alerts.detect()["resolved"] == 1
    assert Alert.objects.get(key="peer:milan:naples").state == AlertState.RESOLVED
    assert Alert.objects.get(key="peer:naples").state == AlertState.OPEN


def test_a_cluster_without_a_snapshot_yet_resolves_nothing() -> None:
    (default,) = ensure_configured([])
    milan = ManagedCluster.objects.create(name="milan", context="milan")
    _troubled(milan)
    SnapshotState.touch(default, last_success_at=timezone.now())
    open_ = Alert.objects.create(key="peer:milan:naples", kind=AlertKind.PEER_UNHEALTHY, managed=milan, title="x")
    assert alerts.detect() == {"opened": 0, "resolved": 0}  # milan never synced: nothing known there
    open_.refresh_from_db()
    assert open_.state == AlertState.OPEN
