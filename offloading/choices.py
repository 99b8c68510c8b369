"""Choice sets for states and sources (NetBox-style choices classes)."""

from django.db import models


class ChangeState(models.TextChoices):
    QUEUED = "queued", "Queued"
    APPLYING = "applying", "Applying"
    APPLIED = "applied", "Applied"
    FAILED = "failed", "Failed"
    CONFLICT = "conflict", "Conflict"
    # change governance (issue 29): waiting for a second person, or for the scope's change window
    AWAITING_APPROVAL = "awaiting_approval", "Awaiting approval"
    SCHEDULED = "scheduled", "Scheduled"
    REJECTED = "rejected", "Rejected"
    EXPIRED = "expired", "Expired"
    CANCELLED = "cancelled", "Cancelled"

    @classmethod
    def terminal(cls) -> tuple[str, ...]:
        return (cls.APPLIED, cls.FAILED, cls.CONFLICT, cls.REJECTED, cls.EXPIRED, cls.CANCELLED)

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
    APPROVAL_REQUESTED = "approval_requested", "Approval requested"
    APPROVED = "approved", "Change approved"
    REJECTED = "rejected", "Change rejected"
    EXPIRED = "expired", "Approval request expired"
    BROKE_GLASS = "broke_glass", "Break glass (applied without approval or outside its window)"
    SCHEDULED = "scheduled", "Change scheduled for its window"
    CANCELLED = "cancelled", "Change cancelled"
    HANDED_OFF = "handed_off", "Change handed off to Git"
    # Managed clusters (issue 28): an admin registered, edited, re-credentialed or removed one. The
    # cluster is named in the event's ``after`` (or ``before``), with the names of the fields that
    # changed, never a secret's value.
    CLUSTER_REGISTERED = "cluster_registered", "Managed cluster registered"
    CLUSTER_UPDATED = "cluster_updated", "Managed cluster edited"
    CLUSTER_CREDENTIALS_ROTATED = "cluster_credentials_rotated", "Managed cluster credentials rotated"
    CLUSTER_REMOVED = "cluster_removed", "Managed cluster removed"


class AlertKind(models.TextChoices):
    CHANGE_FAILED = "change_failed", "Change failed"
    STUCK = "stuck", "Namespace stuck"
    PEER_UNHEALTHY = "peer_unhealthy", "Peer unhealthy"
    APPROVAL_NEEDED = "approval_needed", "Change awaiting approval"
    BROKE_GLASS = "broke_glass", "Break glass used"


class AlertState(models.TextChoices):
    OPEN = "open", "Open"
    RESOLVED = "resolved", "Resolved"


# The start of a change's message when the API server refused its push for good (403 Forbidden for the
# impersonated user, 422 from validation or Liqo's webhook): a bulk's result lists these as refused.
REFUSED_BY_CLUSTER = "Refused by the cluster"
