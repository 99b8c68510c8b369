"""Notifications: what the dashboard tells an outgoing webhook (ALERT_WEBHOOK_URL), and when.

Three subjects, each one ``Alert`` row keyed by what it is about, so that it is told once whichever
process finds it and however often: a change that ends failed (``change-failed:<id>``, recorded in the
transaction that fails it), a stuck state of an offloaded namespace found by the diagnosis rules
(``stuck:<namespace>:<rule>``) and a peer with an unhealthy module (``peer:<cluster id>``); the last two
are found by the periodic check over the snapshot of every managed cluster that has one, told once they
have lasted ALERT_GRACE seconds, and told again as resolved when they go away.

Each alert carries its managed cluster (issue 28). The keys of the default cluster's subjects are the
keys of the single-cluster versions, so an upgrade opens no second alert for a subject already told;
another cluster's keys name it first (``stuck:<managed cluster>:<namespace>:<rule>``,
``peer:<managed cluster>:<cluster id>``: the same namespace, or the same peer, seen from two clusters
is two subjects). A change's key is its id, unique across clusters. The webhook's message names the
cluster when it is not the default (``alertsend.payload``).

Every state change is a conditional UPDATE, so two checks running at once open or resolve an alert
once. Delivery is in ``alertsend``. Off (no rows at all) while ALERT_WEBHOOK_URL is empty.
"""

from __future__ import annotations

import logging
from collections.abc import Iterator
from dataclasses import asdict, dataclass
from datetime import timedelta
from typing import Any
from urllib.parse import urlencode, urlsplit

from django.conf import settings
from django.db import transaction
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone

from liqo_rules import constants as liqo
from offloading.alerts import delivery as alertsend
from offloading.audit.events import cluster_of
from offloading.choices import AlertKind, AlertState
from offloading.insight.diagnosis import diagnose
from offloading.models import Alert, ChangeRequest, Cluster, ClusterOffloading, ManagedCluster, Namespace, SnapshotState
from offloading.models.inventory import Pod
from offloading.queue import enqueue_alert

log = logging.getLogger(__name__)

# A stuck namespace because its peer is down is told once, as the peer (not once per namespace on it).
NOT_TOLD_PER_NAMESPACE = frozenset({"peer-unhealthy"})
PEER_MODULES = ("networking", "authentication", "offloading")
KEEP_DAYS = 30  # told alerts not seen for this long are deleted
CHUNK = 500


def enabled() -> bool:
    return bool(alertsend.webhook_url())


@dataclass(frozen=True)
class Subject:
    """Something to tell, as the rules find it."""

    key: str
    kind: str
    severity: str  # warning | critical
    title: str
    detail: str
    path: str
    namespace: str = ""
    cluster: str = ""
    managed_id: int | None = None  # None: the default cluster

    def fields(self) -> dict[str, Any]:
        values = asdict(self)
        values["title"] = values["title"][:300]
        return values


def change_failed(change: ChangeRequest) -> None:
    """A change has just ended failed (called inside the transaction that says so): record its alert,
    and queue the delivery once that transaction commits."""
    if not enabled():
        return
    now = timezone.now()
    token = alertsend.new_token()
    subject = Subject(
        key=f"change-failed:{change.pk}",
        kind=AlertKind.CHANGE_FAILED,
        severity="critical",
        title=f"Change #{change.pk} ({change.get_action_display().lower()} {change.namespace}, "
        f"asked by {change.requester_name}) failed",
        detail=change.message,
        path=reverse("offloading:change_detail", args=[change.pk]),
        namespace=change.namespace,
        managed_id=cluster_of(change),
    )
    alert, created = Alert.objects.get_or_create(
        key=subject.key,
        defaults={
            **subject.fields(),
            "first_seen": now,
            "last_seen": now,
            "opened_at": now,
            "next_attempt_at": now,
            "lease_token": token,
            "lease_until": now + timedelta(seconds=alertsend.RESERVE),
        },
    )
    if created:
        transaction.on_commit(lambda: enqueue_alert(alert.pk, token), robust=True)


