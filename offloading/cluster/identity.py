"""Whom the dashboard's writes are made as: the user who asked (Kubernetes impersonation) inside an
``acting_as`` block, otherwise the dashboard's own identity. Used by offloading.cluster.kube."""

from __future__ import annotations

import contextlib
import contextvars
from collections.abc import Iterator
from typing import Any, Protocol


class Identity(Protocol):
    """Who a write is made as (access.impersonation.Identity): a user name and its groups."""

    @property
    def user(self) -> str: ...

    @property
    def groups(self) -> tuple[str, ...]: ...


_acting_as: contextvars.ContextVar[Identity | None] = contextvars.ContextVar("liqo_dash_acting_as", default=None)


@contextlib.contextmanager
def acting_as(identity: Identity | None) -> Iterator[None]:
    """Make every write in the block as ``identity`` (None: the dashboard): pushes and dry-runs."""
    token = _acting_as.set(identity)
    try:
        yield
    finally:
        _acting_as.reset(token)


def impersonation_headers(identity: Identity | None) -> dict[str, Any]:
    """Per-call headers that make the API server act as ``identity`` (Kubernetes impersonation), or as
    the identity of the enclosing :func:`acting_as`; nothing when neither is set (the dashboard's own
    identity). One Impersonate-Group header: the client sends each header name once."""
    if identity is None:
        identity = _acting_as.get()
    if identity is None:
        return {}
    headers = {"Impersonate-User": identity.user}
    if identity.groups:
        headers["Impersonate-Group"] = identity.groups[0]
    return {"_headers": headers}
