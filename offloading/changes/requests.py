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

import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.db import transaction

from liqo_rules.admission import field_of_message as field_of_webhook_message
from liqo_rules.admission import validate_spec
from liqo_rules.constants import SCHEDULING_LABEL, SELECTED_NAME
from liqo_rules.spec import normalize_spec
from offloading.audit.events import record_requested
from offloading.changes import authorize
from offloading.changes.errors import ChangeRejected, Refusal
from offloading.changes.merge import merged, three_way
from offloading.choices import ChangeAction, ChangeState, Source
from offloading.cluster.errors import KubeError
from offloading.cluster.identity import acting_as
from offloading.cluster.managed import talking_to
from offloading.cluster.twins import managed_providers, remote_collisions
from offloading.context import Actor
from offloading.gitops.managed import detection_of, who
from offloading.governance import holds
from offloading.models import (
    BulkRequest,
    ChangeRequest,
    Namespace,
)
from offloading.queue import enqueue_apply
from offloading.snapshot.refresh import local_cluster_id
from offloading.whatif.collisions import collisions, selected_clusters
from offloading.whatif.destructive import is_destructive
from offloading.whatif.preview import dry_run

log = logging.getLogger(__name__)


def _problems_by_field(problems: list[Any]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for problem in problems:
        grouped.setdefault(problem.field, []).append(problem.message)
    return grouped


@dataclass
class Validation:
    spec: dict[str, Any]
    errors: dict[str, list[str]]
    warnings: dict[str, list[str]]


def validate(namespace: Namespace, spec: dict[str, Any], local_id: str | None = None) -> Validation:
    """Check a desired spec for ``namespace`` against its observed one with Liqo's rules
    (``local_id``: the local cluster id, when the caller already has it)."""
    normalized = normalize_spec(spec)
    old = namespace.offloading_spec if namespace.offloaded else None
    if local_id is None:
        local_id = local_cluster_id(namespace.managed_id)
    errors, warnings = validate_spec(namespace.name, normalized, old, local_cluster_id=local_id or None)
    return Validation(normalized, _problems_by_field(errors), _problems_by_field(warnings))


NOTHING_TO_CHANGE = "nothing to change"


class NothingToChange(ChangeRejected):
    """The change would leave the namespace as it is (see the module docstring)."""

    def __init__(self, namespace_name: str) -> None:
        message = f"{NOTHING_TO_CHANGE}: the offloading of namespace {namespace_name} already has this spec"
        super().__init__({"namespace": [message]}, Refusal.CONFLICT)


def changes_nothing(namespace: Namespace, spec: dict[str, Any], label_namespace: bool) -> bool:
    """Whether ``spec`` (normalized) is the namespace's offloading spec already, and labelling the namespace
    adds nothing (it carries the scheduling label, or none is asked for)."""
    if not namespace.offloaded:
        return False
    if label_namespace and (namespace.labels or {}).get(SCHEDULING_LABEL) != "true":
        return False
    return normalize_spec(namespace.offloading_spec or {}) == normalize_spec(spec)


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


def refuse_collisions(namespace: Namespace, spec: dict[str, Any], local_id: str | None = None) -> None:
    """Refuse a spec whose remote namespace another local namespace already uses on a peer both would
    use (``offloading.whatif.collisions``). An existing offloading keeps its remote name (Liqo's
    webhook locks it), so only a new one is checked."""
    if namespace.offloaded:
        return
    local_id = local_id if local_id is not None else local_cluster_id(namespace.managed_id)
    found = collisions(namespace.name, spec, local_id, managed=namespace.managed_id)
    if found:
        selected_name = spec.get("namespaceMappingStrategy") == SELECTED_NAME
        field = "remoteNamespaceName" if selected_name else "namespaceMappingStrategy"
        raise ChangeRejected({field: [found[0].message()[:1].upper() + found[0].message()[1:]]}, Refusal.CONFLICT)


def refuse_remote_collisions(
    namespace: Namespace, spec: dict[str, Any], actor: Actor, local_id: str | None = None
) -> None:
    """Refuse a new offloading whose remote name a selected peer that is a managed cluster too already has
    as a namespace that is not this cluster's twin (``offloading.cluster.twins.remote_collisions``:
    Liqo would fail there with CreationLoopBackOff), asked as the requester. Only an answer refuses: a
    provider that could not be asked in time (UNCHECKED) never does, the change goes on as without a
    managed provider. Skipped with one query when no managed cluster is known, with two when none is
    among the selected peers; only then are the providers asked (at once, for ``twins.DEADLINE`` s at
    most, the preview's answers reused from the cache for a few seconds)."""
    if namespace.offloaded:
        return  # Liqo's webhook keeps an existing offloading's remote name
    local_id = local_id if local_id is not None else local_cluster_id(namespace.managed_id)
    providers = managed_providers(local_id, namespace.managed_id)
    if not providers:
        return
    peers = selected_clusters(spec, namespace.managed_id) & providers.keys()
    if not peers:
        return
    checks = remote_collisions(
        namespace.name, spec, peers, local_id=local_id, identity=authorize.readers(actor), own=namespace.managed_id
    )
    taken = [check.message() for check in checks if check.fails]
    if taken:
        field = (
            "remoteNamespaceName"
            if spec.get("namespaceMappingStrategy") == SELECTED_NAME
            else "namespaceMappingStrategy"
        )
        raise ChangeRejected({field: [m[:1].upper() + m[1:] for m in taken]}, Refusal.CONFLICT)


def check_precondition(namespace: Namespace, expected: int | None) -> None:
    """Refuse a change based on another version than the snapshot's (``expected``: the generation the
    requester loaded, 0 for "not offloaded"; None: no precondition).

    The rule is in the module docstring: refused up front with ``STALE`` when the snapshot already
    knows the base is stale; races after queuing are left to the apply-time conflict check.
    """
    if expected is None:
        return
    current = namespace.offloading_generation if namespace.offloaded else 0
    if expected == current or (expected > current > 0):
        # A requester ahead of the snapshot saw a write the snapshot has not caught up with yet (or an
        # object recreated since): only the apply can tell, by generation and uid.
        return
    if expected == 0:
        message = (
            f"namespace {namespace.name} was offloaded by someone else after you loaded it "
            f"(it is now at generation {current}); review its offloading and submit again"
        )
    elif current == 0:
        message = f"namespace {namespace.name} was unoffloaded after you loaded it; review it and submit again"
    else:
        message = (
            f"the offloading of namespace {namespace.name} changed after you loaded it (generation {expected} "
            f"is now {current}); review it and submit again"
        )
    raise ChangeRejected({"namespace": [message]}, Refusal.STALE)


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


CONFIRM_FIELD = "confirm"


def unconfirmed(reason: str) -> ChangeRejected:
    """The refusal of a destructive change that was not confirmed, on the field ``confirm``."""
    message = f"{reason[:1].upper()}{reason[1:]}: confirm this destructive change to go on"
    return ChangeRejected({CONFIRM_FIELD: [message]}, Refusal.UNCONFIRMED)


def require_confirmation(namespace: Namespace, built: ChangeRequest, confirmed: bool) -> None:
    """Refuse ``built`` (the change of ``namespace``) when it is destructive and was not confirmed."""
    if confirmed:
        return
    why = is_destructive(namespace, built.action, built.desired_spec)
    if why:
        raise unconfirmed(why)


GITOPS_FIELD = "gitopsOverride"
# The unsaved change's note of an override, for its audit row (set by build_change, read on save).
OVERRIDE_NOTE = "gitops_override_note"


def gitops_refusal(namespace: Namespace, action: str) -> str:
    """Who would undo a direct ``action`` on the namespace's offloading, in words; "" when nobody."""
    return who(detection_of(namespace), deleting=action == ChangeAction.UNOFFLOAD)


def not_overridden(managers: str) -> ChangeRejected:
    """The refusal of a direct push that a GitOps tool would undo, on the field ``gitopsOverride``."""
    message = (
        f"{managers}: it would undo this change at its next sync. Change the offloading in Git "
        "(download the change as files), or override to push it anyway"
    )
    return ChangeRejected({GITOPS_FIELD: [message]}, Refusal.GITOPS)


def require_gitops_override(namespace: Namespace, built: ChangeRequest, override: bool) -> None:
    """Refuse ``built`` when a GitOps tool manages the offloading and would undo it, unless ``override``;
    an override is noted on ``built`` for its audit row."""
    managers = gitops_refusal(namespace, built.action)
    if not managers:
        return
    if not override:
        raise not_overridden(managers)
    setattr(built, OVERRIDE_NOTE, f"GitOps override: pushed although {managers[:1].lower()}{managers[1:]}")


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


def on_cluster_dry_run(
    cluster: Any, who: Any, namespace_name: str, spec: dict[str, Any], managed: int | None = None
) -> ChangeRejected | None:
    """:func:`dry_run_refusal` on ``cluster``'s API server (a ManagedCluster; None: the process's own), as
    ``who`` (``managed``: the namespace's cluster pk, for its snapshot). A cluster without a usable
    configuration is one that cannot be asked: no refusal."""
    try:
        with acting_as(who), talking_to(cluster):
            return dry_run_refusal(namespace_name, spec, managed)
    except KubeError as exc:
        log.info("dry-run of %s not asked: %s", namespace_name, exc)
        return None


def dry_run_refusal(namespace_name: str, spec: dict[str, Any], managed: int | None = None) -> ChangeRejected | None:
    """What the API server (and so Liqo's webhook) says of ``spec``, as a refusal on the field the
    message is about; None when it accepts it, when dry-runs are off, or when it cannot be asked (an
    unreachable API server does not block a request: the worker applies it when the server is back)."""
    if not settings.LIQO_DASH["DRY_RUN_ON_SUBMIT"]:
        return None
    result = dry_run(namespace_name, spec, managed)
    if not result.errors:
        return None
    errors: dict[str, list[str]] = {}
    for message in result.errors:
        errors.setdefault(field_of_webhook_message(message), []).append(
            f"The API server refused this change: {message}"
        )
    return ChangeRejected(errors, Refusal.INVALID)


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
