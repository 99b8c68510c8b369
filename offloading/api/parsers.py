"""The API's JSON parser: bodies capped at ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (413) and nesting at
``MAX_JSON_DEPTH`` (400), read before anything else looks at them."""

from __future__ import annotations

import json
from typing import Any

from django.conf import settings
from rest_framework.exceptions import ParseError
from rest_framework.parsers import JSONParser

from .errors import RequestTooLarge

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


class LimitedJSONParser(JSONParser):
    def parse(self, stream: Any, media_type: str | None = None, parser_context: Any = None) -> Any:
        limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
        raw = stream.read(limit + 1) if stream is not None else b""
        if len(raw) > limit:
            raise RequestTooLarge(f"the request body is over {limit} bytes")
        too_deep = ParseError(f"JSON parse error - nested more than {MAX_JSON_DEPTH} levels deep")
        try:
            data = json.loads(raw.decode("utf-8")) if raw else None
        except RecursionError as exc:
            raise too_deep from exc
        except ValueError as exc:  # UnicodeDecodeError and JSONDecodeError
            raise ParseError(f"JSON parse error - {exc}") from exc
        if depth_over(data, MAX_JSON_DEPTH):
            raise too_deep
        return data
