"""Discovery (legacy, not aggregated), /version, health and OpenAPI v3, and resource URL parsing."""

from __future__ import annotations

from typing import Any

from sandbox.kinds import (
    Kind,
    group_versions,
    lookup,
)

SERVER_VERSION = {
    "major": "1",
    "minor": "35",
    "gitVersion": "v1.35.2-sandbox",
    "gitCommit": "0000000000000000000000000000000000000000",
    "gitTreeState": "clean",
    "buildDate": "2026-01-01T00:00:00Z",
    "goVersion": "go1.25.0",
    "compiler": "gc",
    "platform": "linux/amd64",
    "emulationMajor": "1",
    "emulationMinor": "35",
}


# -- discovery -------------------------------------------------------------------------------------
def resource_list(group: str, version: str) -> dict[str, Any] | None:
    gv = next((g for g in group_versions() if g.group == group and g.version == version), None)
    if gv is None:
        return None
    resources = []
    for kind in gv.kinds:
        entry: dict[str, Any] = {
            "name": kind.plural,
            "singularName": kind.singular,
            "namespaced": kind.namespaced,
            "kind": kind.kind,
            "verbs": list(kind.verbs),
        }
        if kind.short_names:
            entry["shortNames"] = list(kind.short_names)
        if kind.categories:
            entry["categories"] = list(kind.categories)
        resources.append(entry)
        if kind.status_subresource:
            resources.append(
                {
                    "name": kind.plural + "/status",
                    "singularName": "",
                    "namespaced": kind.namespaced,
                    "kind": kind.kind,
                    "verbs": ["get", "patch", "update"],
                }
            )
    return {
        "kind": "APIResourceList",
        "apiVersion": "v1",
        "groupVersion": f"{group}/{version}" if group else version,
        "resources": resources,
    }


def group_list() -> dict[str, Any]:
    groups: dict[str, list[str]] = {}
    for gv in group_versions():
        if gv.group:
            groups.setdefault(gv.group, []).append(gv.version)
    return {
        "kind": "APIGroupList",
        "apiVersion": "v1",
        "groups": [_group(name, versions) for name, versions in groups.items()],
    }


def _group(name: str, versions: list[str]) -> dict[str, Any]:
    entries = [{"groupVersion": f"{name}/{v}", "version": v} for v in versions]
    return {"name": name, "versions": entries, "preferredVersion": entries[0]}


# -- OpenAPI v3 (just enough for kubectl's validation to defer to the server) ---------------------------
def _gv_path(group: str, version: str) -> str:
    return f"apis/{group}/{version}" if group else f"api/{version}"


def openapi_root() -> dict[str, Any]:
    return {
        "paths": {
            _gv_path(gv.group, gv.version): {
                "serverRelativeURL": f"/openapi/v3/{_gv_path(gv.group, gv.version)}?hash=sandbox"
            }
            for gv in group_versions()
        }
    }


def openapi_group_version(gv_path: str) -> dict[str, Any] | None:
    """Paths with their operations' group/version/kind and the fieldValidation parameter: kubectl then
    validates server-side (fieldValidation=Strict) instead of needing full schemas. There are no schemas."""
    gv = next((g for g in group_versions() if _gv_path(g.group, g.version) == gv_path), None)
    if gv is None:
        return None
    param = [{"name": "fieldValidation", "in": "query", "schema": {"type": "string", "uniqueItems": True}}]
    paths: dict[str, Any] = {}
    for kind in gv.kinds:
        gvk = {"group": kind.group, "version": kind.version, "kind": kind.kind}
        base = "/" + gv_path + ("/namespaces/{namespace}" if kind.namespaced else "") + "/" + kind.plural
        operation = {"x-kubernetes-group-version-kind": gvk, "parameters": param, "responses": {}}
        paths[base] = {"post": operation}
        paths[base + "/{name}"] = {"put": operation, "patch": operation}
    return {
        "openapi": "3.0.0",
        "info": {"title": "Kubernetes", "version": SERVER_VERSION["gitVersion"]},
        "paths": paths,
        "components": {"schemas": {}},
    }


def static_response(path: str, host: str) -> Any:
    """The body of a fixed GET path (version, health, discovery, OpenAPI), or None."""
    if path == "/version":
        return SERVER_VERSION
    if path in ("/healthz", "/readyz", "/livez"):
        return b"ok"
    if path == "/api":
        return {
            "kind": "APIVersions",
            "versions": ["v1"],
            "serverAddressByClientCIDRs": [{"clientCIDR": "0.0.0.0/0", "serverAddress": host}],
        }
    if path == "/apis":
        return group_list()
    if path == "/api/v1":
        return resource_list("", "v1")
    if path == "/openapi/v3":
        return openapi_root()
    if path.startswith("/openapi/v3/"):
        return openapi_group_version(path[len("/openapi/v3/") :])
    parts = path.split("/")[1:]
    if parts[0] == "apis" and len(parts) == 2:
        listing = group_list()
        return next((g for g in listing["groups"] if g["name"] == parts[1]), None) and dict(
            next(g for g in listing["groups"] if g["name"] == parts[1]), kind="APIGroup", apiVersion="v1"
        )
    if parts[0] == "apis" and len(parts) == 3:
        return resource_list(parts[1], parts[2])
    return None


def parse_resource_path(path: str) -> tuple[Kind, str, str, str] | None:
    """(kind, namespace, name, subresource) of a resource URL, or None."""
    parts = path.split("/")[1:]
    if parts[:2] == ["api", "v1"]:
        group, version, rest = "", "v1", parts[2:]
    elif parts and parts[0] == "apis" and len(parts) >= 4:
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return None
    namespace = ""
    if len(rest) >= 3 and rest[0] == "namespaces":
        candidate = lookup(group, version, rest[2])
        if candidate is not None and candidate.namespaced:
            namespace, rest = rest[1], rest[2:]
    if not rest or len(rest) > 3:
        return None
    kind = lookup(group, version, rest[0])
    if kind is None or (namespace and not kind.namespaced):
        return None
    name = rest[1] if len(rest) > 1 else ""
    subresource = rest[2] if len(rest) > 2 else ""
    if subresource and (subresource != "status" or not kind.status_subresource):
        return None
    return kind, namespace, name, subresource
