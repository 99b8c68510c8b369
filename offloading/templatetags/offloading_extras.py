"""Small template helpers: status badges and YAML rendering.

Loaded by the template engine by name, never imported by the views: they sit above the views and use
their helpers (the colour table, a peer's room, the diff of an audit row)."""

from __future__ import annotations

import json
from typing import Any

import yaml
from django import template
from django.template import defaulttags
from django.utils.html import conditional_escape, format_html
from django.utils.safestring import SafeString

from access import policy
from liqo_rules.reflectobjects import plural
from offloading import switcher
from offloading.views.audit import diff
from offloading.views.previewhtml import room_html
from offloading.views.tones import tone
from offloading.whatif.capacity import binary_bytes

register = template.Library()


class ClusterURLNode(template.Node):
    """``{% url %}``, then under the page's managed cluster (``cluster_base``: the context processor's, or a
    cached row's own) when the page named has a per-cluster copy (offloading/switcher.py)."""

    def __init__(self, node: defaulttags.URLNode) -> None:
        self.asvar, node.asvar = node.asvar, None
        self.node = node

    def render(self, context: Any) -> str:
        url = self._url(context)
        base = context.get("cluster_base")
        if base is None:
            base = switcher.base_of(context.get("request"))
        found = SafeString(switcher.prefixed(str(base), str(self.node.view_name.resolve(context)), url))
        if self.asvar:
            context[self.asvar] = found
            return ""
        return found

    def _url(self, context: Any) -> str:
        """What ``{% url %}`` renders (escaped), from switcher.quick_reverse: as URLNode.render, remembered."""
        node = self.node
        args = [arg.resolve(context) for arg in node.args]
        kwargs = {k: v.resolve(context) for k, v in node.kwargs.items()}
        request = getattr(context, "request", None)
        current_app = getattr(request, "current_app", None)
        if current_app is None:
            current_app = getattr(getattr(request, "resolver_match", None), "namespace", None)
        url = switcher.quick_reverse(str(node.view_name.resolve(context)), args, kwargs, current_app)
        return conditional_escape(url) if context.autoescape else url


@register.tag
def cluster_url(parser: Any, token: Any) -> ClusterURLNode:
    """``{% cluster_url 'offloading:namespace_detail' name %}``: as ``{% url %}``, in the page's cluster."""
    return ClusterURLNode(defaulttags.url(parser, token))


@register.simple_tag
def badge(value: str, title: str = "") -> str:
    """A coloured badge for a phase, a change state, a cluster state or a module status."""
    if not value:
        return format_html('<span class="badge muted">{}</span>', "not offloaded")
    return format_html('<span class="badge {}" title="{}">{}</span>', tone(value), title, value)


# A memory size in binary units (capacity.binary_bytes), as quotas are written.
register.filter("binary_bytes", binary_bytes)


# The colour class of a phase, state or status (the same as its badge: views.tones).
register.filter("tone", tone)


@register.filter
def as_yaml(value: Any) -> str:
    if value in (None, ""):
        return ""
    return yaml.safe_dump(value, sort_keys=False, default_flow_style=False)


@register.filter
def room_line(room: Any) -> str:
    """A peer's room (``capacity.Room``): requested of allocatable per resource, and "nearly full"."""
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
    request = context.get("request")
    user = getattr(request, "user", None)
    return policy.can_change(
        user,
        namespace.name,
        getattr(namespace, "labels", None) or {},
        action or policy.default_action(namespace),
        cluster=switcher.cluster_name(request),
    )


@register.filter
def compact_json(value: Any) -> str:
    """A value in one short line: strings as they are, the rest as compact JSON."""
    if value is None:
        return ""
    if isinstance(value, str):
        return value
    return json.dumps(value, sort_keys=True, separators=(",", ": "))


@register.simple_tag
def diff_rows(before: Any, after: Any) -> list[tuple[str, Any, Any]]:
    """(field, before, after) for every top-level field that differs (``{% diff_rows a b as rows %}``)."""
    return diff(before, after)
