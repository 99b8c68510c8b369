"""The protobuf messages the sandbox decodes, by field number, as Kubernetes' generated.proto files number
them (k8s.io/api core/v1, apps/v1, authorization/v1; apimachinery meta/v1, runtime, resource, intstr).

Each message maps a field number to its JSON name and type. Scalar types: `string`, `bytes` (base64 in
JSON), `int` and `bool` (a Go pointer: a zero that was sent is kept), `count` and `flag` (a plain Go value:
zero means unset and is dropped), `quantity`, `intstr`, `time` and `fieldsV1` (meta/v1's wrapped
values). Only the kinds the sandbox serves and kubectl's typed clients send are listed (`KINDS`), and of
the big ones (Deployment's pod template) the fields `kubectl create` fills in and their common
neighbours; `sandbox.protobuf` refuses a field that is not here but carries a value.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Union


@dataclass(frozen=True)
class Message:
    name: str
    fields: dict[int, tuple[str, Type]]


@dataclass(frozen=True)
class Repeated:
    item: Type


@dataclass(frozen=True)
class Map:
    """A `map<string, value>`: repeated entries {1: key, 2: value}."""

    value: Type


Type = Union[str, Message, Repeated, Map]  # noqa: UP007 - a runtime alias used before the classes settle


def _strings(name: str, *names: str) -> Message:
    """A message of string fields numbered 1, 2, ... in this order."""
    return Message(name, {number: (field, "string") for number, field in enumerate(names, 1)})


# -- apimachinery: meta/v1 ----------------------------------------------------------------------------
OWNER_REFERENCE = Message(
    "OwnerReference",
    {
        1: ("kind", "string"),
        3: ("name", "string"),
        4: ("uid", "string"),
        5: ("apiVersion", "string"),
        6: ("controller", "bool"),
        7: ("blockOwnerDeletion", "bool"),
    },
)
MANAGED_FIELDS_ENTRY = Message(
    "ManagedFieldsEntry",
    {
        1: ("manager", "string"),
        2: ("operation", "string"),
        3: ("apiVersion", "string"),
        4: ("time", "time"),
        6: ("fieldsType", "string"),
        7: ("fieldsV1", "fieldsV1"),
        8: ("subresource", "string"),
    },
)
OBJECT_META = Message(
    "ObjectMeta",
    {
        1: ("name", "string"),
        2: ("generateName", "string"),
        3: ("namespace", "string"),
        4: ("selfLink", "string"),
        5: ("uid", "string"),
        6: ("resourceVersion", "string"),
        7: ("generation", "count"),
        8: ("creationTimestamp", "time"),
        9: ("deletionTimestamp", "time"),
        10: ("deletionGracePeriodSeconds", "int"),
        11: ("labels", Map("string")),
        12: ("annotations", Map("string")),
        13: ("ownerReferences", Repeated(OWNER_REFERENCE)),
        14: ("finalizers", Repeated("string")),
        17: ("managedFields", Repeated(MANAGED_FIELDS_ENTRY)),
    },
)
LABEL_SELECTOR = Message(
    "LabelSelector",
    {
        1: ("matchLabels", Map("string")),
        2: (
            "matchExpressions",
            Repeated(
                Message(
                    "LabelSelectorRequirement",
                    {1: ("key", "string"), 2: ("operator", "string"), 3: ("values", Repeated("string"))},
                )
            ),
        ),
    },
)

# -- core/v1 ------------------------------------------------------------------------------------------
OBJECT_REFERENCE = _strings(
    "ObjectReference", "kind", "namespace", "name", "uid", "apiVersion", "resourceVersion", "fieldPath"
)
LOCAL_OBJECT_REFERENCE = _strings("LocalObjectReference", "name")

NAMESPACE = Message(
    "Namespace",
    {
        1: ("metadata", OBJECT_META),
        2: ("spec", Message("NamespaceSpec", {1: ("finalizers", Repeated("string"))})),
        3: ("status", Message("NamespaceStatus", {1: ("phase", "string")})),
    },
)
CONFIG_MAP = Message(
    "ConfigMap",
    {
        1: ("metadata", OBJECT_META),
        2: ("data", Map("string")),
        3: ("binaryData", Map("bytes")),
        4: ("immutable", "bool"),
    },
)
SECRET = Message(
    "Secret",
    {
        1: ("metadata", OBJECT_META),
        2: ("data", Map("bytes")),
        3: ("type", "string"),
        4: ("stringData", Map("string")),
        5: ("immutable", "bool"),
    },
)
SERVICE_ACCOUNT = Message(
    "ServiceAccount",
    {
        1: ("metadata", OBJECT_META),
        2: ("secrets", Repeated(OBJECT_REFERENCE)),
        3: ("imagePullSecrets", Repeated(LOCAL_OBJECT_REFERENCE)),
        4: ("automountServiceAccountToken", "bool"),
    },
)

SERVICE_PORT = Message(
    "ServicePort",
    {
        1: ("name", "string"),
        2: ("protocol", "string"),
        3: ("port", "count"),
        4: ("targetPort", "intstr"),
        5: ("nodePort", "count"),
        6: ("appProtocol", "string"),
    },
)
SERVICE_SPEC = Message(
    "ServiceSpec",
    {
        1: ("ports", Repeated(SERVICE_PORT)),
        2: ("selector", Map("string")),
        3: ("clusterIP", "string"),
        4: ("type", "string"),
        5: ("externalIPs", Repeated("string")),
        7: ("sessionAffinity", "string"),
        8: ("loadBalancerIP", "string"),
        9: ("loadBalancerSourceRanges", Repeated("string")),
        10: ("externalName", "string"),
        11: ("externalTrafficPolicy", "string"),
        12: ("healthCheckNodePort", "count"),
        13: ("publishNotReadyAddresses", "flag"),
        17: ("ipFamilyPolicy", "string"),
        18: ("clusterIPs", Repeated("string")),
        19: ("ipFamilies", Repeated("string")),
        20: ("allocateLoadBalancerNodePorts", "bool"),
        21: ("loadBalancerClass", "string"),
        22: ("internalTrafficPolicy", "string"),
        23: ("trafficDistribution", "string"),
    },
)
SERVICE = Message("Service", {1: ("metadata", OBJECT_META), 2: ("spec", SERVICE_SPEC)})

RESOURCES = Message("ResourceRequirements", {1: ("limits", Map("quantity")), 2: ("requests", Map("quantity"))})
CONTAINER_PORT = Message(
    "ContainerPort",
    {
        1: ("name", "string"),
        2: ("hostPort", "count"),
        3: ("containerPort", "count"),
        4: ("protocol", "string"),
        5: ("hostIP", "string"),
    },
)
ENV_VAR = Message("EnvVar", {1: ("name", "string"), 2: ("value", "string")})
CONTAINER = Message(
    "Container",
    {
        1: ("name", "string"),
        2: ("image", "string"),
        3: ("command", Repeated("string")),
        4: ("args", Repeated("string")),
        5: ("workingDir", "string"),
        6: ("ports", Repeated(CONTAINER_PORT)),
        7: ("env", Repeated(ENV_VAR)),
        8: ("resources", RESOURCES),
        13: ("terminationMessagePath", "string"),
        14: ("imagePullPolicy", "string"),
        16: ("stdin", "flag"),
        17: ("stdinOnce", "flag"),
        18: ("tty", "flag"),
        20: ("terminationMessagePolicy", "string"),
    },
)
POD_SPEC = Message(
    "PodSpec",
    {
        2: ("containers", Repeated(CONTAINER)),
        3: ("restartPolicy", "string"),
        4: ("terminationGracePeriodSeconds", "int"),
        6: ("dnsPolicy", "string"),
        7: ("nodeSelector", Map("string")),
        8: ("serviceAccountName", "string"),
        9: ("serviceAccount", "string"),
        10: ("nodeName", "string"),
        11: ("hostNetwork", "flag"),
        12: ("hostPID", "flag"),
        13: ("hostIPC", "flag"),
        15: ("imagePullSecrets", Repeated(LOCAL_OBJECT_REFERENCE)),
        16: ("hostname", "string"),
        17: ("subdomain", "string"),
        19: ("schedulerName", "string"),
        20: ("initContainers", Repeated(CONTAINER)),
        21: ("automountServiceAccountToken", "bool"),
        24: ("priorityClassName", "string"),
        29: ("runtimeClassName", "string"),
        31: ("preemptionPolicy", "string"),
    },
)
POD_TEMPLATE_SPEC = Message("PodTemplateSpec", {1: ("metadata", OBJECT_META), 2: ("spec", POD_SPEC)})

# -- apps/v1 ------------------------------------------------------------------------------------------
DEPLOYMENT_STRATEGY = Message(
    "DeploymentStrategy",
    {
        1: ("type", "string"),
        2: (
            "rollingUpdate",
            Message("RollingUpdateDeployment", {1: ("maxUnavailable", "intstr"), 2: ("maxSurge", "intstr")}),
        ),
    },
)
DEPLOYMENT = Message(
    "Deployment",
    {
        1: ("metadata", OBJECT_META),
        2: (
            "spec",
            Message(
                "DeploymentSpec",
                {
                    1: ("replicas", "int"),
                    2: ("selector", LABEL_SELECTOR),
                    3: ("template", POD_TEMPLATE_SPEC),
                    4: ("strategy", DEPLOYMENT_STRATEGY),
                    5: ("minReadySeconds", "count"),
                    6: ("revisionHistoryLimit", "int"),
                    7: ("paused", "flag"),
                    9: ("progressDeadlineSeconds", "int"),
                },
            ),
        ),
    },
)

# -- authorization/v1 ---------------------------------------------------------------------------------
RESOURCE_ATTRIBUTES = _strings(
    "ResourceAttributes", "namespace", "verb", "group", "version", "resource", "subresource", "name"
)
NON_RESOURCE_ATTRIBUTES = _strings("NonResourceAttributes", "path", "verb")
SELF_SUBJECT_ACCESS_REVIEW = Message(
    "SelfSubjectAccessReview",
    {
        1: ("metadata", OBJECT_META),
        2: (
            "spec",
            Message(
                "SelfSubjectAccessReviewSpec",
                {1: ("resourceAttributes", RESOURCE_ATTRIBUTES), 2: ("nonResourceAttributes", NON_RESOURCE_ATTRIBUTES)},
            ),
        ),
    },
)
SUBJECT_ACCESS_REVIEW = Message(
    "SubjectAccessReview",
    {
        1: ("metadata", OBJECT_META),
        2: (
            "spec",
            Message(
                "SubjectAccessReviewSpec",
                {
                    1: ("resourceAttributes", RESOURCE_ATTRIBUTES),
                    2: ("nonResourceAttributes", NON_RESOURCE_ATTRIBUTES),
                    3: ("user", "string"),
                    4: ("groups", Repeated("string")),
                    6: ("uid", "string"),
                },
            ),
        ),
    },
)

# (apiVersion, kind) of the envelope -> the message of its raw object
KINDS: dict[tuple[str, str], Message] = {
    ("v1", "Namespace"): NAMESPACE,
    ("v1", "ConfigMap"): CONFIG_MAP,
    ("v1", "Secret"): SECRET,
    ("v1", "ServiceAccount"): SERVICE_ACCOUNT,
    ("v1", "Service"): SERVICE,
    ("apps/v1", "Deployment"): DEPLOYMENT,
    ("authorization.k8s.io/v1", "SelfSubjectAccessReview"): SELF_SUBJECT_ACCESS_REVIEW,
    ("authorization.k8s.io/v1", "SubjectAccessReview"): SUBJECT_ACCESS_REVIEW,
}
