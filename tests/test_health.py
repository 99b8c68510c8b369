"""Probes, metrics and logs: /healthz, /readyz, /metrics and the JSON log lines."""

from __future__ import annotations

import io
import json
import logging
import logging.config
import subprocess
import sys
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from liqo_dash import logs
from offloading.choices import ChangeAction, ChangeState
from offloading.models import ChangeRequest, SnapshotState
from tests.fixtures.waits import free_port

SECRET = "s3cret-password-in-the-url"


def fresh_snapshot(age: float = 1.0, failed: bool = False) -> SnapshotState:
    state = SnapshotState.get()
    now = timezone.now()
    state.last_success_at = now - timedelta(seconds=age)
    state.last_attempt_at = now if failed else state.last_success_at
    state.last_error = "cannot reach the Kubernetes API: https://user:pw@10.0.0.1" if failed else ""
    state.save()
    return state


def test_healthz_needs_no_login_and_no_database(client: Any) -> None:
    # No database access allowed (no db fixture): pytest-django fails the test if it queries.
    response = client.get("/healthz")
    assert response.status_code == 200
    assert response.json() == {"status": "ok"}


@pytest.mark.django_db
def test_readyz_ready_when_everything_answers(client: Any, settings: Any, redis_url: str) -> None:
    settings.CELERY_BROKER_URL = redis_url
    fresh_snapshot()
    response = client.get("/readyz")
    assert response.status_code == 200, response.content
    body = response.json()
    assert body["status"] == "ready"
    assert {name: check["ok"] for name, check in body["checks"].items()} == {
        "database": True,
        "broker": True,
        "kubernetes": True,
        "snapshot": True,
    }


@pytest.mark.django_db
def test_readyz_503_when_the_broker_is_down_and_no_secret_leaks(client: Any, settings: Any) -> None:
    settings.CELERY_BROKER_URL = f"redis://:{SECRET}@127.0.0.1:{free_port()}/0"
    fresh_snapshot(failed=True)
    response = client.get("/readyz")
    assert response.status_code == 503
    body = response.json()
    assert body["status"] == "not ready"
    assert body["checks"]["broker"]["ok"] is False
    assert body["checks"]["kubernetes"] == {"ok": False, "reachable": False, "required": True}
    assert SECRET not in response.content.decode()
    assert "10.0.0.1" not in response.content.decode()


@pytest.mark.django_db
def test_readyz_stale_snapshot_and_the_switch(client: Any, settings: Any, redis_url: str) -> None:
    settings.CELERY_BROKER_URL = redis_url
    settings.READY_SNAPSHOT_AGE = 30.0
    fresh_snapshot(age=120.0)
    response = client.get("/readyz")
    assert response.status_code == 503
    snapshot = response.json()["checks"]["snapshot"]
    assert snapshot["ok"] is False and snapshot["age_seconds"] >= 120
    # Report-only cluster checks: the same state is ready.
    settings.READY_CLUSTER_CHECKS = False
    response = client.get("/readyz")
    assert response.status_code == 200
    second = response.json()["checks"]["snapshot"]
    # The snapshot ages between the two requests: compare all but the age, and the age only for order.
    assert {**second, "age_seconds": None} == {**snapshot, "age_seconds": None, "required": False}
    assert second["age_seconds"] >= snapshot["age_seconds"]


@pytest.mark.django_db
def test_readyz_without_any_refresh_is_not_ready(client: Any, settings: Any, redis_url: str) -> None:
    settings.CELERY_BROKER_URL = redis_url
    response = client.get("/readyz")
    assert response.status_code == 503
    assert response.json()["checks"]["snapshot"]["age_seconds"] is None


def _sample(text: str, name: str, **labels: str) -> float | None:
    from prometheus_client.parser import text_string_to_metric_families

    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            if sample.name == name and all(sample.labels.get(k) == v for k, v in labels.items()):
                return sample.value
    return None


