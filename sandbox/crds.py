"""The openAPIV3Schema of each Liqo CRD the sandbox serves (liqo-semantics.md a.2, a.3, a.6, c.1, c.2), as
the structural schemas the API server prunes, defaults and validates against (`sandbox.strict`).

Transcribed from Liqo's CRDs (deployments/liqo/charts/liqo-crds/crds, v1.0 - v1.2, descriptions left
out). Two simplifications, both on fields the dashboard never reads: VirtualNode `spec.template` (a
Deployment template) and `spec.offloadingPatch.affinity` / `tolerations` keep whatever they are given
(`x-kubernetes-preserve-unknown-fields`) instead of carrying the full core/v1 schemas.

The NamespaceOffloading spec is validated by `liqo_rules.schema.schema_errors` (the dashboard uses
the same rules for its previews), so its node is marked `x-sandbox-validated-elsewhere`: the schema here
prunes it and describes it (the planted-objects test derives a Hypothesis strategy from it) but does not
validate it a second time.
"""

from __future__ import annotations

from typing import Any

from liqo_rules import constants as c

Schema = dict[str, Any]

STRING: Schema = {"type": "string"}
BOOLEAN: Schema = {"type": "boolean"}
INT64: Schema = {"type": "integer", "format": "int64"}
DATE_TIME: Schema = {"type": "string", "format": "date-time"}
DNS1123_LABEL_PATTERN = "^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"
PRESERVE: Schema = {"type": "object", "x-kubernetes-preserve-unknown-fields": True}


def obj(properties: dict[str, Schema], *, required: tuple[str, ...] = (), extra: Schema | None = None) -> Schema:
    out: Schema = {"type": "object", "properties": properties}
    if required:
        out["required"] = list(required)
    out.update(extra or {})
    return out


ATOMIC: Schema = {"x-kubernetes-map-type": "atomic"}


def array(items: Schema, **extra: Any) -> Schema:
    return {"type": "array", "items": items, **extra}


def string_map(values: Schema = STRING) -> Schema:
    return {"type": "object", "additionalProperties": values}


def enum(*values: str, default: str | None = None) -> Schema:
    out: Schema = {"type": "string", "enum": list(values)}
    if default is not None:
        out["default"] = default
    return out


# -- NamespaceOffloading ----------------------------------------------------------------------------
SELECTOR_OPERATORS = ("In", "NotIn", "Exists", "DoesNotExist", "Gt", "Lt")  # documented; the CRD has no enum
NODE_SELECTOR_REQUIREMENT = obj(
    {"key": STRING, "operator": STRING, "values": array(STRING)}, required=("key", "operator")
)
NODE_SELECTOR_TERM = obj(
    {"matchExpressions": array(NODE_SELECTOR_REQUIREMENT), "matchFields": array(NODE_SELECTOR_REQUIREMENT)},
    extra=ATOMIC,
)
NODE_SELECTOR = obj(
    {"nodeSelectorTerms": array(NODE_SELECTOR_TERM)},
    required=("nodeSelectorTerms",),
    extra=ATOMIC,
)
NAMESPACE_OFFLOADING_SPEC = obj(
    {
        "clusterSelector": NODE_SELECTOR,
        "namespaceMappingStrategy": enum(*c.MAPPING_STRATEGIES, default=c.DEFAULT_NAME),
        "podOffloadingStrategy": enum("Local", "Remote", "LocalAndRemote", default="LocalAndRemote"),
        "remoteNamespaceName": STRING,
    },
    extra={"x-sandbox-validated-elsewhere": "liqo_rules.schema.schema_errors"},
)
REMOTE_NAMESPACE_CONDITION = obj(
    {"lastTransitionTime": DATE_TIME, "message": STRING, "reason": STRING, "status": STRING, "type": STRING},
    required=("status", "type"),
)
NAMESPACE_OFFLOADING = obj(
    {
        "apiVersion": STRING,
        "kind": STRING,
        "metadata": {"type": "object"},
        "spec": NAMESPACE_OFFLOADING_SPEC,
        "status": obj(
            {
                "observedGeneration": INT64,
                "offloadingPhase": STRING,
                "remoteNamespaceName": STRING,
                "remoteNamespacesConditions": string_map(array(REMOTE_NAMESPACE_CONDITION)),
            }
        ),
    },
    required=("spec",),
)

