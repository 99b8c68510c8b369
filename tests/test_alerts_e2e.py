"""Notifications end to end: a real Celery worker and beat on a real Redis, the sandbox over HTTP, and a
real webhook receiver. Beat's periodic check finds the peer going down; the worker's delivery meets a
500, retries itself (same task, after its backoff) and is taken on the second attempt."""

from __future__ import annotations

import time
from typing import Any

import pytest

from offloading.choices import AlertState
from offloading.models import Alert
from tests.fixtures.celery import Processes
from tests.fixtures.waits import wait_until
from tests.test_alerts import Receiver

pytestmark = pytest.mark.e2e


def test_beat_finds_a_peer_down_and_the_worker_retries_the_webhook_after_its_backoff(
    pipeline: Processes, sandbox: Any
) -> None:
    hook = Receiver(script=[(500, {})])
    try:
        pipeline.env.update({"ALERT_WEBHOOK_URL": hook.url, "ALERT_INTERVAL": "1", "ALERT_GRACE": "0"})
        pipeline.start_worker()
        pipeline.start_beat()
        sandbox.faults.set(peer_down=["milan"])
        wait_until(lambda: len(hook.posts) >= 2, 60, message=f"two POSTs\n{pipeline.log('worker')[-3000:]}")
        alert = wait_until(
            lambda: Alert.objects.filter(key="peer:milan", notified_state=AlertState.OPEN).first(),
            60,
            message="the alert recorded as told",
        )
        assert alert.attempts == 2 and alert.last_error == ""
        bodies = hook.bodies()
        assert [b["key"] for b in bodies[:2]] == ["peer:milan", "peer:milan"] and bodies[0]["id"] == bodies[1]["id"]
        time.sleep(3)  # a few more periodic checks: nothing more to tell while milan stays down
        assert len(hook.posts) == 2, [b["status"] for b in hook.bodies()]
        assert hook.times[1] - hook.times[0] >= 1.5, "the second attempt waits for the backoff (2 s)"
        assert "Retry in 2" in pipeline.log("worker"), "it is Celery's retry of the same task"
    finally:
        sandbox.faults.set(peer_down=[])
        hook.stop()
