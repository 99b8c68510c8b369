"""The API's JSON parser: bodies capped at ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (413) and nesting at
``MAX_JSON_DEPTH`` (400), read before anything else looks at them; an object with the same key twice,
at any depth, is a 400 naming the key (``json`` would keep the last value silently, and two readers of
the same body could disagree about what it says)."""

from __future__ import annotations

import json
from functools import partial
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from offloading.api.errors import RequestTooLarge

MAX_JSON_DEPTH = 32


def depth_over(value: Any, limit: int) -> bool:
    """Whether arrays and objects nest more than ``limit`` deep (iterative: no recursion to exhaust)."""
    stack: list[tuple[Any, int]] = [(value, 0)]
    while stack:
        item, depth = stack.pop()
        if isinstance(item, dict | list):
            depth += 1
            if depth > limit:
                return True
            children = item.values() if isinstance(item, dict) else item
            stack.extend((child, depth) for child in children if isinstance(child, dict | list))
    return False


class _Duplicated(dict[str, Any]):
    """An object that had keys more than once (``duplicates``, in the order met); never returned."""

    duplicates: list[str]


class DuplicateKey(ParseError):
    """A 400 whose ``Status`` names the key (``causes``: its path, reason ``FieldValueDuplicate``)."""

    def __init__(self, key: str, parent: str) -> None:
        where = f" in {parent}" if parent else ""
        quoted = json.dumps(key, ensure_ascii=False)
        super().__init__(f"JSON parse error - duplicate key {quoted}{where}")
        path = f"{parent}.{key}" if parent else key
        self.causes = [{"field": path, "reason": "FieldValueDuplicate", "message": f"duplicate key {quoted}"}]


def _object(seen: list[bool], pairs: list[tuple[str, Any]]) -> dict[str, Any]:
    result: dict[str, Any] = {}
    duplicates: list[str] = []
    for key, value in pairs:
        if key in result and key not in duplicates:
            duplicates.append(key)
        result[key] = value
    if not duplicates:
        return result
    seen.append(True)
    marked = _Duplicated(result)
    marked.duplicates = duplicates
    return marked


def first_duplicate(value: Any) -> tuple[str, str] | None:
    """The first duplicated key in document order and the path of its object (``a.b[0]``), or None
    (iterative, like depth_over)."""
    stack: list[tuple[Any, str]] = [(value, "")]
    while stack:
        item, path = stack.pop()
        if isinstance(item, _Duplicated):
            return item.duplicates[0], path
        if isinstance(item, dict):
            children = [(child, f"{path}.{key}" if path else str(key)) for key, child in item.items()]
        elif isinstance(item, list):
            children = [(child, f"{path}[{index}]") for index, child in enumerate(item)]
        else:
            continue
        stack.extend(reversed([(child, where) for child, where in children if isinstance(child, dict | list)]))
    return None


class LimitedJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise RequestTooLarge(f"the request body is over {limit} bytes")
        duplicated: list[bool] = []
        too_deep = ParseError(f"JSON parse error - nested more than {MAX_JSON_DEPTH} levels deep")
        try:
            data = json.loads(raw.decode("utf-8"), object_pairs_hook=partial(_object, duplicated)) if raw else None
        except RecursionError as exc:
            raise too_deep from exc
        except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError
            raise ParseError(f"JSON parse error - {exc}") from exc
        if depth_over(data, MAX_JSON_DEPTH):
            raise too_deep
        duplicate = first_duplicate(data) if duplicated else None
        if duplicate is not None:
            raise DuplicateKey(*duplicate)
        return data
