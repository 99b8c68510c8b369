"""The sandbox accepts what an API server with Liqo's CRDs accepts: unknown fields pruned, the schema's
rejections a 422 naming the field, `fieldValidation` Strict / Warn / Ignore as kubectl and the official
client send it, and ObjectMeta's label and annotation grammar for every kind."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client.rest import ApiException

from sandbox import Sandbox
from tests.sandbox.conftest import GROUP, NSOFF, VERSION, Clients
from tests.sandbox.test_kubectl import KUBECTL, Kubectl

SPEC = {"podOffloadingStrategy": "Remote", "clusterSelector": {"nodeSelectorTerms": []}}


def _nsoff(spec: dict[str, Any], **meta: Any) -> dict[str, Any]:
    return {
        "apiVersion": f"{GROUP}/{VERSION}",
        "kind": "NamespaceOffloading",
        "metadata": {"name": "offloading", **meta},
        "spec": spec,
    }


def _status(err: ApiException) -> dict[str, Any]:
    return json.loads(err.body)


def _raw(
    sb: Sandbox, method: str, path: str, body: bytes, content_type: str = "application/json"
) -> tuple[int, Any, list[str]]:
    request = urllib.request.Request(sb.url + path, data=body, method=method, headers={"Content-Type": content_type})
    try:
        with urllib.request.urlopen(request, timeout=10) as resp:
            return resp.status, json.loads(resp.read()), resp.headers.get_all("Warning") or []
    except urllib.error.HTTPError as err:
        return err.code, json.loads(err.read()), err.headers.get_all("Warning") or []


def test_strict_rejects_unknown_fields_with_the_api_servers_message(kube: Clients) -> None:
    body = _nsoff(dict(SPEC, foo="bar", clusterSelector={"nodeSelectorTerms": [], "extra": 1}), color="red")
    with pytest.raises(ApiException) as caught:
        kube.custom.create_namespaced_custom_object(GROUP, VERSION, "alpha", NSOFF, body, field_validation="Strict")
    assert caught.value.status == 400
    status = _status(caught.value)
    assert status["reason"] == "BadRequest"
    assert status["message"].startswith(
        'NamespaceOffloading in version "v1beta1" cannot be handled as a NamespaceOffloading: strict decoding error: '
    )
    for path in ("metadata.color", "spec.foo", "spec.clusterSelector.extra"):
        assert f'unknown field "{path}"' in status["message"]
    with pytest.raises(ApiException):
        kube.get_nsoff("alpha")  # nothing was stored


def test_ignore_prunes_silently_and_warn_says_what_it_pruned(kube: Clients) -> None:
    body = _nsoff(dict(SPEC, foo="bar"))
    created, code, headers = kube.custom.create_namespaced_custom_object_with_http_info(
        GROUP, VERSION, "alpha", NSOFF, body, field_validation="Ignore"
    )
    assert code == 201 and "foo" not in created["spec"]
    assert not headers.get("Warning")
    assert "foo" not in kube.get_nsoff("alpha")["spec"]

    body = _nsoff(dict(SPEC, bar=[1]), annotations={"a": "b"})
    _, code, headers = kube.custom.create_namespaced_custom_object_with_http_info(
        GROUP, VERSION, "beta", NSOFF, body, field_validation="Warn"
    )
    assert code == 201 and headers.get("Warning") == '299 - "unknown field \\"spec.bar\\""'
    assert "bar" not in kube.get_nsoff("beta")["spec"]


def test_without_the_parameter_the_server_warns(kube: Clients) -> None:
    """The API server's default fieldValidation is Warn (Kubernetes 1.27+)."""
    _, _, headers = kube.custom.create_namespaced_custom_object_with_http_info(
        GROUP, VERSION, "alpha", NSOFF, _nsoff(dict(SPEC, foo=1))
    )
    assert 'unknown field \\"spec.foo\\"' in headers.get("Warning", "")


