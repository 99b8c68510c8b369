"""The only module that talks to Kubernetes (official ``kubernetes`` client over HTTP).

Every call returns plain dicts (raw JSON, not the client's model classes: it is faster for large lists
and matches what the rest of the code works with) and raises :class:`KubeError`, classified so the
caller knows whether retrying can help.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any

import urllib3
from django.conf import settings
from kubernetes import client
from kubernetes import utils as k8s_utils
from kubernetes import watch as k8s_watch
from kubernetes.client.rest import ApiException

from liqo_rules import constants as liqo
from liqo_rules.versions import CONTROLLER_MANAGER_SELECTOR
from offloading.cluster.client import api_client, bound_to, current_client, reset_client
from offloading.cluster.errors import KubeError, Result, classify, parse_warnings
from offloading.cluster.identity import Identity, impersonation_headers
from offloading.cluster.pace import current_pacer, in_paced, paced, pacer, pacer_for

# Re-exported: callers use kube.KubeError, kube.paced, kube.reset_client ...
__all__ = ["KubeError", "Result", "api_client", "bound_to", "paced", "pacer", "pacer_for", "reset_client"]

LIST_PAGE_SIZE = 500
# Dry-runs happen inside a page request: an API server that is slow to answer must not hold the page.
DRY_RUN_TIMEOUT = 3.0
CHANGE_ID_ANNOTATION = "liqo-dash.io/change-id"
REQUESTER_ANNOTATION = "liqo-dash.io/requested-by"

_FC = ("core.liqo.io", "v1beta1", "foreignclusters")
_VN = ("offloading.liqo.io", "v1beta1", "virtualnodes")
_NSOFF = (liqo.GROUP, liqo.VERSION, "namespaceoffloadings")
_RSLICE = ("authentication.liqo.io", "v1beta1", "resourceslices")  # issue 27: slices, tenants, quotas
_TENANT = ("authentication.liqo.io", "v1beta1", "tenants")
_QUOTA = (liqo.GROUP, liqo.VERSION, "quotas")
_NSMAP = (liqo.GROUP, liqo.VERSION, "namespacemaps")  # read only: what Liqo asked of each peer (issue 27)


def _timeout() -> float:
    return float(settings.LIQO_DASH["KUBE_REQUEST_TIMEOUT"])


def _call(
    method: Any, *args: Any, timeout: float | None = None, **kwargs: Any
) -> tuple[dict[str, Any] | None, list[str]]:
    """Run a client method returning the raw response; decode JSON; classify every failure. Inside
    :func:`paced`, through the pacer (a 429 waits for Retry-After and is sent again)."""
    if not in_paced():
        return _call_once(method, *args, timeout=timeout, **kwargs)
    return current_pacer().call(lambda: _call_once(method, *args, timeout=timeout, **kwargs))


def _call_once(
    method: Any, *args: Any, timeout: float | None = None, **kwargs: Any
) -> tuple[dict[str, Any] | None, list[str]]:
    try:
        response = method(*args, _preload_content=False, _request_timeout=timeout or _timeout(), **kwargs)
    except ApiException as exc:
        raise classify(exc) from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise KubeError("transient", f"cannot reach the Kubernetes API: {exc}", unreachable=True) from exc
    warnings = parse_warnings(response.headers.getlist("Warning")) if response.headers else []
    data = response.data
    try:
        obj = json.loads(data) if data else None
    except ValueError as exc:
        raise KubeError("transient", f"the API server answered with something that is not JSON: {exc}") from exc
    return obj, warnings


def read_object(method: Any, *args: Any, timeout: float | None = None, **kwargs: Any) -> dict[str, Any]:
    """One read through ``method``, a client method bound to any cluster's client (a managed cluster's
    too, not only the process's own): its JSON object, every failure a classified KubeError."""
    obj, _ = _call_once(method, *args, timeout=timeout, **kwargs)
    return obj if isinstance(obj, dict) else {}


# The calls below that name no client use the bound one (a managed cluster's, see ``client.bound_to``);
# the leases and the audit anchor's ConfigMap are the home API server's: always the process's own client.
def _custom(api: client.ApiClient | None = None) -> client.CustomObjectsApi:
    return client.CustomObjectsApi(api or current_client())


