"""Observability per managed cluster (issue 28): /metrics has one series per managed cluster (a ``cluster``
label naming it; the default cluster's keep their names and other labels), /readyz tells each cluster in
its body without failing on one that is down, and the banner under the header speaks of the page's
cluster, or on a page across the fleet names the clusters that are out.

Two managed clusters, rome (the default) and milan-eu: milan's API server unreachable (its breaker open)
and its snapshot stale show in milan's series only, in the health body and in milan's banner; rome stays
fine. The first tests open milan's breaker as the worker does (``breaker.report_failure``); the last one
against a sandbox domain of two API servers, with milan's dropping every connection."""

from __future__ import annotations

import json
import subprocess
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.core.cache import cache
from django.test import Client
from django.urls import reverse
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from offloading.changes.requests import request_offload
from offloading.choices import ChangeAction, ChangeState
from offloading.cluster import breaker, kube
from offloading.models import ChangeRequest, ManagedCluster, Namespace, SnapshotState
from offloading.models.managed import ensure_configured
from offloading.snapshot import condition
from offloading.snapshot import refresh as snapshot
from offloading.snapshot.engine import _count_restart
from tests.test_fleet_changes_sandbox import SPEC, Two
from tests.test_fleet_changes_sandbox import two as two  # noqa: F401 - the fixture, reused
from tests.test_metrics_promtool import check_metrics, promtool

MILAN = "milan-eu"
UNREACHABLE = kube.KubeError("transient", "connection refused", unreachable=True)
PER_CLUSTER = (
    "liqo_dash_changes",
    "liqo_dash_changes_waiting_for_api",
    "liqo_dash_snapshot_age_seconds",
    "liqo_dash_snapshot_stale",
    "liqo_dash_snapshot_refresh_failed",
    "liqo_dash_watcher_alive",
    "liqo_dash_api_server_reachable",
    "liqo_dash_managed_cluster_health",
    "liqo_dash_offloaded_namespaces",
    "liqo_dash_alerts_open",
)


def _rome_and_milan() -> tuple[ManagedCluster, ManagedCluster]:
    (rome,) = ensure_configured([])
    rome.name = "rome"
    rome.save(update_fields=["name", "updated_at"])
    return rome, ManagedCluster.objects.create(name=MILAN, context="milan")


