"""/metrics passes ``promtool check metrics`` (Prometheus' own linter), with a sample in every family:
no reserved label on the wrong type (``quantile`` outside a summary, ``le`` outside a histogram), counters
named ``_total``, help on every family, base units. promtool comes with the Debian package
``prometheus`` (scripts/system-deps.sh installs it); without it these tests fail rather than skip."""

from __future__ import annotations

import shutil
import subprocess
from datetime import timedelta
from pathlib import Path
from typing import Any

import pytest
from django.utils import timezone

from offloading.choices import ChangeAction, ChangeState
from offloading.models import ChangeRequest
from tests.test_health import _sample, fresh_snapshot


def promtool() -> str:
    found = shutil.which("promtool")
    if found is None:
        pytest.fail("promtool is missing: install the Debian package prometheus (scripts/system-deps.sh)")
    return found


def check_metrics(text: str) -> None:
    result = subprocess.run(
        [promtool(), "check", "metrics"], input=text.encode(), capture_output=True, timeout=60, check=False
    )
    problems = (result.stdout + result.stderr).decode(errors="replace").strip()
    assert result.returncode == 0 and not problems, f"promtool check metrics:\n{problems}\n\n{text}"


def families(text: str) -> dict[str, Any]:
    from prometheus_client.parser import text_string_to_metric_families

    return {family.name: family for family in text_string_to_metric_families(text)}


def _every_family_has_samples(settings: Any, redis_url: str) -> None:
    from offloading.audit.events import verify_and_remember
    from offloading.snapshot.engine import _count_restart

    settings.CELERY_BROKER_URL = redis_url
    fresh_snapshot(age=5.0)
    now = timezone.now()
    for state, seconds in (
        (ChangeState.APPLIED, 1),
        (ChangeState.APPLIED, 2),
        (ChangeState.APPLIED, 3),
        (ChangeState.APPLIED, 10),
        (ChangeState.FAILED, 7),
    ):
        ChangeRequest.objects.create(
            namespace="ns",
            action=ChangeAction.OFFLOAD,
            state=state,
            requester_name="x",
            created_at=now - timedelta(seconds=seconds),
            finished_at=now,
        )
    ChangeRequest.objects.create(namespace="ns", action=ChangeAction.OFFLOAD, state=ChangeState.QUEUED)
    _count_restart("namespaces")
    verify_and_remember()


def test_promtool_is_installed() -> None:
    result = subprocess.run([promtool(), "--version"], capture_output=True, timeout=60, check=False)
    assert result.returncode == 0, result.stderr


@pytest.mark.django_db
def test_metrics_pass_promtool(client: Any, settings: Any, redis_url: str) -> None:
    _every_family_has_samples(settings, redis_url)
    client.get("/healthz")
    client.get("/no-such-page/")
    text = client.get("/metrics").content.decode()
    check_metrics(text)

    found = families(text)
    expected = {
        "liqo_dash_http_requests": "counter",
        "liqo_dash_http_request_duration_seconds": "histogram",
        "liqo_dash_changes": "gauge",
        "liqo_dash_snapshot_age_seconds": "gauge",
        "liqo_dash_change_duration_seconds": "summary",
        "liqo_dash_audit_trail_ok": "gauge",
        "liqo_dash_api_server_reachable": "gauge",
        "liqo_dash_watch_restarts": "counter",
        "liqo_dash_queue_depth": "gauge",
    }
    assert {name: found[name].type for name in expected if name in found} == expected
    empty = [name for name in expected if not found[name].samples]
    assert not empty, f"families without a sample: {empty}"


@pytest.mark.django_db
def test_change_durations_are_a_summary_with_the_same_quantiles(client: Any, settings: Any, redis_url: str) -> None:
    """The series dashboards read keep their names and labels (state, quantile 0.5 / 0.95 / 1.0 over the
    last finished changes); the summary adds a cumulative count and sum by outcome."""
    _every_family_has_samples(settings, redis_url)
    text = client.get("/metrics").content.decode()
    name = "liqo_dash_change_duration_seconds"
    assert _sample(text, name, state="applied", quantile="0.5") == 3
    assert _sample(text, name, state="applied", quantile="0.95") == 10
    assert _sample(text, name, state="applied", quantile="1.0") == 10
    assert _sample(text, name, state="failed", quantile="0.5") == 7
    assert _sample(text, f"{name}_count", state="applied") == 4
    assert _sample(text, f"{name}_sum", state="applied") == pytest.approx(16, abs=0.01)
    assert _sample(text, f"{name}_count", state="failed") == 1
    assert _sample(text, f"{name}_count", state="queued") is None  # not finished: no sample


@pytest.mark.django_db
def test_metrics_pass_promtool_in_multiprocess_mode(
    client: Any, settings: Any, redis_url: str, tmp_path: Path, monkeypatch: Any
) -> None:
    """Under gunicorn the counters and histograms come from the workers' files (MultiProcessCollector)."""
    from prometheus_client import CollectorRegistry, Counter, Histogram, values

    _every_family_has_samples(settings, redis_url)
    monkeypatch.setenv("PROMETHEUS_MULTIPROC_DIR", str(tmp_path))
    monkeypatch.setattr(values, "ValueClass", values.MultiProcessValue(process_identifier=lambda: 4243))
    registry = CollectorRegistry()
    Counter("liqo_dash_http_requests", "x", ["view", "method", "status"], registry=registry).labels(
        "elsewhere", "GET", "200"
    ).inc(3)
    Histogram("liqo_dash_http_request_duration_seconds", "x", ["view"], registry=registry).labels("elsewhere").observe(
        0.2
    )
    text = client.get("/metrics").content.decode()
    check_metrics(text)
    assert _sample(text, "liqo_dash_http_requests_total", view="elsewhere") == 3
    assert _sample(text, "liqo_dash_http_request_duration_seconds_count", view="elsewhere") == 1