def _coordination() -> client.CoordinationV1Api:
    return client.CoordinationV1Api(api_client())


def _apps(api: client.ApiClient | None = None) -> client.AppsV1Api:
    return client.AppsV1Api(api or current_client())


def _core(api: client.ApiClient | None = None) -> client.CoreV1Api:
    return client.CoreV1Api(api or current_client())


def _authorization() -> client.AuthorizationV1Api:
    return client.AuthorizationV1Api(current_client())


@dataclass
class ListResult:
    items: list[dict[str, Any]]
    resource_version: str
    calls: int


def _paginate(fetch: Any, *args: Any, **kwargs: Any) -> ListResult:
    """LIST with limit/continue; restarts once from scratch if the continue token expired (410)."""
    for _attempt in range(2):
        items: list[dict[str, Any]] = []
        calls, token = 0, None
        try:
            while True:
                page, _ = _call(fetch, *args, limit=LIST_PAGE_SIZE, _continue=token, **kwargs)
                calls += 1
                assert page is not None
                items.extend(page.get("items") or [])
                meta = page.get("metadata") or {}
                token = meta.get("continue")
                if not token:
                    return ListResult(items, meta.get("resourceVersion", ""), calls)
        except KubeError as exc:
            if exc.kind != "gone":
                raise
    raise KubeError("transient", "the list kept expiring while it was paginated")


def list_foreign_clusters(api: client.ApiClient | None = None) -> ListResult:
    return _paginate(_custom(api).list_cluster_custom_object, *_FC)


def list_virtual_nodes(api: client.ApiClient | None = None) -> ListResult:
    return _paginate(_custom(api).list_cluster_custom_object, *_VN)


def list_virtual_node_nodes(api: client.ApiClient | None = None) -> ListResult:
    return _paginate(_core(api).list_node, label_selector=f"{liqo.VIRTUAL_NODE_TYPE_LABEL}=virtual-node")


def list_namespaces(api: client.ApiClient | None = None) -> ListResult:
    return _paginate(_core(api).list_namespace)


def list_offloadings() -> ListResult:
    return _paginate(_custom().list_cluster_custom_object, *_NSOFF)


def _one(resource: tuple[str, str, str], namespace: str) -> tuple[str, ...]:
    """The positional arguments naming the NamespaceOffloading of ``namespace``."""
    return (resource[0], resource[1], namespace, resource[2], liqo.OFFLOADING_NAME)


def get_offloading(namespace: str, timeout: float | None = None) -> dict[str, Any] | None:
    """The NamespaceOffloading of ``namespace``, or None when there is none."""
    try:
        obj, _ = _call(_custom().get_namespaced_custom_object, *_one(_NSOFF, namespace), timeout=timeout)
    except KubeError as exc:
        if exc.kind == "not_found":
            return None
        raise
    return obj


def _write_options(dry_run: bool, identity: Identity | None = None) -> dict[str, Any]:
    """Our field manager on every write; dry-runs also get the short timeout of a page request."""
    options: dict[str, Any] = {"field_manager": settings.LIQO_DASH["FIELD_MANAGER"], **impersonation_headers(identity)}
    if dry_run:
        options.update(dry_run="All", timeout=DRY_RUN_TIMEOUT)
    return options


def create_offloading(
    namespace: str, body: dict[str, Any], dry_run: bool = False, identity: Identity | None = None
) -> Result:
    kwargs = _write_options(dry_run, identity)
    obj, warnings = _call(_custom().create_namespaced_custom_object, *_NSOFF[:2], namespace, _NSOFF[2], body, **kwargs)
    return Result(obj, warnings)


def replace_offloading(
    namespace: str, body: dict[str, Any], dry_run: bool = False, identity: Identity | None = None
) -> Result:
    """PUT the whole object; ``body.metadata.resourceVersion`` makes it fail with a conflict if the
    object changed since it was read."""
    kwargs = _write_options(dry_run, identity)
    obj, warnings = _call(_custom().replace_namespaced_custom_object, *_one(_NSOFF, namespace), body, **kwargs)
    return Result(obj, warnings)


