"""REST serializers: explicit fields; spec validation goes through the same services as the forms."""

from __future__ import annotations

import re
from typing import Any

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.validators import ProhibitSurrogateCharactersValidator

from liqo_rules import constants as liqo
from liqo_rules.limits import selector_count_problems
from liqo_rules.selectors.liqoctl import cluster_selector
from liqo_rules.selectors.requirements import SelectorError
from offloading.api.docs import PreviewSerializer
from offloading.api.governance_serializers import GovernanceSerializer, governance_of
from offloading.filtersets import validate_label_selector
from offloading.gitops.managed import detection_of
from offloading.insight.diagnosis import diagnose
from offloading.models import (
    AuditEvent,
    BulkRequest,
    ChangeRequest,
    Cluster,
    ClusterOffloading,
    ManagedCluster,
    Namespace,
    SnapshotState,
    VirtualNode,
)
from offloading.snapshot.resources import api_cluster, installed_version


def camel(name: str) -> str:
    """``remote_namespace_name`` -> ``remoteNamespaceName`` (Kubernetes' convention for field names)."""
    head, *rest = name.split("_")
    return head + "".join(part[:1].upper() + part[1:] for part in rest)


class CamelCaseFields:
    """Fields declared in snake_case (the models' names) are named in camelCase in the API: the field
    reads the model attribute of the snake_case name (``source``), a method field calls ``get_<snake>``.
    Nested serializers do the same for their own fields; JSON fields (labels, specs, capacity ...) are
    data and keep their keys."""

    def get_fields(self) -> dict[str, Any]:
        fields = super().get_fields()  # type: ignore[misc]
        renamed: dict[str, Any] = {}
        for name, field in fields.items():
            new = camel(name)
            if new != name:
                if isinstance(field, serializers.SerializerMethodField):
                    field.method_name = field.method_name or f"get_{name}"
                elif field.source is None:
                    field.source = name
            renamed[new] = field
        return renamed


class SnakeCaseAliases:
    """Request bodies also accept the snake_case spelling of a camelCase field (``dry_run`` for
    ``dryRun``), until the next release: clients that followed the answers' old snake_case names keep
    working. Both spellings of one field in one body is a 400 on the old one."""

    def to_internal_value(self, data: Any) -> Any:
        if isinstance(data, dict):
            fields = self.fields  # type: ignore[attr-defined]
            renamed = dict(data)
            for key in data:
                new = camel(key) if isinstance(key, str) else key
                if new == key or new not in fields:
                    continue
                if new in data:
                    raise ValidationError({key: [f"given twice: as {new} and as its old name {key}"]})
                renamed[new] = renamed.pop(key)
            data = renamed
        return super().to_internal_value(data)  # type: ignore[misc]


class SnapshotSerializer(CamelCaseFields, serializers.ModelSerializer):
    stale = serializers.SerializerMethodField()
    liqo_version = serializers.SerializerMethodField(
        help_text="The installed Liqo version, as `liqoctl info` reads it (the controller manager's image tag); "
        "empty when it is not known."
    )

    class Meta:
        model = SnapshotState
        fields = [
            "last_success_at",
            "last_attempt_at",
            "last_error",
            "last_duration_ms",
            "last_list_calls",
            "local_cluster_id",
            "stale",
            "liqo_version",
        ]

    def get_stale(self, obj: SnapshotState) -> bool:
        return obj.is_stale()

    def get_liqo_version(self, obj: SnapshotState) -> str:
        return installed_version().version


class VirtualNodeSerializer(CamelCaseFields, serializers.ModelSerializer):
    class Meta:
        model = VirtualNode
        fields = ["namespace", "name", "labels", "has_node", "capacity", "healthy", "conditions"]


