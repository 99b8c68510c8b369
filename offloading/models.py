"""Snapshot tables (observed state, written only by the refresh), the ChangeRequest outbox (desired
state, written by users) and the append-only AuditEvent trail."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.utils import timezone

from offloading import auditseal
from offloading.choices import AuditAction, ChangeAction, ChangeState, Source
from offloading.liqo.spec import is_system_namespace
from offloading.liqo.status import phase_is_settled


class SnapshotState(models.Model):
    """One row: when the snapshot was last refreshed, and whether the API server answered."""

    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    last_duration_ms = models.PositiveIntegerField(default=0)
    last_list_calls = models.PositiveIntegerField(default=0)
    local_cluster_id = models.CharField(max_length=63, blank=True)

    def __str__(self) -> str:
        return f"snapshot refreshed at {self.last_success_at}"

    @classmethod
    def get(cls) -> SnapshotState:
        state, _ = cls.objects.get_or_create(pk=1)
        return state

    def is_stale(self, now: Any = None) -> bool:
        """True when the last successful refresh is older than STALE_AFTER or the last one failed."""
        if self.last_success_at is None:
            return True
        now = now or timezone.now()
        age = (now - self.last_success_at).total_seconds()
        failed_since = self.last_attempt_at and self.last_attempt_at > self.last_success_at and self.last_error
        return bool(failed_since) or age > settings.LIQO_DASH["STALE_AFTER"]


class Cluster(models.Model):
    """A peered cluster (ForeignCluster) as last seen."""

    cluster_id = models.CharField(max_length=63, unique=True)
    name = models.CharField(max_length=253)
    role = models.CharField(max_length=32, blank=True)
    networking_status = models.CharField(max_length=16, blank=True)
    authentication_status = models.CharField(max_length=16, blank=True)
    offloading_status = models.CharField(max_length=16, blank=True)
    modules = models.JSONField(default=dict)
    api_server_url = models.CharField(max_length=512, blank=True)
    resource_version = models.CharField(max_length=64, blank=True)
    refreshed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("cluster_id",)

    def __str__(self) -> str:
        return self.cluster_id

    @property
    def is_provider(self) -> bool:
        return self.role in ("Provider", "ConsumerAndProvider")

    @property
    def is_consumer(self) -> bool:
        """It consumes this cluster's resources: it may offload namespaces here (its page's tenant side)."""
        return self.role in ("Consumer", "ConsumerAndProvider")


class VirtualNode(models.Model):
    """A Liqo VirtualNode with the labels that cluster selectors are matched against."""

    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    cluster_id = models.CharField(max_length=63, db_index=True)
    labels = models.JSONField(default=dict)
    has_node = models.BooleanField(default=True)
    capacity = models.JSONField(default=dict)
    healthy = models.BooleanField(default=False)
    conditions = models.JSONField(default=list)
    refreshed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("cluster_id", "name")
        constraints = [models.UniqueConstraint(fields=("namespace", "name"), name="unique_virtual_node")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def generation_lags(namespace: Any) -> bool:
    """Liqo has not yet reconciled the latest spec of ``namespace`` (a Namespace, or a row read as its
    values): it is offloaded and its observedGeneration lags its generation."""
    return bool(namespace.offloaded) and namespace.offloading_observed_generation != namespace.offloading_generation


class Namespace(models.Model):
    """A namespace of the local cluster and its NamespaceOffloading (if any), as last seen."""

    name = models.CharField(max_length=63, unique=True)
    labels = models.JSONField(default=dict)
    status_phase = models.CharField(max_length=16, blank=True)
    created_at = models.DateTimeField(null=True, blank=True)
    # The observed NamespaceOffloading named "offloading"; offloaded=False means it does not exist.
    offloaded = models.BooleanField(default=False, db_index=True)
    offloading_uid = models.CharField(max_length=64, blank=True)
    offloading_spec = models.JSONField(null=True, blank=True)
    offloading_status = models.JSONField(null=True, blank=True)
    offloading_phase = models.CharField(max_length=32, blank=True, db_index=True)
    offloading_generation = models.BigIntegerField(default=0)
    offloading_observed_generation = models.BigIntegerField(default=0)
    offloading_resource_version = models.CharField(max_length=64, blank=True)
    offloading_deleting = models.BooleanField(default=False)
    offloading_managed_by = models.TextField(blank=True)  # an annotation value (up to 256 KiB)
    remote_namespace_name = models.TextField(blank=True)  # SelectedName: the CRD sets no length
    refreshed_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("name",)
        # The phase counts every list page shows: answered from the index alone, at any fleet size.
        indexes = [models.Index(fields=["offloaded", "offloading_phase"], name="namespace_phase_counts")]

    def __str__(self) -> str:
        return self.name

    @property
    def is_system(self) -> bool:
        return is_system_namespace(self.name)

    @property
    def status_settled(self) -> bool:
        """Not offloaded, or Liqo has reconciled the latest spec and reached a phase that stays."""
        return not self.offloaded or (phase_is_settled(self.offloading_phase) and not self.status_is_stale)

    @property
    def status_is_stale(self) -> bool:
        return generation_lags(self)


class ClusterOffloading(models.Model):
    """One row per (offloaded namespace, peered cluster that is selected or still holds its remote
    namespace): the per-cluster status table, flattened so that the fleet matrix and the
    per-cluster counts are single queries."""

    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="cluster_states")
    cluster_id = models.CharField(max_length=63)
    selected = models.BooleanField(default=False)
    state = models.CharField(max_length=32, blank=True)
    message = models.TextField(blank=True)
    since = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ("namespace__name", "cluster_id")
        constraints = [models.UniqueConstraint(fields=("namespace", "cluster_id"), name="unique_cluster_offloading")]
        # A cluster's rows, and the namespaces that select it (counted from the index alone): the
        # cluster list, the ?cluster= filter, a cluster's page. Cluster first, so that one index serves
        # both (with the flag first, SQLite chose a lone cluster_id index and read every row).
        indexes = [models.Index(fields=("cluster_id", "selected"), name="cluster_offloading_by_cluster")]

    def __str__(self) -> str:
        return f"{self.namespace_id}@{self.cluster_id}: {self.state or 'not selected'}"


class StatusTransition(models.Model):
    """A change of a namespace's offloading phase (``cluster_id`` empty) or of its state on one
    cluster, as observed by the refresh. Kept bounded per namespace by the sweeper."""

    time = models.DateTimeField(default=timezone.now, db_index=True)
    namespace = models.CharField(max_length=63, db_index=True)
    cluster_id = models.CharField(max_length=63, blank=True)
    old = models.CharField(max_length=32, blank=True)
    new = models.CharField(max_length=32, blank=True)

    class Meta:
        ordering = ("-time", "-id")

    def __str__(self) -> str:
        return f"{self.namespace}@{self.cluster_id or '*'}: {self.old or '-'} -> {self.new or '-'}"


class BulkRequestQuerySet(models.QuerySet):
    def with_progress(self) -> BulkRequestQuerySet:
        """Annotate the count of children in each state (for lists)."""
        return self.annotate(
            **{
                f"n_{state}": models.Count("changes", filter=models.Q(changes__state=state))
                for state in ChangeState.values
            }
        )


class BulkRequest(models.Model):
    """One request that offloads or unoffloads every namespace matching a label selector; its
    progress is the states of its ChangeRequests."""

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

    state = models.CharField(max_length=16, choices=ChangeState.choices, default=ChangeState.QUEUED, db_index=True)
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

    class Meta:
        ordering = ("-created_at", "-id")
        indexes = [models.Index(fields=("namespace", "state"), name="change_ns_state")]

    def __str__(self) -> str:
        return f"#{self.pk} {self.action} {self.namespace} ({self.state})"

    @property
    def is_terminal(self) -> bool:
        return self.state in ChangeState.terminal()


class AuditEvent(models.Model):
    """An append-only, sealed record of who changed what, when, from where and how it ended.

    Each row has a sequence number and a seal: an HMAC (AUDIT_HMAC_KEY) over its content, its number and
    the seal before it (``offloading.auditseal``). Editing, deleting, inserting or reordering rows breaks
    the seals; ``offloading.changes.audittrail.verify`` finds the first bad one, and the head is anchored
    outside the database (``manage.py audit_anchor``)."""

    seq = models.PositiveBigIntegerField(unique=True, null=True)
    time = models.DateTimeField(default=timezone.now, db_index=True)
    user = models.ForeignKey(settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL)
    user_name = models.CharField(max_length=253, db_index=True)
    source = models.CharField(max_length=16, choices=Source.choices)
    request_id = models.CharField(max_length=64, blank=True)
    action = models.CharField(max_length=32, choices=AuditAction.choices, db_index=True)
    namespace = models.CharField(max_length=63, db_index=True)
    # PROTECT: the change id is part of the sealed payload, so its change may never go away.
    change = models.ForeignKey(
        ChangeRequest, null=True, blank=True, on_delete=models.PROTECT, related_name="audit_events"
    )
    before = models.JSONField(null=True, blank=True)
    after = models.JSONField(null=True, blank=True)
    outcome = models.CharField(max_length=16, blank=True)
    message = models.TextField(blank=True)
    prev_hash = models.CharField(max_length=64, blank=True)  # the seal of the event before
    hash = models.CharField(max_length=64, unique=True)  # this event's seal
    key_id = models.CharField(max_length=12, blank=True)

    class Meta:
        ordering = ("-id",)

    def __str__(self) -> str:
        return f"{self.time:%Y-%m-%d %H:%M:%S} {self.user_name} {self.action} {self.namespace}"

    def save(self, *args: Any, **kwargs: Any) -> None:
        if self.pk is not None:
            raise ValueError("audit events are append-only")
        with transaction.atomic():
            # Why: the chain needs a total order; locking the head row serialises writers on
            # PostgreSQL, and SQLite's IMMEDIATE transactions already serialise them.
            head, _ = AuditChainHead.objects.select_for_update().get_or_create(pk=1)
            self.seq = head.last_seq + 1
            self.prev_hash = head.last_hash
            self.key_id = auditseal.key_id()
            self.hash = self.compute_hash()
            super().save(*args, **kwargs)
            AuditChainHead.objects.filter(pk=1).update(last_hash=self.hash, last_seq=self.seq)

    def delete(self, *args: Any, **kwargs: Any) -> Any:
        raise ValueError("audit events are append-only")

    def payload(self) -> dict[str, Any]:
        """The fields covered by the seal, in a stable form."""
        return {
            "time": self.time.isoformat(),
            "user_name": self.user_name,
            "source": self.source,
            "request_id": self.request_id,
            "action": self.action,
            "namespace": self.namespace,
            "change": self.change_id,
            "before": self.before,
            "after": self.after,
            "outcome": self.outcome,
            "message": self.message,
        }

    def compute_hash(self, key: str | None = None) -> str:
        return auditseal.seal(self.seq or 0, self.prev_hash, self.payload(), key)


class AuditChainHead(models.Model):
    """The newest event's number and seal; its row lock orders concurrent appends."""

    last_hash = models.CharField(max_length=64, blank=True)
    last_seq = models.PositiveBigIntegerField(default=0)

    def __str__(self) -> str:
        return f"#{self.last_seq} {self.last_hash}" if self.last_hash else "(empty chain)"


class AuditCheckpoint(models.Model):
    """Where the trail starts after retention pruning: the number and seal of the last pruned event,
    so that what remains still verifies."""

    seq = models.PositiveBigIntegerField()
    seal = models.CharField(max_length=64)
    pruned = models.PositiveIntegerField(default=0)
    before = models.DateTimeField()
    created_at = models.DateTimeField(default=timezone.now)

    class Meta:
        ordering = ("-seq",)

    def __str__(self) -> str:
        return f"checkpoint after #{self.seq} ({self.pruned} pruned before {self.before:%Y-%m-%d})"


# The pods and events followed in offloaded namespaces, and the webhook's alerts (their own modules;
# this one stays small).
from offloading.alert_models import Alert  # noqa: E402, F401
from offloading.inventory_models import KubeEvent, LiqoResource, Pod  # noqa: E402, F401
from offloading.live_models import LiveVersion  # noqa: E402, F401
from offloading.mapping_models import MappingEntry, PeerNamespaceMap  # noqa: E402, F401
