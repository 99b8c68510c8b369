"""The one set of typed refusals of the change flow.

The form, the REST API, bulk and re-apply all get a :class:`ChangeRejected` from
``offloading.changes.requests`` when a change cannot be queued. It names the fields the messages belong
to (the field names of the NamespaceOffloading spec and of the API: ``clusterSelector``,
``namespaceSelector`` ...; ``namespace`` for the namespace as a whole) and why, as a
:class:`Refusal`; pages put the messages on their fields, the API answers with a Kubernetes-style
``Status`` whose code comes from the refusal.
"""

from __future__ import annotations

from enum import Enum


class Refusal(Enum):
    """Why a change was refused, with the HTTP status and the Kubernetes ``Status`` reason of the API."""

    INVALID = (422, "Invalid")  # Liqo's rules, or the API server (its webhook), refuse the spec
    FORBIDDEN = (403, "Forbidden")  # the user's role or scopes, or the cluster's RBAC, do not allow it
    STALE = (412, "PreconditionFailed")  # the namespace changed since the client loaded it
    CONFLICT = (409, "Conflict")  # the namespace is not in a state that can take the change now
    NOT_FOUND = (404, "NotFound")  # the namespace (or change) is not in the snapshot
    UNCONFIRMED = (400, "BadRequest")  # a destructive change asked for without confirmation (``confirm``)
    # Argo CD or Flux manages the offloading and would undo a direct push, and the request did not say
    # ``gitopsOverride`` (a Conflict like CONFLICT, told apart by the third item: an Enum merges equal values)
    GITOPS = (409, "Conflict", "gitops")

    @property
    def http_status(self) -> int:
        return self.value[0]

    @property
    def reason(self) -> str:
        return self.value[1]


class ChangeRejected(Exception):
    """The change was refused and nothing was queued; ``errors`` maps a field to its messages."""

    def __init__(self, errors: dict[str, list[str]], refusal: Refusal = Refusal.INVALID) -> None:
        super().__init__("; ".join(m for msgs in errors.values() for m in msgs))
        self.errors = errors
        self.refusal = refusal

    @property
    def messages(self) -> list[str]:
        return [m for msgs in self.errors.values() for m in msgs]