class ClusterSerializer(CamelCaseFields, serializers.ModelSerializer):
    virtual_nodes = serializers.SerializerMethodField()
    hosted_namespaces = serializers.SerializerMethodField()
    resources = serializers.SerializerMethodField()

    class Meta:
        model = Cluster
        fields = [
            "cluster_id",
            "role",
            "networking_status",
            "authentication_status",
            "offloading_status",
            "modules",
            "api_server_url",
            "virtual_nodes",
            "hosted_namespaces",
            "refreshed_at",
            "resources",
        ]

    def get_virtual_nodes(self, obj: Cluster) -> Any:
        nodes = self.context.get("virtual_nodes", {}).get(obj.cluster_id)
        if nodes is None:
            nodes = VirtualNode.objects.of(obj.managed_id).filter(cluster_id=obj.cluster_id)
        return VirtualNodeSerializer(nodes, many=True).data

    @extend_schema_field(
        serializers.JSONField(
            allow_null=True,
            help_text="On a single peer (GET /clusters/{clusterId}/, null in the list): whether it takes new "
            "pods from this cluster and why not (cordoned tenant, denied resource slices), its resource slices, "
            "tenant condition and quota (issue 27).",
        )
    )
    def get_resources(self, obj: Cluster) -> dict[str, Any] | None:
        view = self.context.get("view")
        return api_cluster(obj.cluster_id, obj.managed_id) if getattr(view, "action", "") == "retrieve" else None

    def get_hosted_namespaces(self, obj: Cluster) -> int:
        hosted = self.context.get("hosted")
        if hosted is not None:
            return hosted.get(obj.cluster_id, 0)
        return ClusterOffloading.objects.of(obj.managed_id).filter(cluster_id=obj.cluster_id, selected=True).count()


class ClusterStateSerializer(CamelCaseFields, serializers.ModelSerializer):
    stale_ready = serializers.SerializerMethodField(
        help_text="Not selected, but Liqo's status still carries the Ready condition from when it was "
        "(Liqo never removes it): the state says NotSelected and the message says which (issue 27)."
    )

    class Meta:
        model = ClusterOffloading
        fields = ["cluster_id", "selected", "state", "message", "since", "stale_ready"]

    def get_stale_ready(self, obj: ClusterOffloading) -> bool:
        # Only a stale Ready keeps a not-selected row whose state is NotSelected (offloading.snapshot.store).
        return not obj.selected and obj.state == "NotSelected"


class GitOpsEvidenceSerializer(serializers.Serializer):
    where = serializers.ChoiceField(choices=["label", "annotation", "manager"])
    key = serializers.CharField()
    value = serializers.CharField(help_text="The label or annotation value; a field manager's operation.")
    meaning = serializers.CharField()


class GitOpsClaimSerializer(CamelCaseFields, serializers.Serializer):
    tool = serializers.ChoiceField(choices=["argocd", "flux"])
    source_kind = serializers.ChoiceField(choices=["Application", "Kustomization", "HelmRelease"])
    name = serializers.CharField(allow_null=True, help_text="The source object's name, when the offloading names it.")
    namespace = serializers.CharField(allow_null=True)
    confidence = serializers.ChoiceField(
        choices=["certain", "probable"], help_text="`probable`: only `app.kubernetes.io/instance` says so."
    )
    evidence = GitOpsEvidenceSerializer(many=True)
    reverts_edit = serializers.BooleanField(
        allow_null=True, help_text="Whether the tool undoes a direct edit (null: a setting of the source object)."
    )
    reverts_delete = serializers.BooleanField(allow_null=True)
    notes = serializers.ListField(child=serializers.CharField())


class GitOpsSerializer(serializers.Serializer):
    managed = serializers.BooleanField(help_text="A GitOps tool surely manages the offloading.")
    probable = serializers.BooleanField(help_text="Only an ambiguous signal says a tool manages it.")
    claims = GitOpsClaimSerializer(many=True)
    notes = serializers.ListField(child=serializers.CharField())


def gitops_of(namespace: Namespace) -> dict[str, Any] | None:
    """Who manages the namespace's offloading from Git (gitops.detect on the snapshot's facts), or None."""
    detection = detection_of(namespace)
    return None if detection is None else detection.to_dict()


class NamespaceSerializer(CamelCaseFields, serializers.ModelSerializer):
    phase = serializers.CharField(source="offloading_phase")
    spec = serializers.JSONField(source="offloading_spec")
    generation = serializers.IntegerField(source="offloading_generation")
    observed_generation = serializers.IntegerField(source="offloading_observed_generation")
    deleting = serializers.BooleanField(source="offloading_deleting")
    status_stale = serializers.BooleanField(source="status_is_stale")
    last_written_by = serializers.CharField(source="offloading_managed_by")
    clusters = ClusterStateSerializer(source="cluster_states", many=True)
    gitops = serializers.SerializerMethodField(
        help_text="Whether Argo CD or Flux manages the offloading, with the evidence "
        "(labels, annotations, field managers); null when no GitOps signal is on it."
    )

    class Meta:
        model = Namespace
        fields = [
            "name",
            "labels",
            "offloaded",
            "phase",
            "spec",
            "remote_namespace_name",
            "generation",
            "observed_generation",
            "status_stale",
            "deleting",
            "last_written_by",
            "clusters",
            "gitops",
            "refreshed_at",
        ]

    @extend_schema_field(GitOpsSerializer(allow_null=True))
    def get_gitops(self, obj: Namespace) -> dict[str, Any] | None:
        return gitops_of(obj)


