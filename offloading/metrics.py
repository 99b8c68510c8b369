"""Prometheus metrics at ``/metrics`` (prometheus_client).

Counted in-process: HTTP requests by view, method and status, and their latency. Read at scrape time:
the Celery queue depth (Redis list lengths) and, per managed cluster (a ``cluster`` label naming it,
issue 28), its changes by state, its snapshot's age and staleness, whether a watcher keeps it, its API
server's breaker, discovery's health, its watch restarts, offloaded namespaces and open alerts. The
default cluster's series keep the names and other labels of single-cluster versions, so a rule or a
dashboard that matched them still does (it now matches one series per cluster, the default's with
``cluster="<its name>"``). Labels stay bounded: clusters, states, kinds; never a namespace. Under gunicorn with several workers, set ``PROMETHEUS_MULTIPROC_DIR`` to an empty writable
directory (deploy/gunicorn.conf.py empties it at start and marks dead workers), so every worker's
counters are summed; without it the metrics are those of the process that answers.

``METRICS_TOKEN``, when set, must be sent as ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import hmac
import os
import time
from collections.abc import Callable, Iterator
from typing import Any

import redis
from django.conf import settings
from django.db.models import Count, DurationField, ExpressionWrapper, F, QuerySet, Sum
from django.http import HttpRequest, HttpResponse
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from liqo_dash import env
from offloading.audit.events import last_verification
from offloading.choices import AlertKind, AlertState, ChangeState
from offloading.cluster import breaker as apihealth
from offloading.models import Alert, ChangeRequest, ManagedCluster, Namespace
from offloading.models.managed import ManagedClusterHealth
from offloading.queue import cluster_queue
from offloading.snapshot import condition
from offloading.snapshot.engine import watch_restarts
from offloading.views.liveaside import ASIDE

REQUESTS = Counter(
    "liqo_dash_http_requests", "HTTP requests answered, by view, method and status.", ["view", "method", "status"]
)
LATENCY = Histogram(
    "liqo_dash_http_request_duration_seconds",
    "Time to answer an HTTP request, by view.",
    ["view"],
    buckets=(0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0),
)
# kombu's Redis transport keeps one list per priority step: the queue's name, then name + sep + step.
_PRIORITY_SEP = "\x06\x16"
_PRIORITY_STEPS = (3, 6, 9)


def queue_keys(queue: str) -> list[str]:
    return [queue] + [f"{queue}{_PRIORITY_SEP}{step}" for step in _PRIORITY_STEPS]


class StateCollector(Collector):
    """Values read when Prometheus scrapes: nothing to keep in sync between processes."""

    def collect(self) -> Iterator[Metric]:
        found = condition.conditions()
        names = {c.pk: c.name for c in found}
        yield from _changes(names)
        yield from _snapshot(found)
        yield from _change_durations(names)
        yield from _api_and_watch(found)
        yield from _cluster_contents(names)
        yield _queue_depth()


def _counts(rows: QuerySet[Any], *fields: str) -> dict[Any, int]:
    """How many of ``rows`` each managed cluster has, in one GROUP BY: by its pk, or with ``fields`` by
    (pk, *their values). A cluster with none is left out (its series reads 0)."""
    grouped = rows.values_list("managed_id", *fields).annotate(n=Count("id")).order_by()
    return {(row[:-1] if fields else row[0]): row[-1] for row in grouped}


def _changes(names: dict[int, str]) -> Iterator[Metric]:
    """Changes by cluster and state (every state of every cluster, zeros too: a rule sees them go to 0),
    and those parked until their cluster's API server answers again."""
    changes = GaugeMetricFamily(
        "liqo_dash_changes", "Change requests by managed cluster and state.", labels=["cluster", "state"]
    )
    counts = _counts(ChangeRequest.objects.all(), "state")
    for pk, name in names.items():
        for state in ChangeState.values:
            changes.add_metric([name, state], counts.get((pk, state), 0))
    yield changes
    parked = GaugeMetricFamily(
        "liqo_dash_changes_waiting_for_api",
        "Queued changes that wait for their managed cluster's API server to answer again.",
        labels=["cluster"],
    )
    waiting = _counts(ChangeRequest.objects.filter(state=ChangeState.QUEUED, waiting_reason=apihealth.WAITING_FOR_API))
    for pk, name in names.items():
        parked.add_metric([name], waiting.get(pk, 0))
    yield parked


