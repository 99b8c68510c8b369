"""Pods and Events of offloaded namespaces, followed by the watcher (offloading.snapshot.inventory)."""

from __future__ import annotations

from django.db import models
from django.utils import timezone

from offloading.models.fleet import ManagedClusterKey, ScopedQuerySet


class Pod(models.Model):
    """A pod of an offloaded namespace as last seen: where it runs (a local node or a peer's virtual
    node) and what it asks for. Only offloaded namespaces are followed."""

    managed = ManagedClusterKey(db_index=False)
    namespace = models.CharField(max_length=63, db_index=True)
    name = models.CharField(max_length=253)
    uid = models.CharField(max_length=64, blank=True)
    node_name = models.CharField(max_length=253, blank=True)
    cluster_id = models.CharField(max_length=63, blank=True, db_index=True)  # empty: local (or not scheduled)
    phase = models.CharField(max_length=32, blank=True)
    reason = models.CharField(max_length=253, blank=True)
    owner_kind = models.CharField(max_length=64, blank=True)  # its controller (ReplicaSet, DaemonSet...)
    owner_name = models.CharField(max_length=253, blank=True)
    cpu_millis = models.PositiveBigIntegerField(default=0)
    memory_bytes = models.PositiveBigIntegerField(default=0)
    refreshed_at = models.DateTimeField(default=timezone.now)

    objects = ScopedQuerySet.as_manager()  # readers: objects.of(managed) (models/fleet.py)

    class Meta:
        constraints = [models.UniqueConstraint(fields=("managed", "namespace", "name"), name="pod_namespace_name")]
        ordering = ("namespace", "name")

    def __str__(self) -> str:
        return f"{self.namespace}/{self.name} on {self.node_name or '(unscheduled)'}"


def event_subject_namespace(involved: dict[str, object], recorded_in: str) -> str:
    """The namespace an Event is about, whatever namespace it is recorded in: client-go records the
    Events about a Namespace (a cluster-scoped object) in ``default``, with ``involvedObject.kind:
    Namespace`` and the namespace's name in ``involvedObject.name``; an Event about a namespaced object
    (a NamespaceOffloading) is about ``involvedObject.namespace``."""
    kind, name, namespace = (str(involved.get(key) or "") for key in ("kind", "name", "namespace"))
    if kind == "Namespace":
        return name
    return namespace or recorded_in


class KubeEvent(models.Model):
    """A Kubernetes Event about a NamespaceOffloading or a Namespace (Liqo's warnings among them), filed
    under the namespace it is about (``namespace``, see ``event_subject_namespace``), not the one it is
    recorded in (``recorded_in``)."""

    managed = ManagedClusterKey(db_index=False)
    uid = models.CharField(max_length=64)
    namespace = models.CharField(max_length=63, db_index=True)  # the namespace the event is about
    recorded_in = models.CharField(max_length=63, blank=True)  # the Event object's own namespace
    involved_kind = models.CharField(max_length=64)
    involved_name = models.CharField(max_length=253)
    type = models.CharField(max_length=16)
    reason = models.CharField(max_length=128, blank=True)
    message = models.TextField(blank=True)
    count = models.PositiveIntegerField(default=1)
    first_time = models.DateTimeField(null=True, blank=True)
    last_time = models.DateTimeField(null=True, blank=True, db_index=True)

    objects = ScopedQuerySet.as_manager()  # readers: objects.of(managed) (models/fleet.py)

    class Meta:
        ordering = ("-last_time",)
        # The latest events of one managed cluster (objects.of; the overview's warnings).
        indexes = [models.Index(fields=("managed", "last_time"), name="events_latest_per_cluster")]
        constraints = [models.UniqueConstraint(fields=("managed", "uid"), name="unique_event_per_cluster")]

    def __str__(self) -> str:
        return f"{self.type} {self.reason} {self.involved_kind}/{self.involved_name}"


class LiqoResource(models.Model):
    """A ResourceSlice, Tenant or Quota, or the controller manager's Deployment (issue 27), as last seen:
    only what the pages read (offloading.snapshot.liqo_resources)."""

    managed = ManagedClusterKey(db_index=False)
    kind = models.CharField(max_length=32)  # resourceslices | tenants | quotas | deployments
    namespace = models.CharField(max_length=253)
    name = models.CharField(max_length=253)
    cluster_id = models.CharField(max_length=63, blank=True, db_index=True)
    data = models.JSONField(default=dict)
    refreshed_at = models.DateTimeField(default=timezone.now)

    objects = ScopedQuerySet.as_manager()  # readers: objects.of(managed) (models/fleet.py)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=("managed", "kind", "namespace", "name"), name="liqo_resource_key")
        ]
        ordering = ("kind", "cluster_id", "name")

    def __str__(self) -> str:
        return f"{self.kind} {self.namespace}/{self.name}"
