from __future__ import annotations

from typing import Any

from django.http import HttpRequest

from .changes import apihealth
from .models import SnapshotState


def snapshot_state(request: HttpRequest) -> dict[str, Any]:
    """Every page shows how fresh the snapshot is (and says so loudly when it is stale)."""
    if not getattr(request, "user", None) or not request.user.is_authenticated:
        return {}
    state = SnapshotState.get()
    return {"snapshot": state, "snapshot_stale": state.is_stale(), "api_outage": apihealth.outage()}
