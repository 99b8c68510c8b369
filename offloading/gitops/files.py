"""A change (or a bulk's changes) as the files a GitOps repository holds, and as a downloadable archive.

One directory (an overlay) per hand-off, named after the change ids, holds per namespace:

- ``<ns>/namespaceoffloading.yaml``: the NamespaceOffloading after the change, byte for byte what
  ``liqoctl offload namespace <ns> --output yaml`` prints for that spec (liqo_rules.manifest);
- for an edit of an existing offloading, ``<ns>/patch.yaml``: the edit as a strategic-merge patch of the
  spec fields that change (``null`` for one that goes), for a repository whose base already holds the
  offloading. Here it patches the manifest above, which it leaves as it is;
- for an unoffload, ``<ns>/observed.yaml`` (the offloading as liqo-dash saw it when the change was
  requested) and ``<ns>/patch.yaml`` deleting it (``$patch: delete``): the overlay builds without it, and
  in the repository the offloading's file is to be removed.

Managed clusters (issue 28): the overlay of another cluster than the default sits in that cluster's own
directory, ``<cluster>/<overlay>`` under the configured path (``ChangeFiles.cluster``), so that two
clusters' namespaces of the same name never share a file; its ``kustomization.yaml`` names the cluster.
The default cluster's overlays keep their place and their bytes.

``kustomization.yaml`` lists every one of them, so ``kubectl kustomize <dir>`` prints the offloadings as
the changes leave them. The archive (zip or tar.gz) is deterministic: sorted names, fixed times and modes,
so the same changes always download as the same bytes.
"""

from __future__ import annotations

import gzip
import io
import re
import tarfile
import zipfile
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import yaml

from liqo_rules import constants as c
from liqo_rules.manifest import manifest, render_manifest
from liqo_rules.spec import is_dns1123_label

OFFLOAD, UPDATE, UNOFFLOAD = "offload", "update", "unoffload"
ACTIONS = (OFFLOAD, UPDATE, UNOFFLOAD)
KUSTOMIZATION = "kustomization.yaml"
MANIFEST = "namespaceoffloading.yaml"
OBSERVED = "observed.yaml"
PATCH = "patch.yaml"
# Names listed one by one up to this many ids; past it, the first id and how many more.
MAX_NAMED_IDS = 5
_NAME = re.compile(r"[a-z0-9][a-z0-9._-]{0,99}")
# A managed cluster's name (a slug, ManagedCluster.name): one directory of the repository.
_CLUSTER = re.compile(r"[A-Za-z0-9_-]{1,63}")
_ZIP_TIME = (1980, 1, 1, 0, 0, 0)  # the earliest time a zip entry can carry


class FilesError(ValueError):
    """The changes cannot be written as files (a bad namespace, action or path; a namespace twice)."""


@dataclass(frozen=True)
class FileChange:
    """What the files need of one change: its id, namespace, action and specs (``base_spec``: the
    offloading's spec when the change was requested, None when there was none)."""

    change_id: int
    namespace: str
    action: str
    desired_spec: dict[str, Any] | None = None
    base_spec: dict[str, Any] | None = None
    label_namespace: bool = False

    @classmethod
    def of(cls, change: Any) -> FileChange:
        """From a ChangeRequest (or anything with its fields: pk, namespace, action, desired_spec,
        base_spec, label_namespace)."""
        return cls(
            change_id=int(change.pk),
            namespace=str(change.namespace),
            action=str(change.action),
            desired_spec=change.desired_spec,
            base_spec=change.base_spec,
            label_namespace=bool(getattr(change, "label_namespace", False)),
        )

    def describe(self) -> str:
        return f"#{self.change_id} {self.action} {self.namespace}"


