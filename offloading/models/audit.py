"""The append-only, sealed AuditEvent trail, its head and its pruning checkpoints."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone

from offloading.choices import AuditAction, Source
from offloading.models import seal as auditseal
from offloading.models.changes import ChangeRequest


class AuditEvent(models.Model):
    """An append-only, sealed record of who changed what, when, from where and how it ended.

    Each row has a sequence number and a seal: an HMAC (AUDIT_HMAC_KEY) over its content, its number and
    the seal before it (``offloading.models.seal``). Editing, deleting, inserting or reordering rows breaks
    the seals; ``offloading.audit.trail.verify`` finds the first bad one, and the head is anchored
    outside the database (``manage.py audit_anchor``)."""

    seq = models.PositiveBigIntegerField(unique=True, null=True)
    time = models.DateTimeField(default=timezone.now, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    user_name = models.CharField(max_length=253, db_index=True)
    source = models.CharField(max_length=16, choices=Source.choices)
    request_id = models.CharField(max_length=64, blank=True)
    action = models.CharField(max_length=32, choices=AuditAction.choices, db_index=True)
    namespace = models.CharField(max_length=63, db_index=True)
    # PROTECT: the change id is part of the sealed payload, so its change may never go away.
    change = models.ForeignKey(
        ChangeRequest, null=True, blank=True, on_delete=models.PROTECT, related_name="audit_events"
    )
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    outcome = models.CharField(max_length=24, blank=True)  # a change state (awaiting_approval ...) or a verdict
    message = models.TextField(blank=True)
    prev_hash = models.CharField(max_length=64, blank=True)  # the seal of the event before
    hash = models.CharField(max_length=64, unique=True)  # this event's seal
    key_id = models.CharField(max_length=12, blank=True)

    class Meta:
        ordering = ("-id",)

    def __str__(self) -> str:
        return f"{self.time:%Y-%m-%d %H:%M:%S} {self.user_name} {self.action} {self.namespace}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None:
            raise ValueError("audit events are append-only")
        with transaction.atomic():
            # Why: the chain needs a total order; locking the head row serialises writers on
            # PostgreSQL, and SQLite's IMMEDIATE transactions already serialise them.
            head, _ = AuditChainHead.objects.select_for_update().get_or_create(pk=1)
            self.seq = head.last_seq + 1
            self.prev_hash = head.last_hash
            self.key_id = auditseal.key_id()
            self.hash = self.compute_hash()
            super().save(*args, **kwargs)
            AuditChainHead.objects.filter(pk=1).update(last_hash=self.hash, last_seq=self.seq)

    @classmethod
    def append_all(cls, events: list[AuditEvent]) -> None:
        """Seal and insert ``events`` in this order under one lock of the head: the same numbers and
        seals :meth:`save` gives them one by one, in three statements instead of five per event."""
        if not events:
            return
        if any(event.pk is not None for event in events):
            raise ValueError("audit events are append-only")
        with transaction.atomic():
            head, _ = AuditChainHead.objects.select_for_update().get_or_create(pk=1)
            seq, prev = head.last_seq, head.last_hash
            key = auditseal.key_id()
            for event in events:
                seq += 1
                event.seq, event.prev_hash, event.key_id = seq, prev, key
                event.hash = prev = event.compute_hash()
            AuditEvent.objects.bulk_create(events)
            AuditChainHead.objects.filter(pk=1).update(last_hash=prev, last_seq=seq)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError("audit events are append-only")

    def payload(self) -> dict[str, Any]:
        """The fields covered by the seal, in a stable form."""
        return {
            "time": self.time.isoformat(),
            "user_name": self.user_name,
            "source": self.source,
            "request_id": self.request_id,
            "action": self.action,
            "namespace": self.namespace,
            "change": self.change_id,
            "before": self.before,
            "after": self.after,
            "outcome": self.outcome,
            "message": self.message,
        }

    def compute_hash(self, key: str | None = None) -> str:
        return auditseal.seal(self.seq or 0, self.prev_hash, self.payload(), key)


class AuditChainHead(models.Model):
    """The newest event's number and seal; its row lock orders concurrent appends."""

    last_hash = models.CharField(max_length=64, blank=True)
    last_seq = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"#{self.last_seq} {self.last_hash}" if self.last_hash else "(empty chain)"


class AuditCheckpoint(models.Model):
    """Where the trail starts after retention pruning: the number and seal of the last pruned event,
    so that what remains still verifies."""

    seq = models.PositiveBigIntegerField()
    seal = models.CharField(max_length=64)
    pruned = models.PositiveIntegerField(default=0)
    before = models.DateTimeField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("-seq",)

    def __str__(self) -> str:
        return f"checkpoint after #{self.seq} ({self.pruned} pruned before {self.before:%Y-%m-%d})"
