"""The app's tables, one module per kind of data: the snapshot (observed state), the ChangeRequest outbox
(desired state), the sealed audit trail, alerts, the inventory of pods, events and Liqo resources, the
NamespaceMaps and the live pages' version counters."""

from offloading.models.alerts import Alert
from offloading.models.audit import AuditChainHead, AuditCheckpoint, AuditEvent
from offloading.models.changes import BulkRequest, BulkRequestQuerySet, ChangeRequest
from offloading.models.governance import Approval, ApprovalDecision, Schedule
from offloading.models.inventory import KubeEvent, LiqoResource, Pod
from offloading.models.live import LiveVersion
from offloading.models.managed import ManagedCluster
from offloading.models.mapping import MappingEntry, PeerNamespaceMap
from offloading.models.snapshot import (
    Cluster,
    ClusterOffloading,
    Namespace,
    SnapshotState,
    StatusTransition,
    VirtualNode,
    generation_lags,
)

__all__ = [
    "Alert",
    "Approval",
    "ApprovalDecision",
    "AuditChainHead",
    "AuditCheckpoint",
    "AuditEvent",
    "BulkRequest",
    "BulkRequestQuerySet",
    "ChangeRequest",
    "Cluster",
    "ClusterOffloading",
    "KubeEvent",
    "LiqoResource",
    "LiveVersion",
    "ManagedCluster",
    "MappingEntry",
    "Namespace",
    "PeerNamespaceMap",
    "Pod",
    "Schedule",
    "SnapshotState",
    "StatusTransition",
    "VirtualNode",
    "generation_lags",
]
