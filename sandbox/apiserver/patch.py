"""Patch formats: JSON merge patch (RFC 7386), JSON patch (RFC 6902) and strategic merge patch.

Strategic merge is implemented with merge-patch semantics plus the `$patch: delete|replace` and
`$deleteFromPrimitiveList/<key>` directives and name-keyed merging of the few core list fields kubectl
touches (containers, env, ports, tolerations are replaced); that is what the issue asks for.
"""

from __future__ import annotations

from typing import Any

from sandbox.errors import ApiError, bad_request
from sandbox.objects import clone

MERGE_KEYS = {
    "containers": "name",
    "initContainers": "name",
    "env": "name",
    "ports": "containerPort",
    "volumes": "name",
    "volumeMounts": "mountPath",
    "conditions": "type",
    "taints": "key",
}


def merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return clone(patch)
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if value is None:
            result.pop(key, None)
        else:
            result[key] = merge_patch(result.get(key), value)
    return result


def strategic_merge_patch(target: Any, patch: Any) -> Any:
    if not isinstance(patch, dict):
        return clone(patch)
    directive = patch.get("$patch")
    if directive == "delete":
        return None
    if directive == "replace":
        return {k: clone(v) for k, v in patch.items() if k != "$patch"}
    result = dict(target) if isinstance(target, dict) else {}
    for key, value in patch.items():
        if key == "$patch" or key.startswith("$setElementOrder/") or key == "$retainKeys":
            continue
        if key.startswith("$deleteFromPrimitiveList/"):
            field = key.split("/", 1)[1]
            result[field] = [v for v in result.get(field) or [] if v not in value]
            continue
        if value is None:
            result.pop(key, None)
        elif isinstance(value, list) and key in MERGE_KEYS and isinstance(result.get(key), list):
            result[key] = _merge_keyed_list(result[key], value, MERGE_KEYS[key])
        else:
            merged = strategic_merge_patch(result.get(key), value)
            if merged is None:
                result.pop(key, None)
            else:
                result[key] = merged
    return result


def _merge_keyed_list(current: list[Any], patch: list[Any], merge_key: str) -> list[Any]:
    out = [clone(item) for item in current]
    for item in patch:
        if not isinstance(item, dict) or merge_key not in item:
            out.append(clone(item))
            continue
        index = next(
            (i for i, cur in enumerate(out) if isinstance(cur, dict) and cur.get(merge_key) == item[merge_key]), None
        )
        if item.get("$patch") == "delete":
            if index is not None:
                out.pop(index)
        elif index is None:
            out.append({k: v for k, v in item.items() if k != "$patch"})
        else:
            out[index] = strategic_merge_patch(out[index], item)
    return out


def _pointer(path: str) -> list[str]:
    if path == "":
        return []
    if not path.startswith("/"):
        raise bad_request(
            f'the server rejected our request due to an error in our request: invalid JSON pointer "{path}"'
        )
    return [p.replace("~1", "/").replace("~0", "~") for p in path[1:].split("/")]


def _unprocessable(message: str) -> ApiError:
    return ApiError(422, "Invalid", message)


def _container(doc: Any, parts: list[str], op: str) -> tuple[Any, str]:
    node = doc
    for part in parts[:-1]:
        if isinstance(node, dict):
            if part not in node:
                raise _unprocessable(f"{op} operation does not apply: doc is missing path: /{'/'.join(parts)}")
            node = node[part]
        elif isinstance(node, list):
            try:
                node = node[int(part)]
            except (ValueError, IndexError):
                raise _unprocessable(f"{op} operation does not apply: doc is missing path: /{'/'.join(parts)}")
        else:
            raise _unprocessable(f"{op} operation does not apply: doc is missing path: /{'/'.join(parts)}")
    return node, parts[-1]


def _get(doc: Any, parts: list[str], op: str) -> Any:
    node = doc
    for part in parts:
        try:
            node = node[int(part)] if isinstance(node, list) else node[part]
        except (KeyError, ValueError, IndexError, TypeError):
            raise _unprocessable(f"{op} operation does not apply: doc is missing path: /{'/'.join(parts)}")
    return node


def _remove(doc: Any, parts: list[str], op: str = "remove") -> Any:
    parent, last = _container(doc, parts, op)
    try:
        if isinstance(parent, list):
            return parent.pop(int(last))
        return parent.pop(last)
    except (KeyError, ValueError, IndexError, TypeError, AttributeError):
        raise _unprocessable(f"{op} operation does not apply: doc is missing path: /{'/'.join(parts)}")


def _add(doc: Any, parts: list[str], value: Any, op: str = "add") -> Any:
    if not parts:
        return value
    parent, last = _container(doc, parts, op)
    if isinstance(parent, list):
        if last == "-":
            parent.append(value)
        else:
            try:
                index = int(last)
            except ValueError:
                raise _unprocessable(f"{op} operation does not apply: invalid index {last}")
            if index < 0 or index > len(parent):
                raise _unprocessable(f"{op} operation does not apply: index out of range: {index}")
            parent.insert(index, value)
    elif isinstance(parent, dict):
        parent[last] = value
    else:
        raise _unprocessable(f"{op} operation does not apply: doc is missing path: /{'/'.join(parts)}")
    return doc


def json_patch(doc: Any, ops: Any) -> Any:
    if not isinstance(ops, list):
        raise bad_request(
            "the server rejected our request due to an error in our request: json patch must be a list of operations"
        )
    doc = clone(doc)
    for op in ops:
        if not isinstance(op, dict) or "op" not in op or "path" not in op:
            raise bad_request(
                "the server rejected our request due to an error in our request: invalid json patch operation"
            )
        kind = op["op"]
        parts = _pointer(op["path"])
        if kind == "add":
            doc = _add(doc, parts, clone(op.get("value")))
        elif kind == "remove":
            _remove(doc, parts)
        elif kind == "replace":
            _get(doc, parts, "replace")
            if not parts:
                doc = clone(op.get("value"))
            else:
                parent, last = _container(doc, parts, "replace")
                if isinstance(parent, list):
                    parent[int(last)] = clone(op.get("value"))
                else:
                    parent[last] = clone(op.get("value"))
        elif kind in ("move", "copy"):
            source = _pointer(op.get("from", ""))
            value = _remove(doc, source, kind) if kind == "move" else clone(_get(doc, source, kind))
            doc = _add(doc, parts, value, kind)
        elif kind == "test":
            if _get(doc, parts, "test") != op.get("value"):
                raise _unprocessable(f"testing value /{'/'.join(parts)} failed: test failed")
        else:
            raise bad_request(
                f"the server rejected our request due to an error in our request: Unexpected kind: {kind}"
            )
    return doc