def check(now: Any = None) -> dict[str, int]:
    """The periodic task: open and resolve alerts from the snapshot, queue what the webhook is owed,
    forget what was told long ago."""
    if not enabled():
        return {}
    now = now or timezone.now()
    counts = detect(now)
    counts["queued"] = alertsend.send_due(now)
    counts["pruned"] = Alert.objects.filter(
        state=F("notified_state"), last_seen__lt=now - timedelta(days=KEEP_DAYS)
    ).delete()[0]
    return counts


def _known() -> list[ManagedCluster]:
    """The managed clusters whose snapshot succeeded once: with none yet, nothing is known of a cluster,
    so nothing is opened or resolved there."""
    synced = SnapshotState.objects.filter(last_success_at__isnull=False).values("managed_id")
    return list(ManagedCluster.objects.filter(pk__in=synced))


def detect(now: Any = None) -> dict[str, int]:
    """Compare what the rules find now with the open alerts, cluster by cluster: open the new, resolve
    the gone."""
    now = now or timezone.now()
    clusters = _known()
    if not clusters:
        return {"opened": 0, "resolved": 0}  # no snapshot yet: nothing is known, nothing is resolved
    found = {s.key: s for managed in clusters for s in [*peer_subjects(managed), *stuck_subjects(managed)]}
    opened = sum(_open(subject, now) for subject in found.values())
    watched = Alert.objects.filter(
        kind__in=(AlertKind.STUCK, AlertKind.PEER_UNHEALTHY),
        state=AlertState.OPEN,
        managed_id__in=[managed.pk for managed in clusters],
    )
    gone = set(watched.values_list("key", flat=True)) - found.keys()
    resolved = sum(_resolve(key, now) for key in sorted(gone))
    watched.exclude(key__in=gone).update(last_seen=now)
    return {"opened": opened, "resolved": resolved}


def subject_key(kind: str, managed: ManagedCluster, *parts: str) -> str:
    """``kind:part:...`` for the default cluster (the single-cluster versions' keys), with the managed
    cluster's name first for another (``kind:<managed cluster>:part:...``)."""
    named = parts if managed.is_default else (managed.name, *parts)
    return ":".join((kind, *named))


def _page(managed: ManagedCluster, name: str, *args: str, namespace: str = "") -> str:
    """The page of a subject: the default cluster's own page; for another cluster, its rows on the
    fleet-wide namespaces page (the single-cluster pages read the default cluster)."""
    if managed.is_default:
        return reverse(name, args=list(args))
    query = urlencode({"cluster": managed.name, **({"q": namespace} if namespace else {})})
    return f"{reverse('offloading:fleet_namespaces')}?{query}"


def _open(subject: Subject, now: Any) -> int:
    """Open (or open again) the alert of ``subject``; 1 when this call did."""
    grace = timedelta(seconds=float(settings.LIQO_DASH["ALERT_GRACE"]))
    alert, created = Alert.objects.get_or_create(
        key=subject.key,
        defaults={
            **subject.fields(),
            "first_seen": now,
            "last_seen": now,
            "opened_at": now,
            "next_attempt_at": now + grace,
        },
    )
    if created:
        return 1
    if alert.state == AlertState.OPEN:
        return 0
    return Alert.objects.filter(pk=alert.pk, state=AlertState.RESOLVED).update(
        **subject.fields(),
        state=AlertState.OPEN,
        opened_at=now,
        last_seen=now,
        resolved_at=None,
        transitions=F("transitions") + 1,
        attempts=0,
        last_error="",
        next_attempt_at=now + grace,
    )


def _resolve(key: str, now: Any) -> int:
    """Resolve the open alert ``key``; 1 when this call did. Never told it was open (still within its
    grace): nothing to take back, so nothing is owed."""
    still_open = Alert.objects.filter(key=key, state=AlertState.OPEN)
    fields = {
        "state": AlertState.RESOLVED,
        "resolved_at": now,
        "transitions": F("transitions") + 1,
        "attempts": 0,
        "last_error": "",
        "next_attempt_at": now,
    }
    return still_open.filter(notified_state="").update(**fields, notified_state=AlertState.RESOLVED) or (
        still_open.update(**fields)
    )


