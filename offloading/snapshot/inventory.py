"""Pods and Events in the snapshot, kept by the watcher like every other kind (``informer.KindSync``).

* Pods: only those of offloaded namespaces are kept (the others are dropped as they arrive), with the
  node they run on and the peer that node belongs to (a virtual node's name is its VirtualNode's), their
  phase, the reason a pending pod gives, and their CPU and memory requests.
* Events: only those about a NamespaceOffloading or a Namespace (Liqo's warnings, e.g. an invalid
  cluster selector), newest first on the pages, filed under the namespace they are about wherever they
  are recorded (client-go records a Namespace's Events in ``default``).

The watcher lists pods and events after namespaces and offloadings (and pods after virtual nodes) are
written (``after``), so the offloaded namespaces and the peers' nodes are known when the first pods
arrive.
"""

from __future__ import annotations

from typing import Any

from liqo_rules.stuckpods import REFLECTION_DISABLED
from liqo_rules.tenancy import FAILED_REFLECTION
from liqo_rules.versions import OFFLOADING_ABORTED, OFFLOADING_BACKOFF, REMOTE_POD_TERMINATED
from offloading.cluster import kube
from offloading.models import Namespace, VirtualNode
from offloading.models.inventory import KubeEvent, Pod, event_subject_namespace
from offloading.snapshot import informer
from offloading.snapshot.store import parse_time

Event = tuple[str, dict[str, Any]]


def _meta(obj: dict[str, Any]) -> dict[str, Any]:
    return obj.get("metadata") or {}


def _requests(pod: dict[str, Any]) -> tuple[int, int]:
    cpu = memory = 0.0
    for container in (pod.get("spec") or {}).get("containers") or []:
        asked = (container.get("resources") or {}).get("requests") or {}
        cpu += kube.quantity(asked.get("cpu"))
        memory += kube.quantity(asked.get("memory"))
    return round(cpu * 1000), round(memory)


def _pending_reason(pod: dict[str, Any]) -> str:
    status = pod.get("status") or {}
    for condition in status.get("conditions") or []:
        if condition.get("status") == "False" and condition.get("reason"):
            return f"{condition.get('reason')}: {condition.get('message', '')}".strip(": ")
    return str(status.get("reason") or "")


# Liqo's reasons on local pods and the Events its virtual kubelet records on them (issue 27).
_LIQO_REASONS = (OFFLOADING_BACKOFF, OFFLOADING_ABORTED, REMOTE_POD_TERMINATED)
POD_EVENT_REASONS = (FAILED_REFLECTION, REFLECTION_DISABLED)


def _reason(pod: dict[str, Any]) -> str:
    """Liqo's status.reason (OffloadingBackOff...), else for a Pending pod why it is not scheduled."""
    status = pod.get("status") or {}
    if status.get("reason"):
        return str(status["reason"])
    return _pending_reason(pod) if status.get("phase") == "Pending" else ""


def _controller(pod: dict[str, Any]) -> tuple[str, str]:
    for ref in _meta(pod).get("ownerReferences") or []:
        if ref.get("controller"):
            return str(ref.get("kind") or ""), str(ref.get("name") or "")
    return "", ""


def _liqo_held(pod: dict[str, Any], clusters: dict[str, str]) -> bool:
    node = (pod.get("spec") or {}).get("nodeName") or ""
    return node in clusters or (pod.get("status") or {}).get("reason") in _LIQO_REASONS


