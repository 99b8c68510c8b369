"""Who may ask for a change, and as whom it reaches the cluster: the access checks of the request
contract (``offloading.changes.requests``) and the identity the worker pushes as.

Two gates, both before anything is recorded or queued:

1. The dashboard's own roles and scopes (``access.policy``): a viewer, a user without a role, or an
   operator outside their scopes is refused with the reason (``FORBIDDEN``: a form error, an API 403
   ``Status``, a bulk namespace left out).
2. The cluster (``access.review``): a SubjectAccessReview per verb the change needs, for the user the
   push will impersonate. A denial quotes the cluster's reason, the same way. An API server that
   cannot be asked does not block the request (as with the dry-run): the push is made as the user, so
   the cluster decides when it is applied.

Managed clusters (issue 28): a namespace of another cluster than the default is asked of the policy under
that cluster's name (``can_change(..., cluster=name)``: scopes that name clusters), and its access review
of that cluster's API server (``cluster``, through its client).

Every refusal of either gate is written to the audit trail as ``refused``. A change asked for without a
user (``Actor.user_id`` None: management commands, the dashboard's own tests of the pipeline) is the
dashboard acting for itself: no policy, no impersonation.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

from django.contrib.auth import get_user_model

from access import policy, roles
from access.impersonation import Identity, identity_for, identity_per_cluster
from access.review import LOOK_UP, review_change
from liqo_rules.constants import SELECTED_NAME
from offloading.audit.events import record_refused
from offloading.changes.errors import ChangeRejected, Refusal
from offloading.choices import ChangeAction
from offloading.cluster.errors import KubeError
from offloading.cluster.managed import talking_to
from offloading.context import Actor
from offloading.models import ChangeRequest, ManagedCluster, Namespace
from offloading.models.fleet import ManagedRef, is_default, policy_cluster_name

log = logging.getLogger(__name__)


def user_of(actor: Actor) -> Any | None:
    """The Django user behind ``actor`` (None for the dashboard itself)."""
    if actor.user_id is None:
        return None
    return get_user_model().objects.filter(pk=actor.user_id).first()


def cluster_of(managed_id: int | None) -> ManagedCluster | None:
    """The managed cluster of a namespace or change (its pk) when it is not the default one; None for the
    default cluster (the process's own client, the policy's default cluster). One query for another."""
    if managed_id is None or is_default(managed_id):
        return None
    return ManagedCluster.objects.filter(pk=managed_id).first()


def cluster_name(managed_id: int | None) -> str | None:
    """What the policy is told of the cluster (``can_change(cluster=...)``): None for the default one."""
    return policy_cluster_name(managed_id)


def queue_route(managed_id: int | None) -> int | None:
    """What ``enqueue_apply`` is told of the cluster (``queue.cluster_queue``): None for the default one."""
    return None if managed_id is None or is_default(managed_id) else int(managed_id)


def policy_action(namespace: Namespace, action: str, *, reapplying: bool = False) -> str:
    """The policy's name for a change: offload, edit, unoffload or reapply."""
    if reapplying:
        return "reapply"
    if action == ChangeAction.UNOFFLOAD:
        return "unoffload"
    return "edit" if namespace.offloaded else "offload"


def refuse(
    actor: Actor,
    namespace: str,
    action: str,
    reason: str,
    *,
    field: str = "namespace",
    record: bool = True,
    managed: ManagedRef = None,
) -> ChangeRejected:
    """The ``FORBIDDEN`` refusal to raise, written to the audit trail first (``record``), under the
    managed cluster it was asked of (None: the default)."""
    if record:
        record_refused(actor, namespace, action, reason, managed=managed)
    return ChangeRejected({field: [reason[:1].upper() + reason[1:]]}, Refusal.FORBIDDEN)


def permit(actor: Actor, namespace: Namespace, action: str, *, record: bool = True) -> None:
    """Gate 1: raise ``FORBIDDEN`` (written to the audit trail when ``record``) unless the dashboard's
    roles and scopes allow ``action`` (offload, edit, unoffload, reapply) on ``namespace``. The one check
    of who may change a namespace: the request contract asks it, and so do the pages before they show a
    form (``offloading.views.common.gate``; a GET is not recorded)."""
    if actor.user_id is None:
        return
    decision = policy.can_change(
        user_of(actor), namespace.name, namespace.labels or {}, action, cluster=cluster_name(namespace.managed_id)
    )
    if not decision.allowed:
        raise refuse(actor, namespace.name, action, decision.reason, record=record, managed=namespace.managed_id)


