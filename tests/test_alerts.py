"""Notifications to an outgoing webhook, against a real HTTP receiver on a free port (http.server in a
thread, recording every request and answering as each test scripts it), with Celery eager."""

from __future__ import annotations

import json
import threading
import time
from collections.abc import Iterator
from datetime import timedelta
from email.utils import format_datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.urls import reverse
from django.utils import timezone

from liqo_rules.constants import SCHEDULING_LABEL
from offloading.alerts import rules as alerts
from offloading.alerts.delivery import retry_after
from offloading.changes.apply import apply_change
from offloading.changes.requests import request_offload
from offloading.choices import AlertState, ChangeState, Source
from offloading.context import Actor
from offloading.models import Alert, ChangeRequest, Cluster, Namespace, SnapshotState
from offloading.snapshot.refresh import refresh
from tests.fixtures.waits import free_port, wait_until

DASHBOARD = "https://dash.example.com"


class Receiver:
    """A webhook receiver: records (path, headers, JSON body) of each POST and answers the scripted
    (status, headers) in turn, then 200."""

    def __init__(self, port: int = 0, script: list[tuple[int, dict[str, str]]] | None = None) -> None:
        self.posts: list[tuple[str, dict[str, str], dict[str, Any]]] = []
        self.times: list[float] = []  # time.monotonic() of each POST
        self.script = list(script or [])
        receiver = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's name
                body = json.loads(self.rfile.read(int(self.headers["Content-Length"])))
                receiver.posts.append((self.path, dict(self.headers), body))
                receiver.times.append(time.monotonic())
                status, headers = receiver.script.pop(0) if receiver.script else (200, {})
                self.send_response(status)
                for name, value in headers.items():
                    self.send_header(name, value)
                self.send_header("Content-Length", "2")
                self.end_headers()
                self.wfile.write(b"ok")

            def log_message(self, *args: Any) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", port), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_address[1]}/hook/T000/secret"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def bodies(self) -> list[dict[str, Any]]:
        return [body for _path, _headers, body in self.posts]

    def stop(self) -> None:
        self.server.shutdown()
        self.server.server_close()
        self.thread.join(5)


def _configure(settings: Any, url: str, grace: float = 0.0) -> None:
    settings.LIQO_DASH = {
        **settings.LIQO_DASH,
        "ALERT_WEBHOOK_URL": url,
        "ALERT_GRACE": grace,
        "ALERT_DASHBOARD_URL": DASHBOARD,
        "ALERT_WEBHOOK_TIMEOUT": 2.0,
    }


@pytest.fixture
def receiver(settings: Any) -> Iterator[Receiver]:
    hook = Receiver()
    _configure(settings, hook.url)
    yield hook
    hook.stop()


def _snapshot_taken() -> None:
    SnapshotState.touch(None, last_success_at=timezone.now())


def _peer_only(fleet: Any) -> None:
    """The fleet with shop healthy: the one thing to tell is naples' unhealthy offloading module."""
    Namespace.objects.filter(name="shop").update(labels={SCHEDULING_LABEL: "true"})
    _snapshot_taken()


# --------------------------------------------------------------------------------------------------
# A failed change (the sandbox over HTTP; the transaction that fails it must commit: transactional)


