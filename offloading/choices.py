"""Choice sets for states and sources (NetBox-style choices classes)."""

from django.db import models


class ChangeState(models.TextChoices):
    QUEUED = "queued", "Queued"
    APPLYING = "applying", "Applying"
    APPLIED = "applied", "Applied"
    FAILED = "failed", "Failed"
    CONFLICT = "conflict", "Conflict"

    @classmethod
    def terminal(cls) -> tuple[str, ...]:
        return (cls.APPLIED, cls.FAILED, cls.CONFLICT)

    @classmethod
    def pending(cls) -> tuple[str, ...]:
        return (cls.QUEUED, cls.APPLYING)


class ChangeAction(models.TextChoices):
    OFFLOAD = "offload", "Offload"
    UPDATE = "update", "Update"
    UNOFFLOAD = "unoffload", "Unoffload"


class Source(models.TextChoices):
    WEB = "web", "Web"
    API = "api", "API"
    BULK = "bulk", "Bulk"
    TASK = "task", "Task"
    EXTERNAL = "external", "External (kubectl, liqoctl, GitOps ...)"


class AuditAction(models.TextChoices):
    REQUESTED = "requested", "Change requested"
    APPLIED = "applied", "Change applied"
    FAILED = "failed", "Change failed"
    CONFLICT = "conflict", "Change in conflict"
    DRIFT_CREATED = "drift_created", "Created outside liqo-dash"
    DRIFT_UPDATED = "drift_updated", "Changed outside liqo-dash"
    DRIFT_DELETED = "drift_deleted", "Deleted outside liqo-dash"
    REFUSED = "refused", "Change refused (not allowed)"
    DRIFT_ACCEPTED = "drift_accepted", "Drift accepted"
    BULK_REQUESTED = "bulk_requested", "Bulk change requested"


class AlertKind(models.TextChoices):
    CHANGE_FAILED = "change_failed", "Change failed"
    STUCK = "stuck", "Namespace stuck"
    PEER_UNHEALTHY = "peer_unhealthy", "Peer unhealthy"


class AlertState(models.TextChoices):
    OPEN = "open", "Open"
    RESOLVED = "resolved", "Resolved"
