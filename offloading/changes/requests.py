"""Requesting changes: the one request contract of the form, the REST API, bulk and re-apply.

:func:`submit` takes a :class:`ChangeInput` and either records a ChangeRequest and its audit event in one
transaction, sent to the worker after commit (the outbox), or raises a
:class:`~offloading.changes.errors.ChangeRejected` and records nothing. The rules, the same for every
entry point:

- Liqo's rules (``liqo_rules.admission``) refuse an invalid spec: ``INVALID`` (form: field errors,
  API: 422 ``Status``, bulk: the namespace is skipped with the reason).
- Precondition: a change based on a version of the namespace that the snapshot already knows is stale
  (an older generation, or offloaded/unoffloaded since) is refused up front: ``STALE`` (form: an error
  on the page, which asks to reload and review; API: 412 ``Status``; bulk: the plan carries the generation
  each namespace had at preview time and a namespace that moved since is left out and reported). It is
  never queued only to end in ``conflict``. A race with another write after queuing is still caught when
  the change is applied (generation and uid) and ends in ``conflict`` with both versions; re-apply exists
  for it.
- Nothing to change: an edit whose spec, once normalized and defaulted, is the one the namespace already
  has, and that asks for no scheduling label it lacks, is refused with :class:`NothingToChange`
  (``CONFLICT``; form: an error on the page; API: 409 ``Status``; bulk: the namespace is left out with
  the reason "nothing to change"). Re-submitting a form (Back, Apply again) never records an empty change.
- Server-side dry-run: before anything is recorded the API server (and so Liqo's webhook) is asked; a
  denial is ``INVALID`` on the field the message is about, never a failed change in the history. Bulk
  asks for every target, a few at a time (``DRY_RUN_CONCURRENCY``). An API server that cannot be reached
  at submit time does not block the request: it is queued and the worker applies it when the server is
  back (it retries), so a request is never lost.
- Confirmation: a destructive change (``offloading.whatif.destructive``: an unoffload, an edit that loses
  a cluster or makes the pod strategy stricter) is refused unless it was confirmed (``ChangeInput.confirmed``):
  ``UNCONFIRMED`` on the field ``confirm``, with the reason (form: the confirmation the page asks for;
  API: 400 ``Status``; bulk: the whole request, unless confirmed). Asked after the access checks and the
  rules, so that only a change that could go through asks for it.
- GitOps: a direct push to an offloading that Argo CD or Flux manages and would undo
  (``offloading.gitops.managed``, on the facts the snapshot keeps) is refused with ``GITOPS`` (409) on the
  field ``gitopsOverride``, naming who manages it, unless the request overrides it
  (``ChangeInput.gitops_override``; form: the checkbox the refusal shows; API: ``gitopsOverride: true``,
  ``?gitopsOverride=true`` on DELETE; bulk: the namespace is left out with the reason). An override is
  said in the message of the change's ``requested`` audit row. Checked when the change is built, so bulk
  plans and previews leave managed namespaces out the same way.
- Governance (``offloading.governance``): a change the approval policy says needs a second person is
  recorded ``awaiting_approval``, one outside its scope's change window ``scheduled``; neither is sent to
  the worker until it is approved or its window opens (``offloading.governance.approvals``). Asked last,
  so that only a change that could go through waits.
- Managed clusters (issue 28): a change is of one namespace of one managed cluster (``ChangeInput.managed``,
  the pages and the API pass ``current_managed(request)``; None: the default cluster). Its namespace is
  read from that cluster's snapshot, and the access review and the dry-run are asked of that cluster's
  API server (``offloading.cluster.managed.talking_to``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from django.db import transaction

from offloading.audit.events import record_requested
from offloading.changes import authorize
from offloading.changes.checks import (
    OVERRIDE_NOTE,
    NothingToChange,
    changes_nothing,
    check_precondition,
    on_cluster_dry_run,
    refuse_collisions,
    refuse_remote_collisions,
    require_confirmation,
    require_gitops_override,
    validate,
)
from offloading.changes.errors import ChangeRejected, Refusal
from offloading.changes.merge import merged, three_way
from offloading.choices import ChangeAction, ChangeState, Source
from offloading.context import Actor
from offloading.governance import holds
from offloading.models import BulkRequest, ChangeRequest, Namespace
from offloading.queue import enqueue_apply


def get_namespace(namespace_name: str, managed: int | None = None) -> Namespace:
    """The snapshot's namespace ``namespace_name`` of managed cluster ``managed`` (pk; None: the default)."""
    namespace = Namespace.objects.of(managed).filter(name=namespace_name).first()
    if namespace is None:
        raise ChangeRejected({"namespace": [f'namespace "{namespace_name}" does not exist']}, Refusal.NOT_FOUND)
    return namespace