@pytest.mark.django_db(transaction=True)
def test_a_failed_change_is_posted_once_with_its_json_and_text(sandbox: Any, k8s: Any, receiver: Receiver) -> None:
    k8s.core.create_namespace({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "api"}})
    refresh()
    spec = {"namespaceMappingStrategy": "EnforceSameName", "podOffloadingStrategy": "LocalAndRemote"}
    first = request_offload("api", spec, Actor(None, "alice", Source.WEB, "req-1"))
    first.refresh_from_db()
    assert first.state == ChangeState.APPLIED and receiver.posts == [], "an applied change is not told"
    refresh()
    # The mapping strategy is immutable: Liqo's webhook (in the sandbox) denies this update.
    change = ChangeRequest.objects.create(
        namespace="api",
        action="update",
        desired_spec={**spec, "namespaceMappingStrategy": "DefaultName"},
        base_generation=Namespace.objects.get(name="api").offloading_generation,
        requester_name="mallory",
    )
    assert apply_change(change.pk) == ChangeState.FAILED
    change.refresh_from_db()

    assert len(receiver.posts) == 1
    path, headers, body = receiver.posts[0]
    assert path == "/hook/T000/secret" and headers["Content-Type"] == "application/json"
    assert body["kind"] == "change_failed" and body["status"] == "firing" and body["severity"] == "critical"
    assert body["key"] == f"change-failed:{change.pk}" and body["namespace"] == "api"
    assert body["url"] == f"{DASHBOARD}/changes/{change.pk}/"
    assert body["detail"] == change.message and "cannot be modified after creation" in change.message
    assert body["text"].startswith(f"[liqo-dash] CRITICAL: Change #{change.pk} (update api, asked by mallory) failed.")
    assert "cannot be modified after creation" in body["text"] and body["text"].endswith(body["url"])
    assert body["id"] == f"liqo-dash-alert-{Alert.objects.get().pk}-1"

    alert = Alert.objects.get()
    assert alert.notified_state == AlertState.OPEN and alert.attempts == 1 and alert.delivered_at is not None
    assert alert.lease_token == "" and alert.last_error == ""
    alerts.check()
    assert apply_change(change.pk) == "skipped"
    assert len(receiver.posts) == 1, "a failed change is told once"


# --------------------------------------------------------------------------------------------------
# Stuck states and peers found by the periodic check


@pytest.mark.django_db
def test_a_stuck_state_found_twice_is_told_once_and_its_recovery_once(fleet: Any, receiver: Receiver) -> None:
    Cluster.objects.filter(cluster_id="naples").update(offloading_status="Healthy")
    _snapshot_taken()  # shop lacks the scheduling label: the diagnosis flags it

    assert alerts.check()["opened"] == 1
    assert alerts.check()["opened"] == 0
    assert len(receiver.posts) == 1
    body = receiver.bodies()[0]
    assert body["kind"] == "stuck" and body["key"] == "stuck:shop:scheduling-label"
    assert body["namespace"] == "shop" and body["url"] == f"{DASHBOARD}/namespaces/shop/"
    assert f"shop: The namespace lacks {SCHEDULING_LABEL}=true" in body["text"] and "Fix: " in body["detail"]

    Namespace.objects.filter(name="shop").update(labels={SCHEDULING_LABEL: "true"})
    assert alerts.check()["resolved"] == 1
    alerts.check()
    assert [b["status"] for b in receiver.bodies()] == ["firing", "resolved"]
    resolved = receiver.bodies()[1]
    assert resolved["key"] == body["key"] and resolved["id"] != body["id"]
    assert resolved["text"].startswith("[liqo-dash] RESOLVED after 1 min: shop: The namespace lacks")

    Namespace.objects.filter(name="shop").update(labels={})  # stuck again: told again, as a new message
    alerts.check()
    alerts.check()
    assert [b["status"] for b in receiver.bodies()] == ["firing", "resolved", "firing"]
    assert len({b["id"] for b in receiver.bodies()}) == 3 and Alert.objects.count() == 1


@pytest.mark.django_db
def test_a_peer_down_on_one_namespace_is_told_as_the_peer_not_per_namespace(fleet: Any, receiver: Receiver) -> None:
    _peer_only(fleet)
    Namespace.objects.get(name="shop").cluster_states.update(selected=True)  # shop now uses naples too
    alerts.check()
    assert [b["key"] for b in receiver.bodies()] == ["peer:naples"]
    body = receiver.bodies()[0]
    assert body["cluster"] == "naples" and body["url"] == f"{DASHBOARD}/clusters/naples/"
    assert "Peer naples is unhealthy" in body["text"] and "offloading module unhealthy (node not ready)" in body["text"]


