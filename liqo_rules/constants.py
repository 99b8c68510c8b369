"""Liqo and Kubernetes constants used by the dashboard (see liqo-semantics.md section 0 and a.3)."""

from __future__ import annotations

GROUP = "offloading.liqo.io"
VERSION = "v1beta1"
API_VERSION = f"{GROUP}/{VERSION}"
KIND = "NamespaceOffloading"
PLURAL = "namespaceoffloadings"
OFFLOADING_NAME = "offloading"
FINALIZER = "namespaceoffloading-controller.liqo.io/finalizer"

SCHEDULING_LABEL = "liqo.io/scheduling-enabled"
VIRTUAL_NODE_TYPE_LABEL = "liqo.io/type"
VIRTUAL_NODE_TYPE_VALUE = "virtual-node"
REMOTE_CLUSTER_ID_LABEL = "liqo.io/remote-cluster-id"
STORAGE_AVAILABLE_LABEL = "storage.liqo.io/available"
WEBHOOK_SKIP_LABEL = "liqo.io/webhook-skip"
REPLICATION_LABEL = "liqo.io/replication"
REMOTE_ID_LABEL = "liqo.io/remoteID"
RESOURCESLICE_LABEL = "liqo.io/resourceslice-name"
TENANT_NAMESPACE_LABEL = "liqo.io/tenant-namespace"
CLUSTER_PROVIDER_LABEL = "liqo.io/provider"

VIRTUAL_NODE_TAINT_KEY = "virtual-node.liqo.io/not-allowed"
VIRTUAL_NODE_TAINT_VALUE = "true"
VIRTUAL_NODE_TAINT_EFFECT = "NoExecute"
VIRTUAL_NODE_TOLERATION: dict[str, str] = {
    "key": VIRTUAL_NODE_TAINT_KEY,
    "operator": "Exists",
    "effect": VIRTUAL_NODE_TAINT_EFFECT,
}
LIQO_RUNTIME_CLASS = "liqo"
TENANT_NAMESPACE_PREFIX = "liqo-tenant-"

SKIP_REFLECTION_ANNOTATION = "liqo.io/skip-reflection"
ALLOW_REFLECTION_ANNOTATION = "liqo.io/allow-reflection"
ANTI_AFFINITY_PRESET_ANNOTATION = "liqo.io/anti-affinity-preset"
ANTI_AFFINITY_LABELS_ANNOTATION = "liqo.io/anti-affinity-labels"
SHADOW_POD_LABEL = "liqo.io/shadowPod"
LOCAL_POD_NODE_NAME_LABEL = "offloading.liqo.io/nodename"
MANAGED_BY_NAMESPACE_MAP_ANNOTATION = "liqo.io/managed-by-namespace-map"
ORIGINAL_NAME_ANNOTATION = "liqo.io/original-name"

# Mapping strategies (namespaceMappingStrategy), in CRD enum order.
ENFORCE_SAME_NAME = "EnforceSameName"
DEFAULT_NAME = "DefaultName"
SELECTED_NAME = "SelectedName"
MAPPING_STRATEGIES = (ENFORCE_SAME_NAME, DEFAULT_NAME, SELECTED_NAME)
DEFAULT_MAPPING_STRATEGY = DEFAULT_NAME

# Pod offloading strategies (podOffloadingStrategy).
LOCAL_AND_REMOTE = "LocalAndRemote"
LOCAL = "Local"
REMOTE = "Remote"
POD_STRATEGIES = (LOCAL_AND_REMOTE, LOCAL, REMOTE)
DEFAULT_POD_STRATEGY = LOCAL_AND_REMOTE

# status.offloadingPhase values.
PHASE_READY = "Ready"
PHASE_NO_CLUSTER_SELECTED = "NoClusterSelected"
PHASE_IN_PROGRESS = "InProgress"
PHASE_SOME_FAILED = "SomeFailed"
PHASE_ALL_FAILED = "AllFailed"
PHASE_TERMINATING = "Terminating"
PHASES = (
    PHASE_READY,
    PHASE_NO_CLUSTER_SELECTED,
    PHASE_IN_PROGRESS,
    PHASE_SOME_FAILED,
    PHASE_ALL_FAILED,
    PHASE_TERMINATING,
)