@dataclass(frozen=True)
class ChangeFiles:
    """The overlay's files (paths relative to its directory, sorted), its name, and what the files
    cannot say (notes: a namespace to label, an edit that changes nothing)."""

    name: str
    change_ids: tuple[int, ...]
    files: dict[str, bytes]
    notes: tuple[str, ...] = field(default=())
    # One line per change, by id: "#12 offload web".
    described: tuple[str, ...] = field(default=())
    # The managed cluster's directory: its name for another cluster than the default, "" for the default.
    cluster: str = ""

    def directory(self, path: str) -> str:
        """The overlay's directory in a repository: ``<path>/<name>``, or ``<path>/<cluster>/<name>``."""
        return "/".join(p for p in (clean_path(path), self.cluster, self.name) if p)

    def under(self, path: str) -> dict[str, bytes]:
        """The files at their place in a repository: ``<path>[/<cluster>]/<name>/<file>``."""
        base = self.directory(path)
        return {f"{base}/{rel}": data for rel, data in self.files.items()}

    def zip_bytes(self) -> bytes:
        """A zip of ``<name>/<file>``: sorted, every entry dated 1980-01-01 and mode 0644."""
        buffer = io.BytesIO()
        with zipfile.ZipFile(buffer, "w", compression=zipfile.ZIP_DEFLATED) as archive:
            for rel in sorted(self.files):
                info = zipfile.ZipInfo(f"{self.name}/{rel}", date_time=_ZIP_TIME)
                info.compress_type = zipfile.ZIP_DEFLATED
                info.create_system = 3  # Unix, so that the mode below is read
                info.external_attr = 0o100644 << 16
                archive.writestr(info, self.files[rel], compresslevel=9)
        return buffer.getvalue()

    def tar_gz_bytes(self) -> bytes:
        """A gzip'd tar of ``<name>/<file>``: sorted, mtime 0, owner root, mode 0644, no gzip name or time."""
        buffer = io.BytesIO()
        with (
            gzip.GzipFile(filename="", mode="wb", fileobj=buffer, mtime=0, compresslevel=9) as zipped,
            tarfile.open(fileobj=zipped, mode="w", format=tarfile.PAX_FORMAT) as archive,
        ):
            for rel in sorted(self.files):
                data = self.files[rel]
                info = tarfile.TarInfo(f"{self.name}/{rel}")
                info.size, info.mtime, info.mode = len(data), 0, 0o644
                info.uid = info.gid = 0
                info.uname = info.gname = "root"
                archive.addfile(info, io.BytesIO(data))
        return buffer.getvalue()


def clean_path(path: str) -> str:
    """A repository-relative directory: POSIX, no ``..``, not absolute, not inside ``.git``."""
    parts = [p for p in str(path).strip().split("/") if p not in ("", ".")]
    if str(path).startswith("/") or "\\" in str(path) or any(p == ".." for p in parts):
        raise FilesError(f"path {path!r} must be a relative path inside the repository (no '..', no leading '/')")
    if parts and parts[0] == ".git":
        raise FilesError(f"path {path!r} is inside .git")
    if any(not p.isprintable() for p in parts):
        raise FilesError(f"path {path!r} has a control character")
    return "/".join(parts)


def overlay_name(change_ids: Iterable[int]) -> str:
    """``change-12``, ``changes-12-13-14``, or ``changes-12-and-40-more`` past MAX_NAMED_IDS ids."""
    ids = sorted(set(change_ids))
    if not ids:
        raise FilesError("no change to write")
    if len(ids) == 1:
        return f"change-{ids[0]}"
    if len(ids) <= MAX_NAMED_IDS:
        return "changes-" + "-".join(str(i) for i in ids)
    return f"changes-{ids[0]}-and-{len(ids) - 1}-more"


def _yaml(obj: Any) -> bytes:
    return yaml.safe_dump(obj, sort_keys=False, default_flow_style=False, allow_unicode=True).encode()


def _target(namespace: str) -> dict[str, str]:
    return {
        "group": c.GROUP,
        "version": c.VERSION,
        "kind": c.KIND,
        "name": c.OFFLOADING_NAME,
        "namespace": namespace,
    }


def _patch_head(namespace: str) -> dict[str, Any]:
    return {
        "apiVersion": c.API_VERSION,
        "kind": c.KIND,
        "metadata": {"name": c.OFFLOADING_NAME, "namespace": namespace},
    }


def spec_patch(namespace: str, base_spec: dict[str, Any], desired_spec: dict[str, Any]) -> dict[str, Any] | None:
    """The strategic-merge patch turning the offloading of ``base_spec`` into that of ``desired_spec``:
    the spec fields that differ (as liqoctl writes them: defaults filled in), None for a field that goes;
    None when nothing differs. ``clusterSelector`` is one atomic field (the CRD says so), given whole."""
    before, after = manifest(namespace, base_spec)["spec"], manifest(namespace, desired_spec)["spec"]
    changed: dict[str, Any] = {key: value for key, value in after.items() if before.get(key) != value}
    changed.update({key: None for key in before if key not in after})
    if not changed:
        return None
    return {**_patch_head(namespace), "spec": changed}