@pytest.mark.django_db(transaction=True)
def test_a_peer_going_down_is_told_once_and_its_recovery_once(sandbox: Any, receiver: Receiver) -> None:
    assert refresh().ok
    alerts.check()
    assert receiver.posts == [], "every peer of the sandbox is healthy"
    sandbox.faults.set(peer_down=["milan"])

    def milan_unhealthy() -> bool:
        refresh()
        return Cluster.objects.get(cluster_id="milan").offloading_status == "Unhealthy"

    wait_until(milan_unhealthy, 60, message="milan to turn unhealthy in the snapshot")
    alerts.check()
    alerts.check()
    assert [(b["key"], b["status"]) for b in receiver.bodies()] == [("peer:milan", "firing")]

    sandbox.faults.set(peer_down=[])

    def milan_healthy() -> bool:
        refresh()
        return Cluster.objects.get(cluster_id="milan").offloading_status == "Healthy"

    wait_until(milan_healthy, 60, message="milan to recover")
    alerts.check()
    alerts.check()
    assert [(b["key"], b["status"]) for b in receiver.bodies()] == [
        ("peer:milan", "firing"),
        ("peer:milan", "resolved"),
    ]


@pytest.mark.django_db
def test_a_state_gone_within_the_grace_is_never_told(fleet: Any, receiver: Receiver, settings: Any) -> None:
    _peer_only(fleet)
    _configure(settings, receiver.url, grace=60.0)
    assert alerts.check()["opened"] == 1
    assert receiver.posts == [] and Alert.objects.get().owed
    Cluster.objects.filter(cluster_id="naples").update(offloading_status="Healthy")
    assert alerts.check()["resolved"] == 1
    later = timezone.now() + timedelta(minutes=5)
    alerts.check(later)
    assert receiver.posts == [] and not Alert.objects.get().owed


@pytest.mark.django_db
def test_a_state_lasting_past_the_grace_is_told_then(fleet: Any, receiver: Receiver, settings: Any) -> None:
    _peer_only(fleet)
    _configure(settings, receiver.url, grace=60.0)
    alerts.check()
    assert receiver.posts == []
    Alert.objects.update(next_attempt_at=timezone.now() - timedelta(seconds=1))  # the grace has passed
    alerts.check()
    assert [b["key"] for b in receiver.bodies()] == ["peer:naples"]


# --------------------------------------------------------------------------------------------------
# Delivery: retries, Retry-After, a receiver that is down, off


@pytest.mark.django_db
def test_a_receiver_answering_500_twice_gets_the_alert_on_the_third_attempt(fleet: Any, receiver: Receiver) -> None:
    _peer_only(fleet)
    receiver.script = [(500, {}), (500, {})]
    alerts.check()
    assert len(receiver.posts) == 3
    assert len({b["id"] for b in receiver.bodies()}) == 1, "the same message each time"
    alert = Alert.objects.get()
    assert alert.attempts == 3 and alert.notified_state == AlertState.OPEN and alert.last_error == ""
    alerts.check()
    assert len(receiver.posts) == 3


@pytest.mark.django_db
def test_retry_after_on_429_and_503_is_honoured(fleet: Any, receiver: Receiver) -> None:
    _peer_only(fleet)
    receiver.script = [(503, {"Retry-After": "600"})]
    alerts.check()
    alert = Alert.objects.get()
    assert len(receiver.posts) == 1 and alert.owed and alert.last_error == "HTTP 503 Service Unavailable"
    wait = (alert.next_attempt_at - timezone.now()).total_seconds()
    assert 590 < wait <= 600, "ten minutes, as asked, left to the periodic check"
    assert alert.lease_token == "", "no task holds it while it waits"
    alerts.check()
    alerts.check(timezone.now() + timedelta(seconds=300))
    assert len(receiver.posts) == 1, "not before the receiver's time"

    receiver.script = [(429, {"Retry-After": "1"})]
    alerts.check(timezone.now() + timedelta(seconds=601))
    assert [p[2]["id"] for p in receiver.posts[1:]] == [receiver.bodies()[0]["id"]] * 2, "429, then taken"
    alert.refresh_from_db()
    assert not alert.owed and alert.attempts == 3


def test_retry_after_reads_seconds_and_http_dates() -> None:
    now = timezone.now()
    assert retry_after("120") == 120.0 and retry_after(" 0 ") == 0.0 and retry_after("99999") == 3600.0
    assert retry_after(format_datetime(now + timedelta(seconds=90), usegmt=True), now) == pytest.approx(90, abs=1)
    assert retry_after(None) is None and retry_after("soon") is None