def permit_bulk(actor: Actor, target: str, action: str, *, record: bool = True, field: str = "namespace") -> None:
    """Gate 1 for a bulk change (``target``: its namespace selector, or what the page is about): it needs
    the operator role; which namespaces it may change is then asked of each (:func:`permit`'s rule,
    through ``policy``), and the others are left out."""
    if actor.user_id is None:
        return
    user = user_of(actor)
    if not roles.has_role(user, roles.OPERATOR):
        reason = policy.can_change(user, "", {}, "edit").reason
        raise refuse(actor, target, action, reason, field=field, record=record)


def permit_remote_name(actor: Actor, namespace: Namespace, spec: dict[str, Any]) -> None:
    """Scopes cover where a namespace goes: with ``SelectedName`` the remote namespace on every peer is a
    name the requester chooses, so it must be in their scopes too (the same globs, and label selectors
    read on the local namespace of that name, if any). ``EnforceSameName`` and ``DefaultName`` derive it
    from the local name, which gate 1 already checked. An offloading keeps its remote name (Liqo's
    webhook locks it), so an edit is not asked again."""
    if actor.user_id is None or namespace.offloaded:
        return
    if spec.get("namespaceMappingStrategy") != SELECTED_NAME:
        return
    remote = str(spec.get("remoteNamespaceName") or "")
    if not remote or remote == namespace.name:
        return
    labels = Namespace.objects.of(namespace.managed_id).filter(name=remote).values_list("labels", flat=True).first()
    decision = policy.can_change(
        user_of(actor), remote, labels or {}, "offload", cluster=cluster_name(namespace.managed_id)
    )
    if not decision.allowed:
        reason = f'the remote namespace name "{remote}" is not in your scopes: {decision.reason}'
        raise refuse(
            actor, namespace.name, "offload", reason, field="remoteNamespaceName", managed=namespace.managed_id
        )


def cluster_action(change: ChangeRequest) -> str:
    """The review's name for what ``change`` writes: create, update or delete the offloading."""
    if change.action == ChangeAction.UNOFFLOAD:
        return "unoffload"
    return "edit" if change.action == ChangeAction.UPDATE else "offload"


def identity(actor: Actor, cluster: ManagedCluster | None = None) -> Identity | None:
    """Whom ``cluster`` (None: the default; :func:`cluster_of`) sees for ``actor``'s changes (None: the
    dashboard itself), by that cluster's impersonation and role-to-group map."""
    return None if actor.user_id is None else identity_for(actor.user_name, cluster)


def readers(actor: Actor) -> Callable[[ManagedCluster | None], Identity | None] | None:
    """Whom each managed provider sees for ``actor`` when it is read (None: the dashboard itself): its
    own impersonation and groups (``access.impersonation.identity_per_cluster``)."""
    return None if actor.user_id is None else identity_per_cluster(actor.user_name)


def ask_cluster(
    actor: Actor,
    change: ChangeRequest,
    *,
    record: bool = True,
    who: Identity | None | str = LOOK_UP,
    cluster: ManagedCluster | None | str = LOOK_UP,
) -> None:
    """Gate 2: raise ``FORBIDDEN`` (audited when ``record``) unless the change's cluster lets the
    impersonated user make every request ``change`` will make (``who``: the actor's :func:`identity`,
    when known, for that cluster; ``cluster``: the change's managed cluster, when the caller has it,
    :func:`cluster_of`): the SubjectAccessReview is asked of that cluster's API server, for the identity
    that cluster sees (not asked where impersonation is off: the dashboard then pushes as itself)."""
    if actor.user_id is None:
        return
    if isinstance(cluster, str):
        cluster = cluster_of(change.managed_id)
    if isinstance(who, str):
        who = identity(actor, cluster)
    try:
        with talking_to(cluster):
            decision = review_change(
                actor.user_name,
                cluster_action(change),
                change.namespace,
                label=bool(change.label_namespace),
                identity=who,
            )
    except KubeError as exc:
        # Like the dry-run: an API server that cannot be asked now does not block the request. The
        # push is made as the user all the same, so the cluster still decides when it is applied.
        log.info("access review for %s on %s not asked: %s", actor.user_name, change.namespace, exc)
        return
    if not decision.allowed:
        raise refuse(
            actor, change.namespace, cluster_action(change), decision.reason, record=record, managed=change.managed_id
        )


def identity_of_change(change: ChangeRequest) -> Identity | None:
    """Whom the worker pushes ``change`` as: the user who asked (also on retries, sweeps and bulk), as the
    change's cluster maps them, or the dashboard itself for a change asked for without a user or to a
    cluster where impersonation is off."""
    if change.requester_id is None:
        return None
    # change.managed: the claim read the cluster's row with the change (no query here)
    return identity_for(change.requester_name, change.managed)
