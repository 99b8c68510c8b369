"""bench.check: CI fails when a benchmark figure was not measured, never on the figure itself."""

from __future__ import annotations

import json
from pathlib import Path

from bench import check

MEASURED = {
    **dict.fromkeys(check.SCALARS, 1.0),
    "page_p50_ratio": {"namespace list (page 1)": 1.2},
    "cold_page_ms": {"namespace list (page 1)": 30.0},
}


def test_every_figure_measured_passes_whatever_its_value(tmp_path: Path) -> None:
    path = tmp_path / "bench.json"
    path.write_text(json.dumps({**MEASURED, "bulk_vs_kubectl_ratio": 9.0}))  # far from its goal: not judged
    assert check.main([str(path)]) == 0


def test_a_null_figure_or_page_fails_and_is_named(tmp_path: Path) -> None:
    figures = {**MEASURED, "worker_peak_rss_mb": None, "cold_page_ms": {"fleet matrix": None}}
    assert check.missing(figures) == ["worker_peak_rss_mb", "cold_page_ms[fleet matrix]"]
    assert check.missing({**MEASURED, "page_p50_ratio": {}}) == ["page_p50_ratio"]
    path = tmp_path / "bench.json"
    path.write_text(json.dumps(figures))
    assert check.main([str(path)]) == 1


def test_a_pods_run_with_a_null_figure_fails() -> None:
    pods = dict.fromkeys(check.PODS, 3)
    assert check.missing({**MEASURED, "pods": pods}) == []
    assert check.missing({**MEASURED, "pods": {**pods, "pod_visible_p95_s": None}}) == ["pods[pod_visible_p95_s]"]


def test_a_run_of_some_parts_needs_only_their_figures() -> None:
    moved = dict.fromkeys(check.THROUGHPUT, 1.0)
    only_throughput = {
        "runs": ["throughput"],
        "bulk_vs_kubectl_ratio": 0.15,
        "worker_peak_rss_mb": 150.0,
        "api_list_vs_kubectl_ratio": 0.1,
        "status_latency_p95_s": 0.2,
        "throughput": moved,
    }
    assert check.missing(only_throughput) == []
    assert check.missing({**only_throughput, "throughput": {**moved, "physical_limit_s": None}}) == [
        "throughput[physical_limit_s]"
    ]
    assert check.missing({**only_throughput, "throughput": None}) == ["throughput"]
    assert check.missing({**only_throughput, "runs": ["throughput", "sync"]}) == [
        "steady_bytes_per_min",
        "watcher_peak_rss_mb",
        "sandbox_start_s",
    ]


def test_a_domain_run_needs_its_per_cluster_figures_and_page_ratios() -> None:
    fleetwide = {**dict.fromkeys(check.DOMAIN, 2.0), "page_p50_ratio": {"overview of each cluster": 1.1}}
    only_domain = {"runs": ["domain"], "domain": fleetwide}
    assert check.missing(only_domain) == []
    assert check.missing({**only_domain, "domain": {**fleetwide, "snapshot_bytes_per_cluster": None}}) == [
        "domain[snapshot_bytes_per_cluster]"
    ]
    assert check.missing(
        {**only_domain, "domain": {**fleetwide, "page_p50_ratio": {"overview of each cluster": None}}}
    ) == ["domain[page_p50_ratio][overview of each cluster]"]
    assert check.missing({**only_domain, "domain": {}}) == ["domain"]
