"""Server-side apply: the applied configuration merged into the stored object by field ownership.

A manager's apply owns exactly the leaves it applied; a leaf another manager owns with a different value
is a conflict (409 naming the fields and their managers) unless `force`, which takes them over; leaves
the manager applied before and omits now are removed when nobody else owns them. Maps merge key by key,
lists, scalars and the maps the CRD marks `x-kubernetes-map-type: atomic` are replaced: such a map is one
field, owned, conflicting and removed as a whole (NamespaceOffloading's `spec.clusterSelector`).
"""

from __future__ import annotations

from typing import Any

from sandbox.apiserver.fields import (
    Path,
    child_schema,
    from_fields_v1,
    identity,
    is_atomic,
    leaf_values,
    managed_entry,
    overlaps,
    strip_ownership,
)
from sandbox.crds import SCHEMAS, Schema
from sandbox.errors import ApiError
from sandbox.kinds import Kind
from sandbox.objects import clone


def _get(obj: Any, path: Path) -> Any:
    for part in path:
        if not isinstance(obj, dict) or part not in obj:
            return _MISSING
        obj = obj[part]
    return obj


def _delete(obj: dict[str, Any], path: Path) -> None:
    node: Any = obj
    for part in path[:-1]:
        if not isinstance(node, dict) or part not in node:
            return
        node = node[part]
    if isinstance(node, dict):
        node.pop(path[-1], None)


_MISSING = object()


def _fmt(path: Path) -> str:
    return "".join("." + p for p in path)


def server_side_apply(
    current: dict[str, Any] | None,
    applied: dict[str, Any],
    kind: Kind,
    manager: str,
    force: bool,
    now: str,
    subresource: str = "",
) -> dict[str, Any]:
    """Merge an applied configuration into `current` and return the new object with managedFields."""
    base = clone(current) if current is not None else {}
    managed = clone((base.get("metadata") or {}).get("managedFields") or [])
    applied_leaves = leaf_values(applied, kind, subresource)
    ident = (manager, "Apply", subresource)

    conflicts: list[tuple[str, Path]] = []
    for entry in managed:
        if entry.get("manager") == manager:
            continue
        owned = from_fields_v1(entry.get("fieldsV1") or {})
        for path, value in applied_leaves.items():
            if any(overlaps(path, o) for o in owned) and _get(base, path) != value:
                conflicts.append((entry["manager"], path))
    if conflicts and not force:
        raise _conflict_error(kind, applied, conflicts)
    if conflicts:
        managed = strip_ownership(managed, {p for _, p in conflicts}, skip=ident)

    previous = next((e for e in managed if identity(e) == ident), None)
    others: set[Path] = set()
    for entry in managed:
        if entry is not previous:
            others |= from_fields_v1(entry.get("fieldsV1") or {})
    if previous is not None:
        for path in from_fields_v1(previous.get("fieldsV1") or {}):
            if path not in applied_leaves and not any(overlaps(path, o) for o in others):
                _delete(base, path)

    filtered = {k: v for k, v in applied.items() if k not in ("apiVersion", "kind")}
    if kind.status_subresource:
        if subresource == "status":
            filtered = {"status": filtered.get("status", {}), "metadata": {}}
        else:
            filtered.pop("status", None)
    merged = merge_applied(base, filtered, SCHEMAS.get(kind.key))
    managed = [e for e in managed if e is not previous]
    managed.append(managed_entry(manager, "Apply", kind.api_version, set(applied_leaves), now, subresource))
    merged.setdefault("metadata", {})["managedFields"] = managed
    return merged


def _conflict_error(kind: Kind, applied: dict[str, Any], conflicts: list[tuple[str, Path]]) -> ApiError:
    name = (applied.get("metadata") or {}).get("name", "")
    causes = [
        {
            "type": "FieldManagerConflict",
            "message": f'conflict with "{mgr}" using {kind.api_version}',
            "field": _fmt(path),
        }
        for mgr, path in conflicts
    ]
    if len(conflicts) == 1:
        mgr, path = conflicts[0]
        text = f'Apply failed with 1 conflict: conflict with "{mgr}" using {kind.api_version}: {_fmt(path)}'
    else:
        lines = "\n".join(f'- conflict with "{mgr}" using {kind.api_version}: {_fmt(p)}' for mgr, p in conflicts)
        text = f"Apply failed with {len(conflicts)} conflicts:\n{lines}"
    details: dict[str, Any] = {"name": name, "kind": kind.plural, "causes": causes}
    if kind.group:
        details["group"] = kind.group
    return ApiError(409, "Conflict", text, details)


def merge_applied(target: Any, applied: Any, schema: Schema | None) -> Any:
    """The applied configuration merged into `target`: maps key by key, except the ones the schema marks
    atomic, which are replaced whole, like lists and scalars."""
    if not isinstance(applied, dict) or not isinstance(target, dict) or is_atomic(schema):
        return clone(applied)
    result = dict(target)
    for key, value in applied.items():
        result[key] = merge_applied(result.get(key), value, child_schema(schema, key))
    return result
