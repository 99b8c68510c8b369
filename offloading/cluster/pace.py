"""Pacing the pushes to the API server: how many requests a worker keeps in flight while it pushes (a
bulk's threads; ``KUBE_MAX_INFLIGHT`` in all, however many bulks its processes push at once), and the
backoff that a 429 TooManyRequests imposes on all of them, not only on the request that got it. ``offloading.cluster.kube`` sends every call made inside :func:`paced` through
:data:`pacer`.

Per managed cluster (issue 28): the default cluster's pacer is :data:`pacer` with the keys of single-cluster
versions; another cluster's API server has its own (``paced(cluster)``, ``pacer_for``): its own bound in
flight, its own 429 hold (cache key ``liqo-dash:kube-backoff-until:<pk>``) and its own slot files, so one
API server throttling or slow never holds the pushes to another."""

from __future__ import annotations

import contextlib
import contextvars
import threading
import time
from collections.abc import Callable, Iterator
from typing import TypeVar

from django.conf import settings

from offloading.cluster.errors import KubeError
from offloading.cluster.slots import SharedSlots

T = TypeVar("T")

_BACKOFF_KEY = "liqo-dash:kube-backoff-until"
# As client-go: a throttled request is sent again after Retry-After, this many times in all.
PACED_TRIES = 10


class Pacer:
    """The bound on requests in flight of the calls made inside :func:`paced`: in this process, and
    ``KUBE_MAX_INFLIGHT`` in all the processes of the worker (:mod:`offloading.cluster.slots`).

    It starts at ``KUBE_MAX_INFLIGHT``. A 429 halves it (once per Retry-After window, however many
    requests were refused in it) and holds every paced request until Retry-After has passed, in every
    worker process: the hold is shared through the cache (Redis in production). Each success grows the
    bound back by about one per round trip of requests in flight (additive increase)."""

    def __init__(self, cluster: str = "") -> None:
        # cluster: "" for the default cluster (the keys of single-cluster versions), else its primary key.
        self.backoff_key = f"{_BACKOFF_KEY}:{cluster}" if cluster else _BACKOFF_KEY
        self._cond = threading.Condition()
        self._inflight = 0
        self._allowed: float | None = None
        self._hold_until = 0.0  # wall clock (shared between processes)
        self._shared_read_at = 0.0
        self.throttled = 0  # 429s seen since the start of the process
        self.peak_inflight = 0
        self.shared = SharedSlots(subdirectory=cluster)  # the bound, shared by the processes of this worker

    def maximum(self) -> int:
        return max(1, int(settings.LIQO_DASH.get("KUBE_MAX_INFLIGHT", 32)))

    @property
    def allowed(self) -> int:
        with self._cond:
            return int(self._allowed if self._allowed is not None else self.maximum())

    def _shared_hold(self) -> float:
        """The hold another process announced (read from the cache at most twice a second)."""
        now = time.monotonic()
        if now - self._shared_read_at < 0.5:
            return 0.0
        self._shared_read_at = now
        try:
            from django.core.cache import cache

            return float(cache.get(self.backoff_key) or 0.0)
        except Exception:  # noqa: BLE001 - a cache that does not answer must not stop the pushes
            return 0.0

    @contextlib.contextmanager
    def slot(self) -> Iterator[None]:
        shared = self._shared_hold()
        with self._cond:
            if shared > self._hold_until:
                self._hold_until = shared
            if self._allowed is None:
                self._allowed = float(self.maximum())
            while True:
                wait = self._hold_until - time.time()
                if wait > 0:
                    self._cond.wait(wait)
                elif self._inflight < int(self._allowed):
                    break
                else:
                    self._cond.wait(1.0)
            self._inflight += 1
            self.peak_inflight = max(self.peak_inflight, self._inflight)
        try:
            # ... and the bound shared with the worker's other processes (two bulks pushed at once).
            with self.shared.held(self.maximum()):
                yield
        finally:
            with self._cond:
                self._inflight -= 1
                self._cond.notify()

    def succeeded(self) -> None:
        with self._cond:
            allowed = self._allowed if self._allowed is not None else float(self.maximum())
            if allowed < self.maximum():
                self._allowed = min(float(self.maximum()), allowed + 1.0 / allowed)
                self._cond.notify()

    def throttle(self, retry_after: float) -> None:
        """A 429: hold every paced request for ``retry_after`` s here and in the other processes."""
        until = time.time() + max(0.05, retry_after)
        with self._cond:
            self.throttled += 1
            if time.time() >= self._hold_until:  # the first 429 of this window halves the bound
                allowed = self._allowed if self._allowed is not None else float(self.maximum())
                self._allowed = max(1.0, allowed / 2)
            if until <= self._hold_until:
                return
            self._hold_until = until
        try:
            from django.core.cache import cache

            cache.set(self.backoff_key, until, timeout=int(retry_after) + 2)
        except Exception:  # noqa: BLE001 - the hold still applies in this process
            pass

    def call(self, send: Callable[[], T]) -> T:
        """``send()`` (one request) in a slot; a 429 holds everyone for its Retry-After and is sent again."""
        for attempt in range(PACED_TRIES):
            with self.slot():
                try:
                    answer = send()
                except KubeError as exc:
                    if exc.status != 429 or attempt == PACED_TRIES - 1:
                        raise
                    self.throttle(exc.retry_after if exc.retry_after is not None else 1.0)
                    continue
            self.succeeded()
            return answer
        raise AssertionError("unreachable")  # pragma: no cover

    def reset(self) -> None:
        with self._cond:
            self._allowed = None
            self._hold_until = 0.0
            self._shared_read_at = 0.0
            self.peak_inflight = 0


pacer = Pacer()
_pacers: dict[str, Pacer] = {}
_pacers_lock = threading.Lock()
_paced: contextvars.ContextVar[Pacer | None] = contextvars.ContextVar("liqo_dash_kube_paced", default=None)


def pacer_for(cluster: int | str | None = None) -> Pacer:
    """The pacer of a managed cluster's API server: :data:`pacer` for the default one (None), else the
    cluster's own (by primary key), made on first use and kept for the process."""
    if cluster is None or cluster == "":
        return pacer
    key = str(cluster)
    with _pacers_lock:
        found = _pacers.get(key)
        if found is None:
            found = _pacers[key] = Pacer(key)
        return found


@contextlib.contextmanager
def paced(cluster: int | str | None = None) -> Iterator[None]:
    """Calls made in the block (pushes) go through the pacer of ``cluster`` (None: the default cluster's,
    :data:`pacer`): bounded in flight, a 429 sent again after Retry-After (the whole process, and other
    workers, waiting too)."""
    token = _paced.set(pacer_for(cluster))
    try:
        yield
    finally:
        _paced.reset(token)


def in_paced() -> bool:
    """Whether the current call is made inside :func:`paced`."""
    return _paced.get() is not None


def current_pacer() -> Pacer:
    """The pacer of the enclosing :func:`paced` block (the default's outside one)."""
    return _paced.get() or pacer