def _snapshot(found: list[condition.ClusterCondition]) -> Iterator[Metric]:
    age = GaugeMetricFamily(
        "liqo_dash_snapshot_age_seconds",
        "Seconds since the last successful refresh of the managed cluster's snapshot (-1: never).",
        labels=["cluster"],
    )
    stale = GaugeMetricFamily(
        "liqo_dash_snapshot_stale",
        "1 when the managed cluster's snapshot is stale (older than LIQO_DASH_STALE_AFTER, its last refresh "
        "failed, or none yet), else 0.",
        labels=["cluster"],
    )
    failed = GaugeMetricFamily(
        "liqo_dash_snapshot_refresh_failed",
        "1 when the managed cluster's last refresh or watch failed after its last success, else 0.",
        labels=["cluster"],
    )
    watcher = GaugeMetricFamily(
        "liqo_dash_watcher_alive",
        "1 while a watcher keeps every kind of the managed cluster synced, else 0.",
        labels=["cluster"],
    )
    for c in found:
        age.add_metric([c.name], -1 if c.age_seconds is None else c.age_seconds)
        stale.add_metric([c.name], 1 if c.stale else 0)
        failed.add_metric([c.name], 1 if c.refresh_failed else 0)
        watcher.add_metric([c.name], 1 if c.watcher_alive else 0)
    yield from (age, stale, failed, watcher)


def _queue_depth() -> Metric:
    """The Celery queues' lengths: the default queue, and each non-default cluster's own
    (``<prefix><pk>``) when LIQO_DASH_CLUSTER_QUEUE_PREFIX routes them. No cluster label: the default
    queue serves every cluster that is not routed (each cluster's changes are ``liqo_dash_changes``)."""
    queues = [settings.CELERY_TASK_DEFAULT_QUEUE]
    if settings.LIQO_DASH.get("CLUSTER_QUEUE_PREFIX"):
        others = ManagedCluster.objects.filter(is_default=False).order_by("pk").values_list("pk", flat=True)
        queues += [str(cluster_queue(pk)) for pk in others]
    depth = GaugeMetricFamily(
        "liqo_dash_queue_depth", "Messages waiting in the Celery queue (-1: broker unreachable).", labels=["queue"]
    )
    try:
        client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=2.0, socket_connect_timeout=2.0)
        try:
            pipe = client.pipeline()
            for queue in queues:
                for key in queue_keys(queue):
                    pipe.llen(key)
            lengths = pipe.execute()
        finally:
            client.close()
    except redis.RedisError:
        for queue in queues:
            depth.add_metric([queue], -1)
        return depth
    per_queue = len(_PRIORITY_STEPS) + 1
    for index, queue in enumerate(queues):
        depth.add_metric([queue], sum(lengths[index * per_queue : (index + 1) * per_queue]))
    return depth


DURATION_SAMPLE = 1000
DURATION_QUANTILES = (0.5, 0.95, 1.0)


def _change_durations(names: dict[int, str]) -> Iterator[Metric]:
    """A summary by cluster and outcome: the quantiles (0.5, 0.95 and 1.0, the longest) of the seconds from
    request to outcome over each cluster's last DURATION_SAMPLE finished changes (a sliding window, as a
    client-side summary keeps), and the count and sum over every finished change (cumulative, as a
    summary's must be). One query per cluster for the window, one for the totals."""
    finished = ChangeRequest.objects.filter(finished_at__isnull=False)
    elapsed = ExpressionWrapper(F("finished_at") - F("created_at"), output_field=DurationField())
    totals = {
        (managed, state): (count, total)
        for managed, state, count, total in finished.values("managed_id", "state")
        .annotate(count=Count("id"), total=Sum(elapsed))
        .values_list("managed_id", "state", "count", "total")
        .order_by()
    }
    name = "liqo_dash_change_duration_seconds"
    family = Metric(
        name,
        f"Seconds from request to outcome, by managed cluster: quantiles over its last {DURATION_SAMPLE} "
        "finished changes, count and sum over all.",
        "summary",
    )
    for pk, cluster in names.items():
        rows = finished.filter(managed_id=pk).order_by("-finished_at")[:DURATION_SAMPLE]
        by_state: dict[str, list[float]] = {}
        for state, created, finished_at in rows.values_list("state", "created_at", "finished_at"):
            if finished_at is not None:
                by_state.setdefault(state, []).append(max(0.0, (finished_at - created).total_seconds()))
        states = set(by_state) | {state for managed, state in totals if managed == pk}
        for state in sorted(states):
            values = sorted(by_state.get(state, []))
            labels = {"cluster": cluster, "state": state}
            if values:
                for quantile in DURATION_QUANTILES:
                    value = values[min(len(values) - 1, int(quantile * len(values)))]
                    family.add_sample(name, {**labels, "quantile": str(quantile)}, value)
            count, total = totals.get((pk, state), (0, None))
            family.add_sample(f"{name}_count", labels, float(count))
            family.add_sample(f"{name}_sum", labels, max(0.0, total.total_seconds()) if total else 0.0)
    yield family