def offload_change(
    namespace: Namespace,
    spec: dict[str, Any],
    actor: Actor,
    *,
    expected_generation: int | None = None,
    label_namespace: bool = False,
    bulk: BulkRequest | None = None,
    local_id: str | None = None,
) -> ChangeRequest:
    """An unsaved offload/update change for ``namespace``; raises ChangeRejected when Liqo's rules
    (or ours) refuse the spec, or when the requester saw another state of the namespace."""
    if namespace.offloading_deleting:
        raise ChangeRejected(
            {"namespace": ["the namespace offloading is being deleted; wait until it is gone"]}, Refusal.CONFLICT
        )
    check_precondition(namespace, expected_generation)
    checked = validate(namespace, spec, local_id)
    if checked.errors:
        raise ChangeRejected(checked.errors)
    if changes_nothing(namespace, checked.spec, label_namespace):
        raise NothingToChange(namespace.name)
    action = ChangeAction.UPDATE if namespace.offloaded else ChangeAction.OFFLOAD
    authorize.permit_remote_name(actor, namespace, checked.spec)
    refuse_collisions(namespace, checked.spec, local_id)
    if bulk is None and actor.source != Source.BULK:
        # Not for a bulk's children (a bulk plans them as a BULK actor, and sets ``bulk`` once saved): a
        # bulk of 1,000 namespaces must not ask the providers' APIs once per namespace, nor query the
        # managed clusters per namespace. The single-namespace form, API and re-apply ask them.
        refuse_remote_collisions(namespace, checked.spec, actor, local_id)
    base_generation = expected_generation
    if base_generation is None and namespace.offloaded:
        base_generation = namespace.offloading_generation
    return ChangeRequest(
        managed_id=namespace.managed_id,
        namespace=namespace.name,
        action=action,
        desired_spec=checked.spec,
        label_namespace=label_namespace,
        base_spec=namespace.offloading_spec if namespace.offloaded else None,
        base_generation=base_generation if action == ChangeAction.UPDATE else None,
        base_resource_version=namespace.offloading_resource_version if namespace.offloaded else "",
        base_uid=namespace.offloading_uid if namespace.offloaded else "",
        requester_id=actor.user_id,
        requester_name=actor.user_name,
        source=actor.source,
        request_id=actor.request_id,
        warnings=[m for msgs in checked.warnings.values() for m in msgs],
        bulk=bulk,
    )


def unoffload_change(
    namespace: Namespace, actor: Actor, *, expected_generation: int | None = None, bulk: BulkRequest | None = None
) -> ChangeRequest:
    check_precondition(namespace, expected_generation)
    if not namespace.offloaded:
        raise ChangeRejected({"namespace": [f'namespace "{namespace.name}" is not offloaded']}, Refusal.CONFLICT)
    return ChangeRequest(
        managed_id=namespace.managed_id,
        namespace=namespace.name,
        action=ChangeAction.UNOFFLOAD,
        base_spec=namespace.offloading_spec,
        base_generation=expected_generation if expected_generation is not None else namespace.offloading_generation,
        base_resource_version=namespace.offloading_resource_version,
        base_uid=namespace.offloading_uid,
        requester_id=actor.user_id,
        requester_name=actor.user_name,
        source=actor.source,
        request_id=actor.request_id,
        bulk=bulk,
    )