def peer_subjects(managed: ManagedCluster) -> Iterator[Subject]:
    """A peer of ``managed`` with a networking, authentication or offloading module Unhealthy (liqoctl
    info's verdict)."""
    for cluster in Cluster.objects.of(managed):
        bad = [m for m in PEER_MODULES if getattr(cluster, f"{m}_status") == "Unhealthy"]
        if not bad:
            continue
        reasons = []
        for module in bad:
            messages = ((cluster.modules or {}).get(module) or {}).get("alerts") or []
            reasons.append(f"{module} module unhealthy" + (f" ({'; '.join(messages)})" if messages else ""))
        yield Subject(
            key=subject_key("peer", managed, cluster.cluster_id),
            kind=AlertKind.PEER_UNHEALTHY,
            severity="critical",
            title=f"Peer {cluster.cluster_id} is unhealthy",
            detail="; ".join(reasons) + ". Liqo cannot create or update remote namespaces there.",
            path=_page(managed, "offloading:cluster_detail", cluster.cluster_id),
            cluster=cluster.cluster_id,
            managed_id=managed.pk,
        )


def stuck_candidates(managed: ManagedCluster | None = None) -> list[str]:
    """Offloaded namespaces of ``managed`` (None: the default cluster) a diagnosis rule could flag: a
    superset, read in three queries, so that a healthy fleet costs no per-namespace diagnosis (a Ready,
    labelled, reconciled namespace with no CreationLoopBackOff and no pending pod has no finding that is
    told)."""
    looping = set(
        ClusterOffloading.objects.of(managed)
        .filter(state=liqo.REASON_CREATION_LOOP_BACKOFF)
        .values_list("namespace__name", flat=True)
    )
    pending = set(Pod.objects.of(managed).filter(phase="Pending").values_list("namespace", flat=True).distinct())
    rows = (
        Namespace.objects.of(managed)
        .filter(offloaded=True)
        .values_list(
            "name",
            "labels",
            "offloading_phase",
            "offloading_deleting",
            "offloading_generation",
            "offloading_observed_generation",
        )
    )
    return [
        name
        for name, labels, phase, deleting, generation, observed in rows
        if phase != "Ready"
        or deleting
        or generation != observed
        or (labels or {}).get(liqo.SCHEDULING_LABEL) != "true"
        or name in looping
        or name in pending
    ]


def stuck_subjects(managed: ManagedCluster) -> Iterator[Subject]:
    """The diagnosis rules' findings over the offloaded namespaces of ``managed`` (one subject per
    namespace and rule)."""
    names = stuck_candidates(managed)
    for start in range(0, len(names), CHUNK):
        for namespace in Namespace.objects.of(managed).filter(name__in=names[start : start + CHUNK]):
            for finding in diagnose(namespace):
                if finding.rule in NOT_TOLD_PER_NAMESPACE:
                    continue
                yield Subject(
                    key=subject_key("stuck", managed, namespace.name, finding.rule),
                    kind=AlertKind.STUCK,
                    severity="critical" if finding.severity == "bad" else "warning",
                    title=f"{namespace.name}: {finding.title}",
                    detail=f"{finding.explanation} Fix: {finding.action}",
                    path=_page(managed, "offloading:namespace_detail", namespace.name, namespace=namespace.name),
                    namespace=namespace.name,
                    managed_id=managed.pk,
                )


def overview_status() -> dict[str, Any]:
    """For the overview's Notifications line (admins): where alerts go, how the last delivery went."""
    url = alertsend.webhook_url()
    if not url:
        return {"configured": False}
    finished = Alert.objects.filter(Q(delivered_at__isnull=False) | ~Q(last_error=""))  # not in flight
    latest = finished.order_by("-last_attempt_at", "-id").first()
    return {
        "configured": True,
        "host": urlsplit(url).hostname or "",
        "latest": latest,
        "latest_ok": latest is not None and not latest.last_error,
        "failing": Alert.objects.exclude(state=F("notified_state")).exclude(last_error="").count(),
    }
