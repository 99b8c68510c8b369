"""The measurements: refresh cost, page cost and preview cost on one fleet."""

from __future__ import annotations

import json
import math
import statistics
import time
from dataclasses import asdict, dataclass, field
from typing import Any

from bench import cold, counters, harness, worker_rss
from liqo_rules.selectors.liqoctl import cluster_selector
from offloading.snapshot.refresh import refresh
from offloading.whatif.preview import preview

# The cluster selector the previews evaluate: two regions out of seven, without staging clusters.
PREVIEW_SELECTOR = "topology.kubernetes.io/region in (eu-west-1, eu-south-1),!staging"


def selector_at_the_limits() -> list[str]:
    """The largest selector the dashboard accepts (liqo_rules.limits), as liqoctl lines: every term
    and expression at its cap, and expressions every cluster passes until the last one (a region in a
    list of the maximum size), so matching cannot stop early."""
    from liqo_rules.limits import MAX_EXPRESSIONS, MAX_TERMS, MAX_VALUES

    regions = ["eu-west-1", "eu-south-1", *(f"nowhere-{v}" for v in range(MAX_VALUES - 2))]
    return [
        ",".join(
            [
                *(f"!absent-{t}-{e}" for e in range(MAX_EXPRESSIONS - 1)),
                f"topology.kubernetes.io/region in ({','.join(regions)})",
            ]
        )
        for t in range(MAX_TERMS)
    ]


@dataclass
class RefreshRun:
    name: str
    list_calls: int  # LIST requests seen on the wire
    list_calls_by_kind: dict[str, int]
    reported_list_calls: int  # what the refresh itself reported (SnapshotState.last_list_calls)
    expected_list_calls: int  # one page per started 500 items of each kind
    other_calls: int  # any other request (a GET of one object, a write ...)
    response_bytes: int  # bodies of all those responses
    queries: int
    queries_by_kind: dict[str, int]
    seconds: float
    namespaces: int
    offloadings: int
    changed: int  # namespaces whose offloading the refresh rewrote
    modified: int = 0  # offloadings whose status the benchmark changed before this refresh
    transitions: int = 0  # StatusTransition rows recorded
    runs: list[float] = field(default_factory=list)  # the time of each run


@dataclass
class PageRun:
    name: str
    url: str
    method: str
    status: int
    queries: int
    seconds: float  # median of the timed runs
    runs: list[float] = field(default_factory=list)
    size: int = 0  # bytes of the response
    per_cluster: bool = False  # shows one row per peered cluster: its cost may grow with the clusters
    cold_ms: float | None = None  # the first request in a new process (bench.cold), biggest fleet only
    data: Any = None  # the form or JSON body of a POST


@dataclass
class PreviewRun:
    clusters: int
    selected: int
    queries: int
    seconds: float
    runs: list[float] = field(default_factory=list)


@dataclass
class FleetResult:
    namespaces: int
    clusters: int
    label: str
    sandbox_start_s: float
    objects: dict[str, int]
    refreshes: list[RefreshRun] = field(default_factory=list)
    pages: list[PageRun] = field(default_factory=list)
    preview: PreviewRun | None = None
    target_namespace: str = ""
    status_rows: int = 0  # ClusterOffloading rows: one per (offloaded namespace, peered cluster)
    selected_rows: int = 0  # of which the cluster is selected
    worker_refresh: dict[str, Any] | None = None  # the worker's cold refresh in its own process (bench.worker_rss)
    database: str = ""  # a copy of the fleet's snapshot (SQLite file), for measure_side_by_side

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


# --------------------------------------------------------------------------------------------------
# Refresh


def _refresh(name: str, expected: int, modified: int = 0, repeat: int = 1) -> RefreshRun:
    """One refresh measured (``repeat`` > 1: as many, the median time; the counts of the last one,
    which only makes sense when nothing changes between them)."""
    from offloading.models import StatusTransition

    times = []
    for _ in range(repeat):
        transitions_before = StatusTransition.objects.count()
        with counters.api_calls() as calls, counters.queries(capture=False) as sql:
            started = time.perf_counter()
            report = refresh()
            times.append(time.perf_counter() - started)
        if not report.ok:
            raise RuntimeError(f"refresh {name} failed: {report.error}")
    return RefreshRun(
        name=name,
        list_calls=sum(calls.lists.values()),
        list_calls_by_kind=dict(calls.lists),
        reported_list_calls=report.list_calls,
        expected_list_calls=expected,
        other_calls=calls.others,
        response_bytes=calls.bytes,
        queries=sql.count,
        queries_by_kind=dict(sql.by_kind),
        seconds=statistics.median(times),
        runs=times,
        namespaces=report.namespaces,
        offloadings=report.offloadings,
        changed=report.changed,
        modified=modified,
        transitions=StatusTransition.objects.count() - transitions_before,
    )


