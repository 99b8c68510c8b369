"""Request id and request context for the audit trail."""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

from . import context


class RequestContextMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        request.request_id = context.new_request_id(request.headers.get("X-Request-ID"))  # type: ignore[attr-defined]
        token = context.set_request(request)
        try:
            response = self.get_response(request)
        finally:
            context.reset_request(token)
        response["X-Request-ID"] = request.request_id  # type: ignore[attr-defined]
        return response
