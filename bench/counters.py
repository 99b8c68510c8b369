"""What the benchmarks count: the Kubernetes API requests of the dashboard's client, the SQL statements
of a block, and the time of repeated runs."""

from __future__ import annotations

import statistics
import time
from collections import Counter
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import urlsplit

# The resources the refresh lists, by the last segment of their collection URL.
LISTED_KINDS = ("foreignclusters", "virtualnodes", "nodes", "namespaces", "namespaceoffloadings")


@dataclass
class ApiCalls:
    """The HTTP requests the dashboard's kube client sent, as (method, path, query)."""

    calls: list[tuple[str, str, dict[str, str]]] = field(default_factory=list)
    bytes: int = 0  # response bodies (Content-Length)

    @property
    def lists(self) -> Counter[str]:
        """LIST requests (GET on a collection) per kind."""
        out: Counter[str] = Counter()
        for method, path, query in self.calls:
            last = path.rstrip("/").rsplit("/", 1)[-1]
            if method == "GET" and last in LISTED_KINDS and query.get("watch") not in ("true", "1"):
                out[last] += 1
        return out

    @property
    def others(self) -> int:
        """Every request that is not a LIST (a GET of one object, a write ...)."""
        return len(self.calls) - sum(self.lists.values())


@contextmanager
def api_calls() -> Iterator[ApiCalls]:
    """Record every request of ``offloading.cluster.kube``'s client (wraps its urllib3 REST layer; the
    application code is untouched)."""
    from offloading.cluster import kube

    record = ApiCalls()
    rest = kube.api_client().rest_client
    original = rest.request

    def request(method: str, url: str, *args: Any, **kwargs: Any) -> Any:
        query = {str(k): str(v) for k, v in (kwargs.get("query_params") or [])}
        record.calls.append((method, urlsplit(url).path, query))
        response = original(method, url, *args, **kwargs)
        headers = getattr(response, "headers", None) or {}
        record.bytes += int(headers.get("Content-Length") or 0)
        return response

    rest.request = request
    try:
        yield record
    finally:
        del rest.request  # the class method again


@dataclass
class Queries:
    """The SQL statements run inside :func:`queries`, by their first keyword."""

    statements: list[str] = field(default_factory=list)

    @property
    def count(self) -> int:
        return len(self.statements)

    @property
    def by_kind(self) -> Counter[str]:
        return Counter((sql.split(None, 1) or ["?"])[0].upper() for sql in self.statements)


@contextmanager
def queries(capture: bool = True) -> Iterator[Queries]:
    """Count the SQL statements of the block (transaction COMMITs are not counted), with an execute
    wrapper, and with Django's CaptureQueriesContext as a cross-check when ``capture``.

    Why both: CaptureQueriesContext keeps at most ``queries_limit`` (9,000) entries in the
    connection's query log and silently drops the older ones (a cold refresh of 10,000 namespaces
    runs more), and on SQLite it re-quotes every parameter of every statement through extra
    ``SELECT QUOTE(?)`` round trips, which inflates the time of write-heavy code by about 20 %. The
    refresh is therefore counted with the wrapper only (``capture=False``)."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    result = Queries()

    def wrapper(execute: Callable[..., Any], sql: str, params: Any, many: bool, context: Any) -> Any:
        result.statements.append(sql)
        return execute(sql, params, many, context)

    if not capture:
        with connection.execute_wrapper(wrapper):
            yield result
        return
    connection.queries_log.clear()
    with CaptureQueriesContext(connection) as ctx, connection.execute_wrapper(wrapper):
        yield result
    captured = [q for q in ctx.captured_queries if q["sql"] not in ("COMMIT", "ROLLBACK")]
    if len(ctx.captured_queries) < connection.queries_limit and len(captured) != len(result.statements):
        raise AssertionError(
            f"query counts disagree: CaptureQueriesContext {len(captured)}, execute wrapper {result.count}"
        )


@dataclass
class Timing:
    runs: list[float]

    @property
    def median(self) -> float:
        return statistics.median(self.runs)


def timed(fn: Callable[[], Any], repeat: int) -> tuple[Timing, Any]:
    """Run ``fn`` ``repeat`` times; the times of every run and the last result."""
    runs, result = [], None
    for _ in range(repeat):
        started = time.perf_counter()
        result = fn()
        runs.append(time.perf_counter() - started)
    return Timing(runs), result
