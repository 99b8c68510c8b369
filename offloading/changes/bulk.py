"""Bulk changes: one parent request and a change per namespace matching a label selector."""

from __future__ import annotations

import logging
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any

from django.conf import settings
from django.core.exceptions import ImproperlyConfigured
from django.db import transaction

from access import policy
from access.impersonation import Identity
from liqo_rules.selectors.parse import parse_requirements
from liqo_rules.selectors.requirements import SelectorError
from liqo_rules.spec import apply_defaults
from offloading.audit.events import record_bulk_requested, sealed_together
from offloading.changes import authorize
from offloading.changes.checks import NOTHING_TO_CHANGE, NothingToChange, on_cluster_dry_run, unconfirmed
from offloading.changes.errors import ChangeRejected, Refusal
from offloading.changes.requests import ChangeInput, build_change, save_all
from offloading.choices import ChangeAction, ChangeState, Source
from offloading.context import Actor
from offloading.governance import holds
from offloading.models import (
    BulkRequest,
    ChangeRequest,
    ManagedCluster,
    Namespace,
)
from offloading.models.fleet import managed_pk
from offloading.queue import enqueue_bulk
from offloading.snapshot.refresh import local_cluster_id
from offloading.whatif import collisions
from offloading.whatif.destructive import destructive_changes

log = logging.getLogger(__name__)


@dataclass
class BulkPlan:
    """What a bulk request would do: the changes it would make and the namespaces it would skip."""

    changes: list[ChangeRequest]
    skipped: list[dict[str, str]]

    @property
    def namespaces(self) -> list[str]:
        return [c.namespace for c in self.changes]


def namespace_ids_matching(requirements: list[Any], managed: int | None = None) -> list[int]:
    """Ids of the snapshot namespaces of managed cluster ``managed`` (None: the default) whose labels
    satisfy parsed label-selector requirements (matched here with liqo_rules, as the API server would)."""
    return [
        pk
        for pk, labels in Namespace.objects.of(managed).values_list("pk", "labels")
        if all(r.matches(labels or {}) for r in requirements)
    ]


def bulk_targets(namespace_selector: str, managed: int | None = None) -> list[Namespace]:
    """Snapshot namespaces of managed cluster ``managed`` whose labels match a kubectl-style label selector."""
    try:
        requirements = parse_requirements(namespace_selector)
    except SelectorError as exc:
        raise ChangeRejected({"namespaceSelector": [str(exc)]})
    if not requirements:
        raise ChangeRejected({"namespaceSelector": ["give a selector: an empty one would match every namespace"]})
    ids = namespace_ids_matching(requirements, managed)
    return list(Namespace.objects.of(managed).filter(pk__in=ids).defer("offloading_status"))


