"""Helpers shared by the page modules."""

from __future__ import annotations

from typing import Any

import yaml

from offloading.changes.errors import ChangeRejected
from offloading.models import Namespace


def dump_yaml(obj: Any) -> str:
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False)


def reject_into(form: Any, exc: ChangeRejected, field: str | None = None) -> None:
    """Put a service's refusal on the form (on ``field``, or as a form-wide error)."""
    for field_messages in exc.errors.values():
        for message in field_messages:
            form.add_error(field, message)


def status_context(namespace: Namespace) -> dict[str, Any]:
    rows = list(namespace.cluster_states.all()) if namespace.offloaded else []
    return {"namespace": namespace, "cluster_rows": rows}
