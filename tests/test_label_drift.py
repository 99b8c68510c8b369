"""The namespace's scheduling label changed with kubectl is drift (Liqo starts or stops scheduling its
pods remotely); the dashboard's own labelling is not."""

from __future__ import annotations

import subprocess
from datetime import timedelta
from typing import Any

import pytest

from liqo_rules.constants import SCHEDULING_LABEL
from offloading.choices import AuditAction
from offloading.cluster import kube
from offloading.models import AuditEvent
from offloading.snapshot.refresh import refresh

pytestmark = pytest.mark.django_db


def _kubectl(sandbox: Any, *args: str, stdin: str | None = None) -> None:
    done = subprocess.run(
        ["kubectl", f"--kubeconfig={sandbox.kubeconfig_path}", *args],
        input=stdin,
        capture_output=True,
        text=True,
        timeout=30,
    )
    assert done.returncode == 0, done.stderr


def test_kubectl_label_is_drift_and_ours_is_not(sandbox: Any) -> None:
    _kubectl(sandbox, "apply", "-f", "-", stdin="apiVersion: v1\nkind: Namespace\nmetadata: {name: labelled}\n")
    refresh()  # the baseline

    _kubectl(sandbox, "label", "namespace", "labelled", f"{SCHEDULING_LABEL}=true")
    refresh()
    drift = AuditEvent.objects.get(action=AuditAction.DRIFT_UPDATED, namespace="labelled")
    assert drift.user_name == "kubectl-label"
    assert drift.before == {"labels": {SCHEDULING_LABEL: None}} and drift.after == {
        "labels": {SCHEDULING_LABEL: "true"}
    }
    assert "set outside liqo-dash" in drift.message and "unknown unless" in drift.message

    # Removing it from a namespace Liqo does not offload changes nothing Liqo does: not drift.
    _kubectl(sandbox, "label", "namespace", "labelled", f"{SCHEDULING_LABEL}-")
    refresh()
    assert AuditEvent.objects.filter(action=AuditAction.DRIFT_UPDATED, namespace="labelled").count() == 1

    # The dashboard's own write (its field manager) is not drift.
    before = AuditEvent.objects.count()
    kube.label_namespace("labelled", {SCHEDULING_LABEL: "true"})
    refresh()
    assert AuditEvent.objects.count() == before


def test_removing_the_label_liqo_keeps_is_drift_and_liqos_own_removal_is_not() -> None:
    from offloading.models import Namespace
    from offloading.snapshot.drift import record_label_drift

    old = Namespace.objects.create(name="shop", labels={SCHEDULING_LABEL: "true"})
    stripped = {
        "metadata": {
            "name": "shop",
            "labels": {},
            "managedFields": [
                {"manager": "liqo-controller-manager", "operation": "Update", "time": "2026-01-01T10:00:00Z"},
                {"manager": "kubectl-label", "operation": "Update", "time": "2026-01-01T10:05:00Z"},
            ],
        }
    }
    offloaded = {"metadata": {"name": "offloading"}, "spec": {"podOffloadingStrategy": "Remote"}}
    local = {"metadata": {"name": "offloading"}, "spec": {"podOffloadingStrategy": "Local"}}
    deleting = {**offloaded, "metadata": {"name": "offloading", "deletionTimestamp": "2026-01-01T10:04:00Z"}}
    assert not record_label_drift(old, stripped, None)
    assert not record_label_drift(old, stripped, local)
    assert not record_label_drift(old, stripped, deleting)
    assert record_label_drift(old, stripped, offloaded)
    event = AuditEvent.objects.get()
    assert event.user_name == "kubectl-label" and "removed outside liqo-dash" in event.message