# NamespaceMap status.currentMapping[ns].phase values.
MAPPING_ACCEPTED = "Accepted"
MAPPING_CREATION_LOOP_BACKOFF = "CreationLoopBackOff"
MAPPING_TERMINATING = "Terminating"
MAPPING_PHASES = (MAPPING_ACCEPTED, MAPPING_CREATION_LOOP_BACKOFF, MAPPING_TERMINATING)

# RemoteNamespaceCondition types, reasons and messages (liqo-semantics.md a.3).
CONDITION_OFFLOADING_REQUIRED = "OffloadingRequired"
CONDITION_READY = "Ready"
REASON_CLUSTER_SELECTED = "ClusterSelected"
REASON_CLUSTER_NOT_SELECTED = "ClusterNotSelected"
REASON_NAMESPACE_CREATED = "NamespaceCreated"
REASON_CREATION_LOOP_BACKOFF = "CreationLoopBackOff"
REASON_TERMINATING = "Terminating"
REASON_CREATING = "Creating"
MESSAGE_CLUSTER_SELECTED = "The remote cluster has been selected through the ClusterSelector field"
MESSAGE_CLUSTER_NOT_SELECTED = "The remote cluster has not been selected through the ClusterSelector field"
MESSAGE_NAMESPACE_CREATED = "Namespace correctly offloaded to the remote cluster"
MESSAGE_CREATION_LOOP_BACKOFF = "Some problems occurred during remote namespace creation"
MESSAGE_TERMINATING = "The remote namespace is being deleted"
MESSAGE_CREATING = "The remote namespace is being created"

# Validating webhook messages (liqo-semantics.md b.2).
WEBHOOK_NAME_MESSAGE = f"NamespaceOffloading name must match {OFFLOADING_NAME}"
WEBHOOK_SELECTED_NAME_EMPTY_MESSAGE = (
    "The RemoteNamespaceName value cannot be empty when using the SelectedName NamespaceMappingStrategy"
)
WEBHOOK_MAPPING_IMMUTABLE_MESSAGE = "The NamespaceMappingStrategy value cannot be modified after creation"
WEBHOOK_REMOTE_NAME_IMMUTABLE_MESSAGE = "The RemoteNamespaceName value cannot be modified after creation"
WEBHOOK_RESTRICTIVE_POD_STRATEGY_WARNING = (
    "The PodOffloadingStrategy was mutated to a more restrictive setting: "
    "existing pods violating this policy might still be running"
)

# The validating webhook of NamespaceOffloadings (its name appears in the API server's denial message).
WEBHOOK_NAME = "nsoff.validate.liqo.io"

# Controller event for an invalid selector (liqo-semantics.md a.5).
INVALID_SELECTOR_EVENT_REASON = "Invalid"
INVALID_SELECTOR_EVENT_PREFIX = "Invalid ClusterSelector: "

# Namespaces every Kubernetes cluster has besides "default", and the one Liqo is installed in.
KUBERNETES_SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
LIQO_NAMESPACE = "liqo"
# Namespaces that the dashboard refuses to offload (Liqo itself does not check this).
SYSTEM_NAMESPACES = (*KUBERNETES_SYSTEM_NAMESPACES, LIQO_NAMESPACE, "liqo-system")

# NodeSelectorRequirement operators.
OP_IN = "In"
OP_NOT_IN = "NotIn"
OP_EXISTS = "Exists"
OP_DOES_NOT_EXIST = "DoesNotExist"
OP_GT = "Gt"
OP_LT = "Lt"
NODE_SELECTOR_OPERATORS = (OP_IN, OP_NOT_IN, OP_EXISTS, OP_DOES_NOT_EXIST, OP_GT, OP_LT)
METADATA_NAME_FIELD = "metadata.name"

# The field manager of Liqo's controller-manager (its writes are status and finalizers, not intent).
CONTROLLER_MANAGER = "liqo-controller-manager"

# Labels the virtual kubelet puts on every virtual Node (liqo-semantics.md c.3): they never tell one
# peered cluster from another.
VIRTUAL_NODE_STANDARD_LABELS = (
    "kubernetes.io/hostname",
    "kubernetes.io/role",
    "kubernetes.io/os",
    "kubernetes.io/arch",
    "type",
    "liqo.io/type",
    "liqo.io/remote-cluster-id",
    "node.kubernetes.io/exclude-from-external-load-balancers",
    "alpha.service-controller.kubernetes.io/exclude-balancer",
)
