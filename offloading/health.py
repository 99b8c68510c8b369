"""Liveness and readiness endpoints for probes: no login, JSON, no secrets in the body.

``/healthz`` says the process answers (no database, no broker). ``/readyz`` checks the database, the
Redis broker, whether the default cluster's API server answered the last refresh and the age of its
snapshot; it answers 503 when one of the checks that gate readiness fails. Bodies name only check
results and exception classes, never URLs or error messages (they can carry hosts or credentials).

Every managed cluster (issue 28) is told in the body's ``clusters`` (reachable, unreachable since when,
its snapshot's age and staleness, whether a watcher keeps it), with the names of those unreachable and
stale beside it; that detail never gates readiness: a web pod taken out of service because one
consumer cluster is down would hide the dashboard of every other one, and the pod itself is fine.
"""

from __future__ import annotations

from typing import Any

import redis
from django.conf import settings
from django.db import connection
from django.http import HttpRequest, JsonResponse
from django.utils import timezone
from django.views.decorators.cache import never_cache
from django.views.decorators.http import require_GET

from offloading.models import SnapshotState
from offloading.snapshot.condition import ClusterCondition, conditions

BROKER_TIMEOUT = 2.0


@never_cache
@require_GET
def healthz(request: HttpRequest) -> JsonResponse:
    return JsonResponse({"status": "ok"})


def check_database() -> dict[str, Any]:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
            cursor.fetchone()
    except Exception as exc:  # noqa: BLE001 - any failure means "not ready"
        return {"ok": False, "error": type(exc).__name__}
    return {"ok": True}


def check_broker() -> dict[str, Any]:
    try:
        client = redis.Redis.from_url(
            settings.CELERY_BROKER_URL, socket_timeout=BROKER_TIMEOUT, socket_connect_timeout=BROKER_TIMEOUT
        )
        try:
            client.ping()
        finally:
            client.close()
    except Exception as exc:  # noqa: BLE001
        return {"ok": False, "error": type(exc).__name__}
    return {"ok": True}


def snapshot_checks(state: SnapshotState | None, now: Any = None) -> dict[str, dict[str, Any]]:
    """API server reachability as the last refresh saw it, and the snapshot's age."""
    now = now or timezone.now()
    if state is None or state.last_success_at is None:
        return {
            "kubernetes": {"ok": False, "reachable": None},
            "snapshot": {"ok": False, "age_seconds": None, "max_age_seconds": settings.READY_SNAPSHOT_AGE},
        }
    failed_since = bool(state.last_attempt_at and state.last_attempt_at > state.last_success_at and state.last_error)
    age = max(0.0, (now - state.last_success_at).total_seconds())
    return {
        "kubernetes": {"ok": not failed_since, "reachable": not failed_since},
        "snapshot": {
            "ok": age <= settings.READY_SNAPSHOT_AGE,
            "age_seconds": round(age, 1),
            "max_age_seconds": settings.READY_SNAPSHOT_AGE,
        },
    }


def cluster_detail(found: list[ClusterCondition]) -> dict[str, Any]:
    """Each managed cluster as the body tells it (by name), and the names of those out."""
    each = {
        c.name: {
            "default": c.is_default,
            "reachable": c.reachable,
            "unreachable_since": c.outage.since.isoformat() if c.outage is not None else None,
            "snapshot": {
                "age_seconds": None if c.age_seconds is None else round(c.age_seconds, 1),
                "stale": c.stale,
                "last_refresh_failed": c.refresh_failed,
            },
            "watcher_alive": c.watcher_alive,
        }
        for c in found
    }
    return {
        "clusters": each,
        "clusters_unreachable": [c.name for c in found if not c.reachable],
        "clusters_stale": [c.name for c in found if c.stale],
    }


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    checks: dict[str, dict[str, Any]] = {"database": check_database(), "broker": check_broker()}
    state = None
    detail: dict[str, Any] = {"clusters": {}, "clusters_unreachable": [], "clusters_stale": []}
    if checks["database"]["ok"]:
        try:
            state = SnapshotState.find()  # the default cluster's
        except Exception as exc:  # noqa: BLE001 - e.g. not migrated yet
            checks["database"] = {"ok": False, "error": type(exc).__name__}
    if checks["database"]["ok"]:
        try:
            detail = cluster_detail(conditions())
        except Exception as exc:  # noqa: BLE001 - the shared cache (the breakers) unreachable: told, not gating
            detail["clusters_error"] = type(exc).__name__
    checks.update(snapshot_checks(state))
    gating = ["database", "broker"]
    if settings.READY_CLUSTER_CHECKS:
        gating += ["kubernetes", "snapshot"]
    for name, check in checks.items():
        check["required"] = name in gating
    ready = all(checks[name]["ok"] for name in gating)
    body = {"status": "ready" if ready else "not ready", "checks": checks, **detail}
    return JsonResponse(body, status=200 if ready else 503)
