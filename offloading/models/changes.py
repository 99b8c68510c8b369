"""The ChangeRequest outbox (desired state, written by users) and the bulk requests that group changes."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

from offloading.choices import REFUSED_BY_CLUSTER, ChangeAction, ChangeState, Source
from offloading.models.fleet import ManagedClusterKey, ScopedQuerySet

# Changes and bulks carry their managed cluster (issue 28, migration 0027): the same key as the snapshot
# rows (a change written without one is the default cluster's), but PROTECT, not CASCADE: a change is
# named by its sealed audit events, so a cluster with changes is not removed with them.


class BulkRequestQuerySet(ScopedQuerySet["BulkRequest"]):
    def with_progress(self) -> BulkRequestQuerySet:
        """Annotate the count of children in each state (for lists)."""
        return self.annotate(
            **{
                f"n_{state}": models.Count("changes", filter=models.Q(changes__state=state))
                for state in ChangeState.values
            }
        )

    def with_refused(self) -> BulkRequestQuerySet:
        """Fetch every listed bulk's refused children in one more query (:meth:`BulkRequest.refused`)."""
        refused = ChangeRequest.objects.filter(
            state=ChangeState.FAILED, message__startswith=f"{REFUSED_BY_CLUSTER}: "
        ).order_by("namespace", "pk")
        return self.prefetch_related(models.Prefetch("changes", queryset=refused, to_attr="refused_rows"))


class BulkRequest(models.Model):
    """One request that offloads or unoffloads every namespace matching a label selector; its
    progress is the states of its ChangeRequests."""

    managed = ManagedClusterKey(on_delete=models.PROTECT)
    action = models.CharField(max_length=16, choices=ChangeAction.choices)
    namespace_selector = models.CharField(max_length=1024)
    desired_spec = models.JSONField(null=True, blank=True)
    requester = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    requester_name = models.CharField(max_length=150)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.WEB)
    request_id = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(default=timezone.now)
    total = models.PositiveIntegerField(default=0)
    skipped = models.JSONField(default=list, blank=True)

    objects = BulkRequestQuerySet.as_manager()

    class Meta:
        ordering = ("-created_at", "-id")

    def __str__(self) -> str:
        return f"bulk #{self.pk} {self.action} {self.namespace_selector}"

    def refused(self) -> list[dict[str, object]]:
        """The children the cluster refused when they were pushed (the user's RBAC, validation, Liqo's
        webhook), each with its namespace, change id and the API server's reason, by namespace."""
        prefix = f"{REFUSED_BY_CLUSTER}: "
        rows = getattr(self, "refused_rows", None)  # BulkRequestQuerySet.with_refused
        if rows is None:
            rows = self.changes.filter(state=ChangeState.FAILED, message__startswith=prefix).order_by("namespace", "pk")
        return [{"namespace": c.namespace, "change": c.pk, "reason": c.message.removeprefix(prefix)} for c in rows]

    def progress(self) -> dict[str, int]:
        """Counts of the children by state, plus done (terminal) and total. Uses the ``n_<state>``
        annotations of :meth:`BulkRequestQuerySet.with_progress` when present (no query per row)."""
        if hasattr(self, "n_queued"):
            counts = {state: getattr(self, f"n_{state}") for state in ChangeState.values}
        else:
            counts = dict(self.changes.values_list("state").annotate(n=models.Count("id")))
        result = {state: counts.get(state, 0) for state in ChangeState.values}
        result["done"] = sum(result[s] for s in ChangeState.terminal())
        result["total"] = self.total
        result["percent"] = int(100 * result["done"] / self.total) if self.total else 100
        return result


class ChangeRequest(models.Model):
    """A requested change of one namespace's offloading (the outbox): recorded first, then pushed to
    the cluster by the worker. ``state`` and the result fields are written only by the worker."""

    # Its managed cluster: a namespace is one cluster's, and so are the order and the lock of its changes.
    managed = ManagedClusterKey(on_delete=models.PROTECT, db_index=False)
    namespace = models.CharField(max_length=63, db_index=True)
    action = models.CharField(max_length=16, choices=ChangeAction.choices)
    desired_spec = models.JSONField(null=True, blank=True)
    label_namespace = models.BooleanField(
        default=False, help_text="Also label the namespace liqo.io/scheduling-enabled=true before offloading."
    )
    # What the requester saw: the change conflicts if the spec in the cluster moved on since.
    base_spec = models.JSONField(null=True, blank=True)
    base_generation = models.BigIntegerField(null=True, blank=True)
    base_resource_version = models.CharField(max_length=64, blank=True)
    base_uid = models.CharField(max_length=64, blank=True)

    state = models.CharField(max_length=24, choices=ChangeState.choices, default=ChangeState.QUEUED, db_index=True)
    requester = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    requester_name = models.CharField(max_length=150)
    source = models.CharField(max_length=16, choices=Source.choices, default=Source.WEB)
    request_id = models.CharField(max_length=64, blank=True)

    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    updated_at = models.DateTimeField(default=timezone.now)
    claimed_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    attempts = models.PositiveIntegerField(default=0)
    message = models.TextField(blank=True)
    warnings = models.JSONField(default=list, blank=True)
    result_resource_version = models.CharField(max_length=64, blank=True)
    result_generation = models.BigIntegerField(null=True, blank=True)
    # The uid of the object our write produced: with the generation, how drift tells our writes from
    # others' (never the change-id annotation, which any client can copy).
    result_uid = models.CharField(max_length=64, blank=True)
    conflict_spec = models.JSONField(null=True, blank=True)
    # Transient errors: when the first one of this change happened (the retry budget runs from it), and
    # why the change waits now (e.g. the API server is unreachable) since when; empty when it does not.
    retrying_since = models.DateTimeField(null=True, blank=True)
    waiting_reason = models.CharField(max_length=32, blank=True, db_index=True)
    waiting_since = models.DateTimeField(null=True, blank=True)
    bulk = models.ForeignKey(BulkRequest, null=True, blank=True, on_delete=models.SET_NULL, related_name="changes")

    objects = ScopedQuerySet.as_manager()

    class Meta:
        ordering = ("-created_at", "-id")
        # The per-namespace order and the "next change" lookups filter by (cluster, namespace, state).
        indexes = [models.Index(fields=("managed", "namespace", "state"), name="change_cluster_ns_state")]

    def __str__(self) -> str:
        return f"#{self.pk} {self.action} {self.namespace} ({self.state})"

    @property
    def is_terminal(self) -> bool:
        return self.state in ChangeState.terminal()