def patch_offloading(namespace: str, operations: list[dict[str, Any]], identity: Identity | None = None) -> Result:
    """JSON-patch (RFC 6902) the NamespaceOffloading: its ``test`` operations are preconditions that
    the API server checks on the object it holds (a failed one answers 422, nothing written)."""
    kwargs = {**_write_options(False, identity), "_content_type": "application/json-patch+json"}
    obj, warnings = _call(_custom().patch_namespaced_custom_object, *_one(_NSOFF, namespace), operations, **kwargs)
    return Result(obj, warnings)


def delete_offloading(
    namespace: str, resource_version: str | None = None, identity: Identity | None = None, uid: str | None = None
) -> Result:
    """DELETE the NamespaceOffloading; with a resource version (and uid), only if it is still that
    version (that object): otherwise a conflict."""
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "DeleteOptions", "propagationPolicy": "Background"}
    preconditions = {"resourceVersion": resource_version, "uid": uid}
    if resource_version or uid:
        body["preconditions"] = {key: value for key, value in preconditions.items() if value}
    headers = impersonation_headers(identity)
    obj, warnings = _call(_custom().delete_namespaced_custom_object, *_one(_NSOFF, namespace), body=body, **headers)
    return Result(obj, warnings)


def label_namespace(namespace: str, labels: dict[str, str | None], identity: Identity | None = None) -> Result:
    """Merge-patch labels onto a namespace (None removes a label)."""
    obj, warnings = _call(
        _core().patch_namespace,
        namespace,
        {"metadata": {"labels": labels}},
        field_manager=settings.LIQO_DASH["FIELD_MANAGER"],
        **impersonation_headers(identity),
    )
    return Result(obj, warnings)


def subject_access_review(
    user: str, groups: tuple[str, ...], verb: str, group: str, resource: str, namespace: str, name: str
) -> tuple[bool, str]:
    """Ask the API server whether ``user`` (in ``groups``) may ``verb`` the resource: (allowed,
    reason), the reason as the cluster gave it (its evaluation error when it has no reason)."""
    attributes = {"verb": verb, "group": group, "resource": resource, "namespace": namespace, "name": name}
    body = {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SubjectAccessReview",
        "spec": {"user": user, "groups": list(groups), "resourceAttributes": attributes},
    }
    obj, _ = _call(_authorization().create_subject_access_review, body)
    status = (obj or {}).get("status") or {}
    return bool(status.get("allowed")), status.get("reason") or status.get("evaluationError") or ""


# Watches: (list method factory, args, extra kwargs) per kind the dashboard follows.
WATCHED_KINDS = (
    "namespaceoffloadings",
    "foreignclusters",
    "virtualnodes",
    "nodes",
    "namespaces",
    "pods",
    "events",
    "namespacemaps",
    "resourceslices",
    "tenants",
    "quotas",
    "deployments",
)
# Events worth keeping: about NamespaceOffloadings and Namespaces (Liqo's warnings among them).
EVENT_KINDS = ("NamespaceOffloading", "Namespace")


def _list_method(kind: str, api: client.ApiClient | None = None) -> tuple[Any, tuple[Any, ...], dict[str, Any]]:
    """The list method of ``kind`` on ``api`` (a managed cluster's client; the process's own by default)."""
    if kind == "namespaceoffloadings":
        return _custom(api).list_cluster_custom_object, _NSOFF, {}
    if kind == "foreignclusters":
        return _custom(api).list_cluster_custom_object, _FC, {}
    if kind == "virtualnodes":
        return _custom(api).list_cluster_custom_object, _VN, {}
    if kind == "nodes":
        return _core(api).list_node, (), {"label_selector": f"{liqo.VIRTUAL_NODE_TYPE_LABEL}=virtual-node"}
    if kind == "namespaces":
        return _core(api).list_namespace, (), {}
    if kind == "pods":
        return _core(api).list_pod_for_all_namespaces, (), {}
    if kind == "events":
        return _core(api).list_event_for_all_namespaces, (), {}
    if kind == "namespacemaps":
        return _custom(api).list_cluster_custom_object, _NSMAP, {}
    if kind == "resourceslices":
        return _custom(api).list_cluster_custom_object, _RSLICE, {}
    if kind == "tenants":
        return _custom(api).list_cluster_custom_object, _TENANT, {}
    if kind == "quotas":
        return _custom(api).list_cluster_custom_object, _QUOTA, {}
    if kind == "deployments":  # the controller manager's, in Liqo's namespace: its image tag is the version
        return _apps(api).list_namespaced_deployment, ("liqo",), {"label_selector": CONTROLLER_MANAGER_SELECTOR}
    raise ValueError(f"unknown kind {kind}")


