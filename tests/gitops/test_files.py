"""offloading.gitops.files: the overlay parses, names every file, builds with `kubectl kustomize` into the
offloadings the changes ask for, each patch turns the observed offloading into the desired one, and the
archives are the same bytes every time."""

from __future__ import annotations

import io
import shutil
import subprocess
import tarfile
import zipfile
from pathlib import Path
from types import SimpleNamespace
from typing import Any

import pytest
import yaml

from liqo_rules.manifest import manifest, render_manifest
from offloading.gitops import files as f

REGION = "topology.kubernetes.io/region"


def selector(*terms: list[str]) -> dict[str, Any]:
    return {
        "nodeSelectorTerms": [
            {"matchExpressions": [{"key": REGION, "operator": "In", "values": list(values)}]} for values in terms
        ]
    }


BASE = {
    "namespaceMappingStrategy": "EnforceSameName",
    "podOffloadingStrategy": "LocalAndRemote",
    "remoteNamespaceName": "shop-remote",
    "clusterSelector": selector(["eu-west", "eu-south"], ["us-east"]),
}
EDITED = {
    "namespaceMappingStrategy": "EnforceSameName",
    "podOffloadingStrategy": "Remote",
    "clusterSelector": selector(["eu-west"]),
}
NEW = {"podOffloadingStrategy": "LocalAndRemote", "clusterSelector": selector(["eu-west"])}

CHANGES = [
    f.FileChange(12, "web", f.OFFLOAD, desired_spec=NEW, label_namespace=True),
    f.FileChange(13, "shop", f.UPDATE, desired_spec=EDITED, base_spec=BASE),
    f.FileChange(14, "legacy", f.UNOFFLOAD, base_spec={"podOffloadingStrategy": "Local"}),
]


def kubectl() -> str:
    found = shutil.which("kubectl")
    assert found, "kubectl is missing (scripts/system-deps.sh installs it): it builds the overlay"
    return found


def kustomize(directory: Path) -> list[dict[str, Any]]:
    result = subprocess.run([kubectl(), "kustomize", str(directory)], capture_output=True, text=True, timeout=60)
    assert result.returncode == 0, result.stderr
    return [doc for doc in yaml.safe_load_all(result.stdout) if doc]


def write(files: dict[str, bytes], root: Path) -> Path:
    for rel, data in files.items():
        target = root / rel
        target.parent.mkdir(parents=True, exist_ok=True)
        target.write_bytes(data)
    return root


def test_files_parse_and_the_kustomization_names_every_file() -> None:
    out = f.change_files(CHANGES, requester="alice")
    assert out.name == "changes-12-13-14" and out.change_ids == (12, 13, 14)
    assert out.described == ("#12 offload web", "#13 update shop", "#14 unoffload legacy")
    assert sorted(out.files) == [
        "kustomization.yaml",
        "legacy/observed.yaml",
        "legacy/patch.yaml",
        "shop/namespaceoffloading.yaml",
        "shop/patch.yaml",
        "web/namespaceoffloading.yaml",
    ]
    for data in out.files.values():
        assert [doc for doc in yaml.safe_load_all(data) if doc]
    kustomization = yaml.safe_load(out.files["kustomization.yaml"])
    listed = set(kustomization["resources"]) | {p["path"] for p in kustomization["patches"]}
    assert listed == set(out.files) - {"kustomization.yaml"}
    assert out.files["kustomization.yaml"].startswith(
        b"# liqo-dash hand-off: #12 offload web, #13 update shop, #14 unoffload legacy, requested by alice.\n"
    )
    assert out.notes == ("#12 offload web: also label namespace web liqo.io/scheduling-enabled=true",)


def test_manifests_are_the_bytes_liqoctl_prints() -> None:
    out = f.change_files(CHANGES)
    assert out.files["web/namespaceoffloading.yaml"] == render_manifest("web", NEW).encode()
    assert out.files["shop/namespaceoffloading.yaml"] == render_manifest("shop", EDITED).encode()
    assert out.files["legacy/observed.yaml"] == render_manifest("legacy", {"podOffloadingStrategy": "Local"}).encode()


def test_kubectl_kustomize_builds_what_the_changes_ask_for(tmp_path: Path) -> None:
    out = f.change_files(CHANGES)
    built = kustomize(write(out.files, tmp_path))
    by_namespace = {obj["metadata"]["namespace"]: obj for obj in built}
    assert sorted(by_namespace) == ["shop", "web"]  # the unoffloaded one is gone
    assert by_namespace["web"] == manifest("web", NEW)
    assert by_namespace["shop"] == manifest("shop", EDITED)


def test_the_patch_turns_the_observed_offloading_into_the_desired_one(tmp_path: Path) -> None:
    """What the patch is for: a base that holds the offloading as it was. The edit drops the remote name
    (null), changes the pod strategy and replaces a two-term selector by a one-term one."""
    patch = f.change_files(CHANGES).files["shop/patch.yaml"]
    assert yaml.safe_load(patch)["spec"] == {
        "clusterSelector": EDITED["clusterSelector"],
        "podOffloadingStrategy": "Remote",
        "remoteNamespaceName": None,
    }
    write(
        {
            "base.yaml": render_manifest("shop", BASE).encode(),
            "patch.yaml": patch,
            "kustomization.yaml": b"resources:\n- base.yaml\npatches:\n- path: patch.yaml\n",
        },
        tmp_path,
    )
    (built,) = kustomize(tmp_path)
    assert built == manifest("shop", EDITED)