def _samples(text: str, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    """Every sample called ``name``, keyed by its labels (sorted pairs)."""
    return {
        tuple(sorted(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name == name
    }


def _value(text: str, name: str, **labels: str) -> float:
    found = [v for key, v in _samples(text, name).items() if all((k, labels[k]) in key for k in labels)]
    assert len(found) == 1, (name, labels, _samples(text, name))
    return found[0]


# What milan's outage shows in its series, beside rome's: (family, milan's value, rome's value).
OUTAGE = (
    ("liqo_dash_api_server_reachable", 0, 1),
    ("liqo_dash_snapshot_stale", 1, 0),
    ("liqo_dash_snapshot_refresh_failed", 1, 0),
    ("liqo_dash_changes_waiting_for_api", 1, 0),
)


def _milan_out_rome_in(text: str) -> None:
    for name, milans, romes in OUTAGE:
        assert (_value(text, name, cluster=MILAN), _value(text, name, cluster="rome")) == (milans, romes), name


class Milan:
    """rome fresh; milan-eu's snapshot ten minutes old with its last refresh failed, its breaker open, one
    change of it waiting for its API server; an offloaded namespace in each."""

    def __init__(self) -> None:
        self.rome, self.milan = _rome_and_milan()
        now = timezone.now()
        SnapshotState.touch(self.rome, last_success_at=now, last_attempt_at=now, last_error="")
        SnapshotState.touch(
            self.milan,
            last_success_at=now - timedelta(minutes=10),
            last_attempt_at=now,
            last_error="cannot reach the Kubernetes API: https://user:pw@10.0.0.9",
        )
        for managed in (self.rome, self.milan):
            Namespace.objects.create(managed=managed, name="shop", offloaded=True, offloading_phase="Ready")
        Namespace.objects.create(managed=self.rome, name="payments")
        self.outage = breaker.report_failure(UNREACHABLE, self.milan)
        assert self.outage is not None and breaker.outage() is None
        ChangeRequest.objects.create(
            managed=self.milan,
            namespace="shop",
            action=ChangeAction.UPDATE,
            state=ChangeState.QUEUED,
            waiting_reason=breaker.WAITING_FOR_API,
            requester_name="x",
        )
        ChangeRequest.objects.create(
            managed=self.rome,
            namespace="shop",
            action=ChangeAction.UPDATE,
            state=ChangeState.APPLIED,
            requester_name="x",
        )
        snapshot.informer_alive(60, self.rome)  # rome's watcher keeps its snapshot; milan's has none
        _count_restart("namespaces", self.milan)
        _count_restart("namespaces", self.milan)

    @property
    def since(self) -> str:
        assert self.outage is not None
        return f"{timezone.localtime(self.outage.since):%H:%M}"


@pytest.fixture
def milan_down(db: Any, settings: Any, redis_url: str) -> Milan:
    settings.CELERY_BROKER_URL = redis_url
    return Milan()


def test_milans_outage_shows_in_milans_series_only(client: Client, milan_down: Milan) -> None:
    text = client.get("/metrics").content.decode()
    check_metrics(text)
    _milan_out_rome_in(text)
    assert 600 <= _value(text, "liqo_dash_snapshot_age_seconds", cluster=MILAN) < 700
    assert 0 <= _value(text, "liqo_dash_snapshot_age_seconds", cluster="rome") < 60
    assert _value(text, "liqo_dash_watcher_alive", cluster=MILAN) == 0
    assert _value(text, "liqo_dash_watcher_alive", cluster="rome") == 1
    assert _value(text, "liqo_dash_changes", cluster=MILAN, state="queued") == 1
    assert _value(text, "liqo_dash_changes", cluster="rome", state="queued") == 0
    assert _value(text, "liqo_dash_changes", cluster="rome", state="applied") == 1
    assert _value(text, "liqo_dash_offloaded_namespaces", cluster=MILAN) == 1
    assert _value(text, "liqo_dash_offloaded_namespaces", cluster="rome") == 1
    assert _value(text, "liqo_dash_watch_restarts_total", cluster=MILAN, kind="namespaces") == 2
    assert not [k for k in _samples(text, "liqo_dash_watch_restarts_total") if ("cluster", "rome") in k]
    # One series per managed cluster of each family (and its other labels), never one per namespace.
    for name in PER_CLUSTER:
        clusters = {dict(key)["cluster"] for key in _samples(text, name)}
        assert clusters == {"rome", MILAN}, name
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            assert "namespace" not in sample.labels, sample
    assert "10.0.0.9" not in text


def test_the_default_clusters_series_keep_their_names_and_single_cluster_keys(
    client: Client, milan_down: Milan
) -> None:
    """A rule written for a single-cluster install (``liqo_dash_api_server_reachable == 0``,
    ``liqo_dash_snapshot_age_seconds > 300``) still matches the default cluster's series; the counters of
    the default cluster keep their shared-cache keys, so an upgrade loses no count."""
    _count_restart("namespaceoffloadings")  # the default cluster's
    text = client.get("/metrics").content.decode()
    assert _value(text, "liqo_dash_watch_restarts_total", cluster="rome", kind="namespaceoffloadings") == 1
    assert cache.get("liqo-dash:watch-restarts:namespaceoffloadings") == 1
    assert cache.get(f"liqo-dash:watch-restarts:namespaces:{milan_down.milan.pk}") == 2
    rome = _samples(text, "liqo_dash_snapshot_age_seconds")[(("cluster", "rome"),)]
    assert 0 <= rome < 60
    assert set(_samples(text, "liqo_dash_changes")) >= {(("cluster", "rome"), ("state", "failed"))}


def test_readiness_names_milan_out_and_stays_ready(client: Client, milan_down: Milan) -> None:
    response = client.get("/readyz")
    assert response.status_code == 200, response.content  # rome's checks and the process's own pass
    body = response.json()
    assert body["status"] == "ready"
    assert body["clusters_unreachable"] == [MILAN]
    assert body["clusters_stale"] == [MILAN]
    milan, rome = body["clusters"][MILAN], body["clusters"]["rome"]
    assert milan["reachable"] is False and milan["unreachable_since"] is not None
    assert milan["snapshot"]["stale"] is True and milan["snapshot"]["last_refresh_failed"] is True
    assert milan["snapshot"]["age_seconds"] >= 600 and milan["watcher_alive"] is False
    assert milan["default"] is False and rome["default"] is True
    assert rome["reachable"] is True and rome["unreachable_since"] is None
    assert rome["snapshot"]["stale"] is False and rome["watcher_alive"] is True
    assert "10.0.0.9" not in response.content.decode()  # names and results only, never an error message


def test_readiness_is_not_failed_by_another_cluster_even_with_no_snapshot_at_all(
    client: Client, settings: Any, redis_url: str, db: Any
) -> None:
    settings.CELERY_BROKER_URL = redis_url
    rome, milan = _rome_and_milan()
    SnapshotState.touch(rome, last_success_at=timezone.now(), last_error="")
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    assert response.json()["clusters_stale"] == [MILAN]
    assert response.json()["clusters"][MILAN]["snapshot"]["age_seconds"] is None


def test_milans_banner_speaks_of_milan_and_romes_pages_have_none(admin_client: Client, milan_down: Milan) -> None:
    namespaces = reverse("offloading:namespace_list")
    milan = admin_client.get(f"/m/{MILAN}{namespaces}").content.decode()
    banner = milan.split('id="cluster-outage">', 1)[1].split("</div>", 1)[0]
    assert f"The API server of {MILAN} is unreachable since {milan_down.since}." in banner
    assert f"The snapshot of {MILAN} is stale" in banner
    assert "fleet-outage" not in milan
    assert f"API server unreachable since {milan_down.since}" in milan  # the freshness badge, milan's too
    rome = admin_client.get(namespaces).content.decode()
    assert "cluster-outage" not in rome and "fleet-outage" not in rome
    assert "API server unreachable" not in rome


def test_the_fleet_wide_pages_name_the_clusters_that_are_out(admin_client: Client, milan_down: Milan) -> None:
    for name in ("offloading:managed_cluster_list", "offloading:fleet_namespaces"):
        page = admin_client.get(reverse(name)).content.decode()
        banner = page.split('id="fleet-outage">', 1)[1].split("</div>", 1)[0]
        assert f"{MILAN} unreachable since {milan_down.since}; rome fine." in " ".join(banner.split()), name
        assert "cluster-outage" not in page, name


def test_once_milan_is_back_no_banner_names_it(admin_client: Client, milan_down: Milan) -> None:
    assert breaker.report_success(milan_down.milan)
    now = timezone.now()
    SnapshotState.touch(milan_down.milan, last_success_at=now, last_attempt_at=now, last_error="")
    page = admin_client.get(reverse("offloading:managed_cluster_list")).content.decode()
    assert "fleet-outage" not in page
    assert "cluster-outage" not in admin_client.get(f"/m/{MILAN}/namespaces/").content.decode()


def test_a_single_cluster_keeps_its_banner_unnamed(admin_client: Client, db: Any) -> None:
    (only,) = ensure_configured([])
    SnapshotState.touch(only, last_success_at=timezone.now() - timedelta(hours=1), last_error="")
    breaker.report_failure(UNREACHABLE)
    for path in (reverse("offloading:namespace_list"), reverse("offloading:managed_cluster_list")):
        page = admin_client.get(path).content.decode()
        banner = " ".join(page.split('id="cluster-outage">', 1)[1].split("</div>", 1)[0].split())
        assert banner.startswith("The API server is unreachable since"), path
        assert "The snapshot is stale" in banner, path
        assert "fleet-outage" not in page, path


def test_the_summary_puts_the_clusters_out_first(milan_down: Milan) -> None:
    found = condition.conditions()
    assert [c.name for c in found] == ["rome", MILAN]  # the default first
    assert condition.summary(found) == f"{MILAN} unreachable since {milan_down.since}; rome fine"
    assert breaker.report_success(milan_down.milan)
    assert condition.summary(condition.conditions()) == f"{MILAN} stale since " + (
        f"{timezone.localtime(SnapshotState.get(milan_down.milan).last_success_at):%H:%M}; rome fine"
    )


# --------------------------------------------------------------------------------------------------
# Against a sandbox domain of two API servers (the official kubernetes client, eager Celery)


@pytest.mark.django_db(transaction=True)
def test_milans_api_server_down_in_a_real_domain(two: Two, admin_client: Client, settings: Any, redis_url: str) -> None:
    """rome and milan-eu as in tests/test_fleet_changes_sandbox.py (each with a namespace "orders", both
    refreshed): milan's API server drops every connection, its refresh fails and olga's change of it
    waits; then milan answers again."""
    settings.CELERY_BROKER_URL = redis_url  # the readiness' broker check (Celery itself runs eagerly)
    rome, milan = two.rome, two.milan
    rome.name = "rome"
    rome.save(update_fields=["name", "updated_at"])
    text = admin_client.get("/metrics").content.decode()
    check_metrics(text)
    assert _value(text, "liqo_dash_snapshot_stale", cluster=MILAN) == 0
    assert _value(text, "liqo_dash_api_server_reachable", cluster=MILAN) == 1
    two.domain["milan"].faults.set(outage=True)  # every connection to milan dropped without an answer
    try:
        assert not snapshot.refresh(milan).ok  # its last refresh failed: its snapshot is stale
        assert snapshot.refresh(rome).ok
        waiting = request_offload("orders", SPEC, two.olga, managed=milan.pk)
        waiting.refresh_from_db()
        assert waiting.waiting_reason == breaker.WAITING_FOR_API  # the push found milan unreachable
        text = admin_client.get("/metrics").content.decode()
        check_metrics(text)
        _milan_out_rome_in(text)
        ready = admin_client.get("/readyz")
        assert ready.status_code == 200, ready.content
        assert ready.json()["clusters_unreachable"] == [MILAN] and ready.json()["clusters_stale"] == [MILAN]
        fleet = " ".join(admin_client.get(reverse("offloading:managed_cluster_list")).content.decode().split())
        assert f"{MILAN} unreachable since " in fleet and "; rome fine." in fleet
        page = admin_client.get(f"/m/{MILAN}/namespaces/").content.decode()
        assert f"The API server of {MILAN} is unreachable since " in page
        assert "cluster-outage" not in admin_client.get("/namespaces/").content.decode()
    finally:
        two.domain["milan"].faults.clear()
    assert breaker.probe(milan.pk)  # milan answers again: its breaker closes, its change is sent
    assert snapshot.refresh(milan).ok
    text = admin_client.get("/metrics").content.decode()
    check_metrics(text)
    assert _value(text, "liqo_dash_api_server_reachable", cluster=MILAN) == 1
    assert _value(text, "liqo_dash_snapshot_stale", cluster=MILAN) == 0
    assert _value(text, "liqo_dash_changes_waiting_for_api", cluster=MILAN) == 0
    assert "fleet-outage" not in admin_client.get(reverse("offloading:managed_cluster_list")).content.decode()


def test_the_freshness_badge_a_clusters_pages_poll_is_that_clusters(admin_client: Client, milan_down: Milan) -> None:
    badge = reverse("offloading:freshness")
    milan = admin_client.get(f"/m/{MILAN}/namespaces/").content.decode()
    assert f'hx-get="/m/{MILAN}{badge}"' in milan  # the badge polls its page's cluster's
    poll = {"HX-Request": "true", "X-Live-Poll": "1"}  # answered by the live-poll middleware, before any view
    for headers in ({}, poll):
        answer = admin_client.get(f"/m/{MILAN}{badge}", headers=headers)
        assert answer.status_code == 200, headers
        assert f"API server unreachable since {milan_down.since}" in answer.content.decode(), headers
        rome = admin_client.get(badge, headers=headers)
        assert rome.status_code == 200 and "unreachable" not in rome.content.decode(), headers
        assert rome["ETag"] != answer["ETag"]
    assert admin_client.get(f"/m/nowhere{badge}", headers=poll).status_code == 404


def test_a_routed_clusters_celery_queue_has_its_depth(
    client: Client, milan_down: Milan, settings: Any, redis_url: str
) -> None:
    settings.LIQO_DASH = {**settings.LIQO_DASH, "CLUSTER_QUEUE_PREFIX": "cluster-"}
    queue = f"cluster-{milan_down.milan.pk}"
    broker = redis.Redis.from_url(redis_url)
    broker.rpush(queue, "a", "b")
    broker.rpush(f"{queue}\x06\x169", "c")  # a priority step's list
    text = client.get("/metrics").content.decode()
    check_metrics(text)
    assert _value(text, "liqo_dash_queue_depth", queue=queue) == 3
    assert _value(text, "liqo_dash_queue_depth", queue=settings.CELERY_TASK_DEFAULT_QUEUE) == 0


# Rules as a single-cluster install wrote them, before the cluster label: the repository ships none, so
# these stand for an operator's own.
SINGLE_CLUSTER_RULES = """groups:
  - name: liqo-dash
    rules:
      - alert: LiqoDashApiServerUnreachable
        expr: liqo_dash_api_server_reachable == 0
        for: 2m
        labels: {severity: critical}
      - alert: LiqoDashSnapshotStale
        expr: liqo_dash_snapshot_age_seconds > 300
        for: 2m
        labels: {severity: warning}
      - alert: LiqoDashChangesFailing
        expr: liqo_dash_changes{state="failed"} > 0
        labels: {severity: warning}
"""


def _input_series(text: str) -> list[dict[str, str]]:
    """The exposition as promtool's input series: each sample, its value held for ten minutes."""
    series = []
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            labels = ",".join(f'{k}="{v}"' for k, v in sorted(sample.labels.items()))
            series.append({"series": f"{sample.name}{{{labels}}}", "values": f"{sample.value:g}x10"})
    return series


def test_single_cluster_alert_rules_fire_for_milan_alone_on_the_real_exposition(
    client: Client, milan_down: Milan, tmp_path: Any
) -> None:
    """``promtool check rules`` and ``promtool test rules`` on this very scrape: each rule fires once, for
    milan, with its cluster label, and never for rome."""
    ChangeRequest.objects.create(
        managed=milan_down.milan, namespace="shop", action=ChangeAction.UPDATE, state=ChangeState.FAILED
    )
    text = client.get("/metrics").content.decode()
    rules = tmp_path / "rules.yaml"
    rules.write_text(SINGLE_CLUSTER_RULES)
    checked = subprocess.run([promtool(), "check", "rules", str(rules)], capture_output=True, timeout=60, check=False)
    assert checked.returncode == 0, checked.stdout + checked.stderr

    def fires(name: str, **labels: str) -> dict[str, Any]:
        return {"eval_time": "5m", "alertname": name, "exp_alerts": [{"exp_labels": {**labels, "cluster": MILAN}}]}

    plan = {
        "rule_files": [str(rules)],
        "evaluation_interval": "1m",
        "tests": [
            {
                "interval": "1m",
                "input_series": _input_series(text),
                "alert_rule_test": [
                    fires("LiqoDashApiServerUnreachable", severity="critical"),
                    fires("LiqoDashSnapshotStale", severity="warning"),
                    fires("LiqoDashChangesFailing", severity="warning", state="failed"),
                ],
            }
        ],
    }
    tests = tmp_path / "tests.yaml"
    tests.write_text(json.dumps(plan))  # YAML is a superset of JSON
    result = subprocess.run([promtool(), "test", "rules", str(tests)], capture_output=True, timeout=120, check=False)
    assert result.returncode == 0, (result.stdout + result.stderr).decode(errors="replace")