class PodSync(informer.KindSync):
    kind = "pods"
    # Virtual nodes first: a pod's peer is found by its node's name.
    after = ("namespaces", "namespaceoffloadings", "virtualnodes")

    def apply(self, events: list[Event], now: Any, relist: bool = False) -> None:
        latest = {self.key(obj): (event, obj) for event, obj in events}
        managed = self.managed_id
        namespaces = {key.split("/", 1)[0] for key in latest}
        offloaded = set(
            Namespace.objects.filter(managed_id=managed, name__in=namespaces, offloaded=True).values_list(
                "name", flat=True
            )
        )
        clusters = dict(VirtualNode.objects.filter(managed_id=managed).values_list("name", "cluster_id"))
        rows, gone = [], []
        for key, (event, obj) in latest.items():
            namespace, name = key.split("/", 1)
            spec, status = obj.get("spec") or {}, obj.get("status") or {}
            node = spec.get("nodeName") or ""
            # Outside offloaded namespaces only the pods Liqo holds (issue 27: bound to a virtual node,
            # or with a reason of Liqo's virtual kubelet) are kept.
            if event == "DELETED" or (namespace not in offloaded and not _liqo_held(obj, clusters)):
                gone.append((namespace, name))
                continue
            owner = _controller(obj)
            cpu, memory = _requests(obj)
            phase = status.get("phase") or ""
            rows.append(
                Pod(
                    managed_id=managed,
                    namespace=namespace,
                    name=name,
                    uid=_meta(obj).get("uid", ""),
                    node_name=node,
                    cluster_id=clusters.get(node, ""),
                    phase=phase,
                    reason=_reason(obj)[:253],
                    owner_kind=owner[0][:64],
                    owner_name=owner[1][:253],
                    cpu_millis=cpu,
                    memory_bytes=memory,
                    refreshed_at=now,
                )
            )
        Pod.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["managed", "namespace", "name"],
            update_fields=[
                "uid",
                "node_name",
                "cluster_id",
                "phase",
                "reason",
                "owner_kind",
                "owner_name",
                "cpu_millis",
                "memory_bytes",
                "refreshed_at",
            ],
            batch_size=500,
        )
        for namespace, name in gone:
            Pod.objects.filter(managed_id=managed, namespace=namespace, name=name).delete()

    def relisted(self, seen: set[str], now: Any) -> None:
        managed = self.managed_id
        mine = Pod.objects.filter(managed_id=managed)
        stale = [pk for pk, ns, name in mine.values_list("pk", "namespace", "name") if f"{ns}/{name}" not in seen]
        for start in range(0, len(stale), 500):
            Pod.objects.filter(pk__in=stale[start : start + 500]).delete()
        # Namespaces no longer offloaded keep no pods but those Liqo holds (on a virtual node, a Liqo reason).
        offloaded = Namespace.objects.filter(managed_id=managed, offloaded=True).values("name")
        mine.exclude(namespace__in=offloaded).filter(cluster_id="").exclude(reason__in=_LIQO_REASONS).delete()


class EventSync(informer.KindSync):
    kind = "events"
    after = ("namespaces", "namespaceoffloadings")

    def key(self, obj: dict[str, Any]) -> str:
        return str(_meta(obj).get("uid") or super().key(obj))

    def apply(self, events: list[Event], now: Any, relist: bool = False) -> None:
        rows, gone = [], []
        managed = self.managed_id
        for event, obj in events:
            involved = obj.get("involvedObject") or {}
            if involved.get("kind") not in kube.EVENT_KINDS and not (
                involved.get("kind") == "Pod" and obj.get("reason") in POD_EVENT_REASONS
            ):
                continue
            uid = self.key(obj)
            if event == "DELETED":
                gone.append(uid)
                continue
            meta = _meta(obj)
            recorded_in = str(meta.get("namespace") or "")
            namespace = event_subject_namespace(involved, recorded_in)
            rows.append(
                KubeEvent(
                    managed_id=managed,
                    uid=uid,
                    namespace=namespace[:63],
                    recorded_in=recorded_in[:63],
                    involved_kind=involved.get("kind", ""),
                    involved_name=involved.get("name", "")[:253],
                    type=(obj.get("type") or "Normal")[:16],
                    reason=(obj.get("reason") or "")[:128],
                    message=obj.get("message") or "",
                    count=int(obj.get("count") or 1),
                    first_time=parse_time(obj.get("firstTimestamp") or obj.get("eventTime")),
                    last_time=parse_time(
                        obj.get("lastTimestamp") or obj.get("eventTime") or meta.get("creationTimestamp")
                    ),
                )
            )
        KubeEvent.objects.bulk_create(
            rows,
            update_conflicts=True,
            unique_fields=["managed", "uid"],
            update_fields=["namespace", "recorded_in", "type", "reason", "message", "count", "first_time", "last_time"],
            batch_size=500,
        )
        if gone:
            KubeEvent.objects.filter(managed_id=managed, uid__in=gone).delete()

    def relisted(self, seen: set[str], now: Any) -> None:
        mine = KubeEvent.objects.filter(managed_id=self.managed_id)
        stale = [pk for pk, uid in mine.values_list("pk", "uid") if uid not in seen]
        for start in range(0, len(stale), 500):
            KubeEvent.objects.filter(pk__in=stale[start : start + 500]).delete()


def syncs() -> list[informer.KindSync]:
    return [PodSync(), EventSync()]


informer.add_kinds(syncs)