def _check(changes: list[FileChange]) -> None:
    if not changes:
        raise FilesError("no change to write")
    seen: dict[str, FileChange] = {}
    for change in changes:
        if not is_dns1123_label(change.namespace):
            raise FilesError(f"change #{change.change_id}: {change.namespace!r} is not a namespace name")
        if change.action not in ACTIONS:
            raise FilesError(f"change #{change.change_id}: action {change.action!r} is not one of {', '.join(ACTIONS)}")
        if change.action != UNOFFLOAD and not isinstance(change.desired_spec, dict):
            raise FilesError(f"change #{change.change_id}: {change.action} without a desired spec")
        if change.namespace in seen:
            first = seen[change.namespace]
            raise FilesError(
                f"changes #{first.change_id} and #{change.change_id} both change namespace {change.namespace}: "
                "hand them off one at a time"
            )
        seen[change.namespace] = change


def _header(changes: list[FileChange], requester: str, cluster: str = "") -> str:
    one_line = " ".join(str(requester).split())
    by = f", requested by {one_line}" if one_line else ""
    listed = ", ".join(ch.describe() for ch in sorted(changes, key=lambda ch: ch.change_id))
    where = f"# Managed cluster {cluster}: these are its namespaces' offloadings.\n" if cluster else ""
    return (
        f"# liqo-dash hand-off: {listed}{by}.\n"
        f"{where}"
        "# `kubectl kustomize .` prints the NamespaceOffloadings as these changes leave them.\n"
        f"# <ns>/{MANIFEST}: the offloading after the change, as liqoctl prints it. <ns>/{PATCH}: an edit, for\n"
        "# a base that already holds the offloading (here it changes nothing), or the deletion of an unoffload\n"
        f"# (<ns>/{OBSERVED} is the offloading it deletes: remove that offloading's file from your base).\n"
    )


def change_files(
    changes: Iterable[FileChange], requester: str = "", name: str | None = None, cluster: str = ""
) -> ChangeFiles:
    """The overlay of ``changes`` (at most one per namespace), named ``name`` or after the change ids;
    ``cluster``: the managed cluster they are of, when it is not the default ("": the default)."""
    ordered = sorted(changes, key=lambda ch: (ch.namespace, ch.change_id))
    _check(ordered)
    if cluster and not _CLUSTER.fullmatch(cluster):
        raise FilesError(f"managed cluster {cluster!r}: letters, digits, '_' and '-' only")
    overlay = name if name is not None else overlay_name(ch.change_id for ch in ordered)
    if not _NAME.fullmatch(overlay) or ".." in overlay:
        raise FilesError(f"overlay name {overlay!r}: lowercase letters, digits, '.', '_' and '-' only")
    files: dict[str, bytes] = {}
    resources: list[str] = []
    patches: list[dict[str, Any]] = []
    notes: list[str] = []
    for change in ordered:
        ns = change.namespace
        if change.action == UNOFFLOAD:
            files[f"{ns}/{OBSERVED}"] = render_manifest(ns, change.base_spec or {}).encode()
            files[f"{ns}/{PATCH}"] = _yaml({"$patch": "delete", **_patch_head(ns)})
            resources.append(f"{ns}/{OBSERVED}")
            patches.append({"path": f"{ns}/{PATCH}", "target": _target(ns)})
            continue
        desired = change.desired_spec or {}
        files[f"{ns}/{MANIFEST}"] = render_manifest(ns, desired).encode()
        resources.append(f"{ns}/{MANIFEST}")
        if change.action == UPDATE and change.base_spec is not None:
            patch = spec_patch(ns, change.base_spec, desired)
            if patch is None:
                notes.append(f"{change.describe()}: the spec does not change")
            else:
                files[f"{ns}/{PATCH}"] = _yaml(patch)
                patches.append({"path": f"{ns}/{PATCH}", "target": _target(ns)})
        elif change.action == UPDATE:
            notes.append(f"{change.describe()}: the spec it edits was not recorded, so there is no patch")
        if change.label_namespace:
            notes.append(f"{change.describe()}: also label namespace {ns} {c.SCHEDULING_LABEL}=true")
    kustomization: dict[str, Any] = {
        "apiVersion": "kustomize.config.k8s.io/v1beta1",
        "kind": "Kustomization",
        "resources": resources,
    }
    if patches:
        kustomization["patches"] = patches
    files[KUSTOMIZATION] = _header(ordered, requester, cluster).encode() + _yaml(kustomization)
    by_id = sorted(ordered, key=lambda ch: ch.change_id)
    ids = tuple(ch.change_id for ch in by_id)
    described = tuple(ch.describe() for ch in by_id)
    return ChangeFiles(overlay, ids, dict(sorted(files.items())), tuple(notes), described, cluster)