class FindingSerializer(CamelCaseFields, serializers.Serializer):
    rule = serializers.CharField(
        help_text="e.g. `controller-stuck`, `creation-loop-backoff`, `shared-remote-namespace`, "
        "`stale-condition`, `runtime-class`"
    )
    title = serializers.CharField()
    explanation = serializers.CharField()
    action = serializers.CharField()
    severity = serializers.ChoiceField(choices=["info", "warn", "bad"])


class NamespaceDetailSerializer(NamespaceSerializer):
    diagnosis = serializers.SerializerMethodField(
        help_text="What is stuck and how to fix it, as on the namespace page (offloading.insight.diagnosis)."
    )

    class Meta(NamespaceSerializer.Meta):
        fields = [*NamespaceSerializer.Meta.fields, "diagnosis"]

    @extend_schema_field(FindingSerializer(many=True))
    def get_diagnosis(self, obj: Namespace) -> list[dict[str, Any]]:
        return FindingSerializer(diagnose(obj, notes=True), many=True).data  # type: ignore[return-value]


class WaitingSerializer(CamelCaseFields, serializers.Serializer):
    reason = serializers.CharField(help_text="Why the change waits: `api_unreachable`.")
    since = serializers.DateTimeField()
    message = serializers.CharField()


class ChangeRequestSerializer(CamelCaseFields, serializers.ModelSerializer):
    waiting = serializers.SerializerMethodField()
    governance = serializers.SerializerMethodField()
    managed_cluster = serializers.CharField(
        source="managed.name", read_only=True, help_text="The managed cluster it changes (its name)."
    )

    class Meta:
        model = ChangeRequest
        fields = [
            "id",
            "managed_cluster",
            "namespace",
            "action",
            "state",
            "desired_spec",
            "base_spec",
            "base_generation",
            "label_namespace",
            "requester_name",
            "source",
            "request_id",
            "created_at",
            "updated_at",
            "finished_at",
            "attempts",
            "message",
            "warnings",
            "result_generation",
            "conflict_spec",
            "bulk",
            "waiting",
            "retrying_since",
            "governance",
        ]

    @extend_schema_field(GovernanceSerializer(allow_null=True))
    def get_governance(self, obj: ChangeRequest) -> dict[str, Any] | None:
        """Its approval (issue 29) and its schedule when it had one, else null."""
        return governance_of(obj)

    @extend_schema_field(WaitingSerializer(allow_null=True))
    def get_waiting(self, obj: ChangeRequest) -> dict[str, Any] | None:
        """Set while the change waits (for example for an unreachable API server), else null."""
        if not obj.waiting_reason or obj.is_terminal:
            return None
        return {"reason": obj.waiting_reason, "since": obj.waiting_since, "message": obj.message}


class BulkRefusedSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    change = serializers.IntegerField()
    reason = serializers.CharField()


class BulkRequestSerializer(CamelCaseFields, serializers.ModelSerializer):
    progress = serializers.SerializerMethodField()
    refused = serializers.SerializerMethodField()
    managed_cluster = serializers.CharField(
        source="managed.name", read_only=True, help_text="The managed cluster its changes are of (its name)."
    )

    class Meta:
        model = BulkRequest
        fields = [
            "id",
            "managed_cluster",
            "action",
            "namespace_selector",
            "desired_spec",
            "requester_name",
            "source",
            "request_id",
            "created_at",
            "total",
            "skipped",
            "refused",
            "progress",
        ]

    @extend_schema_field(BulkRefusedSerializer(many=True))
    def get_refused(self, obj: BulkRequest) -> list[dict[str, object]]:
        """The namespaces whose push the cluster refused (the user's RBAC, validation, Liqo's webhook),
        each with the API server's reason: by default a bulk's checks are its pushes."""
        return obj.refused()

    def get_progress(self, obj: BulkRequest) -> dict[str, int]:
        # camelCase like every key of the API (awaitingApproval: a state of issue 29)
        return {camel(state): count for state, count in obj.progress().items()}


class AuditEventSerializer(CamelCaseFields, serializers.ModelSerializer):
    managed_cluster: serializers.SlugRelatedField[ManagedCluster] = serializers.SlugRelatedField(
        source="managed", slug_field="name", read_only=True, help_text="The managed cluster the event is about."
    )

    class Meta:
        model = AuditEvent
        fields = [
            "id",
            "seq",
            "managed_cluster",
            "time",
            "user_name",
            "source",
            "request_id",
            "action",
            "namespace",
            "change",
            "before",
            "after",
            "outcome",
            "message",
            "prev_hash",
            "hash",
            "key_id",
        ]


