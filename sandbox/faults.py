"""Runtime fault injection for the sandbox API: latency, 5xx, hung requests, forced 409s, outage, peers down.

Faults act on Kubernetes API requests only (never on `/sandbox/...` admin endpoints) and never on the
simulated controllers, except `peer_down`, which makes the listed provider clusters unreachable for
the Liqo simulation, and `controller_down`, which stops Liqo's NamespaceOffloading controller (the
status and its observedGeneration freeze until it is back).
"""

from __future__ import annotations

import random
import threading
from collections.abc import Callable, Collection
from dataclasses import asdict, dataclass, field
from typing import Any

WRITE_METHODS = ("POST", "PUT", "PATCH", "DELETE")


@dataclass
class FaultSettings:
    latency: float = 0.0  # seconds added to every request
    error_rate: float = 0.0  # fraction answered 500 InternalError
    timeout_rate: float = 0.0  # fraction that hang for `timeout_seconds`, then the connection is dropped
    timeout_seconds: float = 30.0
    conflict_rate: float = 0.0  # fraction of PUT/PATCH answered 409 Conflict
    outage: bool = False  # every API connection is dropped without an answer
    peer_down: list[str] = field(default_factory=list)  # provider cluster ids that are unreachable
    controller_down: bool = False  # Liqo's NamespaceOffloading controller does not reconcile
    path_contains: str = ""  # restrict latency/error/timeout/conflict faults to matching paths
    # Like the API server's priority and fairness: more than this many requests in flight at once (watches
    # not counted) are answered 429 TooManyRequests with Retry-After; 0 = no limit.
    max_inflight: int = 0
    seed: int | None = None


class Faults:
    """Thread-safe fault settings with change listeners (the Liqo simulation listens for peer_down)."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._settings = FaultSettings()
        self._random = random.Random()
        self._listeners: list[Callable[[FaultSettings], None]] = []
        self._inflight = 0
        # Peers another part of a sandbox domain reports unreachable (their own API is out: sandbox.domain);
        # kept apart from the settings, which are this cluster's own faults.
        self._unreachable: frozenset[str] = frozenset()
        self.throttled = 0  # requests answered 429 by max_inflight since the start
        self.peak_inflight = 0  # most requests in flight at once (watches not counted) since reset_peak

    def add_listener(self, listener: Callable[[FaultSettings], None]) -> None:
        self._listeners.append(listener)

    @property
    def settings(self) -> FaultSettings:
        with self._lock:
            return FaultSettings(**asdict(self._settings))

    def as_dict(self) -> dict[str, Any]:
        return asdict(self.settings)

    def set(self, **changes: Any) -> FaultSettings:
        """Change some settings (others keep their values). `peer_down` takes an id, a list or None."""
        with self._lock:
            current = asdict(self._settings)
            for key, value in changes.items():
                if key not in current:
                    raise ValueError(f"unknown fault {key!r}; known: {', '.join(sorted(current))}")
                if key == "peer_down":
                    value = [] if not value else [value] if isinstance(value, str) else list(value)
                elif key in ("latency", "error_rate", "timeout_rate", "conflict_rate", "timeout_seconds"):
                    value = float(value)
                    if key.endswith("_rate") and not 0.0 <= value <= 1.0:
                        raise ValueError(f"{key} must be between 0 and 1")
                    if value < 0:
                        raise ValueError(f"{key} must not be negative")
                elif key == "max_inflight":
                    value = int(value)
                    if value < 0:
                        raise ValueError("max_inflight must not be negative")
                elif key in ("outage", "controller_down") and not isinstance(value, bool):
                    raise ValueError(f"{key} must be true or false")
                current[key] = value
            self._settings = FaultSettings(**current)
            if "seed" in changes and changes["seed"] is not None:
                self._random.seed(changes["seed"])
            settings = FaultSettings(**asdict(self._settings))
        for listener in self._listeners:
            listener(settings)
        return settings

    def replace(self, data: dict[str, Any]) -> FaultSettings:
        """Set exactly these settings (the others go back to their defaults): PUT /sandbox/faults."""
        defaults = asdict(FaultSettings())
        unknown = set(data) - set(defaults)
        if unknown:
            raise ValueError(f"unknown fault(s) {', '.join(sorted(unknown))}; known: {', '.join(sorted(defaults))}")
        with self._lock:
            self._settings = FaultSettings()
        return self.set(**{**defaults, **data})

    def clear(self) -> FaultSettings:
        return self.replace({})

    def admit(self) -> bool:
        """Count one request in flight; False (and not counted) when `max_inflight` is reached."""
        with self._lock:
            limit = self._settings.max_inflight
            if limit and self._inflight >= limit:
                self.throttled += 1
                return False
            self._inflight += 1
            self.peak_inflight = max(self.peak_inflight, self._inflight)
            return True

    def reset_peak(self) -> None:
        with self._lock:
            self.peak_inflight = self._inflight

    def release(self) -> None:
        with self._lock:
            self._inflight -= 1

    def peer_is_down(self, cluster_id: str) -> bool:
        with self._lock:
            return cluster_id in self._settings.peer_down or cluster_id in self._unreachable

    def unreachable(self) -> frozenset[str]:
        """The peers reported unreachable from outside this cluster's settings (a domain's outages)."""
        with self._lock:
            return self._unreachable

    def set_unreachable(self, cluster_ids: Collection[str]) -> None:
        """Report exactly these peers unreachable (besides `peer_down`); listeners hear of the change."""
        with self._lock:
            if frozenset(cluster_ids) == self._unreachable:
                return
            self._unreachable = frozenset(cluster_ids)
            settings = FaultSettings(**asdict(self._settings))
        for listener in self._listeners:
            listener(settings)

    def controller_is_down(self) -> bool:
        with self._lock:
            return self._settings.controller_down

    def decide(self, method: str, path: str) -> tuple[float, str | None]:
        """(latency to add, action) for one API request; action is outage|timeout|error|conflict|None."""
        with self._lock:
            s = self._settings
            if s.outage:
                return 0.0, "outage"
            if s.path_contains and s.path_contains not in path:
                return 0.0, None
            roll = self._random.random
            if s.timeout_rate and roll() < s.timeout_rate:
                return s.latency, "timeout"
            if s.error_rate and roll() < s.error_rate:
                return s.latency, "error"
            if s.conflict_rate and method in ("PUT", "PATCH") and roll() < s.conflict_rate:
                return s.latency, "conflict"
            return s.latency, None
