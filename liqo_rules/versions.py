"""The installed Liqo version and the behaviour that differs between releases (liqo-semantics.md j.1).

The version is what ``liqoctl info`` prints: the tag of the ``controller-manager`` container's image in
the controller manager's Deployment, found in Liqo's namespace by the labels
``app.kubernetes.io/name=controller-manager`` and ``app.kubernetes.io/component=controller-manager``.
A tag that is not a release (a commit built from master) is taken as the newest behaviour.
"""

from __future__ import annotations

import re
import shlex
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from typing import Any

CONTROLLER_MANAGER_CONTAINER = "controller-manager"
CONTROLLER_MANAGER_LABELS: dict[str, str] = {
    "app.kubernetes.io/name": "controller-manager",
    "app.kubernetes.io/component": "controller-manager",
}
CONTROLLER_MANAGER_SELECTOR = ",".join(f"{key}={value}" for key, value in CONTROLLER_MANAGER_LABELS.items())
LIQO_NAMESPACE = "liqo"

# Pod reasons the virtual kubelet writes on local pods (forge/pods.go).
OFFLOADING_BACKOFF = "OffloadingBackOff"
OFFLOADING_ABORTED = "OffloadingAborted"
REMOTE_POD_TERMINATED = "RemotePodTerminated"
# Annotations that came with v1.2.0 (pkg/consts/replication.go).
V12_ANNOTATIONS = (
    "liqo.io/remote-access-modes",
    "liqo.io/remote-storage-class",
    "liqo.io/use-direct-connections",
    "liqo.io/direct-connections-data",
)
# The Node label commit 794486936 added after v1.2.0 (for the cluster autoscaler).
AUTOSCALER_TYPE_LABEL = ("type", "virtual-kubelet")

_RELEASE = re.compile(r"v?(\d+)\.(\d+)\.(\d+)(?:-([0-9A-Za-z.-]+))?")


def image_tag(image: str) -> str:
    """The version liqoctl reads from an image reference: the text after its last ``:`` ("" without one)."""
    parts = image.split(":")
    return parts[-1] if len(parts) > 1 else ""


def controller_manager_version(deployment: Mapping[str, Any]) -> str:
    """The tag of the ``controller-manager`` container of the controller manager's Deployment ("" if none)."""
    template = (deployment.get("spec") or {}).get("template") or {}
    for container in (template.get("spec") or {}).get("containers") or []:
        if container.get("name") == CONTROLLER_MANAGER_CONTAINER:
            return image_tag(str(container.get("image") or ""))
    return ""


def is_controller_manager(deployment: Mapping[str, Any]) -> bool:
    """Whether a Deployment carries the controller manager's two labels."""
    labels = (deployment.get("metadata") or {}).get("labels") or {}
    return all(labels.get(key) == value for key, value in CONTROLLER_MANAGER_LABELS.items())


@dataclass(frozen=True)
class Release:
    major: int
    minor: int
    patch: int
    prerelease: str = ""

    def key(self) -> tuple[int, int, int, int]:
        """Ordering: a pre-release (v1.0.0-rc.3) comes before its release."""
        return (self.major, self.minor, self.patch, 0 if self.prerelease else 1)


def parse_release(tag: str) -> Release | None:
    """``v1.1.2`` / ``1.2.0`` / ``v1.0.0-rc.3`` as a Release; anything else (a commit) is None."""
    found = _RELEASE.fullmatch(tag.strip())
    if found is None:
        return None
    major, minor, patch, pre = found.groups()
    return Release(int(major), int(minor), int(patch), pre or "")


def _at_least(release: Release | None, major: int, minor: int, patch: int) -> bool:
    """Unknown (a development build) counts as newer than every release."""
    return release is None or release.key() >= (major, minor, patch, 1)


@dataclass(frozen=True)
class Behaviour:
    """What the installed version does where releases differ."""

    version: str  # as read ("" when not found)
    release: Release | None

    @property
    def known(self) -> bool:
        return self.release is not None

    @property
    def label(self) -> str:
        return self.version or "unknown"

    @property
    def orphaned_map_blocks_selection(self) -> bool:
        """Up to v1.1.x the controller refuses to select while VirtualNodes' clusters and NamespaceMaps
        differ in number (clusterselector.go); v1.2.0 dropped the check."""
        return self.release is not None and not _at_least(self.release, 1, 2, 0)

    @property
    def liqoctl_many_namespaces(self) -> bool:
        """liqoctl offload takes several namespaces and --ns-selector from v1.0.1 (v1.0.0: exactly one)."""
        return _at_least(self.release, 1, 0, 1)

    @property
    def autoscaler_type_label(self) -> bool:
        """Virtual Nodes carry type=virtual-kubelet: in no release up to v1.2.0, only in later builds."""
        return self.release is None or self.release.key() > (1, 2, 0, 1)

    @property
    def pod_reasons(self) -> tuple[str, ...]:
        """The reasons the virtual kubelet gives local pods it rejected or lost."""
        if _at_least(self.release, 1, 2, 0):
            return (OFFLOADING_BACKOFF, OFFLOADING_ABORTED, REMOTE_POD_TERMINATED)
        return (OFFLOADING_BACKOFF, OFFLOADING_ABORTED)

    @property
    def annotations_added(self) -> tuple[str, ...]:
        """The v1.2.0 annotations, when this version knows them."""
        return V12_ANNOTATIONS if _at_least(self.release, 1, 2, 0) else ()


def behaviour(version: str) -> Behaviour:
    return Behaviour(version, parse_release(version))


def selection_blocked(release: Behaviour, vn_cluster_ids: Iterable[str], namespace_maps: Iterable[str]) -> str:
    """The error the controller of v1.1.x and older returns before selecting any cluster when the clusters
    of the VirtualNodes and the NamespaceMaps differ in number (an orphaned NamespaceMap); "" otherwise."""
    clusters, maps = len(set(vn_cluster_ids)), len(list(namespace_maps))
    if not release.orphaned_map_blocks_selection or clusters == maps:
        return ""
    return f"number of foreign clusters ({clusters}) does not match that of NamespaceMaps ({maps})"


def orphaned_maps(vn_cluster_ids: Iterable[str], namespace_maps: Iterable[str]) -> list[str]:
    """NamespaceMaps (named after their cluster) with no VirtualNode of that cluster, sorted."""
    clusters = set(vn_cluster_ids)
    return sorted(name for name in set(namespace_maps) if name not in clusters)


def offload_commands(release: Behaviour, namespaces: Iterable[str], flags: Iterable[str] = ()) -> list[str]:
    """The liqoctl command(s) that offload ``namespaces``: one command for all of them from v1.0.1, one
    command per namespace with v1.0.0 (which takes exactly one)."""
    names = list(namespaces)
    tail = "".join(f" {shlex.quote(flag)}" for flag in flags)
    if not names:
        return []
    if release.liqoctl_many_namespaces:
        return [f"liqoctl offload namespace {' '.join(shlex.quote(n) for n in names)}{tail}"]
    return [f"liqoctl offload namespace {shlex.quote(name)}{tail}" for name in names]


def ns_selector_supported(release: Behaviour) -> bool:
    """Whether ``liqoctl offload namespace --ns-selector`` exists (v1.0.1 and later)."""
    return release.liqoctl_many_namespaces
