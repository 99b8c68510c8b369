"""The printed tables and the problems the figures point at (flags, never a failure)."""

from __future__ import annotations

from typing import Any

from bench.measures import FleetResult

# A count that grows by less than this factor between two fleets is "constant" (a batch more or less).
GROWTH = 1.5
# A page whose render time grows by more than this factor between two fleets is flagged.
PAGE_TIME_GROWTH = 3.0


def _num(value: float) -> str:
    return f"{int(value):,}" if float(value).is_integer() else f"{value:,.2f}"


def _seconds(value: float) -> str:
    return f"{value * 1000:,.1f} ms" if value < 1 else f"{value:,.2f} s"


def _ratio(first: float, last: float) -> str:
    if first == 0:
        return "=" if last == 0 else "new"
    return f"x{last / first:,.2f}"


def _short(result: FleetResult) -> str:
    return f"{result.label.split(' ', 1)[0]}/{result.clusters}"


def _kinds(by_kind: dict[str, int]) -> str:
    order = ("SELECT", "INSERT", "UPDATE", "DELETE")
    return "/".join(str(by_kind.get(k, 0)) for k in order)


def _grid(headers: list[str], rows: list[list[str]]) -> list[str]:
    """A plain text table: first column left-aligned, the others right-aligned."""
    widths = [max(len(r[i]) for r in [headers, *rows]) for i in range(len(headers))]

    def line(cells: list[str]) -> str:
        parts = [cells[0].ljust(widths[0])] + [c.rjust(w) for c, w in zip(cells[1:], widths[1:], strict=True)]
        return "  ".join(parts).rstrip()

    out = [line(headers), "  ".join("-" * w for w in widths)]
    out += [line(r) for r in rows]
    return out


def table(results: list[FleetResult]) -> str:
    first, last = results[0], results[-1]
    several = len(results) > 1
    ratio_label = f"{_short(last)} vs {_short(first)}"
    lines: list[str] = []

    rows = [
        [
            _short(r),
            _num(r.objects["namespaces"]),
            _num(r.objects["namespaceoffloadings"]),
            _num(r.objects["foreignclusters"]),
            f"{r.status_rows:,} ({r.selected_rows:,})",
            _seconds(r.sandbox_start_s),
        ]
        for r in results
    ]
    headers = ["FLEET ns/clusters", "namespaces", "offloadings", "clusters", "status rows (selected)", "sandbox up"]
    lines += _grid(headers, rows)

    rows = []
    for index, run in enumerate(first.refreshes):
        runs = [r.refreshes[index] for r in results if index < len(r.refreshes)]
        for result, x in zip(results, runs, strict=False):
            rows.append(
                [
                    run.name if x is runs[0] else "",
                    _short(result),
                    f"{x.list_calls} ({x.expected_list_calls})",
                    _num(x.other_calls),
                    f"{x.response_bytes / 1e6:,.1f}",
                    _num(x.queries),
                    _kinds(x.queries_by_kind),
                    _seconds(x.seconds),
                    f"{x.changed:,} / {x.transitions:,}",
                ]
            )
        if several and len(runs) == len(results):
            a, b = runs[0], runs[-1]
            rows.append(
                [
                    "",
                    ratio_label,
                    _ratio(a.list_calls, b.list_calls),
                    "",
                    _ratio(a.response_bytes, b.response_bytes),
                    _ratio(a.queries, b.queries),
                    "",
                    _ratio(a.seconds, b.seconds),
                    "",
                ]
            )
    headers = [
        "REFRESH",
        "fleet",
        "LIST (expected)",
        "other API",
        "MB read",
        "SQL",
        "S/I/U/D",
        "time",
        "rewritten / transitions",
    ]
    lines += [""] + _grid(headers, rows)

    headers = ["PAGE (50 per page)"]
    headers += [f"SQL {_short(r)}" for r in results] + [f"time {_short(r)}" for r in results]
    if several:
        headers += ["SQL ratio", "time ratio", "N+1?"]
    rows = []
    for index, page in enumerate(first.pages):
        pages = [r.pages[index] for r in results]
        row = [page.name] + [_num(p.queries) for p in pages] + [_seconds(p.seconds) for p in pages]
        if several:
            grows = pages[-1].queries > pages[0].queries
            row += [
                _ratio(pages[0].queries, pages[-1].queries),
                _ratio(pages[0].seconds, pages[-1].seconds),
                "YES" if grows else "no",
            ]
        rows.append(row)
    previews = [r.preview for r in results]
    if all(previews):
        name = "services.preview (" + " / ".join(f"{p.clusters} cl, {p.selected} sel" for p in previews if p) + ")"
        row = [name] + [_num(p.queries) for p in previews if p] + [_seconds(p.seconds) for p in previews if p]
        if several and previews[0] and previews[-1]:
            a, b = previews[0], previews[-1]
            row += [
                _ratio(a.queries, b.queries),
                _ratio(a.seconds, b.seconds),
                "YES" if b.queries > a.queries else "no",
            ]
        rows.append(row)
    lines += [""] + _grid(headers, rows)
    lines += [
        "",
        "status rows: ClusterOffloading rows, one per (offloaded namespace, peered cluster); LIST (expected): one",
        "page per 500 items of each of the 5 kinds listed; MB read: response bodies; SQL: statements sent (COMMITs",
        "not counted), S/I/U/D: SELECT/INSERT/UPDATE/DELETE; rewritten: namespaces whose offloading the refresh",
        "wrote again; time: wall clock, median where repeated. Ratios: biggest fleet / smallest fleet.",
    ]
    rule = "=" * max(len(line) for line in lines)
    return "\n".join([rule, *lines, rule])