def plan_bulk(
    action: str,
    namespace_selector: str,
    spec: dict[str, Any] | None,
    actor: Actor,
    *,
    label_namespace: bool = False,
    expected_generations: dict[str, int] | None = None,
    ask_api_server: bool = False,
    gitops_override: bool = False,
    managed: int | None = None,
) -> BulkPlan:
    """Build (unsaved) the changes of a bulk request with the same rules as a single change
    (:func:`offloading.changes.requests.build_change`); namespaces that cannot take it are skipped with
    the reason (a system namespace, not offloaded, an immutable field, changed since the preview ...).

    ``expected_generations``: the generation each namespace had when the requester previewed the bulk;
    a namespace that moved since is left out, never queued. ``ask_api_server``: dry-run every change
    against the API server too (bounded concurrency), leaving out the ones it refuses.
    ``gitops_override``: include the namespaces whose offloading Argo CD or Flux manages (left out
    otherwise, with who manages them); each such change's ``requested`` audit row says it overrode GitOps.
    ``managed``: the managed cluster whose namespaces it changes (pk; None: the default cluster).
    """
    if action != ChangeAction.UNOFFLOAD:
        if spec is None:
            raise ChangeRejected({"spec": ["a spec is required to offload"]})
        if apply_defaults(spec).get("namespaceMappingStrategy") == "SelectedName":
            # Like liqoctl: one remote name for many namespaces would collide on every cluster.
            raise ChangeRejected(
                {"namespaceMappingStrategy": ["SelectedName cannot be used when offloading several namespaces at once"]}
            )
    changes: list[ChangeRequest] = []
    skipped: list[dict[str, str]] = []
    local_id = local_cluster_id(managed)
    expected = expected_generations or {}
    cluster = authorize.cluster_name(managed)
    # The children of a bulk request say so; the parent keeps where it came from (web or api).
    actor = Actor(actor.user_id, actor.user_name, Source.BULK, actor.request_id)
    authorize.permit_bulk(actor, namespace_selector, f"bulk {action}")
    user = authorize.user_of(actor)
    with collisions.indexed(local_id, managed):  # every target's remote name checked against one read of the others
        for namespace in bulk_targets(namespace_selector, managed):
            if actor.user_id is not None:
                # Out of the user's scopes (or no right to change at all): left out, never queued.
                decision = policy.can_change(
                    user,
                    namespace.name,
                    namespace.labels or {},
                    authorize.policy_action(namespace, action),
                    cluster=cluster,
                )
                if not decision.allowed:
                    skipped.append({"namespace": namespace.name, "reason": decision.reason, "why": "scope"})
                    continue
            wanted = ChangeInput(
                namespace.name,
                action,
                spec,
                expected.get(namespace.name),
                label_namespace,
                gitops_override=gitops_override,
                managed=managed,
            )
            try:
                change = build_change(namespace, wanted, actor, local_id=local_id)
            except NothingToChange:
                # Already as asked: left out, never a failure of the bulk (nor an empty change).
                skipped.append({"namespace": namespace.name, "reason": NOTHING_TO_CHANGE, "why": "noop"})
                continue
            except ChangeRejected as exc:
                skipped.append({"namespace": namespace.name, "reason": "; ".join(exc.messages)})
                continue
            changes.append(change)
    if ask_api_server:
        changes = _ask_cluster_all(changes, skipped, actor)
    return BulkPlan(changes, skipped)


def _ask_cluster(
    change: ChangeRequest, actor: Actor, who: Identity | None, cluster: ManagedCluster | None
) -> ChangeRejected | None:
    """The refusal of one bulk child by its cluster (``cluster``: the bulk's, None for the default): its
    access review for the user (``who``), then (offloads) the dry-run as that user; None when it takes it."""
    try:
        # the refusal is kept in the bulk's skipped list
        authorize.ask_cluster(actor, change, record=False, who=who, cluster=cluster)
    except ChangeRejected as exc:
        return exc
    if change.action == ChangeAction.UNOFFLOAD:
        return None
    return on_cluster_dry_run(cluster, who, change.namespace, change.desired_spec or {}, change.managed_id)


BULK_CHECK_MODES = ("push", "request")


def checks_at_request() -> bool:
    """Whether a bulk asks the cluster about each namespace before recording it (``BULK_CHECKS=request``),
    or records at once and lets each push, made as the user, be the check (``push``, the default). The
    push meets the same authorization (the impersonated user's RBAC: what the access review asks) and the
    same admission (Liqo's webhook: what the dry-run asks), so asking first only adds two round trips per
    namespace; the preview (``dryRun``) still asks when the requester wants the cluster's verdict first."""
    mode = settings.LIQO_DASH["BULK_CHECKS"]
    if mode not in BULK_CHECK_MODES:
        raise ImproperlyConfigured(f"LIQO_DASH_BULK_CHECKS must be one of {', '.join(BULK_CHECK_MODES)}, not {mode!r}")
    return bool(mode == "request")


def _ask_cluster_all(changes: list[ChangeRequest], skipped: list[dict[str, str]], actor: Actor) -> list[ChangeRequest]:
    """The changes the cluster accepts (a few at a time); the refused ones go to ``skipped``. The user's
    identity is looked up once per cluster (its impersonation and groups), not by each thread for each
    namespace."""
    limit = max(1, int(settings.LIQO_DASH["DRY_RUN_CONCURRENCY"]))
    clusters = {c.managed_id: authorize.cluster_of(c.managed_id) for c in changes}  # read here, not in the threads
    who = {managed: authorize.identity(actor, cluster) for managed, cluster in clusters.items()}

    with ThreadPoolExecutor(max_workers=limit) as pool:
        verdicts = list(pool.map(lambda c: _ask_cluster(c, actor, who[c.managed_id], clusters[c.managed_id]), changes))
    accepted = []
    for change, refusal in zip(changes, verdicts, strict=True):
        if refusal is None:
            accepted.append(change)
        else:
            skipped.append({"namespace": change.namespace, "reason": "; ".join(refusal.messages)})
    return accepted


