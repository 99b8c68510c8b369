"""Bulk changes: one parent request and a change per namespace matching a label selector."""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.db import transaction

from offloading.changes.errors import ChangeRejected
from offloading.changes.requests import local_cluster_id, offload_change, save_and_enqueue, unoffload_change
from offloading.choices import ChangeAction, Source
from offloading.context import Actor
from offloading.liqo.selectors.parse import parse_requirements
from offloading.liqo.selectors.requirements import SelectorError
from offloading.liqo.spec import apply_defaults
from offloading.models import (
    BulkRequest,
    ChangeRequest,
    Namespace,
)

log = logging.getLogger(__name__)


@dataclass
class BulkPlan:
    """What a bulk request would do: the changes it would make and the namespaces it would skip."""

    changes: list[ChangeRequest]
    skipped: list[dict[str, str]]

    @property
    def namespaces(self) -> list[str]:
        return [c.namespace for c in self.changes]


def namespace_ids_matching(requirements: list[Any]) -> list[int]:
    """Ids of the snapshot namespaces whose labels satisfy parsed label-selector requirements (matched
    here with offloading.liqo, as the API server would)."""
    return [
        pk
        for pk, labels in Namespace.objects.values_list("pk", "labels")
        if all(r.matches(labels or {}) for r in requirements)
    ]


def bulk_targets(namespace_selector: str) -> list[Namespace]:
    """Snapshot namespaces whose labels match a kubectl-style label selector."""
    try:
        requirements = parse_requirements(namespace_selector)
    except SelectorError as exc:
        raise ChangeRejected({"namespace_selector": [str(exc)]})
    if not requirements:
        raise ChangeRejected({"namespace_selector": ["give a selector: an empty one would match every namespace"]})
    return list(Namespace.objects.filter(pk__in=namespace_ids_matching(requirements)).defer("offloading_status"))


def plan_bulk(
    action: str,
    namespace_selector: str,
    spec: dict[str, Any] | None,
    actor: Actor,
    *,
    label_namespace: bool = False,
    bulk: BulkRequest | None = None,
) -> BulkPlan:
    """Build (unsaved) the changes of a bulk request; namespaces that cannot take it are skipped
    with the reason (a system namespace, not offloaded, an immutable field ...)."""
    if action != ChangeAction.UNOFFLOAD:
        if spec is None:
            raise ChangeRejected({"spec": ["a spec is required to offload"]})
        if apply_defaults(spec).get("namespaceMappingStrategy") == "SelectedName":
            # Like liqoctl: one remote name for many namespaces would collide on every cluster.
            raise ChangeRejected(
                {"namespaceMappingStrategy": ["SelectedName cannot be used when offloading several namespaces at once"]}
            )
    changes, skipped = [], []
    local_id = local_cluster_id()
    # The children of a bulk request say so; the parent keeps where it came from (web or api).
    actor = Actor(actor.user_id, actor.user_name, Source.BULK, actor.request_id)
    for namespace in bulk_targets(namespace_selector):
        try:
            if action == ChangeAction.UNOFFLOAD:
                change = unoffload_change(namespace, actor, bulk=bulk)
            else:
                change = offload_change(
                    namespace, spec or {}, actor, label_namespace=label_namespace, bulk=bulk, local_id=local_id
                )
        except ChangeRejected as exc:
            reason = "; ".join(m for msgs in exc.errors.values() for m in msgs)
            skipped.append({"namespace": namespace.name, "reason": reason})
            continue
        changes.append(change)
    return BulkPlan(changes, skipped)


def request_bulk(
    action: str,
    namespace_selector: str,
    spec: dict[str, Any] | None,
    actor: Actor,
    *,
    label_namespace: bool = False,
) -> BulkRequest:
    """Record one parent request and a change per matching namespace, in one transaction."""
    with transaction.atomic():
        bulk = BulkRequest.objects.create(
            action=action,
            namespace_selector=namespace_selector,
            desired_spec=spec,
            requester_id=actor.user_id,
            requester_name=actor.user_name,
            source=actor.source,
            request_id=actor.request_id,
        )
        plan = plan_bulk(action, namespace_selector, spec, actor, label_namespace=label_namespace, bulk=bulk)
        if not plan.changes:
            transaction.set_rollback(True)
            raise ChangeRejected({"namespace_selector": ["no namespace matched that can take this change"]})
        for change in plan.changes:
            save_and_enqueue(change, actor)
        BulkRequest.objects.filter(pk=bulk.pk).update(total=len(plan.changes), skipped=plan.skipped)
    bulk.refresh_from_db()
    return bulk