# --------------------------------------------------------------------------------------------------
# Flags


def flags(results: list[FleetResult]) -> list[str]:
    """What the figures say is wrong or does not scale, each with the figures behind it."""
    from django.conf import settings

    found: list[str] = []
    for result in results:
        for run in result.refreshes:
            where = f"[{_short(result)}] refresh '{run.name}'"
            if run.list_calls != run.expected_list_calls:
                found.append(
                    f"{where}: {run.list_calls} LIST calls, expected {run.expected_list_calls} "
                    f"(one per 500 items per kind): {run.list_calls_by_kind}"
                )
            if run.reported_list_calls != run.list_calls:
                found.append(f"{where}: reports {run.reported_list_calls} LIST calls, {run.list_calls} were made")
            if run.other_calls:
                found.append(f"{where}: {run.other_calls} API requests besides the paginated LISTs")

    if not results:  # --only without the pages: no fleet to judge
        return found
    big = results[-1]
    interval = float(settings.LIQO_DASH["REFRESH_INTERVAL"])
    soft_limit = float(settings.CELERY_TASK_SOFT_TIME_LIMIT)
    for run in big.refreshes:
        where = f"[{_short(big)}] refresh '{run.name}'"
        updates = run.queries_by_kind.get("UPDATE", 0)
        if run.changed >= 50 and updates >= 0.9 * run.changed:
            found.append(f"{where}: {updates:,} UPDATE statements for {run.changed:,} rewritten namespaces (one each)")
        inserts = run.queries_by_kind.get("INSERT", 0)
        if run.changed == 0 and inserts > 5:
            found.append(
                f"{where}: nothing changed, yet {inserts:,} INSERT ... ON CONFLICT statements rewrite all "
                f"{run.namespaces:,} namespace rows"
            )
        if interval > 0 and run.changed <= run.namespaces // 100 + 1 and run.seconds > 0.5 * interval:
            found.append(
                f"{where}: {_seconds(run.seconds)} = {100 * run.seconds / interval:.0f} % of the periodic refresh "
                f"interval (LIQO_DASH_REFRESH_INTERVAL = {interval:g} s): one worker does little but refresh"
                + (", and refreshes run back to back" if run.seconds > interval else "")
            )
        if run.seconds > 0.5 * soft_limit:
            found.append(
                f"{where}: {_seconds(run.seconds)} = {100 * run.seconds / soft_limit:.0f} % of the task's soft time "
                f"limit (CELERY_TASK_SOFT_TIME_LIMIT = {soft_limit:g} s) and of the 60 s refresh lock"
            )
    if len(results) < 2:
        return found

    small = results[0]
    label = f"{_short(big)} vs {_short(small)}"
    ns_scale = big.objects["namespaces"] / max(1, small.objects["namespaces"])
    row_scale = big.status_rows / max(1, small.status_rows)
    for a, b in zip(small.refreshes, big.refreshes, strict=False):
        if b.queries > GROWTH * a.queries:
            found.append(
                f"refresh '{a.name}': SQL statements grow with the fleet, {a.queries:,} -> {b.queries:,} "
                f"(S/I/U/D {_kinds(a.queries_by_kind)} -> {_kinds(b.queries_by_kind)})"
            )
        time_ratio = b.seconds / max(1e-9, a.seconds)
        work_scale = max(ns_scale, b.changed / max(1, a.changed))
        if time_ratio > GROWTH * work_scale:
            rewritten = f", x{b.changed / a.changed:.1f} rewritten namespaces" if a.changed else ""
            found.append(
                f"refresh '{a.name}': time x{time_ratio:.1f} ({_seconds(a.seconds)} -> {_seconds(b.seconds)}) for "
                f"x{ns_scale:.1f} namespaces{rewritten}; it follows the x{row_scale:.0f} per-cluster status rows "
                f"and the x{b.response_bytes / max(1, a.response_bytes):.0f} bytes listed"
            )
    cluster_scale = big.clusters / max(1, small.clusters)
    for a, b in zip(small.pages, big.pages, strict=True):
        if b.queries > a.queries:
            found.append(f"page '{a.name}' ({a.method} {a.url}): N+1, {a.queries} -> {b.queries} queries ({label})")
        time_ratio = b.seconds / max(1e-9, a.seconds)
        # A page with one row per cluster may grow like the clusters; any other page should not grow.
        allowed = GROWTH * cluster_scale if a.per_cluster else PAGE_TIME_GROWTH
        if time_ratio > allowed:
            found.append(
                f"page '{a.name}': render time x{time_ratio:.1f} ({_seconds(a.seconds)} -> {_seconds(b.seconds)}, "
                f"{a.size:,} -> {b.size:,} bytes) with a constant {b.queries} queries"
                + (f", for x{cluster_scale:g} clusters" if a.per_cluster else ", for the same 50 rows")
            )
    if small.preview and big.preview and big.preview.queries > small.preview.queries:
        found.append(f"services.preview: {small.preview.queries} -> {big.preview.queries} queries ({label})")
    return found