def test_update_and_patches_prune_too(kube: Clients) -> None:
    kube.create_nsoff("alpha", SPEC)
    kube.sb.wait_idle(10)  # Liqo's controller adds its finalizer and status: read after it, replace what is stored

    def tampered() -> dict:
        current = kube.get_nsoff("alpha")
        current["spec"]["sneaky"] = True
        current["status"] = {"offloadingPhase": "Ready", "bogus": 1}
        return current

    with pytest.raises(ApiException) as caught:
        kube.custom.replace_namespaced_custom_object(
            GROUP, VERSION, "alpha", NSOFF, "offloading", tampered(), field_validation="Strict"
        )
    assert (
        'strict decoding error: unknown field "spec.sneaky", unknown field "status.bogus"'
        in _status(caught.value)["message"]
    )
    # The controller may still write the offloading (a status, a finalizer): a replace that lost that race
    # gets 409 and is made again from what is stored, as a client does.
    for _ in range(20):
        try:
            replaced = kube.custom.replace_namespaced_custom_object(
                GROUP, VERSION, "alpha", NSOFF, "offloading", tampered()
            )
            break
        except ApiException as exc:
            if exc.status != 409:
                raise
            kube.sb.wait_idle(10)
    else:
        pytest.fail("every replace lost the race with Liqo's controller")
    assert "sneaky" not in replaced["spec"]
    patched = kube.custom.patch_namespaced_custom_object(
        GROUP, VERSION, "alpha", NSOFF, "offloading", {"spec": {"whatever": {"x": 1}}}
    )
    assert "whatever" not in patched["spec"]
    with pytest.raises(ApiException) as caught:
        kube.custom.patch_namespaced_custom_object(
            GROUP, VERSION, "alpha", NSOFF, "offloading", {"spec": {"whatever": 1}}, field_validation="Strict"
        )
    assert caught.value.status == 400 and 'unknown field "spec.whatever"' in _status(caught.value)["message"]


def test_duplicate_fields_are_strict_errors_and_warnings(sandbox: Sandbox) -> None:
    body = (
        b'{"apiVersion":"offloading.liqo.io/v1beta1","kind":"NamespaceOffloading","metadata":{"name":"offloading"},'
        b'"spec":{"podOffloadingStrategy":"Local","podOffloadingStrategy":"Remote"}}'
    )
    path = f"/apis/{GROUP}/{VERSION}/namespaces/alpha/{NSOFF}"
    code, status, _ = _raw(sandbox, "POST", path + "?fieldValidation=Strict", body)
    assert code == 400
    assert 'strict decoding error: duplicate field "spec.podOffloadingStrategy"' in status["message"]
    code, created, warnings = _raw(sandbox, "POST", path + "?fieldValidation=Warn", body)
    assert code == 201 and created["spec"]["podOffloadingStrategy"] == "Remote"  # the last one wins
    assert warnings == ['299 - "duplicate field \\"spec.podOffloadingStrategy\\""']
    code, status, _ = _raw(sandbox, "POST", path + "?fieldValidation=Sometimes", body)
    assert code == 400 and "fieldValidation" in status["message"]


