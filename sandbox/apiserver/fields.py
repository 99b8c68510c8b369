"""managedFields bookkeeping: field sets, their `fieldsV1` rendering, and who owns what after an update.

A field set is a set of leaf paths (tuples of keys). Maps are recursed into; scalars, lists (atomic, as
in CRDs without list-type markers), empty maps and the maps the CRD schema marks
`x-kubernetes-map-type: atomic` (owned as a whole, as structured-merge-diff does) are leaves. `fieldsV1`
is the usual nested `{"f:spec": {"f:x": {}}}` rendering. Updates move ownership of the changed leaves to
the updating manager (server-side apply, in `apply`, owns exactly the applied leaves).
"""

from __future__ import annotations

from typing import Any

from sandbox.crds import SCHEMAS, Schema
from sandbox.kinds import Kind
from sandbox.objects import clone

Path = tuple[str, ...]
META_TRACKED = ("labels", "annotations", "finalizers", "ownerReferences")


def is_atomic(schema: Schema | None) -> bool:
    """A map or struct the schema marks `x-kubernetes-map-type: atomic`: one field, not one per key."""
    return schema is not None and schema.get("x-kubernetes-map-type") == "atomic"


def child_schema(schema: Schema | None, key: str) -> Schema | None:
    """The schema of the field `key` of an object (None where the schema says nothing, e.g. core kinds)."""
    if schema is None:
        return None
    properties = schema.get("properties")
    if properties is not None:
        return properties.get(key)
    extra = schema.get("additionalProperties")
    return extra if isinstance(extra, dict) else None


def _leaves(value: Any, prefix: Path, out: dict[Path, Any], schema: Schema | None) -> None:
    if isinstance(value, dict) and value and not is_atomic(schema):
        for key, child in value.items():
            _leaves(child, prefix + (str(key),), out, child_schema(schema, str(key)))
    else:
        out[prefix] = value


def leaf_values(obj: dict[str, Any], kind: Kind, subresource: str = "") -> dict[Path, Any]:
    schema = SCHEMAS.get(kind.key)
    out: dict[Path, Any] = {}
    for key, value in obj.items():
        if key in ("apiVersion", "kind"):
            continue
        if key == "metadata":
            for meta_key in META_TRACKED:
                if meta_key in (value or {}):
                    _leaves(value[meta_key], ("metadata", meta_key), out, None)
            continue
        if kind.status_subresource and ((key == "status") != (subresource == "status")):
            continue
        _leaves(value, (key,), out, child_schema(schema, key))
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


def overlaps(a: Path, b: Path) -> bool:
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


def managed_entry(
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


def ownership_changed(old: dict[str, Any], new: dict[str, Any]) -> bool:
    """Whether the managedFields of `new` say something else than those of `old` but when (an apply
    that changes no value but who owns it is still written, as kube-apiserver does)."""

    def owners(obj: dict[str, Any]) -> list[dict[str, Any]]:
        entries = (obj.get("metadata") or {}).get("managedFields") or []
        return [{k: v for k, v in entry.items() if k != "time"} for entry in entries]

    return owners(old) != owners(new)


def identity(entry: dict[str, Any]) -> tuple[str, str, str]:
    """What tells managedFields entries apart: (manager, operation, subresource)."""
    return (entry.get("manager", ""), entry.get("operation", ""), entry.get("subresource", ""))


def strip_ownership(
    entries: list[dict[str, Any]], paths: set[Path], skip: tuple[str, str, str] | None = None
) -> list[dict[str, Any]]:
    """Remove ownership of `paths` (and overlapping leaves) from every entry but `skip`."""
    out = []
    # p overlaps q when one is a prefix of the other: compare against the prefixes once (not pairwise)
    prefixes = {q[:n] for q in paths for n in range(1, len(q) + 1)}
    for entry in entries:
        ident = identity(entry)
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
    managed = strip_ownership(managed, changed | removed, skip=None)
    mine = next((e for e in managed if identity(e) == ident), None)
    owned = from_fields_v1(mine["fieldsV1"]) if mine else set()
    owned = owned | changed
    managed = [e for e in managed if e is not mine]
    if owned:
        managed.append(managed_entry(manager, operation, kind.api_version, owned, now, subresource))
    new["metadata"]["managedFields"] = managed