@pytest.mark.django_db
def test_metrics(client: Any, settings: Any, redis_url: str, admin_user: Any) -> None:
    import redis

    settings.CELERY_BROKER_URL = redis_url
    fresh_snapshot(age=42.0)
    for state in (ChangeState.QUEUED, ChangeState.FAILED, ChangeState.FAILED):
        ChangeRequest.objects.create(namespace="ns", action=ChangeAction.OFFLOAD, state=state, requester_name="x")
    queue = settings.CELERY_TASK_DEFAULT_QUEUE
    broker = redis.Redis.from_url(redis_url)
    broker.rpush(queue, "a", "b")
    broker.rpush(f"{queue}\x06\x163", "c")

    before = _sample(client.get("/metrics").content.decode(), "liqo_dash_http_requests_total", view="healthz") or 0
    client.get("/healthz")
    client.get("/healthz")
    client.get("/no-such-page/")
    response = client.get("/metrics")
    assert response.status_code == 200
    text = response.content.decode()
    assert _sample(text, "liqo_dash_http_requests_total", view="healthz", method="GET", status="200") == before + 2
    assert _sample(text, "liqo_dash_http_requests_total", view="unmatched", status="404") >= 1
    assert _sample(text, "liqo_dash_changes", state="failed") == 2
    assert _sample(text, "liqo_dash_changes", state="queued") == 1
    assert _sample(text, "liqo_dash_changes", state="applied") == 0
    assert _sample(text, "liqo_dash_queue_depth", queue=queue) == 3
    assert 42 <= _sample(text, "liqo_dash_snapshot_age_seconds") < 100


@pytest.mark.django_db
def test_metrics_change_durations_api_reachability_and_watch_restarts(
    client: Any, settings: Any, redis_url: str
) -> None:
    from datetime import timedelta

    from django.utils import timezone

    from offloading.cluster import breaker as apihealth
    from offloading.cluster import kube
    from offloading.snapshot.engine import _count_restart

    settings.CELERY_BROKER_URL = redis_url
    fresh_snapshot(age=1.0)
    now = timezone.now()
    for seconds in (1, 2, 3, 10):
        ChangeRequest.objects.create(
            namespace="ns",
            action=ChangeAction.OFFLOAD,
            state=ChangeState.APPLIED,
            requester_name="x",
            created_at=now - timedelta(seconds=seconds),
            finished_at=now,
        )
    _count_restart("namespaces")
    _count_restart("namespaces")
    text = client.get("/metrics").content.decode()
    assert _sample(text, "liqo_dash_change_duration_seconds", state="applied", quantile="0.5") == 3
    assert _sample(text, "liqo_dash_change_duration_seconds", state="applied", quantile="1.0") == 10
    assert _sample(text, "liqo_dash_watch_restarts_total", kind="namespaces") == 2
    assert _sample(text, "liqo_dash_api_server_reachable") == 1
    assert _sample(text, "liqo_dash_audit_trail_ok") == -1  # never verified yet
    from offloading.audit.events import verify_and_remember

    assert verify_and_remember() is None
    assert _sample(client.get("/metrics").content.decode(), "liqo_dash_audit_trail_ok") == 1
    from offloading.models import AuditEvent

    AuditEvent.objects.create(user_name="x", action="requested", namespace="ns", outcome="queued")
    AuditEvent.objects.filter(pk=AuditEvent.objects.order_by("id").first().pk).update(namespace="forged")
    assert verify_and_remember() is not None
    assert _sample(client.get("/metrics").content.decode(), "liqo_dash_audit_trail_ok") == 0
    apihealth.report_failure(kube.KubeError("transient", "connection refused", unreachable=True))
    assert _sample(client.get("/metrics").content.decode(), "liqo_dash_api_server_reachable") == 0


@pytest.mark.django_db
def test_metrics_token(client: Any, monkeypatch: Any, settings: Any, redis_url: str) -> None:
    settings.CELERY_BROKER_URL = redis_url
    monkeypatch.setenv("METRICS_TOKEN", "tok")
    assert client.get("/metrics").status_code == 401
    assert client.get("/metrics", headers={"Authorization": "Bearer tok"}).status_code == 200


@pytest.mark.django_db
def test_metrics_multiprocess_mode(client: Any, settings: Any, redis_url: str, tmp_path: Any, monkeypatch: Any) -> None:
    """With PROMETHEUS_MULTIPROC_DIR the values come from the per-process files gunicorn workers write."""
    from prometheus_client import values

    settings.CELERY_BROKER_URL = redis_url
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    # Write a counter as another worker process would.
    monkeypatch.setattr(values, "ValueClass", values.MultiProcessValue(process_identifier=lambda: 4242))
    from prometheus_client import CollectorRegistry, Counter

    Counter("liqo_dash_http_requests", "x", ["view", "method", "status"], registry=CollectorRegistry()).labels(
        "elsewhere", "GET", "200"
    ).inc(7)
    text = client.get("/metrics").content.decode()
    assert _sample(text, "liqo_dash_http_requests_total", view="elsewhere") == 7