@pytest.mark.parametrize(
    ("spec", "field", "reason"),
    [
        ({"podOffloadingStrategy": "Everywhere"}, "spec.podOffloadingStrategy", "FieldValueNotSupported"),
        ({"namespaceMappingStrategy": 3}, "spec.namespaceMappingStrategy", "FieldValueInvalid"),
        ({"clusterSelector": {}}, "spec.clusterSelector.nodeSelectorTerms", "FieldValueRequired"),
        (
            {"clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "a"}]}]}},
            "spec.clusterSelector.nodeSelectorTerms[0].matchExpressions[0].operator",
            "FieldValueRequired",
        ),
        (
            {
                "clusterSelector": {
                    "nodeSelectorTerms": [{"matchFields": [{"key": "a", "operator": "In", "values": [1]}]}]
                }
            },
            "spec.clusterSelector.nodeSelectorTerms[0].matchFields[0].values[0]",
            "FieldValueInvalid",
        ),
    ],
)
def test_what_the_schema_rejects_is_422_naming_the_field(
    kube: Clients, spec: dict[str, Any], field: str, reason: str
) -> None:
    with pytest.raises(ApiException) as caught:
        kube.create_nsoff("alpha", spec)
    assert caught.value.status == 422
    status = _status(caught.value)
    assert status["reason"] == "Invalid"
    assert [(c["field"], c["reason"]) for c in status["details"]["causes"]] == [(field, reason)]
    assert status["message"].startswith('NamespaceOffloading.offloading.liqo.io "offloading" is invalid: ' + field)


def test_messy_but_valid_selectors_are_stored_as_sent(kube: Clients) -> None:
    spec = {
        "clusterSelector": {
            "nodeSelectorTerms": [
                {"matchExpressions": [{"key": "region", "operator": "In", "values": ["eu south 1"]}]},
                {"matchExpressions": [{"key": "cores", "operator": "Gt", "values": ["4"]}]},
                {"matchFields": [{"key": "metadata.name", "operator": "NotIn", "values": ["milan"]}]},
                {},
                {"matchExpressions": [{"key": "x", "operator": "Sometimes"}]},  # no enum in the CRD
            ]
        }
    }
    created = kube.create_nsoff("alpha", spec, field_validation="Strict")
    assert created["spec"]["clusterSelector"] == spec["clusterSelector"]


def test_the_other_liqo_kinds_are_structural_too(kube: Clients) -> None:
    fc = kube.custom.get_cluster_custom_object("core.liqo.io", "v1beta1", "foreignclusters", "milan")
    fc["spec"]["clusterID"] = "Not_A_Label"
    fc["spec"]["extra"] = "x"
    with pytest.raises(ApiException) as caught:
        kube.custom.replace_cluster_custom_object("core.liqo.io", "v1beta1", "foreignclusters", "milan", fc)
    causes = _status(caught.value)["details"]["causes"]
    assert {c["field"] for c in causes} == {"spec.clusterID"}
    assert any("should match '^[a-z0-9]([-a-z0-9]*[a-z0-9])?$'" in c["message"] for c in causes)
    assert any("ClusterID field is immutable" in c["message"] for c in causes)

    nm = kube.custom.get_namespaced_custom_object(GROUP, VERSION, "liqo-tenant-milan", "namespacemaps", "milan")
    nm["status"] = {"currentMapping": {"alpha": {"phase": "Happy", "remoteNamespace": "alpha"}}}
    with pytest.raises(ApiException) as caught:
        kube.custom.replace_namespaced_custom_object_status(
            GROUP, VERSION, "liqo-tenant-milan", "namespacemaps", "milan", nm
        )
    assert [c["field"] for c in _status(caught.value)["details"]["causes"]] == ["status.currentMapping.alpha.phase"]

    vn = kube.custom.get_namespaced_custom_object(GROUP, VERSION, "liqo-tenant-milan", "virtualnodes", "milan")
    vn["spec"]["resourceQuota"]["hard"]["cpu"] = 8
    vn["spec"]["template"] = {"anything": {"goes": ["here"]}}
    vn["spec"]["nonsense"] = True
    stored = kube.custom.replace_namespaced_custom_object(
        GROUP, VERSION, "liqo-tenant-milan", "virtualnodes", "milan", vn
    )
    assert stored["spec"]["template"] == {"anything": {"goes": ["here"]}} and "nonsense" not in stored["spec"]


def test_label_values_refuse_bidi_controls_annotations_keep_them(kube: Clients) -> None:
    with pytest.raises(ApiException) as caught:
        kube.core.patch_namespace("alpha", {"metadata": {"labels": {"owner": "evil\u202eexe"}}})
    assert caught.value.status == 422
    causes = _status(caught.value)["details"]["causes"]
    assert causes[0]["field"] == "metadata.labels" and "a valid label must be an empty string" in causes[0]["message"]
    with pytest.raises(ApiException) as caught:
        kube.core.patch_namespace("alpha", {"metadata": {"labels": {"x" * 64: "v"}}})
    assert "name part must be no more than 63 bytes" in caught.value.body
    note = "payment to \u202eexe.daolnwod \u2066x\u2069 \u200f\u200b"
    ns = kube.core.patch_namespace("alpha", {"metadata": {"annotations": {"note": note}}})
    assert ns.metadata.annotations["note"] == note
    with pytest.raises(ApiException) as caught:
        kube.core.patch_namespace("alpha", {"metadata": {"annotations": {"big": "x" * (256 * 1024)}}})
    assert "Too long: may not be more than 262144 bytes" in caught.value.body


MANIFEST = """
apiVersion: offloading.liqo.io/v1beta1
kind: NamespaceOffloading
metadata:
  name: offloading
  namespace: alpha
spec:
  podOffloadingStrategy: Remote
  colour: blue
  clusterSelector:
    nodeSelectorTerms: []
"""


@pytest.mark.skipif(not Path(KUBECTL).exists(), reason="kubectl is not installed")
def test_kubectl_validate_strict_warn_and_false(sandbox: Sandbox, tmp_path: Path, kube: Clients) -> None:
    kubectl = Kubectl(sandbox, tmp_path)
    refused = kubectl("create", "-f", "-", stdin=MANIFEST, check=False)  # --validate=strict is the default
    assert refused.returncode != 0
    assert 'strict decoding error: unknown field "spec.colour"' in refused.stderr
    refused = kubectl("apply", "-f", "-", stdin=MANIFEST, check=False)
    assert refused.returncode != 0 and 'unknown field "spec.colour"' in refused.stderr
    warned = kubectl("create", "--validate=warn", "-f", "-", stdin=MANIFEST)
    assert 'unknown field "spec.colour"' in warned.stderr
    assert "colour" not in kube.get_nsoff("alpha")["spec"]
    quiet = kubectl("apply", "--validate=false", "-f", "-", stdin=MANIFEST.replace("alpha", "beta"))
    assert "colour" not in quiet.stderr and "colour" not in kube.get_nsoff("beta")["spec"]
    bad = kubectl(
        "apply", "-f", "-", stdin=MANIFEST.replace("colour: blue", "").replace("Remote", "Anywhere"), check=False
    )
    assert bad.returncode != 0 and 'spec.podOffloadingStrategy: Unsupported value: "Anywhere"' in bad.stderr
