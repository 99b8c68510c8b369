"""Request id and request context for the audit trail; the request-body limit."""

from __future__ import annotations

import json
from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse

from liqo_dash.statusbody import status_data
from offloading import context


def _body_refusal(request: HttpRequest) -> HttpResponse | None:
    """A 413 for a declared body over ``DATA_UPLOAD_MAX_MEMORY_SIZE`` (400 for a malformed length),
    as a ``Status`` on the API, before anything reads the body."""
    declared = request.META.get("CONTENT_LENGTH") or "0"
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    if not declared.isascii() or not declared.isdigit():
        code, message = 400, "Content-Length must be a number of bytes"
    elif int(declared) > limit:
        code, message = 413, f"the request body is over {limit} bytes"
    else:
        return None
    if not request.path.startswith("/api/"):
        return HttpResponse(message, status=code, content_type="text/plain; charset=utf-8")
    return _status_response(code, message)


def _status_response(code: int, message: str) -> HttpResponse:
    return HttpResponse(json.dumps(status_data(code, message)), status=code, content_type="application/json")


def _api_error(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """Django's own error pages (an URL no route matches, say) as a ``Status`` on the API."""
    if (
        request.path.startswith("/api/v1/")
        and 400 <= response.status_code < 500
        and not response.get("Content-Type", "").startswith("application/json")
    ):
        return _status_response(response.status_code, f"{request.method} {request.path}: {response.reason_phrase}")
    return response


class RequestContextMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.request_id = context.new_request_id(request.headers.get("X-Request-ID"))  # type: ignore[attr-defined]
        token = context.set_request(request)
        try:
            response = _body_refusal(request) or _api_error(request, self.get_response(request))
        finally:
            context.reset_request(token)
        response["X-Request-ID"] = request.request_id  # type: ignore[attr-defined]
        return response
