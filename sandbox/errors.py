"""Kubernetes API errors rendered as `Status` bodies, with the API server's reasons and messages."""

from __future__ import annotations

from typing import Any

from sandbox.kinds import Kind


class ApiError(Exception):
    """An error the API answers with a `Status` body (`code` is the HTTP status)."""

    def __init__(
        self,
        code: int,
        reason: str,
        message: str,
        details: dict[str, Any] | None = None,
        retry_after: int | None = None,
    ) -> None:
        super().__init__(message)
        self.code = code
        self.reason = reason
        self.message = message
        self.details = details
        self.retry_after = retry_after

    def status(self) -> dict[str, Any]:
        body: dict[str, Any] = {
            "kind": "Status",
            "apiVersion": "v1",
            "metadata": {},
            "status": "Failure",
            "message": self.message,
            "reason": self.reason,
            "code": self.code,
        }
        if self.details:
            body["details"] = self.details
        return body


def _details(kind: Kind | None, name: str, *, use_kind: bool = False, **extra: Any) -> dict[str, Any]:
    details: dict[str, Any] = {}
    if name:
        details["name"] = name
    if kind is not None:
        if kind.group:
            details["group"] = kind.group
        details["kind"] = kind.kind if use_kind else kind.plural
    details.update(extra)
    return details


def not_found(kind: Kind, name: str) -> ApiError:
    return ApiError(404, "NotFound", f'{kind.qualified} "{name}" not found', _details(kind, name))


def already_exists(kind: Kind, name: str) -> ApiError:
    return ApiError(409, "AlreadyExists", f'{kind.qualified} "{name}" already exists', _details(kind, name))


def conflict(kind: Kind, name: str, why: str = "") -> ApiError:
    why = why or "the object has been modified; please apply your changes to the latest version and try again"
    return ApiError(
        409, "Conflict", f'Operation cannot be fulfilled on {kind.qualified} "{name}": {why}', _details(kind, name)
    )


def invalid(kind: Kind, name: str, causes: list[dict[str, str]]) -> ApiError:
    """422 Invalid; each cause has `field`, `message` (already formatted) and `reason`."""
    text = "; ".join(f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes)
    if len(causes) > 1:
        text = (
            "[" + ", ".join(f"{c['field']}: {c['message']}" if c.get("field") else c["message"] for c in causes) + "]"
        )
    group = f".{kind.group}" if kind.group else ""
    return ApiError(
        422,
        "Invalid",
        f'{kind.kind}{group} "{name}" is invalid: {text}',
        _details(kind, name, use_kind=True, causes=causes),
    )


def bad_request(message: str) -> ApiError:
    return ApiError(400, "BadRequest", message)


def forbidden(message: str, kind: Kind | None = None, name: str = "") -> ApiError:
    return ApiError(403, "Forbidden", message, _details(kind, name) if kind else None)


def unauthorized() -> ApiError:
    return ApiError(401, "Unauthorized", "Unauthorized")


def method_not_allowed(message: str = "the server does not allow this method on the requested resource") -> ApiError:
    return ApiError(405, "MethodNotAllowed", message)


def gone_expired(message: str) -> ApiError:
    return ApiError(410, "Expired", message)


def too_old(rv: int, oldest: int) -> ApiError:
    return ApiError(410, "Expired", f"too old resource version: {rv} ({oldest})")


def unsupported_media_type(content_type: str) -> ApiError:
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the body of the request was in an unknown format - accepted "
        f'media types include: application/json, application/yaml (got "{content_type}")',
    )


def unsupported_protobuf(what: str) -> ApiError:
    """A protobuf body the sandbox cannot read (`sandbox.protobuf`): it names what, and the way around."""
    return ApiError(
        415,
        "UnsupportedMediaType",
        f"the sandbox does not decode {what}: send the body as application/json (with kubectl: "
        "`kubectl create ... --dry-run=client -o yaml | kubectl create -f -`)",
    )


def internal(message: str) -> ApiError:
    return ApiError(500, "InternalError", f"Internal error occurred: {message}", {"causes": [{"message": message}]})


def too_many_requests() -> ApiError:
    return ApiError(429, "TooManyRequests", "Too many requests, please try again later.", retry_after=1)


def unavailable(message: str) -> ApiError:
    return ApiError(503, "ServiceUnavailable", message, retry_after=1)


def timeout(message: str) -> ApiError:
    return ApiError(504, "Timeout", message, retry_after=1)