# -- NamespaceMap -----------------------------------------------------------------------------------
NAMESPACE_MAP = obj(
    {
        "apiVersion": STRING,
        "kind": STRING,
        "metadata": {"type": "object"},
        "spec": obj({"desiredMapping": string_map()}),
        "status": obj(
            {
                "currentMapping": string_map(
                    obj(
                        {
                            "phase": enum("Accepted", "CreationLoopBackOff", "Terminating"),
                            "remoteNamespace": STRING,
                        }
                    )
                )
            }
        ),
    }
)

# -- ForeignCluster ---------------------------------------------------------------------------------
FC_CONDITION = obj(
    {
        "lastTransitionTime": DATE_TIME,
        "message": STRING,
        "reason": STRING,
        "status": enum("None", "Pending", "Established", "Error", "Ready", "NotReady", "SomeNotReady", default="None"),
        "type": enum(
            "APIServerStatus",
            "NetworkConnectionStatus",
            "NetworkGatewayServerStatus",
            "NetworkGatewayClientStatus",
            "NetworkGatewayPresence",
            "NetworkConfigurationStatus",
            "AuthIdentityControlPlaneStatus",
            "AuthTenantStatus",
            "OffloadingVirtualNodeStatus",
            "OffloadingNodeStatus",
        ),
    },
    required=("status", "type"),
)
FC_MODULE = obj({"conditions": array(FC_CONDITION), "enabled": BOOLEAN}, required=("enabled",))
FOREIGN_CLUSTER = obj(
    {
        "apiVersion": STRING,
        "kind": STRING,
        "metadata": {"type": "object"},
        "spec": obj(
            {
                "clusterID": {
                    "type": "string",
                    "pattern": DNS1123_LABEL_PATTERN,
                    "x-kubernetes-validations": [
                        {"rule": "self == oldSelf", "message": "ClusterID field is immutable"}
                    ],
                }
            },
            required=("clusterID",),
        ),
        "status": obj(
            {
                "apiServerUrl": STRING,
                "conditions": array(FC_CONDITION),
                "foreignProxyUrl": STRING,
                "modules": obj(
                    {"authentication": FC_MODULE, "networking": FC_MODULE, "offloading": FC_MODULE},
                    required=("authentication", "networking", "offloading"),
                ),
                "observedGeneration": INT64,
                "role": enum("Consumer", "Provider", "ConsumerAndProvider", "Unknown", default="Unknown"),
                "tenantNamespace": obj({"local": STRING, "remote": STRING}),
            },
            required=("role",),
        ),
    }
)

# -- VirtualNode ------------------------------------------------------------------------------------
QUANTITY: Schema = {"x-kubernetes-int-or-string": True, "anyOf": [{"type": "integer"}, {"type": "string"}]}
TAINT = obj({"effect": STRING, "key": STRING, "timeAdded": DATE_TIME, "value": STRING}, required=("effect", "key"))
OBJECT_REFERENCE = obj(
    {
        "apiVersion": STRING,
        "fieldPath": STRING,
        "kind": STRING,
        "name": STRING,
        "namespace": STRING,
        "resourceVersion": STRING,
        "uid": STRING,
    },
    extra=ATOMIC,
)
VIRTUAL_NODE = obj(
    {
        "apiVersion": STRING,
        "kind": STRING,
        "metadata": {"type": "object"},
        "spec": obj(
            {
                "annotations": string_map(),
                "clusterID": {"type": "string", "pattern": DNS1123_LABEL_PATTERN},
                "createNode": BOOLEAN,
                "disableNetworkCheck": BOOLEAN,
                "images": array(obj({"names": array(STRING), "sizeBytes": INT64})),
                "ingressClasses": array(
                    obj({"default": BOOLEAN, "ingressClassName": STRING}, required=("ingressClassName",))
                ),
                "kubeconfigSecretRef": obj({"name": {"type": "string", "default": ""}}, extra=ATOMIC),
                "labels": string_map(),
                "loadBalancerClasses": array(
                    obj({"default": BOOLEAN, "loadBalancerClassName": STRING}, required=("loadBalancerClassName",))
                ),
                "offloadingPatch": obj(
                    {
                        "affinity": PRESERVE,
                        "annotationsNotReflected": array(STRING),
                        "labelsNotReflected": array(STRING),
                        "nodeSelector": string_map(),
                        "runtimeClassName": STRING,
                        "tolerations": array(PRESERVE),
                    }
                ),
                "resourceQuota": obj({"hard": string_map(QUANTITY)}),
                "storageClasses": array(
                    obj({"default": BOOLEAN, "storageClassName": STRING}, required=("storageClassName",))
                ),
                "taints": array(TAINT),
                "template": PRESERVE,
                "vkOptionsTemplateRef": OBJECT_REFERENCE,
            }
        ),
        "status": obj(
            {
                "conditions": array(
                    obj(
                        {
                            "lastTransitionTime": DATE_TIME,
                            "message": STRING,
                            "reason": STRING,
                            "status": enum("None", "Running", "Creating", "Draining", "Deleting"),
                            "type": enum("VirtualKubelet", "Node"),
                        },
                        required=("status", "type"),
                    )
                )
            }
        ),
    }
)

