"""The resource types the sandbox API server serves, with their discovery metadata.

One `Kind` per served resource. Discovery documents, URL routing, printer columns (kubectl tables), the
allowed field selectors and the per-type update rules (status subresource, generation) all come from here.
"""

from __future__ import annotations

from dataclasses import dataclass, field

ALL_VERBS = ("create", "delete", "deletecollection", "get", "list", "patch", "update", "watch")
READ_ONLY = ("get", "list", "watch")


@dataclass(frozen=True)
class Column:
    """A kubectl table column: `path` is a dotted JSON path or a special `@name` computed by the server."""

    name: str
    path: str
    type: str = "string"
    priority: int = 0
    description: str = ""


@dataclass(frozen=True)
class Kind:
    group: str
    version: str
    kind: str
    plural: str
    singular: str
    namespaced: bool
    short_names: tuple[str, ...] = ()
    categories: tuple[str, ...] = ()
    verbs: tuple[str, ...] = ALL_VERBS
    status_subresource: bool = False
    # Whether metadata.generation is maintained (bumped on spec changes only).
    generation: bool = False
    # Create-only kinds (access reviews): nothing is stored.
    virtual: bool = False
    columns: tuple[Column, ...] = ()
    field_selectors: tuple[str, ...] = ()
    custom: bool = False  # a CRD: lists carry apiVersion/kind on every item

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}" if self.group else self.version

    @property
    def list_kind(self) -> str:
        return self.kind + "List"

    @property
    def key(self) -> str:
        """Stable identifier, e.g. `namespaces` or `namespaceoffloadings.offloading.liqo.io`."""
        return f"{self.plural}.{self.group}" if self.group else self.plural

    @property
    def qualified(self) -> str:
        """The resource name used in error messages (`namespaceoffloadings.offloading.liqo.io`)."""
        return self.key

    def allowed_field_selectors(self) -> tuple[str, ...]:
        base = ("metadata.name", "metadata.namespace") if self.namespaced else ("metadata.name",)
        return base + self.field_selectors


AGE = Column("Age", "@age", "date")

