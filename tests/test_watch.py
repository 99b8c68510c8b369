"""The watcher keeps the snapshot current from watch events, without waiting for a refresh."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from offloading.choices import AuditAction, Source
from offloading.models import AuditEvent, Namespace
from offloading.snapshot.engine import KindWatcher
from offloading.snapshot.refresh import refresh
from tests.fixtures.waits import wait_until

pytestmark = pytest.mark.django_db(transaction=True)
GROUP, VERSION, PLURAL = "offloading.liqo.io", "v1beta1", "namespaceoffloadings"


@pytest.fixture
def watcher(sandbox: Any) -> Iterator[KindWatcher]:
    refresh()
    stop = threading.Event()
    thread = KindWatcher("namespaceoffloadings", stop, timeout_seconds=5)
    thread.start()
    wait_until(lambda: thread.resource_version, 60, message="the watch to start")
    yield thread
    stop.set()
    thread.join(15)
    assert not thread.is_alive()


def test_an_offloading_created_elsewhere_reaches_the_snapshot_through_the_watch(watcher: KindWatcher, k8s: Any) -> None:
    k8s.core.create_namespace({"metadata": {"name": "watched"}})
    refresh()  # the namespace itself (a namespace event would trigger this refresh too)
    k8s.custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        "watched",
        PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NamespaceOffloading",
            "metadata": {"name": "offloading"},
            "spec": {"podOffloadingStrategy": "Remote"},
        },
        field_manager="liqoctl",
    )
    ready = wait_until(
        lambda: Namespace.objects.filter(name="watched", offloading_phase="Ready").first(),
        60,
        message="Ready via watch",
    )
    assert ready.offloading_spec["podOffloadingStrategy"] == "Remote"
    drift = AuditEvent.objects.get(namespace="watched")
    assert (
        drift.action == AuditAction.DRIFT_CREATED and drift.source == Source.EXTERNAL and drift.user_name == "liqoctl"
    )

    k8s.custom.delete_namespaced_custom_object(GROUP, VERSION, "watched", PLURAL, "offloading")
    wait_until(lambda: not Namespace.objects.get(name="watched").offloaded, 60, message="the deletion via watch")
    assert AuditEvent.objects.filter(namespace="watched", action=AuditAction.DRIFT_DELETED).count() == 1
    assert watcher.events >= 2


def test_the_watch_survives_an_outage_and_resumes(
    watcher: KindWatcher, k8s: Any, sandbox: Any, caplog: pytest.LogCaptureFixture
) -> None:
    k8s.core.create_namespace({"metadata": {"name": "resumed"}})
    refresh()
    assert watcher.lists == 1
    caplog.set_level(logging.WARNING, logger="offloading.watch")
    sandbox.faults.set(outage=True)  # also ends the open watch
    try:
        # The watcher noticed: its attempt to watch again failed, and it is backing off.
        wait_until(
            lambda: any(r.name == "offloading.watch" and "failed" in r.getMessage() for r in caplog.records),
            60,
            message="the watch to fail during the outage",
        )
    finally:
        sandbox.faults.clear()
    k8s.custom.create_namespaced_custom_object(
        GROUP,
        VERSION,
        "resumed",
        PLURAL,
        {
            "apiVersion": f"{GROUP}/{VERSION}",
            "kind": "NamespaceOffloading",
            "metadata": {"name": "offloading"},
            "spec": {},
        },
    )
    wait_until(lambda: Namespace.objects.get(name="resumed").offloaded, 40, message="the event after the outage")
    # It resumed from the resourceVersion it had, without listing again.
    assert watcher.lists == 1