def test_a_removal_while_one_of_our_changes_is_in_motion_is_liqos_upkeep() -> None:
    """Edits racing through Local and back: the namespace can be seen without the label while the
    offloading (read a moment later) already wants it again. Not drift while our change is recent."""
    from django.utils import timezone

    from offloading.choices import ChangeAction, ChangeState
    from offloading.models import ChangeRequest, Namespace
    from offloading.snapshot.drift import record_label_drift

    old = Namespace.objects.create(name="shop", labels={SCHEDULING_LABEL: "true"})
    stripped = {"metadata": {"name": "shop", "labels": {}}}
    offloaded = {"metadata": {"name": "offloading"}, "spec": {"podOffloadingStrategy": "Remote"}}
    change = ChangeRequest.objects.create(
        namespace="shop", action=ChangeAction.UPDATE, state=ChangeState.APPLIED, requester_name="alice", source="web"
    )
    assert not record_label_drift(old, stripped, offloaded)
    ChangeRequest.objects.filter(pk=change.pk).update(updated_at=timezone.now() - timedelta(minutes=5))
    assert record_label_drift(old, stripped, offloaded)  # long after our change: someone removed it


def test_the_watchers_namespace_events_record_label_drift_too(sandbox: Any) -> None:
    """The informer path (what the watcher does with a MODIFIED namespace), not the full refresh."""
    from django.utils import timezone

    from offloading.snapshot import informer

    _kubectl(sandbox, "apply", "-f", "-", stdin="apiVersion: v1\nkind: Namespace\nmetadata: {name: watched}\n")
    refresh()
    _kubectl(sandbox, "label", "namespace", "watched", f"{SCHEDULING_LABEL}=true")
    obj = next(n for n in kube.list_namespaces().items if n["metadata"]["name"] == "watched")
    informer.SYNCED["namespaces"].apply([("MODIFIED", obj)], timezone.now())
    drift = AuditEvent.objects.get(action=AuditAction.DRIFT_UPDATED, namespace="watched")
    assert drift.user_name == "kubectl-label"


def test_the_watchers_removal_seen_before_the_offloadings_own_event_is_read_again(sandbox: Any) -> None:
    """The watcher's namespace and offloading streams are two: Liqo removes the label after the
    offloading turned Local, and the namespace's event can come while the snapshot still holds the
    offloading as Remote. Read again from the API server, the removal is Liqo's; with the offloading
    still Remote there, it is drift."""
    from django.utils import timezone

    from offloading.models import Namespace
    from offloading.snapshot import informer

    _kubectl(sandbox, "apply", "-f", "-", stdin="apiVersion: v1\nkind: Namespace\nmetadata: {name: raced}\n")
    offloading = (
        "apiVersion: offloading.liqo.io/v1beta1\nkind: NamespaceOffloading\n"
        "metadata: {name: offloading, namespace: raced}\nspec: {podOffloadingStrategy: %s}\n"
    )
    _kubectl(sandbox, "apply", "-f", "-", stdin=offloading % "Local")
    refresh()  # the baseline: learned
    obj = next(n for n in kube.list_namespaces().items if n["metadata"]["name"] == "raced")
    assert SCHEDULING_LABEL not in (obj["metadata"].get("labels") or {})

    def as_before_the_offloadings_event() -> None:  # the snapshot as the watcher held it: Remote, labelled
        Namespace.objects.filter(name="raced").update(
            labels={SCHEDULING_LABEL: "true"}, offloaded=True, offloading_spec={"podOffloadingStrategy": "Remote"}
        )

    as_before_the_offloadings_event()
    informer.SYNCED["namespaces"].apply([("MODIFIED", obj)], timezone.now())
    assert not AuditEvent.objects.filter(namespace="raced", action=AuditAction.DRIFT_UPDATED).exists()
    assert SCHEDULING_LABEL not in Namespace.objects.get(name="raced").labels  # the row is written all the same

    _kubectl(sandbox, "apply", "-f", "-", stdin=offloading % "Remote")
    as_before_the_offloadings_event()
    obj = next(n for n in kube.list_namespaces().items if n["metadata"]["name"] == "raced")
    labels = obj["metadata"].get("labels") or {}
    if SCHEDULING_LABEL in labels:  # the sandbox's Liqo labelled it again: someone takes it off with kubectl
        _kubectl(sandbox, "label", "namespace", "raced", f"{SCHEDULING_LABEL}-")
        obj = next(n for n in kube.list_namespaces().items if n["metadata"]["name"] == "raced")
    informer.SYNCED["namespaces"].apply([("MODIFIED", obj)], timezone.now())
    drift = AuditEvent.objects.get(namespace="raced", action=AuditAction.DRIFT_UPDATED)
    assert "removed outside liqo-dash" in drift.message
