"""The outbox sweeper and history trimming (beat)."""

from __future__ import annotations

import logging
from datetime import timedelta

from django.conf import settings
from django.db.models import Count
from django.utils import timezone

from offloading.choices import ChangeState
from offloading.models import (
    ChangeRequest,
    StatusTransition,
)
from offloading.queue import enqueue_apply

log = logging.getLogger(__name__)


def sweep() -> int:
    """Re-enqueue changes whose message was lost or whose worker died (outbox sweeper), every cluster's.
    A change of a cluster whose API server is down is parked again by its claim (its breaker is open)."""
    cutoff = timezone.now() - timedelta(seconds=settings.LIQO_DASH["STUCK_AFTER"])
    stuck = list(
        ChangeRequest.objects.filter(state__in=ChangeState.pending(), updated_at__lt=cutoff).values_list(
            "pk", "managed_id", "managed__is_default"
        )
    )
    for pk, managed_id, default in stuck:
        ChangeRequest.objects.filter(pk=pk, state=ChangeState.APPLYING, updated_at__lt=cutoff).update(
            state=ChangeState.QUEUED, updated_at=timezone.now(), message="re-enqueued by the sweeper"
        )
        ChangeRequest.objects.filter(pk=pk, state=ChangeState.QUEUED, updated_at__lt=cutoff).update(
            updated_at=timezone.now()
        )
        enqueue_apply(pk, managed=None if default else managed_id)  # to its cluster's queue, if it has one
    return len(stuck)


HISTORY_PER_NAMESPACE = 200


def trim_history(limit: int = HISTORY_PER_NAMESPACE) -> int:
    """Keep only the newest ``limit`` status transitions of each namespace of each managed cluster (a
    namespace's name in another cluster is another namespace: its history is counted apart)."""
    deleted = 0
    crowded = (
        StatusTransition.objects.values("managed", "namespace")
        .annotate(n=Count("id"))
        .filter(n__gt=limit)
        .values_list("managed", "namespace")
    )
    for managed, namespace in list(crowded):
        history = StatusTransition.objects.filter(managed_id=managed, namespace=namespace)
        keep_from = history.order_by("-id").values_list("id", flat=True)[limit - 1]
        deleted += history.filter(id__lt=keep_from).delete()[0]
    return deleted