def bulk_destructive_reason(changes: list[ChangeRequest]) -> str | None:
    """Why a bulk change is destructive (how many of its namespaces, and the first reason), or None."""
    found = destructive_changes(changes)
    if not found:
        return None
    names = sorted(found)
    listed = ", ".join(names[:5]) + (f" and {len(names) - 5} more" if len(names) > 5 else "")
    return f"destructive for {len(found)} of the {len(changes)} namespaces ({listed}); {names[0]}: {found[names[0]]}"


def require_bulk_confirmation(changes: list[ChangeRequest]) -> None:
    """Refuse an unconfirmed bulk change that is destructive for any of its namespaces."""
    why = bulk_destructive_reason(changes)
    if why:
        raise unconfirmed(why)


def _refuse_empty(plan: BulkPlan, actor: Actor, namespace_selector: str, action: str) -> None:
    """Refuse a bulk change that no namespace can take, saying why (``FORBIDDEN`` when every one was
    left out for the user's scopes)."""
    if plan.changes:
        return
    reasons = sorted({s["reason"] for s in plan.skipped})[:3]
    detail = f" ({'; '.join(reasons)})" if reasons else ""
    message = f"no namespace matched that can take this change{detail}"
    if plan.skipped and all(s.get("why") == "scope" for s in plan.skipped):
        raise authorize.refuse(actor, namespace_selector, f"bulk {action}", message, field="namespaceSelector")
    raise ChangeRejected({"namespaceSelector": [message]})


def request_bulk(
    action: str,
    namespace_selector: str,
    spec: dict[str, Any] | None,
    actor: Actor,
    *,
    label_namespace: bool = False,
    expected_generations: dict[str, int] | None = None,
    confirmed: bool = False,
    gitops_override: bool = False,
    managed: int | None = None,
) -> BulkRequest:
    """Record one parent request and a change per namespace that can take it, in one transaction (with
    ``BULK_CHECKS=request`` the API server is asked first, outside the transaction; by default each push
    is the check, :func:`checks_at_request`). A bulk change that is destructive for any
    of its namespaces (``offloading.whatif.destructive``) needs ``confirmed``, as a single change does;
    ``gitops_override`` includes the namespaces managed from Git (:func:`plan_bulk`)."""
    plan = plan_bulk(
        action,
        namespace_selector,
        spec,
        actor,
        label_namespace=label_namespace,
        expected_generations=expected_generations,
        gitops_override=gitops_override,
        managed=managed,
    )
    _refuse_empty(plan, actor, namespace_selector, action)
    if not confirmed:  # before the API server is asked of every namespace
        require_bulk_confirmation(plan.changes)
    if checks_at_request():
        plan.changes = _ask_cluster_all(plan.changes, plan.skipped, actor)
        _refuse_empty(plan, actor, namespace_selector, action)
    waits = holds.gate_bulk(plan.changes)  # one approval for the whole bulk, or windows per namespace
    with transaction.atomic(), sealed_together():  # the children's audit rows: one append for all
        bulk = BulkRequest.objects.create(
            managed_id=managed_pk(managed),
            action=action,
            namespace_selector=namespace_selector,
            desired_spec=spec,
            requester_id=actor.user_id,
            requester_name=actor.user_name,
            source=actor.source,
            request_id=actor.request_id,
            total=len(plan.changes),
            skipped=plan.skipped,
        )
        # The bulk request's own audit event first, then each namespace's (sealed in this order).
        record_bulk_requested(bulk, actor, [change.namespace for change in plan.changes])
        for change in plan.changes:
            change.bulk = bulk
        save_all(plan.changes, actor)
        holds.hold_bulk(bulk, plan.changes, waits, actor)
        # One task pushes them all, many at a time (offloading.changes.bulkpush.apply_bulk).
        if waits.enqueue:
            route = authorize.queue_route(bulk.managed_id)
            send = (lambda: enqueue_bulk(bulk.pk)) if route is None else (lambda: enqueue_bulk(bulk.pk, managed=route))
            transaction.on_commit(send, robust=True)
    return bulk


