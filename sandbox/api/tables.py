"""meta.k8s.io/v1 Tables for `kubectl get`: the printer columns of each kind."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterable
from typing import Any

from sandbox.api.query import field_value
from sandbox.kinds import (
    Column,
    Kind,
)
from sandbox.objects import Obj


# -- tables ----------------------------------------------------------------------------------------
def human_duration(seconds: float) -> str:
    """k8s.io/apimachinery duration.HumanDuration."""
    s = int(seconds)
    if s < 0:
        return "<invalid>"
    if s < 120:
        return f"{s}s"
    minutes = s // 60
    if minutes < 10:
        return f"{minutes}m{s % 60}s" if s % 60 else f"{minutes}m"
    if minutes < 180:
        return f"{minutes}m"
    hours = s // 3600
    if hours < 8:
        return f"{hours}h{minutes % 60}m" if minutes % 60 else f"{hours}h"
    if hours < 48:
        return f"{hours}h"
    days = hours // 24
    if hours < 24 * 8:
        return f"{days}d{hours % 24}h" if hours % 24 else f"{days}d"
    if days < 365 * 2:
        return f"{days}d"
    return f"{days // 365}y"


def _since(timestamp: str | None) -> str:
    if not timestamp:
        return "<unknown>"
    try:
        then = dt.datetime.strptime(timestamp, "%Y-%m-%dT%H:%M:%SZ").replace(tzinfo=dt.UTC)
    except ValueError:
        return "<unknown>"
    return human_duration((dt.datetime.now(dt.UTC) - then).total_seconds())


def _cell(obj: Obj, column: Column) -> Any:
    path = column.path
    if path == "@age":
        return _since((obj.get("metadata") or {}).get("creationTimestamp"))
    status = obj.get("status") or {}
    if path == "@node_status":
        ready = next((c for c in status.get("conditions") or [] if c.get("type") == "Ready"), None)
        text = "Ready" if ready and ready.get("status") == "True" else "NotReady" if ready else "Unknown"
        if (obj.get("spec") or {}).get("unschedulable"):
            text += ",SchedulingDisabled"
        return text
    if path == "@node_roles":
        labels = (obj.get("metadata") or {}).get("labels") or {}
        roles = sorted(
            {k.split("/", 1)[1] for k in labels if k.startswith("node-role.kubernetes.io/")}
            | ({labels["kubernetes.io/role"]} if "kubernetes.io/role" in labels else set())
        )
        return ",".join(r for r in roles if r) or "<none>"
    if path == "@node_ip":
        return next(
            (a.get("address") for a in status.get("addresses") or [] if a.get("type") == "InternalIP"), "<none>"
        )
    if path == "@pod_ready":
        statuses = status.get("containerStatuses") or []
        total = len((obj.get("spec") or {}).get("containers") or [])
        return f"{sum(1 for c in statuses if c.get('ready'))}/{total}"
    if path == "@pod_restarts":
        return sum(int(c.get("restartCount") or 0) for c in status.get("containerStatuses") or [])
    if path == "@event_last_seen":
        return _since(
            obj.get("lastTimestamp") or obj.get("eventTime") or (obj.get("metadata") or {}).get("creationTimestamp")
        )
    if path == "@event_object":
        inv = obj.get("involvedObject") or {}
        return f"{(inv.get('kind') or '').lower()}/{inv.get('name', '')}"
    if path.startswith("@vn_condition_"):
        ctype = path[len("@vn_condition_") :]
        return next((c.get("status") for c in status.get("conditions") or [] if c.get("type") == ctype), None)
    value = field_value(obj, path) if not isinstance(_raw(obj, path), (int, bool)) else _raw(obj, path)
    return value if value != "" else None


def _raw(obj: Obj, path: str) -> Any:
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, dict):
            return None
        node = node.get(part)
    return node


def table(kind: Kind, objs: Iterable[Obj], list_meta: dict[str, Any], include: str) -> dict[str, Any]:
    columns = [
        {
            "name": "Name",
            "type": "string",
            "format": "name",
            "priority": 0,
            "description": "Name must be unique within a namespace.",
        }
    ]
    columns += [
        {"name": c.name, "type": c.type, "format": "", "description": c.description or c.name, "priority": c.priority}
        for c in kind.columns
    ]
    rows = []
    for obj in objs:
        row: dict[str, Any] = {"cells": [obj["metadata"]["name"]] + [_cell(obj, c) for c in kind.columns]}
        if include == "Object":
            row["object"] = obj
        elif include != "None":
            row["object"] = {
                "kind": "PartialObjectMetadata",
                "apiVersion": "meta.k8s.io/v1",
                "metadata": obj.get("metadata") or {},
            }
        rows.append(row)
    return {
        "kind": "Table",
        "apiVersion": "meta.k8s.io/v1",
        "metadata": list_meta,
        "columnDefinitions": columns,
        "rows": rows,
    }
