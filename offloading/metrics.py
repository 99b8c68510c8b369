"""Prometheus metrics at ``/metrics`` (prometheus_client).

Counted in-process: HTTP requests by view, method and status, and their latency. Read at scrape time:
changes by state (from the database), the Celery queue depth (Redis list lengths) and the snapshot's
age. Under gunicorn with several workers, set ``PROMETHEUS_MULTIPROC_DIR`` to an empty writable
directory (deploy/gunicorn.conf.py empties it at start and marks dead workers), so every worker's
counters are summed; without it the metrics are those of the process that answers.

``METRICS_TOKEN``, when set, must be sent as ``Authorization: Bearer <token>``.
"""

from __future__ import annotations

import hmac
import os
import time
from collections.abc import Callable, Iterator

import redis
from django.conf import settings
from django.db.models import Count, DurationField, ExpressionWrapper, F, Sum
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, REGISTRY, CollectorRegistry, Counter, Histogram, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.multiprocess import MultiProcessCollector
from prometheus_client.registry import Collector

from liqo_dash import env
from offloading.audit.events import last_verification
from offloading.choices import ChangeState
from offloading.cluster import breaker as apihealth
from offloading.models import ChangeRequest, SnapshotState
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
        changes = GaugeMetricFamily("liqo_dash_changes", "Change requests by state.", labels=["state"])
        counts = dict(ChangeRequest.objects.values_list("state").annotate(n=Count("id")).order_by())
        for name in ChangeState.values:
            changes.add_metric([name], counts.get(name, 0))
        yield changes

        state = SnapshotState.find()  # the default cluster's
        age = GaugeMetricFamily(
            "liqo_dash_snapshot_age_seconds", "Seconds since the last successful refresh of the snapshot (-1: never)."
        )
        if state is None or state.last_success_at is None:
            age.add_metric([], -1)
        else:
            age.add_metric([], max(0.0, (timezone.now() - state.last_success_at).total_seconds()))
        yield age

        yield from _change_durations()
        yield from _api_and_watch()

        queue = settings.CELERY_TASK_DEFAULT_QUEUE
        depth = GaugeMetricFamily(
            "liqo_dash_queue_depth", "Messages waiting in the Celery queue (-1: broker unreachable).", labels=["queue"]
        )
        try:
            client = redis.Redis.from_url(settings.CELERY_BROKER_URL, socket_timeout=2.0, socket_connect_timeout=2.0)
            try:
                pipe = client.pipeline()
                for key in queue_keys(queue):
                    pipe.llen(key)
                depth.add_metric([queue], sum(pipe.execute()))
            finally:
                client.close()
        except redis.RedisError:
            depth.add_metric([queue], -1)
        yield depth


DURATION_SAMPLE = 1000
DURATION_QUANTILES = (0.5, 0.95, 1.0)


def _change_durations() -> Iterator[Metric]:
    """A summary by outcome: the quantiles (0.5, 0.95 and 1.0, the longest) of the seconds from request to
    outcome over the last DURATION_SAMPLE finished changes (a sliding window, as a client-side summary
    keeps), and the count and sum over every finished change (cumulative, as a summary's must be)."""
    finished = ChangeRequest.objects.filter(finished_at__isnull=False)
    rows = finished.order_by("-finished_at")[:DURATION_SAMPLE]
    by_state: dict[str, list[float]] = {}
    for state, created, finished_at in rows.values_list("state", "created_at", "finished_at"):
        if finished_at is not None:
            by_state.setdefault(state, []).append(max(0.0, (finished_at - created).total_seconds()))
    elapsed = ExpressionWrapper(F("finished_at") - F("created_at"), output_field=DurationField())
    totals = {
        state: (count, total)
        for state, count, total in finished.values("state")
        .annotate(count=Count("id"), total=Sum(elapsed))
        .values_list("state", "count", "total")
        .order_by()
    }
    name = "liqo_dash_change_duration_seconds"
    family = Metric(
        name,
        f"Seconds from request to outcome: quantiles over the last {DURATION_SAMPLE} finished changes, "
        "count and sum over all.",
        "summary",
    )
    for state in sorted(set(by_state) | set(totals)):
        values = sorted(by_state.get(state, []))
        if values:
            for quantile in DURATION_QUANTILES:
                value = values[min(len(values) - 1, int(quantile * len(values)))]
                family.add_sample(name, {"state": state, "quantile": str(quantile)}, value)
        count, total = totals.get(state, (0, None))
        family.add_sample(f"{name}_count", {"state": state}, float(count))
        family.add_sample(f"{name}_sum", {"state": state}, max(0.0, total.total_seconds()) if total else 0.0)
    yield family


def _api_and_watch() -> Iterator[Metric]:
    verdict = last_verification()
    audit_ok = GaugeMetricFamily(
        "liqo_dash_audit_trail_ok", "1: the last verification of the audit trail passed, 0: it failed, -1: none yet."
    )
    audit_ok.add_metric([], -1 if verdict is None else 1 if verdict["ok"] else 0)
    yield audit_ok
    reachable = GaugeMetricFamily("liqo_dash_api_server_reachable", "1 unless the API server is known unreachable.")
    reachable.add_metric([], 0 if apihealth.outage() is not None else 1)
    yield reachable
    restarts = CounterMetricFamily(
        "liqo_dash_watch_restarts", "Watches that failed or had to list again (410 Gone), by kind.", labels=["kind"]
    )
    for kind, count in sorted(watch_restarts().items()):
        restarts.add_metric([kind], count)
    yield restarts


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
