"""What the OpenAPI schema says beyond the serializers: the ``Status`` body of every error the API can
give, ``ETag`` and ``If-Match``, the preview and bulk ``dryRun`` shapes, and links between operations
(for clients and for schemathesis' stateful tests). ``postprocess`` runs as a drf-spectacular hook."""

from __future__ import annotations

from typing import Any

from drf_spectacular.views import SpectacularSwaggerSplitView
from rest_framework import serializers
from rest_framework.renderers import JSONRenderer
from rest_framework.request import Request
from rest_framework.response import Response

from offloading.api.errors import IF_MATCH_PATTERN, REASONS
from offloading.filtersets import MAX_ID, SELECTOR_PATTERN, TEXT_PATTERN

# An error body: the Status the Kubernetes API server writes.
_CAUSE = {
    "type": "object",
    "properties": {"field": {"type": "string"}, "reason": {"type": "string"}, "message": {"type": "string"}},
    "required": ["field", "reason", "message"],
}
STATUS_SCHEMA = {
    "type": "object",
    "description": "A Kubernetes-style `Status`: `reason` and `code` say what failed, `details.causes[].field` where.",
    "properties": {
        "kind": {"type": "string", "enum": ["Status"]},
        "apiVersion": {"type": "string", "enum": ["v1"]},
        "metadata": {"type": "object"},
        "status": {"type": "string", "enum": ["Failure"]},
        "message": {"type": "string"},
        "reason": {"type": "string"},
        "details": {
            "type": "object",
            "properties": {
                "name": {"type": "string"},
                "kind": {"type": "string"},
                "causes": {"type": "array", "items": _CAUSE},
            },
        },
        "code": {"type": "integer"},
    },
    "required": ["kind", "apiVersion", "status", "message", "reason", "details", "code"],
}
_WHY = {
    400: "Malformed request: a field, a query parameter (unknown ones included), If-Match, or JSON nested over "
    "32 levels; or a destructive change (an unoffload, a lost cluster, a stricter pod strategy) without "
    "`confirm` (reason `BadRequest`, the cause names the field `confirm` and says what the change deletes).",
    401: "No valid credentials.",
    403: "The user's role may not do this.",
    404: 'No such object: the Status names it (`namespaces "shopx" not found`, `details.name`, `details.kind`).',
    409: "The namespace cannot take this change now (a change in flight, a deletion under way), or the change "
    'changes nothing (the spec it already has: "nothing to change"), or Argo CD or Flux manages the '
    "offloading and would undo the change (the cause names the field `gitopsOverride` and who manages it; "
    "send `gitopsOverride` to push anyway).",
    412: "The namespace changed since the generation given in If-Match or expectedGeneration.",
    413: "The request body is over 1 MiB.",
    415: "The body is not JSON.",
    422: "Liqo's rules (or the API server's dry-run) refuse the spec; causes name the spec fields.",
    429: "Too many requests; retry after the Retry-After header.",
}
_CHANGE_CODES = (409, 412, 422)
# Extra error codes per (path, method); every operation also has 400, 401, 403 and 429.
_EXTRA: dict[tuple[str, str], tuple[int, ...]] = {
    ("/api/v1/namespaces/{name}/offloading/", "put"): _CHANGE_CODES,
    ("/api/v1/namespaces/{name}/offloading/", "delete"): _CHANGE_CODES,
    ("/api/v1/changes/{id}/reapply/", "post"): _CHANGE_CODES,
    ("/api/v1/bulk/", "post"): _CHANGE_CODES,
}
_LINKS: dict[tuple[str, str, str], dict[str, Any]] = {
    ("/api/v1/namespaces/{name}/offloading/", "put", "202"): {
        "GetChange": {"operationId": "v1_changes_retrieve", "parameters": {"id": "$response.body#/id"}},
        "GetNamespace": {"operationId": "v1_namespaces_retrieve", "parameters": {"name": "$request.path.name"}},
    },
    ("/api/v1/namespaces/{name}/offloading/", "delete", "202"): {
        "GetChange": {"operationId": "v1_changes_retrieve", "parameters": {"id": "$response.body#/id"}},
    },
    ("/api/v1/changes/{id}/reapply/", "post", "202"): {
        "GetChange": {"operationId": "v1_changes_retrieve", "parameters": {"id": "$response.body#/id"}},
    },
    ("/api/v1/bulk/", "post", "201"): {
        "GetBulk": {"operationId": "v1_bulk_retrieve", "parameters": {"id": "$response.body#/id"}},
    },
    ("/api/v1/namespaces/{name}/", "get", "200"): {
        "PreviewNamespace": {
            "operationId": "v1_namespaces_preview_create",
            "parameters": {"name": "$response.body#/name"},
        },
        "OffloadNamespace": {
            "operationId": "v1_namespaces_offloading_update",
            "parameters": {"name": "$response.body#/name", "header.If-Match": "$response.header.ETag"},
        },
    },
    ("/api/v1/changes/{id}/", "get", "200"): {
        "ReapplyChange": {"operationId": "v1_changes_reapply_create", "parameters": {"id": "$response.body#/id"}},
        "GetNamespace": {"operationId": "v1_namespaces_retrieve", "parameters": {"name": "$response.body#/namespace"}},
    },
}
_ETAG = {
    "ETag": {
        "description": 'The namespace\'s offloading generation in quotes (`"3"`): send it back as If-Match.',
        "schema": {"type": "string"},
    }
}
_IF_MATCH = {
    "name": "If-Match",
    "in": "header",
    "required": False,
    "description": 'The ETag of the namespace (`"<generation>"`, `W/` allowed, `*` for any); a namespace that '
    "changed since is a 412.",
    "schema": {"type": "string", "pattern": IF_MATCH_PATTERN},
}
# Query parameters as the filters read them (drf-spectacular sees only their types).
_ID_SCHEMA = {"type": "integer", "minimum": 1, "maximum": MAX_ID}
_SELECTOR = {
    "type": "string",
    "pattern": SELECTOR_PATTERN,
    "description": "A `kubectl -l` label selector: at most 50 requirements of at most 100 values each.",
}
_TEXT = {"type": "string", "pattern": TEXT_PATTERN}
_TIME = {"type": "string", "anyOf": [{"format": "date-time"}, {"maxLength": 0}]}
_QUERY: dict[str, dict[str, Any]] = {
    "selector": _SELECTOR,
    "cluster": {**_TEXT, "description": "A cluster id: the namespaces offloaded to it."},
    "q": {**_TEXT, "description": "Part of the namespace's name or remote namespace name."},
    "namespace": _TEXT,
    "actor": _TEXT,
    "outcome": _TEXT,
    "bulk": _ID_SCHEMA,
    "change": _ID_SCHEMA,
    "since": {**_TIME, "description": "Events at or after this time (ISO 8601); empty: no bound."},
    "until": {**_TIME, "description": "Events before this time (ISO 8601); empty: no bound."},
}
# The audit trail's ``cluster`` is a managed cluster (issue 28), not a peer's cluster id.
_AUDIT_QUERY: dict[str, dict[str, Any]] = {
    "cluster": {**_TEXT, "description": "A managed cluster's name: only its events (empty: every managed cluster's)."},
}
# A path id beyond int64 is no row: the schema says so (the views answer 404 for one).
_PATH_ID = {"type": "integer", "minimum": 1, "maximum": 2**63 - 1}


