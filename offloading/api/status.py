"""Kubernetes-style ``Status`` bodies for refusals of the change flow (what a client of the Kubernetes
API already knows how to read: ``reason``, ``code``, ``details.causes[].field``)."""

from __future__ import annotations

from typing import Any

from rest_framework.response import Response

from liqo_rules.spec import FIELD_MAPPING, FIELD_POD, FIELD_REMOTE_NAME, FIELD_SELECTOR
from offloading.changes.errors import ChangeRejected

_SPEC_FIELDS = {FIELD_MAPPING, FIELD_REMOTE_NAME, FIELD_POD, FIELD_SELECTOR}


def status_body(exc: ChangeRejected, *, name: str = "", kind: str = "namespaces") -> dict[str, Any]:
    causes = [
        {"field": f"spec.{field}" if field in _SPEC_FIELDS else field, "reason": "FieldValueInvalid", "message": m}
        for field, messages in exc.errors.items()
        for m in messages
    ]
    return {
        "kind": "Status",
        "apiVersion": "v1",
        "metadata": {},
        "status": "Failure",
        "message": "; ".join(exc.messages),
        "reason": exc.refusal.reason,
        "details": {"name": name, "kind": kind, "causes": causes},
        "code": exc.refusal.http_status,
    }


def refusal_response(exc: ChangeRejected, *, name: str = "", kind: str = "namespaces") -> Response:
    """The API's answer to a refused change: the refusal's HTTP status with a ``Status`` body."""
    return Response(status_body(exc, name=name, kind=kind), status=exc.refusal.http_status)
