"""``Alert``: one notification subject (a failed change, a stuck state of a namespace, an unhealthy peer)
and what the webhook has been told about it (offloading.alerts.rules and alertsend)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from offloading.choices import AlertKind, AlertState
from offloading.models.fleet import ManagedClusterKey


class Alert(models.Model):
    """Keyed by what it is about (``key`` is unique: ``change-failed:<id>``, ``stuck:<namespace>:<rule>``,
    ``peer:<cluster id>``; a subject of another managed cluster than the default names it:
    ``stuck:<managed cluster>:<namespace>:<rule>``, ``peer:<managed cluster>:<cluster id>``), so the same
    subject is told once, whichever process finds it. ``managed``: the managed cluster the subject is
    in (``cluster`` is a peer's Liqo cluster id). The webhook is
    owed a message while ``state`` differs from ``notified_state`` (the state it was last told); this row
    is the outbox, written in the transaction that finds the subject."""

    key = models.CharField(max_length=200, unique=True)
    kind = models.CharField(max_length=24, choices=AlertKind.choices)
    severity = models.CharField(max_length=8, default="warning")  # warning | critical
    namespace = models.CharField(max_length=63, blank=True)
    cluster = models.CharField(max_length=63, blank=True)
    managed = ManagedClusterKey()  # None when built: the default cluster
    title = models.CharField(max_length=300)
    detail = models.TextField(blank=True)
    path = models.CharField(max_length=300, blank=True)  # the dashboard page, without scheme and host

    state = models.CharField(max_length=8, choices=AlertState.choices, default=AlertState.OPEN)
    notified_state = models.CharField(max_length=8, blank=True)  # "" until the webhook has been told
    transitions = models.PositiveIntegerField(default=1)  # each open / resolve: the message id's suffix
    first_seen = models.DateTimeField(default=timezone.now)
    last_seen = models.DateTimeField(default=timezone.now)
    opened_at = models.DateTimeField(default=timezone.now)
    resolved_at = models.DateTimeField(null=True, blank=True)

    # Delivery of the message owed: not before next_attempt_at; one sender at a time (the lease).
    next_attempt_at = models.DateTimeField(default=timezone.now, db_index=True)
    attempts = models.PositiveIntegerField(default=0)
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    delivered_at = models.DateTimeField(null=True, blank=True)
    last_error = models.CharField(max_length=500, blank=True)
    lease_token = models.CharField(max_length=64, blank=True)
    lease_until = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("-opened_at", "-id")
        indexes = [models.Index(fields=("kind", "state"), name="alert_kind_state")]

    def __str__(self) -> str:
        return f"{self.key} ({self.state}, told {self.notified_state or 'nothing'})"

    @property
    def owed(self) -> bool:
        return self.state != self.notified_state
