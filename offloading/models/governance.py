"""Change governance rows (issue 29): the approval a change or a bulk waits for, and when a scheduled
change is released into the queue (``offloading.governance``).

Managed clusters (issue 28): neither row carries a cluster of its own. An approval is of exactly one change
or one bulk, a schedule of one change, and those carry theirs (``managed``, migration 0027), which nothing
edits after they are recorded; so the cluster is resolved through them (``Approval.objects.of(managed)``,
``Schedule.objects.of(managed)``) and can never disagree with the change's."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from offloading.models.changes import BulkRequest, ChangeRequest
from offloading.models.fleet import ManagedRef, managed_pk


class ApprovalQuerySet(models.QuerySet["Approval"]):
    def of(self, managed: ManagedRef = None) -> ApprovalQuerySet:
        """The approvals of managed cluster ``managed`` (None: the default): their change's or bulk's."""
        pk = managed_pk(managed)
        return self.filter(models.Q(change__managed_id=pk) | models.Q(bulk__managed_id=pk))


class ScheduleQuerySet(models.QuerySet["Schedule"]):
    def of(self, managed: ManagedRef = None) -> ScheduleQuerySet:
        """The schedules of managed cluster ``managed`` (None: the default): their change's."""
        return self.filter(change__managed_id=managed_pk(managed))


class ApprovalDecision(models.TextChoices):
    PENDING = "pending", "Awaiting a decision"
    APPROVED = "approved", "Approved"
    REJECTED = "rejected", "Rejected"
    EXPIRED = "expired", "Expired"
    BROKE_GLASS = "broke_glass", "Break glass (no approval)"
    SUPERSEDED = "superseded", "Superseded (the namespace changed: asked again)"
    CANCELLED = "cancelled", "Cancelled"


class Approval(models.Model):
    """One request for a second person's decision, about one change or one whole bulk (exactly one of
    ``change`` and ``bulk``). A change that goes back for a new decision gets a new row; the newest is
    the one that counts. ``spec_hash`` is the hash of what the approver saw (action, namespace, base and
    desired spec); ``seen`` is the snapshot version of each namespace at that time."""

    change = models.ForeignKey(ChangeRequest, null=True, blank=True, on_delete=models.CASCADE, related_name="approvals")
    bulk = models.ForeignKey(BulkRequest, null=True, blank=True, on_delete=models.CASCADE, related_name="approvals")
    reason = models.TextField(blank=True)  # why a second person is needed
    impact = models.JSONField(default=dict, blank=True)  # a bulk's impact, shown with it
    requester = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    requester_name = models.CharField(max_length=150)
    requested_at = models.DateTimeField(default=timezone.now)
    expires_at = models.DateTimeField(db_index=True)
    spec_hash = models.CharField(max_length=64)
    seen = models.JSONField(default=dict, blank=True)

    decision = models.CharField(
        max_length=16, choices=ApprovalDecision.choices, default=ApprovalDecision.PENDING, db_index=True
    )
    decided_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    decided_by_name = models.CharField(max_length=150, blank=True)
    decided_at = models.DateTimeField(null=True, blank=True)
    comment = models.TextField(blank=True)

    objects = ApprovalQuerySet.as_manager()

    class Meta:
        ordering = ("-requested_at", "-id")
        constraints = [
            models.CheckConstraint(
                condition=models.Q(change__isnull=False, bulk__isnull=True)
                | models.Q(change__isnull=True, bulk__isnull=False),
                name="approval_of_change_or_bulk",
            )
        ]

    def __str__(self) -> str:
        subject = f"change #{self.change_id}" if self.change_id else f"bulk #{self.bulk_id}"
        return f"approval #{self.pk} of {subject} ({self.decision})"


class Schedule(models.Model):
    """When a change kept for its change window is released into the queue (``not_before``), and which
    window it waits for; ``released_at`` once it was."""

    change = models.OneToOneField(ChangeRequest, on_delete=models.CASCADE, related_name="schedule")
    not_before = models.DateTimeField(db_index=True)
    window = models.CharField(max_length=500, blank=True)
    scheduled_at = models.DateTimeField(default=timezone.now)
    released_at = models.DateTimeField(null=True, blank=True)

    objects = ScheduleQuerySet.as_manager()

    class Meta:
        ordering = ("not_before", "id")

    def __str__(self) -> str:
        return f"change #{self.change_id} not before {self.not_before.isoformat()}"