def measure_refreshes(fleet: harness.Fleet, mass_change: bool, log: Any) -> list[RefreshRun]:
    """A cold refresh (empty snapshot), a second one with nothing changed, one after 1 % of the
    offloadings changed status, and (``mass_change``) one after every Ready offloading did."""
    harness.reset_database()
    expected = fleet.expected_list_calls()
    runs = [_refresh("cold (empty snapshot)", expected)]
    log(f"    cold refresh {runs[-1].seconds:.2f} s")
    runs.append(_refresh("nothing changed (median of 3)", expected, repeat=3))
    log(f"    unchanged refresh {runs[-1].seconds:.2f} s")
    changed = fleet.change_offloading_status(0.01)
    runs.append(_refresh("1% offloadings' status changed", expected, modified=len(changed)))
    log(f"    refresh after {len(changed)} status changes {runs[-1].seconds:.2f} s")
    if mass_change:
        changed = fleet.change_offloading_status(1.0)
        runs.append(_refresh("all Ready offloadings' status changed", expected, modified=len(changed)))
        log(f"    refresh after {len(changed)} status changes {runs[-1].seconds:.2f} s")
    return runs


# --------------------------------------------------------------------------------------------------
# Pages


def target_namespace() -> Any:
    """An offloaded namespace that works on several clusters (the same kind in every fleet)."""
    from django.db.models import Count, Q

    from offloading.models import Namespace

    offloaded = Namespace.objects.filter(offloaded=True).annotate(
        selected=Count("cluster_states", filter=Q(cluster_states__selected=True))
    )
    # Small fleets may have no namespace on two clusters: then one on a single cluster.
    return (
        offloaded.filter(selected__gte=2).order_by("name").first()
        or offloaded.filter(selected__gte=1).order_by("name").first()
    )


def admin_client() -> Any:
    """A test client logged in as the benchmark's administrator of the current database (made if needed)."""
    from django.contrib.auth import get_user_model
    from django.test import Client

    user = get_user_model().objects.filter(username="bench").first() or get_user_model().objects.create_superuser(
        "bench", "bench@example.com", "bench-password"
    )
    client = Client()
    client.force_login(user)
    return client


def plan_pages() -> tuple[list[PageRun], str]:
    """The main pages of the current fleet, as a logged-in administrator sees them, not measured yet
    (``measure_side_by_side`` does), and the namespace they show."""
    from django.db.models import Count
    from django.urls import reverse

    from offloading.models import ClusterOffloading, Namespace

    namespace = target_namespace()
    if namespace is None:
        raise RuntimeError("no offloaded namespace selects two clusters or more: nothing to render")
    # The cluster selected by the most namespaces: its filtered list has full pages.
    busiest = (
        ClusterOffloading.objects.filter(selected=True)
        .values("cluster_id")
        .annotate(n=Count("id"))
        .order_by("-n", "cluster_id")
        .values_list("cluster_id", flat=True)
        .first()
    )
    preview_form = {
        "namespace_mapping_strategy": "DefaultName",
        "pod_offloading_strategy": "LocalAndRemote",
        "cluster_selector": PREVIEW_SELECTOR,
        "expected_generation": str(namespace.offloading_generation),
    }
    at_limits = selector_at_the_limits()
    limits_form = {**preview_form, "cluster_selector": "\n".join(at_limits)}
    limits_json = json.dumps({"podOffloadingStrategy": "LocalAndRemote", "selectors": at_limits})
    last_page = max(1, math.ceil(Namespace.objects.count() / 50))
    detail = reverse("offloading:namespace_detail", args=[namespace.name])
    # (name, method, url, form data, whether it shows one row per peered cluster)
    pages = [
        ("namespace list (page 1)", "GET", reverse("offloading:namespace_list"), None, False),
        ("namespace list (last page)", "GET", reverse("offloading:namespace_list") + f"?page={last_page}", None, False),
        ("namespace list ?cluster=", "GET", reverse("offloading:namespace_list") + f"?cluster={busiest}", None, False),
        ("cluster list", "GET", reverse("offloading:cluster_list"), None, True),
        ("fleet matrix", "GET", reverse("offloading:fleet_matrix"), None, True),
        ("namespace detail", "GET", detail, None, True),
        ("namespace status (polled)", "GET", reverse("offloading:namespace_status", args=[namespace.name]), None, True),
        ("offload form", "GET", reverse("offloading:namespace_offload", args=[namespace.name]), None, False),
        (
            "offload preview POST",
            "POST",
            reverse("offloading:namespace_offload_preview", args=[namespace.name]),
            preview_form,
            True,
        ),
        (
            "offload preview POST, selector at the limits",
            "POST",
            reverse("offloading:namespace_offload_preview", args=[namespace.name]),
            limits_form,
            True,
        ),
        (
            "API preview POST, selector at the limits",
            "POST",
            reverse("api:namespace-preview", args=[namespace.name]),
            limits_json,
            True,
        ),
    ]
    return [
        PageRun(name=name, url=url, method=method, status=0, queries=0, seconds=0.0, per_cluster=per_cluster, data=data)
        for name, method, url, data, per_cluster in pages
    ], namespace.name


