"""The figures of the throughput run (``bench/throughput.py``), as JSON and as the readable report."""

from __future__ import annotations

import os
from dataclasses import asdict, dataclass, field
from typing import Any

GOAL_RATIO = 0.2


@dataclass
class Throughput:
    namespaces: int
    latency_s: float
    max_inflight: int  # the sandbox's 429 limit (0: none)
    kube_max_inflight: int  # the worker's bound on requests in flight (LIQO_DASH_KUBE_MAX_INFLIGHT)
    check_concurrency: int  # access reviews and dry-runs of the request at once (DRY_RUN_CONCURRENCY)
    request_single_s: float  # one API request, alone (median of 20)
    concurrent_32_s: float  # 32 requests at once, until the last answered
    kubectl_apply_s: float
    kubectl_requests: int  # every request kubectl made (discovery and OpenAPI included)
    kubectl_calls_per_object: float  # resource requests per manifest
    kubectl_expected_s: float  # kubectl_requests x request_single_s (it sends them one after the other)
    kubectl_sandbox_cpu_s: float  # CPU the sandbox used while kubectl ran
    kubectl_own_cpu_s: float  # CPU kubectl itself used
    kubectl_calls_by_verb: dict[str, int]  # its resource requests by verb and resource
    bulk_s: float
    bulk_request_s: float  # of which the request itself (recording; with BULK_CHECKS=request also the checks)
    bulk_applied: int
    bulk_failed: int
    request_calls_per_change: float
    worker_calls_per_change: float
    calls_by_verb: dict[str, int]  # the bulk's own calls (request and worker), by verb and resource
    peak_inflight: int  # most requests in flight at once at the sandbox during the bulk
    bulk_cpu_s: dict[str, float]  # CPU used during the bulk: worker (all processes), sandbox, watcher, this process
    physical_limit_s: float  # request + worker: changes x calls per change x latency / in flight
    throttled: int  # requests the sandbox answered 429 during the bulk
    status_visible_p50_s: float | None  # a status change of another namespace -> snapshot, during the bulk
    status_visible_p95_s: float | None
    status_samples: int
    worker_peak_rss_mb: float  # the largest worker process
    worker_total_peak_pss_mb: float  # the parent and its pool together (PSS)
    api_list_s: float
    kubectl_list_s: float
    load_average: float = 0.0  # the machine's, at the bulk's end (other work shares its cores)
    bulk_checks: str = "push"  # LIQO_DASH_BULK_CHECKS: each push is the check, or the request asks first
    flags: list[str] = field(default_factory=list)

    @property
    def ratio(self) -> float:
        return round(self.bulk_s / self.kubectl_apply_s, 3)

    @property
    def expected_ratio(self) -> float:
        """Against the time kubectl's requests imply (the reference at the speed the latency allows)."""
        return round(self.bulk_s / self.kubectl_expected_s, 3) if self.kubectl_expected_s else 0.0

    @property
    def list_ratio(self) -> float:
        return round(self.api_list_s / self.kubectl_list_s, 3)

    def as_dict(self) -> dict[str, Any]:
        return {
            **asdict(self),
            "bulk_vs_kubectl_ratio": self.ratio,
            "bulk_vs_kubectl_expected_ratio": self.expected_ratio,
            "api_list_vs_kubectl_ratio": self.list_ratio,
        }

    def lines(self) -> list[str]:
        def verdict(value: float | None, goal: float) -> str:
            return "not measured" if value is None else ("meets" if value <= goal else "MISSES")

        ms = self.latency_s * 1000
        verbs = ", ".join(f"{key} {n}" for key, n in sorted(self.calls_by_verb.items()))
        out = [
            f"Bulk vs kubectl ({self.namespaces:,} offloads each, {ms:.0f} ms API latency, sandbox 429 limit "
            f"{self.max_inflight or 'none'}):",
            f"  one request alone                  {self.request_single_s * 1000:7.1f} ms; 32 at once "
            f"{self.concurrent_32_s * 1000:.0f} ms (overlapping: the sandbox is not the bottleneck)"
            if self.concurrent_32_s < 3 * self.request_single_s
            else f"  one request alone                  {self.request_single_s * 1000:7.1f} ms; 32 at once "
            f"{self.concurrent_32_s * 1000:.0f} ms: THEY DO NOT OVERLAP (the sandbox is the bottleneck)",
            f"  kubectl apply -f (two halves)      {self.kubectl_apply_s:7.1f} s   {self.kubectl_requests:,} "
            f"requests ({self.kubectl_calls_per_object:.2f} per object, one after the other): expected "
            f"{self.kubectl_expected_s:.1f} s; sandbox CPU {self.kubectl_sandbox_cpu_s:.1f} s, kubectl CPU "
            f"{self.kubectl_own_cpu_s:.1f} s meanwhile",
            "    kubectl's calls: " + ", ".join(f"{key} {n}" for key, n in sorted(self.kubectl_calls_by_verb.items())),
            f"  bulk, request to last applied      {self.bulk_s:7.1f} s   (request {self.bulk_request_s:.1f} s; "
            f"applied {self.bulk_applied}, failed {self.bulk_failed}, 429s {self.throttled})",
            "  CPU during the bulk                "
            + ", ".join(f"{key} {value:.1f} s" for key, value in self.bulk_cpu_s.items())
            + f" (load average {self.load_average:.1f} on {os.cpu_count()} cores)",
            "    per change                       "
            + ", ".join(f"{key} {value * 1000 / self.namespaces:.1f} ms" for key, value in self.bulk_cpu_s.items()),
            f"  calls per change                   request {self.request_calls_per_change:.2f} + worker "
            f"{self.worker_calls_per_change:.2f}  ({verbs}; bulk checks: "
            + ("each push, as the user)" if self.bulk_checks == "push" else "access review + dry-run first)"),
            f"  requests in flight                 bound {self.kube_max_inflight} (worker), "
            f"{self.check_concurrency} (request checks); at most {self.peak_inflight} seen by the sandbox",
            f"  physical limit                     {self.physical_limit_s:7.1f} s   (changes x calls per change x "
            f"{ms:.0f} ms / requests in flight, both phases)",
            f"  bulk_vs_kubectl_ratio              {self.ratio:7.3f}    goal <= {GOAL_RATIO}: "
            f"{verdict(self.ratio, GOAL_RATIO)}; against kubectl's expected time {self.expected_ratio:.3f}: "
            f"{verdict(self.expected_ratio, GOAL_RATIO)}",
            f"  status of other namespaces visible p50 {self.status_visible_p50_s!s:>6} s, p95 "
            f"{self.status_visible_p95_s!s:>6} s over {self.status_samples} changes during the bulk  "
            f"goal p95 <= 1 s: {verdict(self.status_visible_p95_s, 1.0)}",
            f"  worker peak RSS                    {self.worker_peak_rss_mb:7.1f} MB per process "
            f"({self.worker_total_peak_pss_mb:.0f} MB PSS parent + pool)  goal <= 250 MB: "
            f"{verdict(self.worker_peak_rss_mb, 250)}",
            f"  list: REST API (snapshot, all pages) {self.api_list_s:5.2f} s vs kubectl get -A -o json "
            f"{self.kubectl_list_s:.2f} s  api_list_vs_kubectl_ratio {self.list_ratio:.3f}",
        ]
        return out + [f"  FLAG: {flag}" for flag in self.flags]


def percentile(values: list[float], q: float) -> float | None:
    if not values:
        return None
    ordered = sorted(values)
    return round(ordered[min(len(ordered) - 1, int(round(q * (len(ordered) - 1))))], 3)
