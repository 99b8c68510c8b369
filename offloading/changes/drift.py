"""Answering drift (a change of the offloading made in the cluster without liqo-dash, see
``offloading.snapshot.drift``): accept theirs, written in the audit trail and nothing else changes; or
re-apply mine, the spec of our last applied change asked for again through the one request contract."""

from __future__ import annotations

from offloading.audit.events import record_drift_accepted
from offloading.changes import authorize
from offloading.changes.errors import ChangeRejected, Refusal
from offloading.changes.requests import ChangeInput, get_namespace, submit
from offloading.choices import ChangeAction
from offloading.context import Actor
from offloading.models import AuditEvent, ChangeRequest
from offloading.snapshot.drift import open_drift

NOTHING_TO_REAPPLY = "there is no change of liqo-dash to apply again"


def accept_drift(namespace_name: str, actor: Actor) -> AuditEvent | None:
    """Accept the open drift of ``namespace_name`` as it is (the same right as an edit); None when no
    drift is open (nothing is written). Raises ChangeRejected (``NOT_FOUND``, ``FORBIDDEN``)."""
    namespace = get_namespace(namespace_name)
    authorize.permit(actor, namespace, "edit")
    found = open_drift(namespace)
    if not found:
        return None
    spec = namespace.offloading_spec if namespace.offloaded else None
    return record_drift_accepted(actor, namespace.name, spec, found["drift"].seq)


def reapply_mine(namespace_name: str, actor: Actor, *, confirmed: bool = False) -> ChangeRequest:
    """Ask again for the spec of our last applied change of ``namespace_name``, based on the version the
    snapshot holds now (a change like any other: the same checks, confirmation when it is destructive)."""
    namespace = get_namespace(namespace_name)
    mine = open_drift(namespace).get("drift_mine")
    if mine is None:
        raise ChangeRejected({"namespace": [NOTHING_TO_REAPPLY]}, Refusal.CONFLICT)
    current = namespace.offloading_generation if namespace.offloaded else 0
    wanted = ChangeInput(
        namespace.name, ChangeAction.OFFLOAD, mine.desired_spec or {}, current, mine.label_namespace, confirmed
    )
    return submit(wanted, actor)
