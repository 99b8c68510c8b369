"""Snapshot tables: the observed state, written only by the refresh and the watcher."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import connection, models
from django.utils import timezone

from liqo_rules.spec import is_system_namespace
from liqo_rules.status import phase_is_settled
from offloading.models.fleet import ManagedClusterKey, ManagedRef, ScopedQuerySet, is_default, managed_pk


class SnapshotState(models.Model):
    """One row per managed cluster: when its snapshot was last refreshed, and whether its API server
    answered."""

    managed = ManagedClusterKey(db_index=False)  # the unique constraint's index serves it
    last_attempt_at = models.DateTimeField(null=True, blank=True)
    last_success_at = models.DateTimeField(null=True, blank=True)
    last_error = models.TextField(blank=True)
    last_duration_ms = models.PositiveIntegerField(default=0)
    last_list_calls = models.PositiveIntegerField(default=0)
    local_cluster_id = models.CharField(max_length=63, blank=True)

    objects = ScopedQuerySet.as_manager()  # readers: objects.of(managed) (models/fleet.py)

    class Meta:
        constraints = [models.UniqueConstraint(fields=("managed",), name="one_snapshot_state_per_cluster")]

    def __str__(self) -> str:
        return f"snapshot refreshed at {self.last_success_at}"

    @classmethod
    def local_id_of(cls, managed: ManagedRef = None) -> str:
        """The Liqo cluster id of ``managed`` (None: the default cluster): for the default the configured one
        (LIQO_LOCAL_CLUSTER_ID, which names the process's own cluster), else the one its refresh or watcher
        discovered (may be empty)."""
        configured = settings.LIQO_DASH["LOCAL_CLUSTER_ID"]
        if configured and is_default(managed):
            return str(configured)
        return cls.get(managed).local_cluster_id

    @classmethod
    def get(cls, managed: ManagedRef = None) -> SnapshotState:
        """The row of ``managed`` (None: the default cluster), made when missing."""
        pk = managed_pk(managed)
        # A raw read first: the freshness badge asks at every poll, and get_or_create's queryset cost
        # three times the read (0.66 against 0.21 ms, in process).
        table, column = connection.ops.quote_name(cls._meta.db_table), connection.ops.quote_name("managed_id")
        for state in cls.objects.raw(f"SELECT * FROM {table} WHERE {column} = %s", [pk]):  # noqa: S611
            return state
        state, _ = cls.objects.get_or_create(managed_id=pk)
        return state

    @classmethod
    def find(cls, managed: ManagedRef = None) -> SnapshotState | None:
        """The row of ``managed`` (None: the default cluster), or None. One query that never writes
        (the probes and /metrics read it: they must not make the default cluster's row)."""
        if managed is None:
            return cls.objects.filter(managed__is_default=True).first()
        return cls.objects.filter(managed_id=managed_pk(managed)).first()

    @classmethod
    def touch(cls, managed: ManagedRef = None, **fields: Any) -> None:
        """Update the row of ``managed`` (made when missing) with ``fields``: the writers' one statement."""
        pk = managed_pk(managed)
        if not cls.objects.filter(managed_id=pk).update(**fields):
            state, _ = cls.objects.get_or_create(managed_id=pk)
            cls.objects.filter(pk=state.pk).update(**fields)

    @property
    def last_refresh_failed(self) -> bool:
        """Whether the last refresh failed: an error noted after the last success."""
        return bool(
            self.last_error
            and self.last_attempt_at
            and self.last_success_at
            and self.last_attempt_at > self.last_success_at
        )

    def is_stale(self, now: Any = None) -> bool:
        """True when the last successful refresh is older than STALE_AFTER or the last one failed."""
        if self.last_success_at is None:
            return True
        now = now or timezone.now()
        age = (now - self.last_success_at).total_seconds()
        return self.last_refresh_failed or age > settings.LIQO_DASH["STALE_AFTER"]


class Cluster(models.Model):
    """A peered cluster (ForeignCluster) as last seen."""

    managed = ManagedClusterKey(db_index=False)
    # Indexed alone too: the pages look a peer up by its id alone while they show one cluster.
    cluster_id = models.CharField(max_length=63, db_index=True)
    name = models.CharField(max_length=253)
    role = models.CharField(max_length=32, blank=True)
    networking_status = models.CharField(max_length=16, blank=True)
    authentication_status = models.CharField(max_length=16, blank=True)
    offloading_status = models.CharField(max_length=16, blank=True)
    modules = models.JSONField(default=dict)
    api_server_url = models.CharField(max_length=512, blank=True)
    resource_version = models.CharField(max_length=64, blank=True)
    refreshed_at = models.DateTimeField(default=timezone.now)

    objects = ScopedQuerySet.as_manager()  # readers: objects.of(managed) (models/fleet.py)

    class Meta:
        ordering = ("cluster_id",)
        constraints = [models.UniqueConstraint(fields=("managed", "cluster_id"), name="unique_peer_per_cluster")]

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

    managed = ManagedClusterKey(db_index=False)
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    cluster_id = models.CharField(max_length=63, db_index=True)
    labels = models.JSONField(default=dict)
    has_node = models.BooleanField(default=True)
    capacity = models.JSONField(default=dict)
    healthy = models.BooleanField(default=False)
    conditions = models.JSONField(default=list)
    refreshed_at = models.DateTimeField(default=timezone.now)

    objects = ScopedQuerySet.as_manager()  # readers: objects.of(managed) (models/fleet.py)

    class Meta:
        ordering = ("cluster_id", "name")
        constraints = [models.UniqueConstraint(fields=("managed", "namespace", "name"), name="unique_virtual_node")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


def generation_lags(namespace: Any) -> bool:
    """Liqo has not yet reconciled the latest spec of ``namespace`` (a Namespace, or a row read as its
    values): it is offloaded and its observedGeneration lags its generation."""
    return bool(namespace.offloaded) and namespace.offloading_observed_generation != namespace.offloading_generation


class Namespace(models.Model):
    """A namespace of the local cluster and its NamespaceOffloading (if any), as last seen."""

    managed = ManagedClusterKey(db_index=False)
    # Indexed alone too: the pages find a namespace by its name and list them in name order; the unique
    # key (managed, name) does not serve a query that names no cluster.
    name = models.CharField(max_length=63, db_index=True)
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
    # What offloading.gitops.detect reads of the offloading (its GitOps labels, annotations and field
    # managers: gitops.detect.facts), so pages and the request contract know who manages it from Git.
    gitops_facts = models.JSONField(default=dict, blank=True)
    refreshed_at = models.DateTimeField(default=timezone.now)

    objects = ScopedQuerySet.as_manager()  # readers: objects.of(managed) (models/fleet.py)

    class Meta:
        ordering = ("name",)
        # The phase counts every list page shows: answered from the index alone, at any fleet size. The
        # managed cluster first: every reader names one (objects.of), and SQLite, without statistics,
        # otherwise took the (managed, name) key and sorted a cluster's every row.
        indexes = [
            models.Index(fields=["managed", "offloaded", "offloading_phase"], name="namespace_phases_per_cluster")
        ]
        constraints = [models.UniqueConstraint(fields=("managed", "name"), name="unique_namespace_per_cluster")]

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

    managed = ManagedClusterKey()  # its namespace's cluster (the unique key is per namespace, hence per cluster)
    namespace = models.ForeignKey(Namespace, on_delete=models.CASCADE, related_name="cluster_states")
    cluster_id = models.CharField(max_length=63)
    selected = models.BooleanField(default=False)
    state = models.CharField(max_length=32, blank=True)
    message = models.TextField(blank=True)
    since = models.DateTimeField(null=True, blank=True)

    objects = ScopedQuerySet.as_manager()  # readers: objects.of(managed) (models/fleet.py)

    class Meta:
        ordering = ("namespace__name", "cluster_id")
        constraints = [models.UniqueConstraint(fields=("namespace", "cluster_id"), name="unique_cluster_offloading")]
        # A cluster's rows, and the namespaces that select it (counted from the index alone): the
        # cluster list, the ?cluster= filter, a cluster's page. Cluster first, so that one index serves
        # both (with the flag first, SQLite chose a lone cluster_id index and read every row). The managed
        # cluster before them: every reader names one (objects.of), and SQLite then took the lone managed index.
        indexes = [models.Index(fields=("managed", "cluster_id", "selected"), name="cluster_offloading_by_peer")]

    def __str__(self) -> str:
        return f"{self.namespace_id}@{self.cluster_id}: {self.state or 'not selected'}"


class StatusTransition(models.Model):
    """A change of a namespace's offloading phase (``cluster_id`` empty) or of its state on one
    cluster, as observed by the refresh. Kept bounded per namespace by the sweeper."""

    managed = ManagedClusterKey()
    time = models.DateTimeField(default=timezone.now, db_index=True)
    namespace = models.CharField(max_length=63, db_index=True)
    cluster_id = models.CharField(max_length=63, blank=True)
    old = models.CharField(max_length=32, blank=True)
    new = models.CharField(max_length=32, blank=True)

    objects = ScopedQuerySet.as_manager()  # readers: objects.of(managed) (models/fleet.py)

    class Meta:
        ordering = ("-time", "-id")
        # A namespace's history, newest first, of one managed cluster (objects.of): without it SQLite took the
        # lone managed index and sorted the cluster's whole history for one namespace page.
        indexes = [models.Index(fields=("managed", "namespace", "time"), name="transition_history")]

    def __str__(self) -> str:
        return f"{self.namespace}@{self.cluster_id or '*'}: {self.old or '-'} -> {self.new or '-'}"
