"""Liveness and readiness endpoints for probes: no login, JSON, no secrets in the body.

``/healthz`` says the process answers (no database, no broker). ``/readyz`` checks the database, the
Redis broker, whether the API server answered the last refresh and the age of the snapshot; it answers
503 when one of the checks that gate readiness fails. Bodies name only check results and exception
classes, never URLs or error messages (they can carry hosts or credentials).
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


@never_cache
@require_GET
def readyz(request: HttpRequest) -> JsonResponse:
    checks: dict[str, dict[str, Any]] = {"database": check_database(), "broker": check_broker()}
    state = None
    if checks["database"]["ok"]:
        try:
            state = SnapshotState.find()  # the default cluster's
        except Exception as exc:  # noqa: BLE001 - e.g. not migrated yet
            checks["database"] = {"ok": False, "error": type(exc).__name__}
    checks.update(snapshot_checks(state))
    gating = ["database", "broker"]
    if settings.READY_CLUSTER_CHECKS:
        gating += ["kubernetes", "snapshot"]
    for name, check in checks.items():
        check["required"] = name in gating
    ready = all(checks[name]["ok"] for name in gating)
    return JsonResponse({"status": "ready" if ready else "not ready", "checks": checks}, status=200 if ready else 503)