def _log_lines(fmt: str, emit: Any) -> list[str]:
    from django.conf import settings

    stream = io.StringIO()
    config = json.loads(json.dumps(settings.LOGGING))
    config["handlers"]["console"]["formatter"] = fmt
    config["handlers"]["console"]["stream"] = "ext://sys.stdout"
    logging.config.dictConfig(config)
    handler = logging.getLogger().handlers[0]
    handler.setStream(stream)  # type: ignore[attr-defined]
    try:
        emit()
    finally:
        logging.config.dictConfig(settings.LOGGING)
    return stream.getvalue().splitlines()


@pytest.mark.django_db
def test_json_logs_carry_request_and_user(admin_client: Any) -> None:
    def emit() -> None:
        admin_client.get("/healthz", headers={"X-Request-ID": "req-123"})
        with logs.bound(change_id=7, namespace="web-frontend"):
            logging.getLogger("offloading.test").warning("applied %s", "it")

    lines = _log_lines("json", emit)
    records = [json.loads(line) for line in lines]
    ours = [r for r in records if r.get("logger") == "offloading.test"]
    assert len(ours) == 1
    assert ours[0]["message"] == "applied it"
    assert ours[0]["level"] == "WARNING"
    assert ours[0]["change_id"] == 7 and ours[0]["namespace"] == "web-frontend"
    assert list(ours[0])[0] == "time"


@pytest.mark.django_db
def test_logs_inside_a_request_name_the_request_and_user(admin_client: Any, admin_user: Any) -> None:
    """A 404 is logged by Django inside the request: the record carries its request id and user."""

    def emit() -> None:
        admin_client.get("/api/v1/changes/999999/", headers={"X-Request-ID": "req-abc"})

    records = [json.loads(line) for line in _log_lines("json", emit)]
    assert any(r.get("request_id") == "req-abc" and r.get("user") == admin_user.username for r in records), records
    text = _log_lines("text", emit)
    assert any("request_id=req-abc" in line and f"user={admin_user.username}" in line for line in text), text


@pytest.mark.django_db
def test_logs_name_the_client_address_the_trusted_proxies_yield(
    admin_client: Any, admin_user: Any, settings: Any
) -> None:
    """The address in the logs is the one the throttles and the lockout use: behind one proxy its
    entry of X-Forwarded-For, never what the client wrote before it."""
    settings.TRUSTED_PROXIES = 1
    forwarded = "6.6.6.6, 203.0.113.9"  # the client wrote 6.6.6.6; the proxy appended 203.0.113.9

    def emit() -> None:
        admin_client.get("/api/v1/changes/999999/", headers={"X-Request-ID": "req-ip", "X-Forwarded-For": forwarded})

    records = [json.loads(line) for line in _log_lines("json", emit)]
    ours = [r for r in records if r.get("request_id") == "req-ip"]
    assert ours and all(r.get("client") == "203.0.113.9" for r in ours), records
    settings.TRUSTED_PROXIES = 0
    records = [json.loads(line) for line in _log_lines("json", emit)]
    assert all(r.get("client") == "127.0.0.1" for r in records if r.get("request_id") == "req-ip"), records


@pytest.mark.django_db
def test_probes_are_not_redirected_to_https_and_accept_the_pod_ip(client: Any, settings: Any) -> None:
    settings.SECURE_SSL_REDIRECT = True
    settings.ALLOWED_HOSTS = ["liqo-dash.example.com", "10.1.2.3"]
    assert client.get("/accounts/login/", HTTP_HOST="liqo-dash.example.com").status_code == 301
    assert client.get("/healthz", HTTP_HOST="10.1.2.3:8000").status_code == 200
    assert client.get("/healthz", HTTP_HOST="10.9.9.9:8000").status_code == 400


def test_pod_ip_from_the_environment_is_an_allowed_host(tmp_path: Any) -> None:
    code = "from django.conf import settings; print(settings.ALLOWED_HOSTS)"
    env = {
        "PATH": "/usr/bin:/bin",
        "POD_IP": "10.1.2.3",
        "ALLOWED_HOSTS": "liqo-dash.example.com",
        "DJANGO_SETTINGS_MODULE": "liqo_dash.settings",
        "LIQO_DASH_VAR_DIR": str(tmp_path),
    }
    result = subprocess.run(
        [sys.executable, "-c", f"import django; django.setup(); {code}"],
        env=env,
        capture_output=True,
        text=True,
        timeout=60,
        cwd=str(Path(__file__).resolve().parent.parent),
    )
    assert result.returncode == 0, result.stderr
    assert result.stdout.strip() == "['liqo-dash.example.com', '10.1.2.3']"
