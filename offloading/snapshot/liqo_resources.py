"""ResourceSlices, Tenants, Quotas and the controller manager's Deployment in the snapshot (issue 27),
kept by the watcher like every other kind (``informer.KindSync``): one ``LiqoResource`` row each, with
the cluster it concerns and only the fields the pages read."""

from __future__ import annotations

from typing import Any

from liqo_rules import tenancy, versions
from offloading.models.inventory import LiqoResource
from offloading.snapshot import informer

Event = tuple[str, dict[str, Any]]
KINDS = ("resourceslices", "tenants", "quotas", "deployments")


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def _cluster_of(kind: str, obj: dict[str, Any]) -> str:
    meta, spec = _meta(obj), obj.get("spec") or {}
    labelled = (meta.get("labels") or {}).get(tenancy.REMOTE_CLUSTER_ID_LABEL)
    if kind == "resourceslices":
        return tenancy.read_slice(obj).cluster_id
    if kind == "tenants":
        return str(spec.get("clusterID") or labelled or "")
    namespace = str(meta.get("namespace") or "")
    prefix = "liqo-tenant-"
    return str(labelled or (namespace[len(prefix) :] if namespace.startswith(prefix) else ""))


def _data(kind: str, obj: dict[str, Any]) -> dict[str, Any]:
    """What the pages read of one object (never secrets: no CSR, keys or auth params)."""
    meta = _meta(obj)
    if kind == "resourceslices":
        return {
            "labels": meta.get("labels") or {},
            "annotations": {
                k: v
                for k, v in (meta.get("annotations") or {}).items()
                if k in (tenancy.CORDON_ANNOTATION, tenancy.CORDON_TENANT_ANNOTATION)
            },
            "spec": {k: v for k, v in (obj.get("spec") or {}).items() if k != "csr"},
            "status": {k: v for k, v in (obj.get("status") or {}).items() if k in ("conditions", "resources")},
        }
    if kind == "tenants":
        return {
            "spec": {
                "tenantCondition": tenancy.tenant_condition(obj),
                "clusterID": (obj.get("spec") or {}).get("clusterID", ""),
            }
        }
    if kind == "quotas":
        return {"spec": obj.get("spec") or {}}
    return {"version": versions.controller_manager_version(obj)}


class LiqoResourceSync(informer.KindSync):
    def __init__(self, kind: str) -> None:
        self.kind = kind

    def apply(self, events: list[Event], now: Any, relist: bool = False) -> None:
        rows, gone = [], []
        managed = self.managed_id
        for event, obj in events:
            meta = _meta(obj)
            namespace, name = str(meta.get("namespace") or ""), str(meta.get("name") or "")
            if event == "DELETED" or (self.kind == "deployments" and not versions.is_controller_manager(obj)):
                gone.append((namespace, name))
                continue
            rows.append(
                LiqoResource(
                    managed_id=managed,
                    kind=self.kind,
                    namespace=namespace,
                    name=name,
                    cluster_id=_cluster_of(self.kind, obj)[:63],
                    data=_data(self.kind, obj),
                    refreshed_at=now,
                )
            )
        LiqoResource.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["managed", "kind", "namespace", "name"],
            update_fields=["cluster_id", "data", "refreshed_at"],
            batch_size=500,
        )
        for namespace, name in gone:
            LiqoResource.objects.filter(managed_id=managed, kind=self.kind, namespace=namespace, name=name).delete()

    def relisted(self, seen: set[str], now: Any) -> None:
        stale = [
            pk
            for pk, namespace, name in LiqoResource.objects.filter(
                managed_id=self.managed_id, kind=self.kind
            ).values_list("pk", "namespace", "name")
            if f"{namespace}/{name}" not in seen
        ]
        LiqoResource.objects.filter(pk__in=stale).delete()


def syncs() -> list[informer.KindSync]:
    return [LiqoResourceSync(kind) for kind in KINDS]


informer.add_kinds(syncs)
