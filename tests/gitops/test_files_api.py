"""A change and a bulk download as the files of a GitOps repository: JSON, zip and tar.gz, from the API
and from the links of the change and bulk pages; a viewer may download, an anonymous client may not."""

from __future__ import annotations

import io
import tarfile
import zipfile
from typing import Any

import pytest
import yaml
from django.contrib.auth.models import Group
from rest_framework.test import APIClient

from offloading.models import BulkRequest, ChangeRequest, Namespace

pytestmark = pytest.mark.django_db

GAINS = {
    "nodeSelectorTerms": [
        {
            "matchExpressions": [
                {"key": "topology.kubernetes.io/region", "operator": "In", "values": ["eu-west", "eu-south"]}
            ]
        }
    ]
}


def _edit(api: Any) -> ChangeRequest:
    assert api.put("/api/v1/namespaces/shop/offloading/", {"clusterSelector": GAINS}, format="json").status_code == 202
    return ChangeRequest.objects.get()


def test_a_change_as_json_zip_and_tar_gz(api: Any, fleet: Any) -> None:
    change = _edit(api)
    url = f"/api/v1/changes/{change.pk}/files/"
    listing = api.get(url)
    assert listing.status_code == 200, listing.content
    body = listing.json()
    assert body["name"] == f"change-{change.pk}" and body["changeIds"] == [change.pk]
    files = body["files"]
    assert sorted(files) == ["kustomization.yaml", "shop/namespaceoffloading.yaml", "shop/patch.yaml"]
    docs = [d for d in yaml.safe_load_all(files["shop/namespaceoffloading.yaml"]) if d]
    (manifest,) = [d for d in docs if d["kind"] == "NamespaceOffloading"]
    assert manifest["metadata"] == {"name": "offloading", "namespace": "shop"}
    assert manifest["spec"]["clusterSelector"] == GAINS
    assert yaml.safe_load(files["shop/patch.yaml"])["spec"] == {"clusterSelector": GAINS}

    zipped = api.get(url + "?format=zip")
    assert zipped.status_code == 200 and zipped["Content-Type"] == "application/zip"
    assert zipped["Content-Disposition"] == f'attachment; filename="change-{change.pk}.zip"'
    with zipfile.ZipFile(io.BytesIO(zipped.content)) as archive:
        assert {n: archive.read(n).decode() for n in archive.namelist()} == {
            f"change-{change.pk}/{path}": text for path, text in files.items()
        }
    assert api.get(url + "?format=zip").content == zipped.content  # the same bytes every time

    tarred = api.get(url + "?format=tar.gz")
    assert tarred.status_code == 200 and tarred["Content-Type"] == "application/gzip"
    with tarfile.open(fileobj=io.BytesIO(tarred.content), mode="r:gz") as archive:
        read = {m.name: archive.extractfile(m).read().decode() for m in archive.getmembers()}  # type: ignore[union-attr]
    assert read == {f"change-{change.pk}/{path}": text for path, text in files.items()}


def test_a_bad_format_an_unknown_change_and_no_credentials(api: Any, fleet: Any) -> None:
    change = _edit(api)
    bad = api.get(f"/api/v1/changes/{change.pk}/files/?format=rar")
    assert bad.status_code == 400 and bad.json()["details"]["causes"][0]["field"] == "format"
    assert api.get("/api/v1/changes/999999/files/?format=zip").status_code == 404
    assert api.get("/api/v1/changes/999999/files/?format=zip")["Content-Type"].startswith("application/json")
    assert api.get(f"/api/v1/changes/{change.pk}/files/?other=1").status_code == 400
    assert APIClient().get(f"/api/v1/changes/{change.pk}/files/").status_code in (401, 403)


def test_a_viewer_may_download(api: Any, fleet: Any, django_user_model: Any, client: Any) -> None:
    change = _edit(api)
    viewer = django_user_model.objects.create_user("vera", password="pw-for-vera-1234")
    viewer.groups.add(Group.objects.get_or_create(name="viewer")[0])
    client.force_login(viewer)
    response = client.get(f"/api/v1/changes/{change.pk}/files/?format=zip")
    assert response.status_code == 200 and response["Content-Type"] == "application/zip"


def test_a_bulk_is_one_overlay_and_the_pages_link_to_it(api: Any, admin_client: Any, fleet: Any) -> None:
    Namespace.objects.filter(name__in=["shop", "payments"]).update(labels={"env": "prod"})
    body = {"action": "unoffload", "namespaceSelector": "env=prod", "confirm": True}
    assert api.post("/api/v1/bulk/", body, format="json").status_code == 201
    bulk = BulkRequest.objects.get()
    change = bulk.changes.get()
    files = api.get(f"/api/v1/bulk/{bulk.pk}/files/").json()["files"]
    assert sorted(files) == ["kustomization.yaml", "shop/observed.yaml", "shop/patch.yaml"]
    assert yaml.safe_load(files["shop/patch.yaml"])["$patch"] == "delete"
    zipped = api.get(f"/api/v1/bulk/{bulk.pk}/files/?format=zip")
    assert zipped["Content-Disposition"] == f'attachment; filename="change-{change.pk}.zip"'

    page = admin_client.get(f"/bulk/{bulk.pk}/").content.decode()
    assert f'href="/api/v1/bulk/{bulk.pk}/files/?format=zip"' in page
    page = admin_client.get(f"/changes/{change.pk}/").content.decode()
    assert f'href="/api/v1/changes/{change.pk}/files/?format=tar.gz"' in page
