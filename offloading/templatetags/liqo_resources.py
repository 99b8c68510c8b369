"""Issue 27 sections: a peer's slices, tenant and quota; a namespace's stuck pods; the Liqo version."""

from __future__ import annotations

from typing import Any

from django import template

from liqo_rules import versions
from offloading.snapshot import resources as resourcesinfo

register = template.Library()


@register.inclusion_tag("offloading/_peer_resources.html")
def peer_resources(cluster: Any) -> dict[str, Any]:
    return {
        "cluster": cluster,
        "info": resourcesinfo.peer_resources(cluster.cluster_id, getattr(cluster, "managed_id", None)),
    }


@register.inclusion_tag("offloading/_stuck_pods.html")
def stuck_pods(namespace: Any) -> dict[str, Any]:
    found = resourcesinfo.stuck_pods(namespace)
    return {"namespace": namespace, "stuck": found, "summary": resourcesinfo.stuck_summary(found)}


@register.inclusion_tag("offloading/_liqo_version.html")
def liqo_version() -> dict[str, Any]:
    behaviour = resourcesinfo.installed_version()
    return {
        "liqo": behaviour,
        "type_label": "{}={}".format(*versions.AUTOSCALER_TYPE_LABEL),
        "offload_example": versions.offload_commands(behaviour, ["ns-a", "ns-b"]),
    }
