"""The Kubernetes-style ``Status`` body: the one shape of every error the API answers, written by the API's
exception handler (offloading.api.errors) and by the middlewares that answer before any view does (a body
over the size limit, an account without a role). No Django REST framework here: the pages load none."""

from __future__ import annotations

from typing import Any

REASONS = {
    400: "BadRequest",
    401: "Unauthorized",
    403: "Forbidden",
    404: "NotFound",
    405: "MethodNotAllowed",
    406: "NotAcceptable",
    409: "Conflict",
    412: "PreconditionFailed",
    413: "RequestEntityTooLarge",
    415: "UnsupportedMediaType",
    422: "Invalid",
    429: "TooManyRequests",
}


def status_data(
    code: int, message: str, causes: list[dict[str, str]] | None = None, *, name: str = "", kind: str = ""
) -> dict[str, Any]:
    """A ``Status`` body as the Kubernetes API server writes it."""
    details: dict[str, Any] = {"causes": causes or []}
    if name:
        details["name"] = name
    if kind:
        details["kind"] = kind
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": message,
        "reason": REASONS.get(code, "Unknown"),
        "details": details,
        "code": code,
    }