def retry_failed(bulk_id: int, actor: Actor, *, confirmed: bool = False) -> BulkRequest:
    """A new bulk request for the children of ``bulk_id`` that failed, each asked for again with the
    same rules (scopes, the cluster's checks as :func:`checks_at_request` says, the confirmation of a
    destructive change),
    based on the snapshot now."""
    original = BulkRequest.objects.filter(pk=bulk_id).first()
    if original is None:
        raise ChangeRejected({"bulk": [f"bulk request {bulk_id} does not exist"]}, Refusal.NOT_FOUND)
    failed = list(original.changes.filter(state=ChangeState.FAILED).order_by("namespace"))
    if not failed:
        raise ChangeRejected({"bulk": ["no change of this bulk request failed"]}, Refusal.CONFLICT)
    actor = Actor(actor.user_id, actor.user_name, Source.BULK, actor.request_id)
    user = authorize.user_of(actor)
    cluster = authorize.cluster_name(original.managed_id)
    namespaces = {
        ns.name: ns for ns in Namespace.objects.of(original.managed_id).filter(name__in=[c.namespace for c in failed])
    }
    changes: list[ChangeRequest] = []
    skipped: list[dict[str, str]] = []
    for old in failed:
        namespace = namespaces.get(old.namespace)
        if namespace is None:
            skipped.append({"namespace": old.namespace, "reason": "the namespace no longer exists"})
            continue
        action = ChangeAction.UNOFFLOAD if old.action == ChangeAction.UNOFFLOAD else ChangeAction.OFFLOAD
        if actor.user_id is not None:
            decision = policy.can_change(user, namespace.name, namespace.labels or {}, "reapply", cluster=cluster)
            if not decision.allowed:
                skipped.append({"namespace": namespace.name, "reason": decision.reason, "why": "scope"})
                continue
        wanted = ChangeInput(
            namespace.name, action, old.desired_spec, None, old.label_namespace, managed=original.managed_id
        )
        try:
            changes.append(build_change(namespace, wanted, actor))
        except NothingToChange:
            skipped.append({"namespace": namespace.name, "reason": NOTHING_TO_CHANGE, "why": "noop"})
        except ChangeRejected as exc:
            skipped.append({"namespace": namespace.name, "reason": "; ".join(exc.messages)})
    if checks_at_request():
        changes = _ask_cluster_all(changes, skipped, actor)
    if not changes:
        reasons = "; ".join(sorted({s["reason"] for s in skipped})[:3])
        message = f"none of the failed changes can be asked for again ({reasons})"
        if all(s.get("why") == "scope" for s in skipped):
            raise authorize.refuse(actor, original.namespace_selector, "bulk retry", message, field="bulk")
        raise ChangeRejected({"bulk": [message]})
    if not confirmed:
        require_bulk_confirmation(changes)
    waits = holds.gate_bulk(changes)
    with transaction.atomic(), sealed_together():  # the children's audit rows: one append for all
        retry = BulkRequest.objects.create(
            managed_id=original.managed_id,
            action=original.action,
            namespace_selector=original.namespace_selector,
            desired_spec=original.desired_spec,
            requester_id=actor.user_id,
            requester_name=actor.user_name,
            source=actor.source,
            request_id=actor.request_id,
            total=len(changes),
            skipped=skipped,
        )
        record_bulk_requested(retry, actor, [change.namespace for change in changes], retry_of=original.pk)
        for change in changes:
            change.bulk = retry
        save_all(changes, actor)
        holds.hold_bulk(retry, changes, waits, actor)
        if waits.enqueue:
            route = authorize.queue_route(retry.managed_id)
            send = (
                (lambda: enqueue_bulk(retry.pk)) if route is None else (lambda: enqueue_bulk(retry.pk, managed=route))
            )
            transaction.on_commit(send, robust=True)
    return retry