def save_and_enqueue(change: ChangeRequest, actor: Actor, *, enqueue: bool = True) -> ChangeRequest:
    """Save the change and its audit event (inside the caller's transaction); enqueue after commit
    (``enqueue=False``: the caller sends them together, as bulk does). A GitOps override that
    :func:`build_change` let through is said in the audit row's message."""
    change.save()
    record_requested(change, actor, message=getattr(change, OVERRIDE_NOTE, ""))
    if enqueue:
        route = authorize.queue_route(change.managed_id)
        # The default cluster's change is sent as before (no cluster: the default queue).
        send = (
            (lambda: enqueue_apply(change.pk)) if route is None else (lambda: enqueue_apply(change.pk, managed=route))
        )
        transaction.on_commit(send, robust=True)
    return change


def save_all(changes: list[ChangeRequest], actor: Actor) -> None:
    """:func:`save_and_enqueue` for a bulk's children without enqueueing: one INSERT for all of them
    (their ids come back with it, on SQLite and PostgreSQL alike), then each one's audit event."""
    ChangeRequest.objects.bulk_create(changes, batch_size=500)
    for change in changes:
        record_requested(change, actor, message=getattr(change, OVERRIDE_NOTE, ""))


# --------------------------------------------------------------------------------------------------
# The one entry point


@dataclass(frozen=True)
class ChangeInput:
    """A change as every entry point asks for it (form, REST API, bulk child, re-apply).

    ``expected_generation`` is the generation of the NamespaceOffloading the requester based the change
    on (0: "it was not offloaded"; None: no precondition, take what the snapshot holds now).
    """

    namespace: str
    action: str  # ChangeAction.OFFLOAD (create or update) or ChangeAction.UNOFFLOAD
    spec: dict[str, Any] | None = None
    expected_generation: int | None = None
    label_namespace: bool = False
    confirmed: bool = False  # the requester confirmed a destructive change
    gitops_override: bool = False  # push even though Argo CD or Flux manages the offloading and may undo it
    managed: int | None = None  # the managed cluster's pk (current_managed(request)); None: the default cluster


def build_change(
    namespace: Namespace,
    change: ChangeInput,
    actor: Actor,
    *,
    bulk: BulkRequest | None = None,
    local_id: str | None = None,
) -> ChangeRequest:
    """The unsaved ChangeRequest for ``change``, after the precondition, Liqo's rules and the GitOps
    check; raises ChangeRejected. Bulk builds its children with this too."""
    if change.action == ChangeAction.UNOFFLOAD:
        built = unoffload_change(namespace, actor, expected_generation=change.expected_generation, bulk=bulk)
    else:
        built = offload_change(
            namespace,
            change.spec or {},
            actor,
            expected_generation=change.expected_generation,
            label_namespace=change.label_namespace,
            bulk=bulk,
            local_id=local_id,
        )
    require_gitops_override(namespace, built, change.gitops_override)
    return built


def submit(change: ChangeInput, actor: Actor, *, reapplying: bool = False) -> ChangeRequest:
    """Check who asks, validate, check the precondition, ask the cluster (access review, then dry-run as
    the user), then record and queue ``change``.

    Raises ChangeRejected, and then nothing is recorded but, for ``FORBIDDEN``, the refusal in the audit
    trail: ``NOT_FOUND`` for an unknown namespace, ``FORBIDDEN`` when the user's role or scopes or the
    cluster's RBAC do not allow it (``offloading.changes.authorize``), ``STALE`` when the snapshot shows
    the namespace changed since the requester loaded it, ``CONFLICT`` when it cannot take the change now,
    ``UNCONFIRMED`` when it is destructive and not confirmed, ``INVALID`` when Liqo's rules or the API
    server refuse the spec.
    """
    namespace = get_namespace(change.namespace, change.managed)
    authorize.permit(actor, namespace, authorize.policy_action(namespace, change.action, reapplying=reapplying))
    built = build_change(namespace, change, actor)
    cluster = authorize.cluster_of(namespace.managed_id)
    authorize.ask_cluster(actor, built, cluster=cluster)
    require_confirmation(namespace, built, change.confirmed)
    if built.action != ChangeAction.UNOFFLOAD:
        denied = on_cluster_dry_run(
            cluster, authorize.identity(actor, cluster), namespace.name, built.desired_spec or {}, namespace.managed_id
        )
        if denied is not None:
            raise denied
    waits = holds.gate(namespace, built)  # awaiting approval, or scheduled for its window, or queued
    with transaction.atomic():
        saved = save_and_enqueue(built, actor, enqueue=waits.enqueue)
        holds.hold(saved, waits, actor)
        return saved