CLUSTER_PATH = "/api/v1/m/{cluster}/"


def _default_path(path: str) -> str:
    """``/api/v1/m/{cluster}/namespaces/`` -> ``/api/v1/namespaces/``: the same resource, of the default
    cluster (offloading/switcher.py)."""
    return "/api/v1/" + path[len(CLUSTER_PATH) :] if path.startswith(CLUSTER_PATH) else path


def _parameters(operation: dict[str, Any], path: str) -> None:
    """The filters' patterns, bounds and formats; an empty choice (the pages' "any") is accepted."""
    for parameter in operation.get("parameters", []):
        name, where = parameter.get("name"), parameter.get("in")
        if where == "path" and name == "cluster":
            parameter["description"] = (
                "A managed cluster's name: this resource of that cluster (the path without /m/{cluster}/ "
                "addresses the default cluster). An unknown name is a 404."
            )
        elif where == "path" and name == "id":
            parameter["schema"] = dict(_PATH_ID)
        elif where == "path" and name == "clusterId":
            parameter["schema"] = {"type": "string", "pattern": "^[^/.]+$"}
        elif where == "query" and (name in _QUERY or name in _AUDIT_QUERY):
            audit = path.startswith("/api/v1/audit/") and name in _AUDIT_QUERY
            parameter["schema"] = dict(_AUDIT_QUERY[name] if audit else _QUERY[name])
            if "description" in parameter["schema"]:
                parameter["description"] = parameter["schema"].pop("description")
        elif where == "query" and name != "format" and "enum" in parameter.get("schema", {}):
            enum = parameter["schema"]["enum"]
            if "" not in enum:
                parameter["schema"]["enum"] = ["", *enum]
                parameter["description"] = (parameter.get("description", "") + " Empty: any.").strip()


