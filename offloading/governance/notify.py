"""Governance's notifications, through the alerts' channel (``offloading.alerts``: the outgoing webhook):
an ``approval_needed`` alert while a change or a bulk waits for a second person (resolved once it is
decided, expires or is cancelled), and a critical ``broke_glass`` alert when an admin breaks glass.
Nothing is written while ALERT_WEBHOOK_URL is empty, as for every alert."""

from __future__ import annotations

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from offloading.alerts import delivery as alertsend
from offloading.alerts import rules as alerts
from offloading.choices import AlertKind, AlertState
from offloading.models import Alert
from offloading.models.fleet import managed_pk


def _send_after_commit(alert_id: int) -> None:
    transaction.on_commit(lambda: alertsend.reserve_and_send(alert_id), robust=True)


def open_alert(
    key: str,
    kind: str,
    severity: str,
    title: str,
    detail: str,
    path: str,
    namespace: str = "",
    managed: int | None = None,
) -> None:
    """Open (or open again) the alert ``key`` about managed cluster ``managed`` (its pk; None: the default)
    and send it once the caller's transaction commits."""
    if not alerts.enabled():
        return
    now = timezone.now()
    fields = {
        "kind": kind,
        "severity": severity,
        "title": title[:300],
        "detail": detail,
        "path": path,
        "namespace": namespace[:63],
        "managed_id": managed_pk(managed),
    }
    alert, created = Alert.objects.get_or_create(
        key=key,
        defaults={
            **fields,
            "first_seen": now,
            "last_seen": now,
            "opened_at": now,
            "next_attempt_at": now,
        },
    )
    if not created:
        Alert.objects.filter(pk=alert.pk).update(
            **fields,
            state=AlertState.OPEN,
            opened_at=now,
            last_seen=now,
            resolved_at=None,
            transitions=F("transitions") + (0 if alert.state == AlertState.OPEN else 1),
            attempts=0,
            last_error="",
            next_attempt_at=now,
        )
        if alert.state == AlertState.OPEN and alert.notified_state == AlertState.OPEN:
            return  # already told, still open: the new detail is on the page
    _send_after_commit(alert.pk)


def resolve_alert(key: str) -> None:
    """Resolve the open alert ``key`` (told as resolved when it was told as open)."""
    if not alerts.enabled():
        return
    now = timezone.now()
    still_open = Alert.objects.filter(key=key, state=AlertState.OPEN)
    fields = {
        "state": AlertState.RESOLVED,
        "resolved_at": now,
        "last_seen": now,
        "transitions": F("transitions") + 1,
        "attempts": 0,
        "last_error": "",
        "next_attempt_at": now,
    }
    if still_open.filter(notified_state="").update(**fields, notified_state=AlertState.RESOLVED):
        return
    pk = still_open.values_list("pk", flat=True).first()
    if pk is not None and Alert.objects.filter(pk=pk, state=AlertState.OPEN).update(**fields):
        _send_after_commit(pk)


def approval_key(change_id: int | None, bulk_id: int | None) -> str:
    return f"approval-bulk:{bulk_id}" if bulk_id else f"approval-change:{change_id}"


KIND_APPROVAL = AlertKind.APPROVAL_NEEDED
KIND_BROKE_GLASS = AlertKind.BROKE_GLASS