def _api_and_watch(found: list[condition.ClusterCondition]) -> Iterator[Metric]:
    verdict = last_verification()
    audit_ok = GaugeMetricFamily(
        "liqo_dash_audit_trail_ok", "1: the last verification of the audit trail passed, 0: it failed, -1: none yet."
    )
    audit_ok.add_metric([], -1 if verdict is None else 1 if verdict["ok"] else 0)
    yield audit_ok
    reachable = GaugeMetricFamily(
        "liqo_dash_api_server_reachable",
        "1 unless the managed cluster's API server is known unreachable (its breaker is open: 0).",
        labels=["cluster"],
    )
    health = GaugeMetricFamily(
        "liqo_dash_managed_cluster_health",
        "What the last discovery of the managed cluster found: 1 reachable, 0 unreachable, -1 unknown.",
        labels=["cluster"],
    )
    restarts = CounterMetricFamily(
        "liqo_dash_watch_restarts",
        "Watches that failed or had to list again (410 Gone), by managed cluster and kind.",
        labels=["cluster", "kind"],
    )
    for c in found:
        reachable.add_metric([c.name], 1 if c.reachable else 0)
        health.add_metric([c.name], _HEALTH.get(c.health, -1))
        for kind, count in sorted(watch_restarts(c.pk).items()):
            restarts.add_metric([c.name, kind], count)
    yield from (reachable, health, restarts)


_HEALTH: dict[str, int] = {ManagedClusterHealth.REACHABLE.value: 1, ManagedClusterHealth.UNREACHABLE.value: 0}


def _cluster_contents(names: dict[int, str]) -> Iterator[Metric]:
    """What each cluster's snapshot holds, counted (never a series per namespace): offloaded namespaces
    and open alerts by kind."""
    offloaded = GaugeMetricFamily(
        "liqo_dash_offloaded_namespaces",
        "Namespaces with a NamespaceOffloading in the managed cluster's snapshot.",
        labels=["cluster"],
    )
    counts = _counts(Namespace.objects.filter(offloaded=True))
    for pk, name in names.items():
        offloaded.add_metric([name], counts.get(pk, 0))
    yield offloaded
    alerts = GaugeMetricFamily(
        "liqo_dash_alerts_open", "Open alerts by managed cluster and kind.", labels=["cluster", "kind"]
    )
    open_ = _counts(Alert.objects.filter(state=AlertState.OPEN), "kind")
    for pk, name in names.items():
        for kind in AlertKind.values:
            alerts.add_metric([name, kind], open_.get((pk, kind), 0))
    yield alerts


class _Forward(Collector):
    def __init__(self, registry: CollectorRegistry) -> None:
        self.registry = registry

    def collect(self) -> Iterator[Metric]:
        yield from self.registry.collect()


def scrape_registry() -> CollectorRegistry:
    registry = CollectorRegistry(auto_describe=False)
    if os.environ.get("PROMETHEUS_MULTIPROC_DIR"):
        MultiProcessCollector(registry)
    else:
        registry.register(_Forward(REGISTRY))
    registry.register(StateCollector())
    return registry


@never_cache
@require_GET
def metrics_view(request: HttpRequest) -> HttpResponse:
    token = env.string("METRICS_TOKEN")
    if token:
        sent = request.headers.get("Authorization", "")
        if not hmac.compare_digest(sent.encode(), f"Bearer {token}".encode()):
            return HttpResponse("unauthorized\n", status=401, content_type="text/plain")
    return HttpResponse(generate_latest(scrape_registry()), content_type=CONTENT_TYPE_LATEST)


class RequestMetricsMiddleware:
    """Counts every answered request by the name of the view that matched (``unmatched`` if none)."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        started = time.perf_counter()
        response = self.get_response(request)
        if ASIDE in request.META:
            return response  # a render the live renderer makes for a poll the web process counts
        match = getattr(request, "resolver_match", None)
        view = (match.view_name or match._func_path) if match is not None else "unmatched"
        method = request.method if request.method in ("GET", "HEAD", "POST", "PUT", "PATCH", "DELETE") else "other"
        REQUESTS.labels(view, method, str(response.status_code)).inc()
        LATENCY.labels(view).observe(time.perf_counter() - started)
        return response