# -- ResourceSlice, Tenant, Quota (issue 27; authentication.liqo.io / offloading.liqo.io v1beta1) ------
CLUSTER_ID: Schema = {"type": "string", "pattern": DNS1123_LABEL_PATTERN}
RESOURCE_LIST = string_map(QUANTITY)
RESOURCE_SLICE_CONDITION = obj(
    {
        "lastTransitionTime": DATE_TIME,
        "message": STRING,
        "reason": STRING,
        "status": enum("Accepted", "Denied"),
        "type": enum("Authentication", "Resources"),
    },
    required=("status", "type"),
)
RESOURCE_SLICE = obj(
    {
        "apiVersion": STRING,
        "kind": STRING,
        "metadata": {"type": "object"},
        "spec": obj(
            {
                "class": STRING,
                "consumerClusterID": CLUSTER_ID,
                "csr": {"type": "string", "format": "byte"},
                "providerClusterID": CLUSTER_ID,
                "resources": RESOURCE_LIST,
            }
        ),
        "status": obj(
            {
                "authParams": PRESERVE,
                "conditions": array(RESOURCE_SLICE_CONDITION),
                "ingressClasses": array(PRESERVE),
                "loadBalancerClasses": array(PRESERVE),
                "nodeLabels": string_map(),
                "nodeSelector": string_map(),
                "resources": RESOURCE_LIST,
                "storageClasses": array(PRESERVE),
            }
        ),
    }
)
TENANT = obj(
    {
        "apiVersion": STRING,
        "kind": STRING,
        "metadata": {"type": "object"},
        "spec": obj(
            {
                "authzPolicy": enum("KeysExchange", "TolerateNoHandshake", default="KeysExchange"),
                "clusterID": CLUSTER_ID,
                "csr": {"type": "string", "format": "byte"},
                "proxyURL": STRING,
                "publicKey": {"type": "string", "format": "byte"},
                "signature": {"type": "string", "format": "byte"},
                "tenantCondition": enum("Active", "Cordoned", "Drained", default="Active"),
            }
        ),
        "status": obj({"authParams": PRESERVE, "tenantNamespace": STRING}),
    }
)
QUOTA = obj(
    {
        "apiVersion": STRING,
        "kind": STRING,
        "metadata": {"type": "object"},
        "spec": obj(
            {
                "cordoned": BOOLEAN,
                "limitsEnforcement": enum("Hard", "Soft", "None"),
                "resources": RESOURCE_LIST,
                "user": {"type": "string", "minLength": 1},
            },
            required=("resources", "user"),
        ),
    },
    required=("spec",),
)

# The schemas by the sandbox's kind key (`<plural>.<group>`).
SCHEMAS: dict[str, Schema] = {
    "namespaceoffloadings.offloading.liqo.io": NAMESPACE_OFFLOADING,
    "namespacemaps.offloading.liqo.io": NAMESPACE_MAP,
    "foreignclusters.core.liqo.io": FOREIGN_CLUSTER,
    "virtualnodes.offloading.liqo.io": VIRTUAL_NODE,
    "resourceslices.authentication.liqo.io": RESOURCE_SLICE,
    "tenants.authentication.liqo.io": TENANT,
    "quotas.offloading.liqo.io": QUOTA,
}
