"""The colour of a phase, a change state, a cluster state or a module status: one table for the badges of
the templates (offloading_extras' ``badge`` and ``tone``) and the rows and chips the views build."""

from __future__ import annotations

TONES = {
    # offloading phases
    "Ready": "ok",
    "NoClusterSelected": "muted",
    "InProgress": "info",
    "SomeFailed": "warn",
    "AllFailed": "bad",
    "Terminating": "purple",
    # change states
    "queued": "muted",
    "applying": "info",
    "applied": "ok",
    "failed": "bad",
    "conflict": "warn",
    "awaiting_approval": "purple",
    "scheduled": "info",
    "rejected": "bad",
    "expired": "muted",
    "cancelled": "muted",
    # per-cluster Ready reasons
    "NamespaceCreated": "ok",
    "Creating": "info",
    "CreationLoopBackOff": "bad",
    # module health
    "Healthy": "ok",
    "Unhealthy": "bad",
    "Disabled": "muted",
    # namespace phases (Terminating is above)
    "Active": "ok",
}


def tone(value: str) -> str:
    """The colour class of a phase, state or status (the same as its badge)."""
    return TONES.get(value, "muted")