def _components(schemas: dict[str, Any]) -> None:
    """What the request serializers enforce beyond their field types."""
    selector = schemas.get("BulkCreate", {}).get("properties", {}).get("namespaceSelector")
    if selector is not None:
        # Blank is refused (it would select every namespace): at least one non-space character.
        selector["allOf"] = [{"pattern": SELECTOR_PATTERN}, {"pattern": r"[^ \t\r\n]"}]
    for name in ("Spec", "Offload"):
        cluster = schemas.get(name, {}).get("properties", {}).get("clusterSelector")
        if cluster is not None:
            cluster.clear()
            cluster.update(
                {"type": "object", "description": "A NodeSelector (`nodeSelectorTerms`); not with `selectors`."}
            )


def _error(code: int) -> dict[str, Any]:
    return {
        "description": f"{REASONS[code]}: {_WHY[code]}",
        "content": {"application/json": {"schema": {"$ref": "#/components/schemas/Status"}}},
    }


def postprocess(result: dict[str, Any], generator: Any, request: Any, public: bool) -> dict[str, Any]:
    """Add the error responses, ETag/If-Match and the links to every operation."""
    result.setdefault("components", {}).setdefault("schemas", {})["Status"] = STATUS_SCHEMA
    for shown, operations in result.get("paths", {}).items():
        path = _default_path(shown)  # a managed cluster's path is documented as the default cluster's
        for method, operation in operations.items():
            if not isinstance(operation, dict) or "responses" not in operation:
                continue
            codes = {400, 401, 403, 429, *_EXTRA.get((path, method), ())}
            if "{" in shown:
                codes.add(404)
            if "requestBody" in operation:
                codes |= {413, 415}
            responses = operation["responses"]
            for code in sorted(codes):
                responses.setdefault(str(code), _error(code))
            for status, links in _LINKS.items():
                if status[:2] == (path, method) and status[2] in responses:
                    responses[status[2]]["links"] = links
            if path == "/api/v1/namespaces/{name}/" and method == "get":
                responses["200"]["headers"] = _ETAG
            if path == "/api/v1/namespaces/{name}/offloading/":
                operation.setdefault("parameters", []).append(_IF_MATCH)
            _parameters(operation, path)
    _components(result["components"]["schemas"])
    return result


class ExplanationSerializer(serializers.Serializer):
    virtualNode = serializers.CharField()  # noqa: N815
    terms = serializers.ListField(child=serializers.DictField(), required=False)


class PreviewClusterSerializer(serializers.Serializer):
    clusterId = serializers.CharField()  # noqa: N815
    selected = serializers.BooleanField()
    note = serializers.CharField(allow_blank=True, allow_null=True)
    error = serializers.CharField(allow_blank=True, allow_null=True)
    virtualNodesDisagree = serializers.BooleanField()  # noqa: N815
    explanations = serializers.ListField(child=serializers.DictField())


