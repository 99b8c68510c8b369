"""The local NamespaceMaps as last seen (one per peer that has a virtual node): what Liqo's
NamespaceOffloading controller asked of each peer (``spec.desiredMapping``) and what the peer reports
(``status.currentMapping``). Kept by offloading.snapshot.namespacemaps; read by the diagnosis (errors the
controller swallows, a stale Ready condition) and the namespace page."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from offloading.models.fleet import ManagedClusterKey, ScopedQuerySet


class PeerNamespaceMap(models.Model):
    """A local NamespaceMap (named after the peer's cluster id, in its tenant namespace)."""

    managed = ManagedClusterKey(db_index=False)
    cluster_id = models.CharField(max_length=63)
    namespace = models.CharField(max_length=253)  # the tenant namespace it lives in
    name = models.CharField(max_length=253)
    resource_version = models.CharField(max_length=64, blank=True)
    refreshed_at = models.DateTimeField(default=timezone.now)

    objects = ScopedQuerySet.as_manager()  # readers: objects.of(managed) (models/fleet.py)

    class Meta:
        ordering = ("cluster_id",)
        constraints = [models.UniqueConstraint(fields=("managed", "cluster_id"), name="unique_map_per_cluster")]

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name}"


class MappingEntry(models.Model):
    """One local namespace in one NamespaceMap: desired (the remote name asked for, "" when not asked)
    and current (the peer's remote name and phase, "" when it reports none)."""

    managed = ManagedClusterKey(db_index=False)
    namespace_map = models.ForeignKey(PeerNamespaceMap, on_delete=models.CASCADE, related_name="entries")
    cluster_id = models.CharField(max_length=63)
    namespace = models.CharField(max_length=63, db_index=True)  # the local namespace
    desired = models.TextField(blank=True)  # a remote name: the CRD sets no length
    current_remote = models.TextField(blank=True)
    current_phase = models.CharField(max_length=32, blank=True)

    objects = ScopedQuerySet.as_manager()  # readers: objects.of(managed) (models/fleet.py)

    class Meta:
        ordering = ("namespace", "cluster_id")
        constraints = [
            models.UniqueConstraint(fields=("managed", "cluster_id", "namespace"), name="unique_mapping_entry")
        ]

    def __str__(self) -> str:
        return f"{self.namespace}@{self.cluster_id}: {self.desired or '-'} / {self.current_phase or '-'}"
