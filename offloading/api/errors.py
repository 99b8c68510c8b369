"""Every error of the API as a Kubernetes-style ``Status`` body: DRF's exceptions (field errors,
authentication, permissions, throttling, unknown routes), the body-size and nesting limits, unknown
query parameters and a malformed ``If-Match``."""

from __future__ import annotations

import re
from typing import Any

from django.core.exceptions import RequestDataTooBig
from rest_framework import exceptions, status
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import exception_handler as drf_exception_handler

from liqo_dash.statusbody import REASONS, status_data  # the body, shared with the middlewares

_INT64_MAX = 2**63 - 1


class RequestTooLarge(exceptions.APIException):
    status_code = status.HTTP_413_REQUEST_ENTITY_TOO_LARGE
    default_detail = "the request body is too large"
    default_code = "too_large"


def _causes(detail: Any, prefix: str = "") -> list[dict[str, str]]:
    """Field errors of a serializer, flattened to ``field.sub[0]`` paths."""
    if isinstance(detail, dict):
        return [c for key, value in detail.items() for c in _causes(value, f"{prefix}.{key}" if prefix else str(key))]
    if isinstance(detail, list):
        if all(not isinstance(item, dict | list) for item in detail):
            return [{"field": prefix, "reason": "FieldValueInvalid", "message": str(item)} for item in detail]
        return [c for i, item in enumerate(detail) for c in _causes(item, f"{prefix}[{i}]")]
    return [{"field": prefix, "reason": "FieldValueInvalid", "message": str(detail)}]


def exception_handler(exc: Exception, context: dict[str, Any]) -> Response | None:
    """DRF's handler, with every answer rewritten as a ``Status``."""
    if isinstance(exc, RequestDataTooBig):
        exc = RequestTooLarge(str(exc))
    response = drf_exception_handler(exc, context)
    if response is None:
        return None
    code = response.status_code
    if isinstance(exc, exceptions.ValidationError):
        causes = _causes(exc.detail)
        message = "; ".join(f"{c['field']}: {c['message']}" if c["field"] else c["message"] for c in causes)
        response.data = status_data(code, message or "invalid request", causes)
    else:
        detail = getattr(exc, "detail", None)
        message = str(detail) if detail is not None else REASONS.get(code, "error")
        named = {"name": getattr(exc, "name", ""), "kind": getattr(exc, "kind", "")}
        response.data = status_data(code, message, getattr(exc, "causes", None), **named)
    return response


def field_error(field: str, message: str) -> exceptions.ValidationError:
    return exceptions.ValidationError({field: [message]})


def _at_most(limit: int) -> str:
    """A regular expression for the decimal numbers from 0 to ``limit`` (leading zeros allowed)."""
    digits = str(limit)
    shorter = f"[0-9]{{1,{len(digits) - 1}}}"
    alternatives = [
        digits[:i]
        + (f"[0-{int(d) - 1}]" if d != "1" else "0")
        + (f"[0-9]{{{len(digits) - i - 1}}}" if i < len(digits) - 1 else "")
        for i, d in enumerate(digits)
        if d != "0"
    ]
    return "|".join([shorter, *alternatives, digits])


# An ETag of a namespace as If-Match takes it: "<generation>" (an int64), W/ allowed, or *; the OpenAPI
# schema gives the same expression.
IF_MATCH_PATTERN = rf'^[ \t]*(?:\*|(?:W/)?"(?:{_at_most(_INT64_MAX)})")[ \t]*$'
_IF_MATCH = re.compile(IF_MATCH_PATTERN)


def if_match_generation(request: Request) -> int | None:
    """The generation of an ``If-Match: "<generation>"`` header (``*`` and no header: None); anything
    else, an empty value, a number without quotes or non-ASCII digits included, is a 400 on the header."""
    header = request.headers.get("If-Match")
    if header is None:
        return None
    if not _IF_MATCH.match(header):
        raise field_error("If-Match", 'must be the ETag of the namespace, a generation number in quotes ("3"), or *')
    value = header.strip(" \t").removeprefix("W/").strip('"')
    return None if value == "*" else int(value)


def check_query_parameters(request: Request, accepted: set[str]) -> None:
    """A 400 naming the unknown query parameters and listing the accepted ones."""
    unknown = sorted(set(request.query_params) - accepted)
    if unknown:
        listed = ", ".join(sorted(accepted)) or "none"
        raise exceptions.ValidationError({name: [f"unknown query parameter; accepted: {listed}"] for name in unknown})
