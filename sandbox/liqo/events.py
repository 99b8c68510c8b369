"""core/v1 Events recorded by the simulated Liqo controller, aggregated like client-go's recorder."""

from __future__ import annotations

import hashlib
import uuid

from liqo_rules import constants as c
from sandbox.apicommon import now_iso
from sandbox.kinds import EVENTS
from sandbox.liqo.context import LiqoContext
from sandbox.objects import Obj


def record_event(ctx: LiqoContext, involved: Obj, event_type: str, reason: str, message: str) -> None:
    """A new Event, or count+1 on the Event with the same involved object, reason and message."""
    meta = involved["metadata"]
    namespace = meta.get("namespace") or "default"
    now = now_iso()
    for existing in ctx.store.items(EVENTS, namespace):
        inv = existing.get("involvedObject") or {}
        if (
            inv.get("uid") == meta.get("uid")
            and existing.get("reason") == reason
            and existing.get("message") == message
        ):
            ctx.patch(
                EVENTS,
                namespace,
                existing["metadata"]["name"],
                {"count": int(existing.get("count") or 1) + 1, "lastTimestamp": now},
            )
            return
    suffix = hashlib.sha1(f"{meta.get('uid')}{reason}{message}{uuid.uuid4()}".encode()).hexdigest()[:16]
    ctx.create(
        EVENTS,
        {
            "apiVersion": "v1",
            "kind": "Event",
            "metadata": {"name": f"{meta['name']}.{suffix}", "namespace": namespace},
            "involvedObject": {
                "kind": involved.get("kind"),
                "namespace": meta.get("namespace"),
                "name": meta["name"],
                "uid": meta.get("uid"),
                "apiVersion": involved.get("apiVersion"),
                "resourceVersion": meta.get("resourceVersion"),
            },
            "reason": reason,
            "message": message,
            "type": event_type,
            "count": 1,
            "firstTimestamp": now,
            "lastTimestamp": now,
            "source": {"component": c.CONTROLLER_MANAGER},
            "reportingComponent": c.CONTROLLER_MANAGER,
            "reportingInstance": "",
        },
    )
