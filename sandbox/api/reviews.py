"""(Self)SubjectAccessReviews against the sandbox RBAC policy."""

from __future__ import annotations

from typing import Any

from sandbox import errors
from sandbox.api.context import Api
from sandbox.api.request import Exchange
from sandbox.kinds import SUBJECT_ACCESS_REVIEWS, Kind
from sandbox.rbac import Attributes, User


def access_review(api: Api, exchange: Exchange, kind: Kind, user: User) -> None:
    """SubjectAccessReview (about the subject in the spec) or SelfSubjectAccessReview (about `user`)."""
    body = exchange.json_body(exchange.body())  # JSON, or the protobuf `kubectl auth can-i` sends
    spec = body.get("spec") or {}
    if kind is SUBJECT_ACCESS_REVIEWS:
        if not spec.get("user") and not spec.get("groups"):
            raise errors.invalid(
                kind,
                "",
                [
                    {
                        "field": "spec.user",
                        "reason": "FieldValueInvalid",
                        "message": 'Invalid value: "": at least one of user or group must be specified',
                    }
                ],
            )
        subject = User(spec.get("user") or "", tuple(spec.get("groups") or ()))
    else:
        subject = user
    resource = spec.get("resourceAttributes")
    non_resource = spec.get("nonResourceAttributes")
    if resource:
        attrs = Attributes(
            resource.get("verb") or "",
            resource.get("group") or "",
            resource.get("resource") or "",
            resource.get("subresource") or "",
            resource.get("namespace") or "",
            resource.get("name") or "",
        )
    elif non_resource:
        attrs = Attributes(non_resource.get("verb") or "", path=non_resource.get("path") or "")
    else:
        raise errors.invalid(
            kind,
            "",
            [
                {
                    "field": "spec",
                    "reason": "FieldValueRequired",
                    "message": "Required value: exactly one of nonResourceAttributes or "
                    "resourceAttributes must be specified",
                }
            ],
        )
    allowed = api.policy.allowed(subject, attrs)
    status: dict[str, Any] = {"allowed": allowed}
    if allowed:
        status["reason"] = "allowed by sandbox RBAC policy"
    body = dict(body, apiVersion=kind.api_version, kind=kind.kind, status=status)
    body.setdefault("metadata", {})["creationTimestamp"] = None
    exchange.send(201, body)
