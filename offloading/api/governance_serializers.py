"""The governance of a change as the API shows it (issue 29): its approval and its schedule. Read-only,
nested in the change (``ChangeRequestSerializer.governance``) and in the list of approvals; field names
are camelCase as everywhere in the API."""

from __future__ import annotations

from typing import Any

from django.core.exceptions import ObjectDoesNotExist
from rest_framework import serializers

from offloading.models import Approval, ChangeRequest, Schedule


class ApprovalSerializer(serializers.ModelSerializer):
    requesterName = serializers.CharField(source="requester_name", read_only=True)  # noqa: N815 - API names
    requestedAt = serializers.DateTimeField(source="requested_at", read_only=True)  # noqa: N815
    expiresAt = serializers.DateTimeField(source="expires_at", read_only=True)  # noqa: N815
    decidedByName = serializers.CharField(source="decided_by_name", read_only=True)  # noqa: N815
    decidedAt = serializers.DateTimeField(source="decided_at", read_only=True, allow_null=True)  # noqa: N815
    specHash = serializers.CharField(source="spec_hash", read_only=True)  # noqa: N815
    change = serializers.IntegerField(source="change_id", read_only=True, allow_null=True)
    bulk = serializers.IntegerField(source="bulk_id", read_only=True, allow_null=True)

    class Meta:
        model = Approval
        fields = [
            "id",
            "change",
            "bulk",
            "decision",
            "reason",
            "impact",
            "requesterName",
            "requestedAt",
            "expiresAt",
            "decidedByName",
            "decidedAt",
            "comment",
            "specHash",
        ]
        read_only_fields = fields


class AwaitingApprovalSerializer(ApprovalSerializer):
    """An approval of the list of what awaits the caller, with the managed cluster of its change or bulk."""

    managedCluster = serializers.SerializerMethodField(  # noqa: N815
        help_text="The managed cluster of its change or bulk (its name)."
    )

    class Meta(ApprovalSerializer.Meta):
        fields = [*ApprovalSerializer.Meta.fields, "managedCluster"]
        read_only_fields = fields

    def get_managedCluster(self, approval: Approval) -> str:  # noqa: N802 - DRF names it after the field
        subject = approval.change if approval.change_id is not None else approval.bulk
        return subject.managed.name if subject is not None else ""


class ScheduleSerializer(serializers.ModelSerializer):
    notBefore = serializers.DateTimeField(source="not_before", read_only=True)  # noqa: N815
    releasedAt = serializers.DateTimeField(source="released_at", read_only=True, allow_null=True)  # noqa: N815

    class Meta:
        model = Schedule
        fields = ["notBefore", "window", "releasedAt"]
        read_only_fields = fields


class GovernanceSerializer(serializers.Serializer):
    approval = ApprovalSerializer(allow_null=True, help_text="The approval that counts (the newest; a bulk's).")
    schedule = ScheduleSerializer(allow_null=True, help_text="When a change kept for its window is released.")


def governance_of(change: ChangeRequest) -> dict[str, Any] | None:
    """The change's approval and schedule (from the prefetched relations when there are), or None."""
    approvals = sorted(change.approvals.all(), key=lambda a: a.pk)
    if not approvals and change.bulk_id is not None and change.bulk is not None:
        approvals = sorted(change.bulk.approvals.all(), key=lambda a: a.pk)
    try:
        schedule: Schedule | None = change.schedule
    except ObjectDoesNotExist:
        schedule = None
    if not approvals and schedule is None:
        return None
    return {
        "approval": ApprovalSerializer(approvals[-1]).data if approvals else None,
        "schedule": ScheduleSerializer(schedule).data if schedule is not None else None,
    }
