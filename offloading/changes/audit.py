"""Audit events of the change flow."""

from __future__ import annotations

import logging
from typing import Any

from offloading.choices import AuditAction, ChangeState
from offloading.context import Actor
from offloading.models import (
    AuditEvent,
    ChangeRequest,
)

log = logging.getLogger(__name__)


def record_requested(change: ChangeRequest, actor: Actor, before: Any, after: Any, message: str = "") -> None:
    AuditEvent.objects.create(
        user_id=actor.user_id,
        user_name=actor.user_name,
        source=change.source,
        request_id=actor.request_id,
        action=AuditAction.REQUESTED,
        namespace=change.namespace,
        change=change,
        before=before,
        after=after,
        outcome=ChangeState.QUEUED,
        message=message,
    )