def _request(client: Any, page: PageRun) -> Any:
    if isinstance(page.data, str):  # a JSON body, for the API
        return client.post(page.url, page.data, content_type="application/json")
    return client.post(page.url, page.data) if page.method == "POST" else client.get(page.url)


@dataclass
class _Staged:
    """One fleet during the side-by-side rounds: its database, client and the preview's arguments."""

    result: FleetResult
    client: Any
    namespace: Any
    spec: dict[str, Any]


def measure_side_by_side(results: list[FleetResult], repeat: int) -> None:
    """Each fleet's pages and ``preview`` timed side by side: ``repeat`` rounds, each of which requests
    every page once on every fleet (their snapshots kept by ``measure_fleet``, the database switched
    between fleets; the order of the fleets alternates from one round to the next). Measured one fleet
    after the other, a ratio compared moments minutes apart, and the machine's other load between them
    moved it by up to 2x; side by side, both fleets see the same moments. Fills each result's pages
    (queries, status, size, the runs and their median) and preview."""
    from offloading.models import Cluster, Namespace

    staged = []
    for result in results:
        harness.use_database(result.database)
        client = admin_client()
        for page in result.pages:
            response = _request(client, page)  # warm-up: templates compiled, caches filled
            if response.status_code not in (200, 286):
                raise RuntimeError(f"{page.method} {page.url} answered {response.status_code}, not a page to measure")
            with counters.queries() as sql:
                response = _request(client, page)
            page.queries, page.status, page.size = sql.count, response.status_code, len(response.content)
        namespace = Namespace.objects.get(name=result.target_namespace)
        spec = {
            "namespaceMappingStrategy": (namespace.offloading_spec or {}).get(
                "namespaceMappingStrategy", "DefaultName"
            ),
            "podOffloadingStrategy": "LocalAndRemote",
            "clusterSelector": cluster_selector([PREVIEW_SELECTOR]),
        }
        with counters.queries() as sql:
            found = preview(namespace, spec)
        result.preview = PreviewRun(
            clusters=Cluster.objects.count(), selected=len(found.selected), queries=sql.count, seconds=0.0
        )
        staged.append(_Staged(result, client, namespace, spec))
    for round_ in range(repeat):
        for fleet in staged if round_ % 2 == 0 else staged[::-1]:
            harness.use_database(fleet.result.database)
            for page in fleet.result.pages:
                timing, _ = counters.timed(lambda page=page, client=fleet.client: _request(client, page), 1)
                page.runs += timing.runs
            assert fleet.result.preview is not None
            # The function alone, its database connection open (the pages' requests close theirs).
            preview(fleet.namespace, fleet.spec)
            timing, _ = counters.timed(lambda fleet=fleet: preview(fleet.namespace, fleet.spec), 1)
            fleet.result.preview.runs += timing.runs
    for fleet in staged:
        for page in fleet.result.pages:
            page.seconds = statistics.median(page.runs)
        assert fleet.result.preview is not None
        fleet.result.preview.seconds = statistics.median(fleet.result.preview.runs)
    harness.use_database(None)


# --------------------------------------------------------------------------------------------------


def measure_cold(pages: list[PageRun]) -> None:
    """Each page's first request in a new, warmed-up web process (see bench.cold)."""
    timings = cold.measure([{"name": p.name, "method": p.method, "url": p.url, "data": p.data} for p in pages])
    for page in pages:
        page.cold_ms = timings.get(page.name)


def measure_fleet(
    namespaces: int, clusters: int, var_dir: Any, *, mass_change: bool, log: Any, cold: bool = False
) -> FleetResult:
    with harness.Fleet(namespaces, clusters, var_dir) as fleet:
        log(f"  {fleet.label}: sandbox up in {fleet.startup_s:.1f} s")
        result = FleetResult(
            namespaces=namespaces,
            clusters=clusters,
            label=fleet.label,
            sandbox_start_s=fleet.startup_s,
            objects=fleet.object_counts(),
        )
        result.refreshes = measure_refreshes(fleet, mass_change, log)
        if cold:
            assert fleet.kubeconfig is not None
            result.worker_refresh = worker_rss.measure(fleet.kubeconfig)
            log(f"    worker cold refresh: peak RSS {result.worker_refresh['peak_mb']} MB")
    from offloading.models import ClusterOffloading

    result.status_rows = ClusterOffloading.objects.count()
    result.selected_rows = ClusterOffloading.objects.filter(selected=True).count()
    # Pages and previews read the snapshot only: the sandbox is not needed any more.
    result.pages, result.target_namespace = plan_pages()
    admin_client()  # the administrator the cold renders log in as
    if cold:
        measure_cold(result.pages)
        log("    cold renders measured (a new process per page)")
    # The snapshot kept for measure_side_by_side, which times the pages of every fleet together.
    result.database = harness.keep_database(var_dir / f"fleet-{namespaces}x{clusters}.sqlite3")
    return result