NAMESPACES = Kind(
    "",
    "v1",
    "Namespace",
    "namespaces",
    "namespace",
    False,
    ("ns",),
    verbs=("create", "delete", "get", "list", "patch", "update", "watch"),
    status_subresource=True,
    columns=(Column("Status", "status.phase"), AGE),
    field_selectors=("status.phase",),
)
NODES = Kind(
    "",
    "v1",
    "Node",
    "nodes",
    "node",
    False,
    ("no",),
    status_subresource=True,
    columns=(
        Column("Status", "@node_status"),
        Column("Roles", "@node_roles"),
        AGE,
        Column("Version", "status.nodeInfo.kubeletVersion"),
        Column("Internal-IP", "@node_ip", priority=1),
        Column("OS-Image", "status.nodeInfo.osImage", priority=1),
    ),
    field_selectors=("spec.unschedulable",),
)
PODS = Kind(
    "",
    "v1",
    "Pod",
    "pods",
    "pod",
    True,
    ("po",),
    ("all",),
    status_subresource=True,
    generation=True,
    columns=(
        Column("Ready", "@pod_ready"),
        Column("Status", "status.phase"),
        Column("Restarts", "@pod_restarts", "integer"),
        AGE,
        Column("IP", "status.podIP", priority=1),
        Column("Node", "spec.nodeName", priority=1),
    ),
    field_selectors=(
        "spec.nodeName",
        "spec.restartPolicy",
        "spec.schedulerName",
        "spec.serviceAccountName",
        "status.phase",
        "status.podIP",
        "status.nominatedNodeName",
    ),
)
EVENTS = Kind(
    "",
    "v1",
    "Event",
    "events",
    "event",
    True,
    ("ev",),
    columns=(
        Column("Last Seen", "@event_last_seen"),
        Column("Type", "type"),
        Column("Reason", "reason"),
        Column("Object", "@event_object"),
        Column("Message", "message"),
    ),
    field_selectors=(
        "involvedObject.kind",
        "involvedObject.namespace",
        "involvedObject.name",
        "involvedObject.uid",
        "involvedObject.apiVersion",
        "involvedObject.resourceVersion",
        "involvedObject.fieldPath",
        "reason",
        "reportingComponent",
        "source",
        "type",
    ),
)
LEASES = Kind(
    "coordination.k8s.io",
    "v1",
    "Lease",
    "leases",
    "lease",
    True,
    columns=(Column("Holder", "spec.holderIdentity"), AGE),
)
CONFIG_MAPS = Kind("", "v1", "ConfigMap", "configmaps", "configmap", True, ("cm",), columns=(AGE,))
# What Liqo reflects besides pods (the dashboard reads them for the namespace page's reflection section).
SECRETS = Kind(
    "", "v1", "Secret", "secrets", "secret", True, columns=(Column("Type", "type"), AGE), field_selectors=("type",)
)
SERVICES = Kind("", "v1", "Service", "services", "service", True, ("svc",), ("all",), columns=(AGE,))
SERVICE_ACCOUNTS = Kind("", "v1", "ServiceAccount", "serviceaccounts", "serviceaccount", True, ("sa",), columns=(AGE,))
FOREIGN_CLUSTERS = Kind(
    "core.liqo.io",
    "v1beta1",
    "ForeignCluster",
    "foreignclusters",
    "foreigncluster",
    False,
    ("fc",),
    ("liqo",),
    status_subresource=True,
    generation=True,
    custom=True,
    columns=(
        Column("Role", "status.role"),
        Column("ClusterID", "spec.clusterID", priority=1),
        AGE,
    ),
)
NAMESPACE_OFFLOADINGS = Kind(
    "offloading.liqo.io",
    "v1beta1",
    "NamespaceOffloading",
    "namespaceoffloadings",
    "namespaceoffloading",
    True,
    ("nso", "nsof", "nsoff", "nsoffloading"),
    ("liqo",),
    status_subresource=True,
    generation=True,
    custom=True,
    columns=(
        Column("NamespaceMappingStrategy", "spec.namespaceMappingStrategy"),
        Column("PodOffloadingStrategy", "spec.podOffloadingStrategy"),
        Column("OffloadingPhase", "status.offloadingPhase"),
        Column("RemoteNamespaceName", "status.remoteNamespaceName", priority=10),
        AGE,
    ),
)
VIRTUAL_NODES = Kind(
    "offloading.liqo.io",
    "v1beta1",
    "VirtualNode",
    "virtualnodes",
    "virtualnode",
    True,
    ("vn", "vnode", "virno", "vno"),
    ("liqo",),
    status_subresource=True,
    generation=True,
    custom=True,
    columns=(
        Column("ClusterID", "spec.clusterID"),
        Column("Create Node", "spec.createNode", "boolean"),
        AGE,
        Column("Node", "@vn_condition_Node"),
        Column("VirtualKubelet", "@vn_condition_VirtualKubelet"),
    ),
)
NAMESPACE_MAPS = Kind(
    "offloading.liqo.io",
    "v1beta1",
    "NamespaceMap",
    "namespacemaps",
    "namespacemap",
    True,
    ("nm", "nsmap"),
    ("liqo",),
    status_subresource=True,
    generation=True,
    custom=True,
    columns=(AGE,),
)
# Resource slices, tenants and quotas decide whether a peer takes pods (issue 27, liqo_rules.tenancy).
RESOURCE_SLICES = Kind(
    "authentication.liqo.io",
    "v1beta1",
    "ResourceSlice",
    "resourceslices",
    "resourceslice",
    True,
    ("rslice",),
    ("liqo",),
    status_subresource=True,
    generation=True,
    custom=True,
    columns=(
        Column("Authentication", "@vn_condition_Authentication"),
        Column("Resources", "@vn_condition_Resources"),
        AGE,
    ),
)
TENANTS = Kind(
    "authentication.liqo.io",
    "v1beta1",
    "Tenant",
    "tenants",
    "tenant",
    True,
    ("tn",),
    ("liqo",),
    status_subresource=True,
    generation=True,
    custom=True,
    columns=(Column("Condition", "spec.tenantCondition"), AGE),
)
QUOTAS = Kind(
    "offloading.liqo.io",
    "v1beta1",
    "Quota",
    "quotas",
    "quota",
    True,
    ("qt",),
    ("liqo",),
    generation=True,
    custom=True,
    columns=(
        Column("Enforcement", "spec.limitsEnforcement"),
        Column("Cordoned", "spec.cordoned", "boolean"),
        AGE,
        Column("User", "spec.user", priority=1),
    ),
)
# The controller manager's Deployment: its image tag is the installed Liqo version (liqoctl info).
DEPLOYMENTS = Kind(
    "apps",
    "v1",
    "Deployment",
    "deployments",
    "deployment",
    True,
    ("deploy",),
    ("all",),
    status_subresource=True,
    generation=True,
    columns=(AGE,),
)
SELF_SUBJECT_ACCESS_REVIEWS = Kind(
    "authorization.k8s.io",
    "v1",
    "SelfSubjectAccessReview",
    "selfsubjectaccessreviews",
    "selfsubjectaccessreview",
    False,
    verbs=("create",),
    virtual=True,
)
SUBJECT_ACCESS_REVIEWS = Kind(
    "authorization.k8s.io",
    "v1",
    "SubjectAccessReview",
    "subjectaccessreviews",
    "subjectaccessreview",
    False,
    verbs=("create",),
    virtual=True,
)

KINDS: tuple[Kind, ...] = (
    NAMESPACES,
    NODES,
    PODS,
    EVENTS,
    LEASES,
    CONFIG_MAPS,
    SECRETS,
    SERVICES,
    SERVICE_ACCOUNTS,
    FOREIGN_CLUSTERS,
    NAMESPACE_OFFLOADINGS,
    VIRTUAL_NODES,
    NAMESPACE_MAPS,
    RESOURCE_SLICES,
    TENANTS,
    QUOTAS,
    DEPLOYMENTS,
    SELF_SUBJECT_ACCESS_REVIEWS,
    SUBJECT_ACCESS_REVIEWS,
)
STORED_KINDS: tuple[Kind, ...] = tuple(k for k in KINDS if not k.virtual)
BY_KEY: dict[str, Kind] = {k.key: k for k in KINDS}


@dataclass
class GroupVersion:
    group: str
    version: str
    kinds: list[Kind] = field(default_factory=list)


def group_versions() -> list[GroupVersion]:
    """Served group/versions in discovery order (legacy core group first)."""
    out: dict[tuple[str, str], GroupVersion] = {}
    for kind in KINDS:
        out.setdefault((kind.group, kind.version), GroupVersion(kind.group, kind.version)).kinds.append(kind)
    return list(out.values())


def lookup(group: str, version: str, plural: str) -> Kind | None:
    for kind in KINDS:
        if kind.group == group and kind.version == version and kind.plural == plural:
            return kind
    return None