def test_an_edit_that_changes_nothing_has_no_patch_and_an_unknown_base_says_so(tmp_path: Path) -> None:
    out = f.change_files([f.FileChange(3, "shop", f.UPDATE, desired_spec=BASE, base_spec=dict(BASE))])
    assert sorted(out.files) == ["kustomization.yaml", "shop/namespaceoffloading.yaml"]
    assert out.notes == ("#3 update shop: the spec does not change",)
    assert "patches" not in yaml.safe_load(out.files["kustomization.yaml"])
    assert kustomize(write(out.files, tmp_path)) == [manifest("shop", BASE)]
    unknown = f.change_files([f.FileChange(4, "shop", f.UPDATE, desired_spec=EDITED)])
    assert unknown.notes == ("#4 update shop: the spec it edits was not recorded, so there is no patch",)


def test_from_a_change_request() -> None:
    row = SimpleNamespace(
        pk=7, namespace="web", action="offload", desired_spec=NEW, base_spec=None, label_namespace=False
    )
    assert f.FileChange.of(row) == f.FileChange(7, "web", "offload", NEW, None, False)
    assert f.change_files([f.FileChange.of(row)]).name == "change-7"


def test_overlay_names() -> None:
    assert f.overlay_name([5]) == "change-5"
    assert f.overlay_name([9, 5, 7]) == "changes-5-7-9"
    assert f.overlay_name(range(1, 6)) == "changes-1-2-3-4-5"
    assert f.overlay_name(range(10, 40)) == "changes-10-and-29-more"
    assert f.change_files(CHANGES, name="bulk-4").name == "bulk-4"


def test_files_under_a_path() -> None:
    out = f.change_files(CHANGES[:1])
    assert sorted(out.under("clusters/prod/liqo/")) == [
        "clusters/prod/liqo/change-12/kustomization.yaml",
        "clusters/prod/liqo/change-12/web/namespaceoffloading.yaml",
    ]
    assert sorted(out.under(""))[0] == "change-12/kustomization.yaml"


@pytest.mark.parametrize("path", ["../up", "/etc", "a/../../b", ".git/hooks", "a\\b", "a/\nb"])
def test_a_path_outside_the_repository_is_refused(path: str) -> None:
    with pytest.raises(f.FilesError):
        f.change_files(CHANGES[:1]).under(path)


@pytest.mark.parametrize(
    ("changes", "words"),
    [
        ([], "no change"),
        ([f.FileChange(1, "../etc", f.OFFLOAD, NEW)], "not a namespace name"),
        ([f.FileChange(1, "web", "migrate", NEW)], "not one of offload, update, unoffload"),
        ([f.FileChange(1, "web", f.OFFLOAD)], "offload without a desired spec"),
        ([f.FileChange(1, "web", f.OFFLOAD, NEW), f.FileChange(2, "web", f.UNOFFLOAD)], "#1 and #2 both change"),
    ],
)
def test_changes_that_cannot_be_files_say_why(changes: list[f.FileChange], words: str) -> None:
    with pytest.raises(f.FilesError, match=words):
        f.change_files(changes)


@pytest.mark.parametrize("name", ["Bulk", "../x", "a/b", "", "a..b"])
def test_a_bad_overlay_name_is_refused(name: str) -> None:
    with pytest.raises(f.FilesError, match="overlay name"):
        f.change_files(CHANGES, name=name)


def test_archives_are_deterministic_and_hold_the_files() -> None:
    one, two = f.change_files(CHANGES, requester="alice"), f.change_files(list(reversed(CHANGES)), requester="alice")
    assert one.zip_bytes() == two.zip_bytes()
    assert one.tar_gz_bytes() == two.tar_gz_bytes()
    expected = {f"changes-12-13-14/{rel}": data for rel, data in one.files.items()}
    with zipfile.ZipFile(io.BytesIO(one.zip_bytes())) as archive:
        infos = archive.infolist()
        assert [i.filename for i in infos] == sorted(expected)
        assert {i.date_time for i in infos} == {(1980, 1, 1, 0, 0, 0)}
        assert {i.external_attr >> 16 for i in infos} == {0o100644}
        assert {i.filename: archive.read(i) for i in infos} == expected
    raw = one.tar_gz_bytes()
    assert raw[4:8] == b"\0\0\0\0"  # the gzip header's mtime
    with tarfile.open(fileobj=io.BytesIO(raw), mode="r:gz") as archive:
        members = archive.getmembers()
        assert [m.name for m in members] == sorted(expected)
        assert {(m.mtime, m.uid, m.gid, m.mode) for m in members} == {(0, 0, 0, 0o644)}
        assert {m.name: archive.extractfile(m).read() for m in members} == expected  # type: ignore[union-attr]