_SURROGATE = re.compile("[\ud800-\udfff]")


class _NoSurrogates(ProhibitSurrogateCharactersValidator):
    """DRF's check that a text has no surrogate code point, the same error for the same first one,
    found by a regular expression rather than a Python loop over every character (50 selector lines
    at the limits are 100,000 characters)."""

    def __call__(self, value: Any) -> None:
        found = _SURROGATE.search(str(value))
        if found is not None:
            raise ValidationError(self.message.format(code_point=ord(found.group())), code=self.code)


class SelectorLineField(serializers.CharField):
    """One liqoctl ``--selector`` line: a CharField, with ``_NoSurrogates`` for DRF's surrogate check."""

    def __init__(self, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        self.validators = [
            _NoSurrogates() if type(v) is ProhibitSurrogateCharactersValidator else v for v in self.validators
        ]


class SpecSerializer(SnakeCaseAliases, serializers.Serializer):
    """A NamespaceOffloading spec, with the cluster selector given either as a NodeSelector
    (``clusterSelector``) or as liqoctl selector strings (``selectors``, ORed). Omitted fields take the
    CRD defaults (or, when editing, the current values)."""

    namespaceMappingStrategy = serializers.ChoiceField(choices=liqo.MAPPING_STRATEGIES, required=False)  # noqa: N815
    remoteNamespaceName = serializers.CharField(required=False, allow_blank=True, max_length=253)  # noqa: N815
    podOffloadingStrategy = serializers.ChoiceField(choices=liqo.POD_STRATEGIES, required=False)  # noqa: N815
    clusterSelector = serializers.JSONField(required=False)  # noqa: N815
    selectors = serializers.ListField(child=SelectorLineField(allow_blank=True), required=False)

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if "clusterSelector" in attrs and "selectors" in attrs:
            raise serializers.ValidationError({"selectors": ["give either clusterSelector or selectors, not both"]})
        if "selectors" in attrs:
            over = selector_count_problems(attrs["selectors"])
            if over:
                raise serializers.ValidationError({"selectors": over})
            try:
                selector = cluster_selector(attrs.pop("selectors"))
            except SelectorError as exc:
                raise serializers.ValidationError({"selectors": [str(exc)]})
            attrs["clusterSelector"] = selector
        selector = attrs.get("clusterSelector")  # type: ignore[assignment]
        if selector is not None and not isinstance(selector, dict):
            raise serializers.ValidationError({"clusterSelector": ["must be an object with nodeSelectorTerms"]})
        if not attrs.get("remoteNamespaceName"):
            attrs.pop("remoteNamespaceName", None)
        return attrs


CONFIRM_HELP = (
    "Confirm a destructive change: an edit whose selector loses a cluster the namespace is on (Liqo deletes "
    "the twin namespace there), or that makes the pod offloading strategy stricter (LocalAndRemote to Remote "
    "or Local, Remote to Local and back). Without it such a change is a 400 `Status` whose cause is the field "
    "`confirm`, with the reason; the preview says the same in `destructive`."
)


GITOPS_OVERRIDE_HELP = (
    "Push even though Argo CD or Flux manages the offloading and would undo the change at its next sync "
    "(the namespace's `gitops`). Without it such a change is a 409 `Status` whose cause is the field "
    "`gitopsOverride`, naming who manages it; with it the audit trail says the change overrode GitOps."
)


class RemoteNamespaceCheckSerializer(serializers.Serializer):
    """The remote name checked on one selected peer that is a managed cluster too (issue 28)."""

    clusterId = serializers.CharField(help_text="The peer's Liqo cluster id.")  # noqa: N815
    managedCluster = serializers.CharField(help_text="Its name as a managed cluster of this dashboard.")  # noqa: N815
    remoteNamespaceName = serializers.CharField()  # noqa: N815
    verdict = serializers.ChoiceField(
        choices=["free", "ours", "shared", "taken", "unchecked"],
        help_text="`free`: no namespace of that name there; `ours`: already this namespace's twin; `shared`: the "
        "twin of another namespace of this cluster (both would share it); `taken`: a namespace that is not this "
        "cluster's twin, so Liqo would fail (CreationLoopBackOff) and a submit is refused (409); `unchecked`: the "
        "provider could not be asked in time (a note, never a refusal).",
    )
    fails = serializers.BooleanField(help_text="Whether Liqo would fail there (`taken`).")
    message = serializers.CharField()


class NamespacePreviewSerializer(PreviewSerializer):
    """The namespace preview's answer: ``PreviewSerializer`` and the remote name's check on the managed
    providers (same schema component, ``Preview``)."""

    class Meta:
        ref_name = "Preview"

    # A nested field as the preview's others (not a method field: drf-spectacular makes a read-only one
    # required, and an invalid spec's answer has no checks).
    remoteNamespaceChecks = RemoteNamespaceCheckSerializer(  # noqa: N815
        many=True,
        required=False,
        help_text="For a new offloading, the remote name checked on each selected peer that is a managed cluster "
        "too, on its own API (others are not visible from here); empty for an offloaded namespace, whose remote "
        "name Liqo's webhook keeps.",
    )


class OffloadSerializer(SpecSerializer):
    labelNamespace = serializers.BooleanField(default=False)  # noqa: N815
    expectedGeneration = serializers.IntegerField(required=False, min_value=0, max_value=2**63 - 1)  # noqa: N815
    confirm = serializers.BooleanField(default=False, help_text=CONFIRM_HELP)
    gitopsOverride = serializers.BooleanField(default=False, help_text=GITOPS_OVERRIDE_HELP)  # noqa: N815
    pod = serializers.DictField(required=False, help_text="A pod to show Liqo's mutation of (preview only).")

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        attrs = super().validate(attrs)
        namespace: Namespace = self.context["namespace"]
        extra = ("labelNamespace", "expectedGeneration", "pod", "confirm", "gitopsOverride")
        spec = {k: v for k, v in attrs.items() if k not in extra}
        if namespace.offloaded:
            # Omitted immutable fields keep their value (Liqo itself would default them and then
            # refuse the change); omitted mutable ones keep theirs too, as with a PATCH.
            for key, value in (namespace.offloading_spec or {}).items():
                spec.setdefault(key, value)
        # Liqo's rules are checked by the change flow (offloading.changes.requests), the same for the
        # form, the API and bulk: a refusal there is a 422 Status, not a serializer error.
        attrs["spec"] = spec
        return attrs


class ReapplySerializer(serializers.Serializer):
    """The body of a re-apply (optional)."""

    resolve = serializers.DictField(
        child=serializers.ChoiceField(choices=["mine", "theirs"]),
        required=False,
        help_text="For each field both sides changed: keep `mine` or `theirs` (without it: 409 naming the field).",
    )
    confirm = serializers.BooleanField(
        default=False, help_text="Confirm when the change asked for again is destructive. " + CONFIRM_HELP
    )
    gitopsOverride = serializers.BooleanField(default=False, help_text=GITOPS_OVERRIDE_HELP)  # noqa: N815


class BulkCreateSerializer(SnakeCaseAliases, serializers.Serializer):
    action = serializers.ChoiceField(choices=["offload", "unoffload"])
    namespaceSelector = serializers.CharField(  # noqa: N815
        max_length=16384,
        validators=[validate_label_selector],
        help_text="A `kubectl -l` label selector: at most 50 requirements of at most 100 values each.",
    )
    spec = SpecSerializer(required=False)
    labelNamespace = serializers.BooleanField(default=False)  # noqa: N815
    dryRun = serializers.BooleanField(  # noqa: N815
        default=False, help_text="Only show what would change (the API server is asked too)."
    )
    confirm = serializers.BooleanField(
        default=False,
        help_text="Confirm a bulk change that is destructive for any of its namespaces (an unoffload, a lost "
        "cluster, a stricter pod strategy): without it, a 400 `Status` on `confirm` with the reason; a `dryRun` "
        "says it in `destructive`.",
    )
    expectedGenerations = serializers.DictField(  # noqa: N815
        child=serializers.IntegerField(min_value=0, max_value=2**63 - 1),
        required=False,
        help_text="The generation each namespace had when you looked (0: not offloaded); one that moved since "
        "is left out and reported in `skipped`.",
    )
    gitopsOverride = serializers.BooleanField(  # noqa: N815
        default=False,
        help_text="Include the namespaces whose offloading Argo CD or Flux manages (the namespace's `gitops`): "
        "without it they are left out and reported in `skipped` with who manages them; with it each of their "
        "changes is pushed directly and its `requested` audit event says it overrode GitOps.",
    )

    def validate(self, attrs: dict[str, Any]) -> dict[str, Any]:
        if attrs["action"] == "offload" and "spec" not in attrs:
            raise serializers.ValidationError({"spec": ["required to offload"]})
        return attrs