class PodImpactSerializer(serializers.Serializer):
    """The running pods a change hits (``offloading.whatif.pods``)."""

    followed = serializers.BooleanField(help_text="False: the namespace is not offloaded, its pods are not followed.")
    runningOnLostClusters = serializers.IntegerField(  # noqa: N815
        help_text="Running pods on clusters that lose the namespace: deleted there with the remote namespace."
    )
    lostClusters = serializers.DictField(child=serializers.IntegerField(), help_text="Those pods per cluster.")  # noqa: N815
    offStrategy = serializers.IntegerField(  # noqa: N815
        help_text="Running pods that no longer satisfy a stricter pod strategy (they run on until recreated)."
    )
    offStrategyWhere = serializers.ChoiceField(choices=["", "local", "remote"])  # noqa: N815
    strategyBefore = serializers.CharField(allow_blank=True)  # noqa: N815
    strategyAfter = serializers.CharField(allow_blank=True)  # noqa: N815


class ResourceAmountsSerializer(serializers.Serializer):
    cpu = serializers.FloatField(help_text="cores")
    memory = serializers.FloatField(help_text="bytes")
    pods = serializers.FloatField()


class ResourceSharesSerializer(serializers.Serializer):
    cpu = serializers.IntegerField(allow_null=True)
    memory = serializers.IntegerField(allow_null=True)
    pods = serializers.IntegerField(allow_null=True)


class RoomSerializer(serializers.Serializer):
    """A selected cluster's room (``offloading.whatif.capacity``): its virtual nodes' allocatable and
    what the running pods request there."""

    clusterId = serializers.CharField()  # noqa: N815
    allocatable = ResourceAmountsSerializer()
    requested = ResourceAmountsSerializer()
    percent = ResourceSharesSerializer(help_text="requested / allocatable in %, null when nothing is allocatable")
    nearlyFull = serializers.BooleanField(help_text="At least 80 % of its CPU, memory or pods is requested.")  # noqa: N815
    full = serializers.ListField(child=serializers.ChoiceField(choices=["cpu", "memory", "pods"]))


class RefusingClusterSerializer(serializers.Serializer):
    clusterId = serializers.CharField()  # noqa: N815
    reasons = serializers.ListField(child=serializers.CharField())


class RemoteNameCollisionSerializer(serializers.Serializer):
    namespace = serializers.CharField(help_text="The other local namespace.")
    clusters = serializers.ListField(child=serializers.CharField(), help_text="The peers both would use.")
    message = serializers.CharField()


class PreviewSerializer(serializers.Serializer):
    """A preview: ``valid`` false with ``errors`` keyed by field, or the full picture."""

    valid = serializers.BooleanField()
    warnings = serializers.DictField(child=serializers.ListField(child=serializers.CharField()), required=False)
    spec = serializers.DictField(required=False, help_text="The spec as it would be written (defaults applied).")
    clusters = PreviewClusterSerializer(many=True, required=False)
    terms = serializers.ListField(
        child=serializers.CharField(allow_blank=True),
        required=False,
        help_text="The selector's terms as text; explanations refer to them by `index`.",
    )
    selected = serializers.ListField(child=serializers.CharField(), required=False)
    gains = serializers.ListField(child=serializers.CharField(), required=False)
    losses = serializers.ListField(child=serializers.CharField(), required=False)
    remoteNamespaceName = serializers.CharField(required=False)  # noqa: N815
    refusingClusters = RefusingClusterSerializer(  # noqa: N815
        many=True,
        required=False,
        help_text="Selected peers that refuse new pods from this cluster (a cordoned tenant, denied resource "
        "slices): the namespace is created there, its pods are not.",
    )
    remoteNameCollisions = RemoteNameCollisionSerializer(  # noqa: N815
        many=True,
        required=False,
        help_text="Other namespaces that already map to the same remote namespace on a selected peer: a "
        "submit is refused (409) while there is one.",
    )
    manifest = serializers.CharField(required=False, help_text="What `liqoctl offload namespace --output yaml` prints.")
    pod = serializers.DictField(required=False, allow_null=True, help_text="The sample pod after Liqo's webhook.")
    runtimeClassWarnings = serializers.ListField(  # noqa: N815
        child=serializers.CharField(),
        required=False,
        help_text="When Liqo's RuntimeClass is not named `liqo` (LIQO_DASH_RUNTIME_CLASS): pods of that class "
        "skip the webhook, and their remote copies ask the provider for that RuntimeClass.",
    )
    podImpact = PodImpactSerializer(required=False)  # noqa: N815
    capacity = RoomSerializer(many=True, required=False, help_text="The room on each selected cluster.")
    nearlyFull = serializers.ListField(  # noqa: N815
        child=serializers.CharField(), required=False, help_text="The selected clusters that are nearly full."
    )
    destructive = serializers.CharField(
        required=False,
        allow_null=True,
        help_text="Why submitting this spec is destructive (a lost cluster, a stricter pod strategy), null when it "
        "is not: the PUT then needs `confirm: true`.",
    )

    def get_fields(self) -> dict[str, Any]:
        fields = dict(super().get_fields())
        # ``errors`` is a Serializer attribute: the field is added here, keyed by the request's fields.
        fields["errors"] = serializers.DictField(child=serializers.ListField(child=serializers.CharField()))
        return fields


