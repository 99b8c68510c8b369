"""The watcher's part of the NamespaceMaps: the informer kind ``namespacemaps``, which stores them through
``offloading.snapshot.namespacemaps`` (importing this module registers it)."""

from __future__ import annotations

from typing import Any

from liqo_rules.mapping import local_map_cluster
from offloading.snapshot import informer
from offloading.snapshot.namespacemaps import forget_maps, object_meta, write_map


class NamespaceMapSync(informer.KindSync):
    """NamespaceMaps, keyed by the peer's cluster id (one local map per peer)."""

    kind = "namespacemaps"

    def key(self, obj: dict[str, Any]) -> str:
        return local_map_cluster(obj) or f"{object_meta(obj).get('namespace', '')}/{object_meta(obj).get('name', '')}"

    def apply(self, events: list[informer.Event], now: Any, relist: bool = False) -> None:
        latest = {self.key(obj): (event, obj) for event, obj in events if local_map_cluster(obj)}
        managed = self.managed_id
        for cluster_id, (event, obj) in latest.items():
            if event == "DELETED":
                forget_maps(drop={cluster_id}, managed=managed)
            else:
                write_map(obj, now, managed)

    def relisted(self, seen: set[str], now: Any) -> None:
        forget_maps(keep=seen, managed=self.managed_id)


def syncs() -> list[informer.KindSync]:
    return [NamespaceMapSync()]


informer.add_kinds(syncs)
