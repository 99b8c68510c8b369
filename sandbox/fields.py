"""managedFields bookkeeping and server-side apply.

A field set is a set of leaf paths (tuples of keys). Maps are recursed into; scalars, lists (atomic, as
in CRDs without list-type markers) and empty maps are leaves. `fieldsV1` is the usual nested
`{"f:spec": {"f:x": {}}}` rendering. Updates move ownership of the changed leaves to the updating
manager; applies own exactly the applied leaves, conflict with other managers on different values
(409 unless force) and remove leaves the manager stopped applying when nobody else owns them.
"""

from __future__ import annotations

from typing import Any

from sandbox.errors import ApiError
from sandbox.kinds import Kind
from sandbox.patch import deep_merge
from sandbox.store import clone

Path = tuple[str, ...]
META_TRACKED = ("labels", "annotations", "finalizers", "ownerReferences")


def _leaves(value: Any, prefix: Path, out: dict[Path, Any]) -> None:
    if isinstance(value, dict) and value:
        for key, child in value.items():
            _leaves(child, prefix + (str(key),), out)
    else:
        out[prefix] = value


def leaf_values(obj: dict[str, Any], kind: Kind, subresource: str = "") -> dict[Path, Any]:
    out: dict[Path, Any] = {}
    for key, value in obj.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "metadata":
            for meta_key in META_TRACKED:
                if meta_key in (value or {}):
                    _leaves(value[meta_key], ("metadata", meta_key), out)
            continue
        if kind.status_subresource and ((key == "status") != (subresource == "status")):
            continue
        _leaves(value, (key,), out)
    return out


def changed_paths(
    old: dict[str, Any] | None, new: dict[str, Any], kind: Kind, subresource: str = ""
) -> tuple[set[Path], set[Path]]:
    """(leaves set or changed in `new`, leaves that disappeared)."""
    before = leaf_values(old or {}, kind, subresource)
    after = leaf_values(new, kind, subresource)
    changed = {p for p, v in after.items() if p not in before or before[p] != v}
    removed = {p for p in before if p not in after}
    return changed, removed


def _overlaps(a: Path, b: Path) -> bool:
    n = min(len(a), len(b))
    return a[:n] == b[:n]


def to_fields_v1(paths: set[Path]) -> dict[str, Any]:
    root: dict[str, Any] = {}
    for path in sorted(paths):
        node = root
        for part in path:
            node = node.setdefault("f:" + part, {})
    return root


def from_fields_v1(fields: dict[str, Any], prefix: Path = ()) -> set[Path]:
    out: set[Path] = set()
    for key, child in (fields or {}).items():
        if not key.startswith("f:"):
            continue
        path = prefix + (key[2:],)
        if child:
            out |= from_fields_v1(child, path)
        else:
            out.add(path)
    return out


def _entry(
    manager: str, operation: str, api_version: str, paths: set[Path], now: str, subresource: str
) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "manager": manager,
        "operation": operation,
        "apiVersion": api_version,
        "time": now,
        "fieldsType": "FieldsV1",
        "fieldsV1": to_fields_v1(paths),
    }
    if subresource:
        entry["subresource"] = subresource
    return entry


def _strip(
    entries: list[dict[str, Any]], paths: set[Path], skip: tuple[str, str, str] | None = None
) -> list[dict[str, Any]]:
    """Remove ownership of `paths` (and overlapping leaves) from every entry but `skip`."""
    out = []
    # p overlaps q when one is a prefix of the other: compare against the prefixes once (not pairwise)
    prefixes = {q[:n] for q in paths for n in range(1, len(q) + 1)}
    for entry in entries:
        ident = (entry.get("manager", ""), entry.get("operation", ""), entry.get("subresource", ""))
        owned = from_fields_v1(entry.get("fieldsV1") or {})
        if ident != skip:
            owned = {p for p in owned if p not in prefixes and not any(p[:n] in paths for n in range(1, len(p)))}
        if owned:
            out.append(dict(entry, fieldsV1=to_fields_v1(owned)))
    return out


def record_update(
    old: dict[str, Any] | None,
    new: dict[str, Any],
    kind: Kind,
    manager: str,
    now: str,
    subresource: str = "",
    operation: str = "Update",
) -> None:
    """Set new.metadata.managedFields after a create/update/patch by `manager`."""
    managed = clone((old or {}).get("metadata", {}).get("managedFields") or [])
    changed, removed = changed_paths(old, new, kind, subresource)
    if not changed and not removed and old is not None:
        new["metadata"]["managedFields"] = managed
        return
    ident = (manager, operation, subresource)
    managed = _strip(managed, changed | removed, skip=None)
    mine = next((e for e in managed if (e.get("manager"), e.get("operation"), e.get("subresource", "")) == ident), None)
    owned = from_fields_v1(mine["fieldsV1"]) if mine else set()
    owned = owned | changed
    managed = [e for e in managed if e is not mine]
    if owned:
        managed.append(_entry(manager, operation, kind.api_version, owned, now, subresource))
    new["metadata"]["managedFields"] = managed


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
            if any(_overlaps(path, o) for o in owned) and _get(base, path) != value:
                conflicts.append((entry["manager"], path))
    if conflicts and not force:
        raise _conflict_error(kind, applied, conflicts)
    if conflicts:
        managed = _strip(managed, {p for _, p in conflicts}, skip=ident)

    previous = next(
        (e for e in managed if (e.get("manager"), e.get("operation"), e.get("subresource", "")) == ident), None
    )
    others: set[Path] = set()
    for entry in managed:
        if entry is not previous:
            others |= from_fields_v1(entry.get("fieldsV1") or {})
    if previous is not None:
        for path in from_fields_v1(previous.get("fieldsV1") or {}):
            if path not in applied_leaves and not any(_overlaps(path, o) for o in others):
                _delete(base, path)

    filtered = {k: v for k, v in applied.items() if k not in ("apiVersion", "kind")}
    if kind.status_subresource:
        if subresource == "status":
            filtered = {"status": filtered.get("status", {}), "metadata": {}}
        else:
            filtered.pop("status", None)
    merged = deep_merge(base, filtered)
    managed = [e for e in managed if e is not previous]
    managed.append(_entry(manager, "Apply", kind.api_version, set(applied_leaves), now, subresource))
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
