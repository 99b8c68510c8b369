"""Small template helpers: status badges and YAML rendering."""

from __future__ import annotations

from typing import Any

import yaml
from django import template
from django.utils.html import format_html

from liqo_rules.reflectobjects import plural
from offloading.whatif.capacity import binary_bytes

register = template.Library()

TONES = {
    # offloading phases
    "Ready": "ok",
    "NoClusterSelected": "muted",
    "InProgress": "info",
    "SomeFailed": "warn",
    "AllFailed": "bad",
    "Terminating": "purple",
    # change states
    "queued": "muted",
    "applying": "info",
    "applied": "ok",
    "failed": "bad",
    "conflict": "warn",
    # per-cluster Ready reasons
    "NamespaceCreated": "ok",
    "Creating": "info",
    "CreationLoopBackOff": "bad",
    # module health
    "Healthy": "ok",
    "Unhealthy": "bad",
    "Disabled": "muted",
    # namespace phases (Terminating is above)
    "Active": "ok",
}


@register.simple_tag
def badge(value: str, title: str = "") -> str:
    """A coloured badge for a phase, a change state, a cluster state or a module status."""
    if not value:
        return format_html('<span class="badge muted">{}</span>', "not offloaded")
    return format_html('<span class="badge {}" title="{}">{}</span>', TONES.get(value, "muted"), title, value)


# A memory size in binary units (capacity.binary_bytes), as quotas are written.
register.filter("binary_bytes", binary_bytes)


@register.filter
def tone(value: str) -> str:
    """The colour class of a phase, state or status (the same as its badge)."""
    return TONES.get(value, "muted")


@register.filter
def as_yaml(value: Any) -> str:
    if value in (None, ""):
        return ""
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False)


@register.filter
def room_line(room: Any) -> str:
    """A peer's room (``capacity.Room``): requested of allocatable per resource, and "nearly full"."""
    from offloading.views.previewhtml import room_html

    return room_html(room)


@register.filter
def get_item(mapping: dict[str, Any], key: str) -> Any:
    return (mapping or {}).get(key)


@register.filter
def kind_plural(kind: str) -> str:
    """A Kubernetes kind in lower case, in the plural (the reflection section's rows)."""
    return plural(str(kind))


@register.filter
def index(sequence: list[Any], position: int | None) -> Any:
    if position is None:
        return None
    try:
        return sequence[position]
    except (IndexError, TypeError):
        return None


@register.filter
def field_label(form: Any, name: str) -> str:
    """The label people see for a form field (never the internal field name)."""
    field = getattr(form, "fields", {}).get(name)
    return str(field.label) if field is not None and field.label else name.replace("_", " ").capitalize()


@register.simple_tag(takes_context=True)
def may_change(context: Any, namespace: Any, action: str = "") -> Any:
    """The access decision for the signed-in user on ``namespace`` (truthy when allowed; ``.reason``
    says why not): ``{% may_change ns as allowed %}``. ``action`` defaults to offload or edit."""
    from access import policy

    request = context.get("request")
    user = getattr(request, "user", None)
    return policy.can_change(
        user, namespace.name, getattr(namespace, "labels", None) or {}, action or policy.default_action(namespace)
    )


@register.filter
def compact_json(value: Any) -> str:
    """A value in one short line: strings as they are, the rest as compact JSON."""
    import json

    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ": "))


@register.simple_tag
def diff_rows(before: Any, after: Any) -> list[tuple[str, Any, Any]]:
    """(field, before, after) for every top-level field that differs (``{% diff_rows a b as rows %}``)."""
    from offloading.views.audit import diff

    return diff(before, after)