@pytest.mark.django_db
def test_a_receiver_that_is_down_gets_the_alert_from_the_periodic_check_once_up(
    fleet: Any,
    settings: Any,
) -> None:
    _peer_only(fleet)
    port = free_port()
    _configure(settings, f"http://127.0.0.1:{port}/hook")
    alerts.check()
    alert = Alert.objects.get()
    assert alert.owed and alert.delivered_at is None and "no answer" in alert.last_error
    assert alert.attempts == 6, "the first attempt and the task's five quick retries"
    assert alert.next_attempt_at > timezone.now() and alert.lease_token == ""
    alerts.check()
    alert.refresh_from_db()
    assert alert.attempts == 6, "the backoff holds: no attempt before next_attempt_at"

    hook = Receiver(port=port)
    try:
        alerts.check(alert.next_attempt_at + timedelta(seconds=1))
        assert [b["key"] for b in hook.bodies()] == ["peer:naples"]
        alert.refresh_from_db()
        assert not alert.owed and alert.attempts == 7 and alert.last_error == ""
    finally:
        hook.stop()


@pytest.mark.django_db
def test_a_redirect_is_not_followed_and_not_retried_soon(fleet: Any, receiver: Receiver) -> None:
    _peer_only(fleet)
    receiver.script = [(302, {"Location": "http://127.0.0.1:1/elsewhere"})]
    alerts.check()
    alert = Alert.objects.get()
    assert len(receiver.posts) == 1 and alert.owed and alert.last_error.startswith("HTTP 302")
    assert (alert.next_attempt_at - timezone.now()).total_seconds() > 250


@pytest.mark.django_db
def test_off_when_the_webhook_url_is_empty(fleet: Any, receiver: Receiver, settings: Any) -> None:
    _snapshot_taken()
    _configure(settings, "")
    assert alerts.check() == {}
    change = ChangeRequest.objects.create(namespace="shop", action="update", requester_name="x", message="boom")
    alerts.change_failed(change)
    assert not Alert.objects.exists() and receiver.posts == []


@pytest.mark.django_db
def test_nothing_is_found_before_the_first_snapshot(fleet: Any, receiver: Receiver) -> None:
    SnapshotState.touch(None, last_success_at=None)
    assert alerts.check()["opened"] == 0 and receiver.posts == []


# --------------------------------------------------------------------------------------------------
# The overview's Notifications line


@pytest.mark.django_db
def test_the_overview_tells_admins_how_the_webhook_fares(
    fleet: Any,
    receiver: Receiver,
    admin_client: Any,
    django_user_model: Any,
    settings: Any,
) -> None:
    from django.contrib.auth.models import Group
    from django.test import Client

    home = reverse("offloading:home")
    _peer_only(fleet)
    page = admin_client.get(home).content.decode()
    assert "Notifications:" in page and "webhook to <code>127.0.0.1</code>" in page and "nothing sent yet" in page
    assert "secret" not in page, "the webhook's path (its secret) is not shown"
    receiver.script = [(500, {})] * 6
    alerts.check()
    page = admin_client.get(home).content.decode()
    assert "last delivery failed" in page and "HTTP 500" in page and "1 waiting to be sent again" in page
    Alert.objects.update(next_attempt_at=timezone.now())
    alerts.check()
    page = admin_client.get(home).content.decode()
    assert "last delivery ok" in page and "waiting to be sent again" not in page

    viewer = django_user_model.objects.create_user("vera", password="vera-password-123")
    viewer.groups.add(Group.objects.get(name="viewer"))
    client = Client()
    client.force_login(viewer)
    page = client.get(home).content.decode()
    assert "Overview" in page and "Notifications:" not in page
    _configure(settings, "")
    assert "off (set <code>ALERT_WEBHOOK_URL</code>)" in admin_client.get(home).content.decode()


def test_a_webhook_url_that_is_not_http_stops_the_start(tmp_path: Any) -> None:
    import os
    import subprocess
    import sys

    env = {**os.environ, "ALERT_WEBHOOK_URL": "hooks.slack.com/services/x", "LIQO_DASH_VAR_DIR": str(tmp_path)}
    env.pop("ALERT_WEBHOOK_URL_FILE", None)
    done = subprocess.run(
        [sys.executable, "-c", "import liqo_dash.settings"], env=env, capture_output=True, text=True, timeout=60
    )
    assert done.returncode != 0 and "ALERT_WEBHOOK_URL must start with http:// or https://" in done.stderr