def current_resource_version(kind: str) -> str:
    """The list resourceVersion of ``kind`` now (a one-item LIST), to start a watch from."""
    method, args, kwargs = _list_method(kind)
    page, _ = _call(method, *args, limit=1, **kwargs)
    return ((page or {}).get("metadata") or {}).get("resourceVersion", "")


def storable(value: Any) -> Any:
    """``value`` with every NUL character in its strings (keys too) replaced by U+FFFD. JSON and the API
    server allow NUL in a string (``kubectl`` can write one into any field), PostgreSQL's text and jsonb
    do not: what the snapshot keeps of a listed or watched object shows it as the replacement character
    instead of failing the whole batch. Only the snapshot's copies: the objects pushed back are read
    unaltered."""
    if isinstance(value, str):
        return value.replace("\x00", "\ufffd") if "\x00" in value else value
    if isinstance(value, dict):
        items = [(storable(k), storable(v)) for k, v in value.items()]
        # The same object when nothing changed (the usual case: no copy of a listed page).
        if all(k is k0 and v is v0 for (k, v), (k0, v0) in zip(items, value.items(), strict=True)):
            return value
        return dict(items)
    if isinstance(value, list):
        converted = [storable(v) for v in value]
        return value if all(a is b for a, b in zip(converted, value, strict=True)) else converted
    return value


def list_pages(
    kind: str, page_size: int | None = None, api: client.ApiClient | None = None
) -> Iterator[tuple[list[dict[str, Any]], str]]:
    """LIST ``kind`` one page at a time (limit/continue), yielding ``(items, resourceVersion)``: the
    version is the list's own on the last page (empty before), where a watch starts. Nothing holds the
    whole list. A continue token that expired (410) raises KubeError kind ``gone``: list again. ``api``:
    the cluster's client (a managed cluster's; the process's own by default)."""
    method, args, kwargs = _list_method(kind, api)
    token = None
    while True:
        page, _ = _call(method, *args, limit=page_size or LIST_PAGE_SIZE, _continue=token, **kwargs)
        meta = (page or {}).get("metadata") or {}
        token = meta.get("continue")
        yield (
            [storable(item) for item in (page or {}).get("items") or []],
            "" if token else meta.get("resourceVersion", ""),
        )
        if not token:
            return


# The JSON escape of NUL, not itself escaped: an even run of backslashes (escaped backslashes) before it.
_ESCAPED_NUL = re.compile(r"(?<!\\)((?:\\\\)*)\\u0000")


class _RawWatch(k8s_watch.Watch):
    """The client's Watch, each event decoded once. The watcher keeps only the raw object, while the
    client would also turn it back into JSON and decode it again into its model (for a NamespaceMap of
    1,000 entries 7.9 instead of 2.2 ms per event; for a Namespace, a typed model, 660 instead of 15 us).
    Without a return type the client hands over the decoded event as it is; this stream never reconnects
    by itself (``timeout_seconds`` is always given), so the resourceVersion it would track is not needed."""

    def get_return_type(self, func: Any) -> None:
        return None

    def unmarshal_event(self, data: str, return_type: Any) -> Any:
        """The event decoded with every NUL in its strings (keys too) already the replacement character,
        as :func:`storable` would leave it: a NUL can only be the escape ``\\u0000`` in the JSON text,
        so one look at the text spares walking the object (16 % of the watcher's CPU during a bulk)."""
        if data and "\\u0000" in data:
            data = _ESCAPED_NUL.sub(r"\1\\ufffd", data)
        return super().unmarshal_event(data, None)