class BulkNamespaceImpactSerializer(serializers.Serializer):
    namespace = serializers.CharField()
    action = serializers.CharField(help_text="`offload`, `update` or `unoffload`.")
    gains = serializers.ListField(child=serializers.CharField(), help_text="Clusters that gain the twin namespace.")
    losses = serializers.ListField(
        child=serializers.CharField(), help_text="Clusters that lose it: Liqo deletes the remote namespace there."
    )
    podImpact = PodImpactSerializer()  # noqa: N815


class BulkImpactSerializer(serializers.Serializer):
    remoteNamespacesDeleted = serializers.IntegerField(help_text="Remote namespaces Liqo would delete.")  # noqa: N815
    runningPodsOnLostClusters = serializers.IntegerField(  # noqa: N815
        help_text="Running pods on the clusters that lose a namespace (deleted there)."
    )
    podsOffStrategy = serializers.IntegerField(  # noqa: N815
        help_text="Running pods that no longer satisfy a stricter pod strategy."
    )
    perNamespace = BulkNamespaceImpactSerializer(many=True)  # noqa: N815


class BulkPlanSerializer(serializers.Serializer):
    """The answer to a bulk request with ``dryRun``: nothing is recorded."""

    namespaces = serializers.ListField(child=serializers.CharField(), help_text="Namespaces that would change.")
    skipped = serializers.ListField(
        child=serializers.DictField(child=serializers.CharField()),
        help_text="Namespaces left out: `{namespace, reason}`.",
    )
    impact = BulkImpactSerializer(help_text="What the changes would do, as the bulk page's preview says it.")
    capacity = RoomSerializer(many=True, help_text="The room on every cluster the new spec selects.")
    nearlyFull = serializers.ListField(  # noqa: N815
        child=serializers.CharField(), help_text="Those of them nearly full (80 % or more requested)."
    )
    destructive = serializers.CharField(
        allow_null=True,
        help_text="Why the bulk change is destructive (for how many namespaces, and the first reason), null when "
        "it is not: the request then needs `confirm: true`.",
    )


class SwaggerView(SpectacularSwaggerSplitView):
    """The browsable docs (the split view: its start-up script is a file, for the CSP); their errors (401, 405 ...) are a JSON ``Status``, not an HTML template
    the view does not have (which was a 500, for OPTIONS too)."""

    http_method_names = ["get", "head"]

    def finalize_response(self, request: Request, response: Response, *args: Any, **kwargs: Any) -> Response:
        if getattr(response, "exception", False):
            request.accepted_renderer = JSONRenderer()
            request.accepted_media_type = JSONRenderer.media_type
        return super().finalize_response(request, response, *args, **kwargs)