def summary(results: list[FleetResult], elapsed: float) -> dict[str, Any]:
    return {"elapsed_s": elapsed, "fleets": [r.as_dict() for r in results], "flags": flags(results)}


# The goals, under stable keys (None: not measured in this run).
GOALS = {
    "steady_bytes_per_min": (1_000_000, "API bytes read per minute, nothing changing", "B"),
    "status_latency_p95_s": (1.0, "status change -> snapshot, p95 (worse of quiet and during a bulk)", "s"),
    "bulk_vs_kubectl_ratio": (0.2, "bulk of N offloads / kubectl apply of the same N (50 ms latency)", ""),
    "worker_peak_rss_mb": (250, "worker peak RSS (largest process)", "MB"),
    "watcher_peak_rss_mb": (250, "watcher peak RSS (cold sync)", "MB"),
    "sandbox_start_s": (5.0, "sandbox start with the biggest fleet", "s"),
    "api_list_vs_kubectl_ratio": (1.0, "REST API list of the offloadings / kubectl get -A -o json", ""),
}
PAGE_RATIO_GOAL = 1.5
COLD_PAGE_GOAL_MS = 150.0


def goals(results: list[FleetResult], synced: dict[str, Any], moved: dict[str, Any] | None = None) -> dict[str, Any]:
    first, last = (results[0], results[-1]) if results else (None, None)
    ratios: dict[str, float | None] = {}
    cold: dict[str, float | None] = {}
    function_ratio = None
    if first is not None and last is not None and len(results) > 1:
        small = {p.name: p for p in first.pages}
        for page in last.pages:
            base = small.get(page.name)
            ratios[page.name] = round(page.seconds / base.seconds, 2) if base and base.seconds else None
            cold[page.name] = page.cold_ms
        if first.preview and last.preview and first.preview.seconds:
            function_ratio = round(last.preview.seconds / first.preview.seconds, 2)
    moved = moved or {}
    worker = [
        v for v in (moved.get("worker_peak_rss_mb"), (last.worker_refresh or {}).get("peak_mb") if last else None) if v
    ]
    return {
        "steady_bytes_per_min": synced.get("steady_bytes_per_min"),
        "status_latency_p95_s": _worse(synced.get("status_latency_p95_s"), moved.get("status_visible_p95_s")),
        "bulk_vs_kubectl_ratio": moved.get("bulk_vs_kubectl_ratio"),
        "page_p50_ratio": ratios,
        "page_ratio_fleets": f"{_short(last)} vs {_short(first)}" if first and last else None,
        # The preview function alone (services.preview), not a page: shown beside the goals, not one of them.
        "preview_function_p50_ratio": function_ratio,
        "cold_page_ms": cold,
        "worker_peak_rss_mb": max(worker) if worker else None,
        "worker_cold_refresh": last.worker_refresh if last else None,
        "watcher_peak_rss_mb": synced.get("watcher_peak_rss_mb"),
        "sandbox_start_s": synced.get("sandbox_start_s", last.sandbox_start_s if last else None),
        "api_list_vs_kubectl_ratio": moved.get("api_list_vs_kubectl_ratio"),
        "sync": synced,
        "throughput": moved,
    }