def watch(
    kind: str, resource_version: str, timeout_seconds: int = 300, api: client.ApiClient | None = None
) -> Iterator[tuple[str, dict[str, Any]]]:
    """Stream ``(type, object)`` watch events of ``kind`` after ``resource_version``, bookmarks
    included (type ``BOOKMARK``), from ``api`` (the process's own client by default). Raises KubeError:
    kind ``gone`` when the version is too old."""
    method, args, kwargs = _list_method(kind, api)
    watcher = _RawWatch()
    try:
        for event in watcher.stream(
            method,
            *args,
            resource_version=resource_version,
            allow_watch_bookmarks=True,
            timeout_seconds=timeout_seconds,
            _request_timeout=(_timeout(), timeout_seconds + 30),
            **kwargs,
        ):
            obj = event.get("raw_object") or {}
            if event.get("type") == "ERROR":
                code = obj.get("code") or 0
                raise KubeError("gone" if code == 410 else "transient", obj.get("message") or "watch error", code)
            yield event["type"], obj  # NULs already replaced (_RawWatch.unmarshal_event)
    except ApiException as exc:
        raise classify(exc) from exc
    except (urllib3.exceptions.HTTPError, OSError) as exc:
        raise KubeError("transient", f"watch interrupted: {exc}") from exc
    finally:
        watcher.stop()


def probe(timeout: float = 2.0) -> None:
    """One cheap request (GET /version) to learn whether the API server answers; raises KubeError."""
    _call(client.VersionApi(current_client()).get_code, timeout=timeout)


def get_lease(namespace: str, name: str, timeout: float | None = None) -> dict[str, Any] | None:
    """A coordination.k8s.io Lease, or None when there is none. ``timeout``: the leases' callers pass a
    fraction of the lease's duration (the request timeout is as long as a whole default lease)."""
    try:
        obj, _ = _call(_coordination().read_namespaced_lease, name, namespace, timeout=timeout)
    except KubeError as exc:
        if exc.kind == "not_found":
            return None
        raise
    return obj


def create_lease(namespace: str, body: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
    obj, _ = _call(_coordination().create_namespaced_lease, namespace, body, timeout=timeout)
    return obj or {}


def replace_lease(namespace: str, body: dict[str, Any], timeout: float | None = None) -> dict[str, Any]:
    """Replace a Lease; its metadata.resourceVersion makes it conditional (conflict if it moved)."""
    name = body["metadata"]["name"]
    obj, _ = _call(_coordination().replace_namespaced_lease, name, namespace, body, timeout=timeout)
    return obj or {}


def read_config_map(namespace: str, name: str) -> dict[str, Any] | None:
    """A ConfigMap (the audit anchor's), or None when there is none."""
    try:
        return _call(_core(api_client()).read_namespaced_config_map, name, namespace)[0]
    except KubeError as exc:
        if exc.kind == "not_found":
            return None
        raise


def write_config_map(namespace: str, name: str, data: dict[str, str]) -> None:
    """Create or replace the ConfigMap ``namespace/name`` with ``data``."""
    body: dict[str, Any] = {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": name}, "data": data}
    existing = read_config_map(namespace, name)
    if existing is None:
        _call(_core(api_client()).create_namespaced_config_map, namespace, body)
    else:
        body["metadata"]["resourceVersion"] = existing["metadata"]["resourceVersion"]
        _call(_core(api_client()).replace_namespaced_config_map, name, namespace, body)


def list_in_namespace(kind: str, namespace: str, limit: int, timeout: float) -> tuple[list[dict[str, Any]], bool]:
    """One page (at most ``limit``) of ``kind`` in ``namespace``, as the acting user: (items, more left)."""
    # A call (not a literal): tests/test_deploy.py derives the RBAC these need from it.
    methods = dict(
        configmaps=_core().list_namespaced_config_map,
        secrets=_core().list_namespaced_secret,
        services=_core().list_namespaced_service,
        serviceaccounts=_core().list_namespaced_service_account,
        pods=_core().list_namespaced_pod,
    )
    page, _ = _call(methods[kind], namespace, limit=limit, timeout=timeout, **impersonation_headers(None))
    return (page or {}).get("items") or [], bool(((page or {}).get("metadata") or {}).get("continue"))


def quantity(text: str | None) -> float:
    """A Kubernetes quantity ("100m", "128Mi") as a number (0 when missing or unreadable)."""
    try:
        return float(k8s_utils.parse_quantity(text)) if text else 0.0
    except (ValueError, TypeError):
        return 0.0