def request_offload(
    namespace_name: str,
    spec: dict[str, Any],
    actor: Actor,
    *,
    expected_generation: int | None = None,
    label_namespace: bool = False,
    confirmed: bool = False,
    gitops_override: bool = False,
    managed: int | None = None,
) -> ChangeRequest:
    """:func:`submit` an offload (create, or update when already offloaded) of ``namespace_name`` of managed
    cluster ``managed`` (pk; None: the default)."""
    wanted = ChangeInput(
        namespace_name,
        ChangeAction.OFFLOAD,
        spec,
        expected_generation,
        label_namespace,
        confirmed,
        gitops_override,
        managed,
    )
    return submit(wanted, actor)


def request_unoffload(
    namespace_name: str,
    actor: Actor,
    *,
    expected_generation: int | None = None,
    confirmed: bool = False,
    gitops_override: bool = False,
    managed: int | None = None,
) -> ChangeRequest:
    """:func:`submit` the removal of the namespace's NamespaceOffloading (Liqo then removes the remote
    namespaces and everything reflected into them): destructive, so it needs ``confirmed``."""
    wanted = ChangeInput(
        namespace_name,
        ChangeAction.UNOFFLOAD,
        None,
        expected_generation,
        confirmed=confirmed,
        gitops_override=gitops_override,
        managed=managed,
    )
    return submit(wanted, actor)


def reapply(
    change_id: int,
    actor: Actor,
    choices: dict[str, str] | None = None,
    *,
    confirmed: bool = False,
    gitops_override: bool = False,
) -> ChangeRequest:
    """Resolve a change that ended in conflict by asking for it again, based on what the snapshot holds
    now, merged field by field (``offloading.changes.merge``): the fields only the requester changed
    are applied, the fields only the other writer changed are kept, and a field both changed
    needs ``choices[field]`` ("mine" or "theirs"); without it the answer is CONFLICT naming the field."""
    change = ChangeRequest.objects.filter(pk=change_id).first()
    if change is None or change.state != ChangeState.CONFLICT:
        raise ChangeRejected({"change": ["only a change in conflict can be applied again"]}, Refusal.CONFLICT)
    namespace = get_namespace(change.namespace, change.managed_id)
    current = namespace.offloading_generation if namespace.offloaded else 0
    if change.action == ChangeAction.UNOFFLOAD:
        wanted = ChangeInput(
            namespace.name,
            ChangeAction.UNOFFLOAD,
            None,
            current,
            confirmed=confirmed,
            gitops_override=gitops_override,
            managed=change.managed_id,
        )
        return submit(wanted, actor, reapplying=True)
    spec = change.desired_spec or {}
    if namespace.offloaded:
        fields = three_way(change.base_spec, namespace.offloading_spec, spec)
        spec, missing = merged(fields, choices or {})
        if missing:
            raise ChangeRejected(
                {name: [f"{name} was changed by you and by someone else: choose mine or theirs"] for name in missing},
                Refusal.CONFLICT,
            )
    return submit(
        ChangeInput(
            namespace.name,
            ChangeAction.OFFLOAD,
            spec,
            current,
            change.label_namespace,
            confirmed,
            gitops_override,
            change.managed_id,
        ),
        actor,
        reapplying=True,
    )
