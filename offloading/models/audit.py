"""The append-only, sealed AuditEvent trail, its head and its pruning checkpoints.

Every event belongs to a managed cluster (issue 28, migration 0028): the cluster whose namespace it is
about; an event about no cluster in particular (a managed cluster registered, edited or removed, which
names the cluster in its own fields) is the default cluster's. The key is PROTECT: the trail is
append-only, so a cluster with events cannot be removed (pruning its events first lets it go).

What the seal covers, by ``seal_version`` (kept on the row, so a row verifies the way it was sealed
whatever happens to the clusters later):

* **1**, every row sealed before 0028: the fields of :meth:`AuditEvent.payload` without the cluster.
  0028 gave these rows the default cluster (they were all its events), unsealed; they verify exactly as
  they did, so ``verify_audit``, the chain head, the anchors and the checkpoints written before the
  upgrade stay valid.
* **2**, every row sealed since: the same fields plus ``"v": 2`` and ``"managed"``, the cluster's
  primary key. Moving a row to another cluster breaks its seal; so does turning it back into a
  version 1 row (the payload then lacks the two keys it was sealed with). The primary key, not the
  name: a cluster may be renamed without breaking the trail (its events show its current name; the
  events of its registration and edits, in the trail, say which name it had when).

Why not "the cluster only when it is not the default": which cluster is the default can change
(``ensure_configured`` moves it while the old one holds no rows), and a rule read from today's default
would then re-read yesterday's seals differently.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone

from offloading.choices import AuditAction, Source
from offloading.models import seal as auditseal
from offloading.models.changes import ChangeRequest
from offloading.models.fleet import ManagedClusterKey, managed_pk

SEAL_VERSION = 2  # what new rows are sealed with (the module's docstring)


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
    # The managed cluster the event is about (None when built: the default cluster, filled in before
    # the seal is computed); what the seal covers, by seal_version (the module's docstring).
    managed = ManagedClusterKey(on_delete=models.PROTECT, db_index=False)
    seal_version = models.PositiveSmallIntegerField(default=SEAL_VERSION)

    class Meta:
        ordering = ("-id",)
        # One cluster's trail, newest first (the audit page and API filtered by cluster).
        indexes = [models.Index(fields=["managed", "seq"], name="audit_per_cluster")]

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
            self._name_cluster()
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
                event._name_cluster()
                event.hash = prev = event.compute_hash()
            AuditEvent.objects.bulk_create(events)
            AuditChainHead.objects.filter(pk=1).update(last_hash=prev, last_seq=seq)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError("audit events are append-only")

    def _name_cluster(self) -> None:
        """The cluster the seal covers must be the one written: the default's pk is filled in now, not
        by the key's ``pre_save`` after the seal was computed."""
        if self.managed_id is None:
            self.managed_id = managed_pk(None)

    def payload(self) -> dict[str, Any]:
        """The fields covered by the seal, in a stable form (by ``seal_version``: the module's docstring)."""
        fields: dict[str, Any] = {
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
        if self.seal_version >= 2:
            fields["v"] = self.seal_version
            fields["managed"] = self.managed_id
        return fields

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