def _worse(*values: float | None) -> float | None:
    """The larger of the figures measured (the sync run's and the throughput run's status latency)."""
    measured = [v for v in values if v is not None]
    return max(measured) if measured else None


def _verdict(value: float | None, goal: float) -> str:
    if value is None:
        return "not measured"
    return "meets" if value <= goal else "MISSES"


def goal_lines(figures: dict[str, Any]) -> list[str]:
    """Every goal of the run with its figure and whether it meets it."""
    lines = ["GOALS (issue 15)"]
    for key, (goal, what, unit) in GOALS.items():
        value = figures.get(key)
        shown = "-" if value is None else f"{round(value, 3):,}"
        lines.append(
            f"  {key:<28} {shown:>12} {unit:<2}  goal <= {goal:,} {unit:<2} {_verdict(value, goal):<12} {what}"
        )
    fleets = figures.get("page_ratio_fleets") or ""
    for name, ratio in (figures.get("page_p50_ratio") or {}).items():
        shown = "-" if ratio is None else f"x{ratio:.2f}"
        lines.append(
            f"  page_p50_ratio {name[:40]:<40} {shown:>8}  goal <= x{PAGE_RATIO_GOAL} "
            f"{_verdict(ratio, PAGE_RATIO_GOAL)} ({fleets})"
        )
    function_ratio = figures.get("preview_function_p50_ratio")
    if function_ratio is not None:
        lines.append(
            f"  {'(not a goal) services.preview, the function alone':<55} {f'x{function_ratio:.2f}':>8}  ({fleets}; "
            "it evaluates every peer: the preview page above is the goal)"
        )
    for name, ms in (figures.get("cold_page_ms") or {}).items():
        shown = "-" if ms is None else f"{ms:,.1f} ms"
        lines.append(
            f"  cold_page_ms {name[:42]:<42} {shown:>10}  goal <= {COLD_PAGE_GOAL_MS:.0f} ms "
            f"{_verdict(ms, COLD_PAGE_GOAL_MS)}"
        )
    return lines
