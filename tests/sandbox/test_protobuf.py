"""The protobuf decoder (sandbox/protobuf.py): real kubectl v1.32 bodies, bodies built here with a tiny
encoder, bad bodies, and the same bodies through the sandbox's HTTP API, read back with the official client."""

from __future__ import annotations

import json
import urllib.error
import urllib.request
from pathlib import Path
from typing import Any

import pytest
from kubernetes.client import ApiException

from sandbox.errors import ApiError
from sandbox.protobuf import CONTENT_TYPE, MAGIC, decode_object
from tests.sandbox.conftest import Clients

BODIES = Path(__file__).resolve().parent / "kubectl_bodies"

# -- a test-only encoder: a message is a list of (field number, value); a value is an int (varint), str or
# bytes (length-delimited) or a list (a nested message) ------------------------------------------------
Fields = list[tuple[int, Any]]


def _varint(n: int) -> bytes:
    n &= (1 << 64) - 1  # negative ints as two's complement, as Go writes int32/int64
    out = bytearray()
    while True:
        low, n = n & 0x7F, n >> 7
        out.append(low | (0x80 if n else 0))
        if not n:
            return bytes(out)


def message(fields: Fields) -> bytes:
    out = b""
    for number, value in fields:
        if isinstance(value, int):
            out += _varint(number << 3) + _varint(value)
            continue
        data = message(value) if isinstance(value, list) else value.encode() if isinstance(value, str) else value
        out += _varint(number << 3 | 2) + _varint(len(data)) + data
    return out


def entry(key: str, value: Any) -> list[tuple[int, Any]]:
    return [(1, key), (2, value)]


def body(api_version: str, kind: str, obj: Fields) -> bytes:
    return MAGIC + message([(1, [(1, api_version), (2, kind)]), (2, obj), (3, ""), (4, "")])


# Go's marshaller writes every non-pointer field of ObjectMeta, set or not; the decoder drops them.
GO_EMPTIES: Fields = [(2, ""), (4, ""), (5, ""), (6, ""), (7, 0), (8, [])]


def meta(name: str, namespace: str = "", *more: tuple[int, Any]) -> tuple[int, Fields]:
    return (1, [(1, name), *GO_EMPTIES, (3, namespace), *more])


# -- real bodies ---------------------------------------------------------------------------------------
KUBECTL_BODIES = {
    # kubectl create namespace team-a
    "namespace": {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "team-a"}},
    # kubectl create configmap settings -n team-a --from-literal=mode=fast --from-literal=empty= --from-file=blob=<4 bytes>
    "configmap": {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {"name": "settings", "namespace": "team-a"},
        "data": {"empty": "", "mode": "fast"},
        "binaryData": {"blob": "AAH+/w=="},
    },
    # kubectl create secret generic creds -n team-a --from-literal=password=hunter2
    "secret": {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": "creds", "namespace": "team-a"},
        "data": {"password": "aHVudGVyMg=="},
    },
    # kubectl create serviceaccount robot -n team-a
    "serviceaccount": {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": {"name": "robot", "namespace": "team-a"},
    },
    # kubectl create service clusterip web -n team-a --tcp=80:8080
    "service": {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": {"name": "web", "namespace": "team-a", "labels": {"app": "web"}},
        "spec": {
            "ports": [{"name": "80-8080", "protocol": "TCP", "port": 80, "targetPort": 8080}],
            "selector": {"app": "web"},
            "type": "ClusterIP",
        },
    },
    # kubectl create deployment web -n team-a --image=nginx:1.27 --replicas=0 --port=80
    "deployment": {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": {"name": "web", "namespace": "team-a", "labels": {"app": "web"}},
        "spec": {
            "replicas": 0,
            "selector": {"matchLabels": {"app": "web"}},
            "template": {
                "metadata": {"labels": {"app": "web"}},
                "spec": {"containers": [{"name": "nginx", "image": "nginx:1.27", "ports": [{"containerPort": 80}]}]},
            },
        },
    },
    # kubectl auth can-i delete pods -n team-a
    "selfsubjectaccessreview": {
        "apiVersion": "authorization.k8s.io/v1",
        "kind": "SelfSubjectAccessReview",
        "spec": {"resourceAttributes": {"namespace": "team-a", "verb": "delete", "resource": "pods"}},
    },
}


@pytest.mark.parametrize("name", sorted(KUBECTL_BODIES))
def test_real_kubectl_bodies_decode_to_the_json_kubectl_would_have_sent(name: str) -> None:
    raw = (BODIES / f"{name}.bin").read_bytes()
    assert raw.startswith(MAGIC)
    assert decode_object(raw) == KUBECTL_BODIES[name]


# -- bodies built here ---------------------------------------------------------------------------------
def test_object_meta_labels_annotations_finalizers_owner_references_and_times() -> None:
    owner = [(1, "Deployment"), (3, "web"), (4, "u-1"), (5, "apps/v1"), (6, 1), (7, 0)]
    managed = [
        (1, "kubectl"),
        (2, "Apply"),
        (3, "v1"),
        (4, [(1, 1700000000)]),
        (6, "FieldsV1"),
        (7, [(1, '{"f:data":{}}')]),
    ]
    decoded = decode_object(
        body(
            "v1",
            "ConfigMap",
            [
                (
                    1,
                    [
                        (2, "cfg-"),
                        (3, "alpha"),
                        (8, [(1, 1700000000), (2, 0)]),
                        (10, 0),
                        (11, entry("team", "payments")),
                        (11, entry("empty", "")),
                        (12, entry("note", "a b")),
                        (12, [(1, "bare")]),  # an entry without its value: the empty string
                        (13, owner),
                        (14, "liqo.io/a"),
                        (14, "liqo.io/b"),
                        (17, managed),
                        (5, ""),
                        (7, 0),
                    ],
                ),
                (2, entry("k", "v")),
            ],
        )
    )
    assert decoded["metadata"] == {
        "generateName": "cfg-",
        "namespace": "alpha",
        "creationTimestamp": "2023-11-14T22:13:20Z",
        "deletionGracePeriodSeconds": 0,  # a pointer: a zero that was sent is kept
        "labels": {"team": "payments", "empty": ""},
        "annotations": {"note": "a b", "bare": ""},
        "ownerReferences": [
            {
                "kind": "Deployment",
                "name": "web",
                "uid": "u-1",
                "apiVersion": "apps/v1",
                "controller": True,
                "blockOwnerDeletion": False,
            }
        ],
        "finalizers": ["liqo.io/a", "liqo.io/b"],
        "managedFields": [
            {
                "manager": "kubectl",
                "operation": "Apply",
                "apiVersion": "v1",
                "time": "2023-11-14T22:13:20Z",
                "fieldsType": "FieldsV1",
                "fieldsV1": {"f:data": {}},
            }
        ],
    }
    assert decoded["data"] == {"k": "v"}


def test_pointer_zeros_are_kept_and_go_s_unset_plain_values_dropped() -> None:
    cm = decode_object(body("v1", "ConfigMap", [meta("c", "alpha"), (4, 0)]))
    assert cm["immutable"] is False
    sa = decode_object(body("v1", "ServiceAccount", [meta("r", "alpha"), (2, [(3, "tok")]), (3, [(1, "reg")]), (4, 0)]))
    assert sa["automountServiceAccountToken"] is False
    assert sa["secrets"] == [{"name": "tok"}] and sa["imagePullSecrets"] == [{"name": "reg"}]
    container = [
        (1, "c"),
        (2, "busybox"),
        (3, "sh"),
        (3, "-c"),
        (16, 0),
        (7, [(1, "A"), (2, "1")]),
        (8, [(1, entry("cpu", [(1, "500m")]))]),
    ]
    strategy = [(1, "RollingUpdate"), (2, [(1, [(1, 1), (3, "25%")]), (2, [(1, 0), (2, 1)])])]
    spec = [(1, 3), (3, [(2, [(2, container), (4, 30), (11, 0)])]), (4, strategy), (5, 0), (6, -1), (7, 0)]
    dep = decode_object(body("apps/v1", "Deployment", [meta("d", "alpha"), (2, spec), (3, [(1, 0), (2, 0)])]))
    assert dep["spec"] == {
        "replicas": 3,
        "template": {
            "spec": {
                "containers": [
                    {
                        "name": "c",
                        "image": "busybox",
                        "command": ["sh", "-c"],
                        "env": [{"name": "A", "value": "1"}],
                        "resources": {"limits": {"cpu": "500m"}},
                    }
                ],
                "terminationGracePeriodSeconds": 30,
            }
        },
        "strategy": {"type": "RollingUpdate", "rollingUpdate": {"maxUnavailable": "25%", "maxSurge": 1}},
        "revisionHistoryLimit": -1,  # int32 -1 as Go writes it: ten bytes of two's complement
    }
    secret = decode_object(
        body(
            "v1",
            "Secret",
            [meta("s", "alpha"), (2, entry("b", b"\x00\xff")), (3, "kubernetes.io/tls"), (4, entry("plain", "text"))],
        )
    )
    assert (
        secret["data"] == {"b": "AP8="}
        and secret["stringData"] == {"plain": "text"}
        and secret["type"] == "kubernetes.io/tls"
    )


def test_a_kind_the_sandbox_does_not_decode_is_a_415_naming_it() -> None:
    with pytest.raises(ApiError) as err:
        decode_object(body("v1", "Pod", [meta("p", "alpha")]))
    assert err.value.code == 415 and err.value.reason == "UnsupportedMediaType"
    assert 'protobuf bodies of kind "Pod" (v1)' in err.value.message and "application/json" in err.value.message
    with pytest.raises(ApiError) as err:
        decode_object(body("batch/v1", "Job", []))
    assert err.value.code == 415 and '"Job" (batch/v1)' in err.value.message


def test_a_field_the_schema_lacks_is_refused_when_it_holds_a_value_and_ignored_when_empty() -> None:
    probe = [(1, [(1, [(1, "/healthz")])])]  # Container.livenessProbe (10), not in the schema
    with_probe = [(2, [(2, [(1, "c"), (2, "nginx"), (10, probe)])])]
    with pytest.raises(ApiError) as err:
        decode_object(body("apps/v1", "Deployment", [meta("d", "alpha"), (2, [(3, with_probe)])]))
    assert err.value.code == 415
    assert "field 10 of the protobuf Container (Deployment.spec.template.spec.containers)" in err.value.message
    empty_probe = [(2, [(2, [(1, "c"), (10, [(1, [(1, "")]), (2, 0)])])])]
    decoded = decode_object(body("apps/v1", "Deployment", [meta("d", "alpha"), (2, [(3, empty_probe)])]))
    assert decoded["spec"]["template"]["spec"]["containers"] == [{"name": "c"}]


@pytest.mark.parametrize(
    ("raw", "message"),
    [
        (b'{"kind": "Namespace"}', "without the k8s magic prefix"),
        (body("v1", "Namespace", [meta("n")])[:-6], "truncated protobuf body"),
        (body("v1", "Namespace", [(1, [(1, b"\xff\xfe")])]), "Namespace.metadata.name: not valid UTF-8"),
        (body("v1", "Namespace", [(1, [(1, 7)])]), "Namespace.metadata.name: expected a string"),
        (body("v1", "Namespace", [(1, [(11, [(1, 5)])])]), "Namespace.metadata.labels key: expected a string"),
        (
            body("v1", "Namespace", [(1, [(8, [(1, 1 << 62)])])]),
            "Namespace.metadata.creationTimestamp: a time out of range",
        ),
        (MAGIC + b"\x0b", "unsupported protobuf wire type 3"),
        (MAGIC + b"\x08" + b"\xff" * 11, "truncated protobuf body"),
        (MAGIC + message([(1, [(1, "v1"), (2, "Namespace")]), (3, "gzip")]), "content encoding"),
    ],
)
def test_bad_bodies_are_a_clear_client_error(raw: bytes, message: str) -> None:
    with pytest.raises(ApiError) as err:
        decode_object(raw)
    assert err.value.code in (400, 415) and message in err.value.message


def test_subject_access_reviews_keep_user_groups_and_attributes() -> None:
    spec = [(1, [(1, "alpha"), (2, "get"), (5, "pods")]), (3, "alice"), (4, "devs"), (4, "ops")]
    decoded = decode_object(body("authorization.k8s.io/v1", "SubjectAccessReview", [(1, []), (2, spec)]))
    assert decoded["spec"] == {
        "resourceAttributes": {"namespace": "alpha", "verb": "get", "resource": "pods"},
        "user": "alice",
        "groups": ["devs", "ops"],
    }


# -- through the sandbox's API -------------------------------------------------------------------------
def _post(kube: Clients, path: str, data: bytes) -> tuple[int, dict[str, Any]]:
    request = urllib.request.Request(
        kube.sb.url + path, data=data, method="POST", headers={"Content-Type": CONTENT_TYPE}
    )
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status, json.loads(response.read())
    except urllib.error.HTTPError as exc:
        return exc.code, json.loads(exc.read())


def test_a_protobuf_object_is_stored_with_its_metadata_and_read_back_by_the_official_client(kube: Clients) -> None:
    owner = [(1, "ConfigMap"), (3, "parent"), (4, "uid-1"), (5, "v1"), (6, 1)]
    obj = [
        meta(
            "proto-cm",
            "alpha",
            (11, entry("team", "payments")),
            (12, entry("owner", "carol")),
            (13, owner),
            (14, "example.com/keep"),
        ),
        (2, entry("mode", "fast")),
        (3, entry("blob", b"\x00\x01")),
    ]
    code, created = _post(kube, "/api/v1/namespaces/alpha/configmaps", body("v1", "ConfigMap", obj))
    assert code == 201 and created["metadata"]["resourceVersion"]
    cm = kube.core.read_namespaced_config_map("proto-cm", "alpha")
    assert cm.metadata.labels == {"team": "payments"} and cm.metadata.annotations == {"owner": "carol"}
    assert cm.metadata.finalizers == ["example.com/keep"]
    ref = cm.metadata.owner_references[0]
    assert (ref.kind, ref.name, ref.uid, ref.api_version, ref.controller) == (
        "ConfigMap",
        "parent",
        "uid-1",
        "v1",
        True,
    )
    assert cm.data == {"mode": "fast"} and cm.binary_data == {"blob": "AAE="}


def test_over_http_an_unknown_kind_is_a_415_status_and_a_broken_body_a_400(kube: Clients) -> None:
    code, status = _post(kube, "/api/v1/namespaces/alpha/pods", body("v1", "Pod", [meta("p", "alpha")]))
    assert code == 415 and status["kind"] == "Status" and status["reason"] == "UnsupportedMediaType"
    assert '"Pod"' in status["message"]
    code, status = _post(kube, "/api/v1/namespaces", MAGIC + b"\x0a\x50")
    assert code == 400 and status["message"] == "truncated protobuf body"
    with pytest.raises(ApiException) as err:
        kube.core.read_namespaced_pod("p", "alpha")
    assert err.value.status == 404


def test_a_client_asking_for_protobuf_is_answered_in_json(kube: Clients) -> None:
    for accept in (CONTENT_TYPE, CONTENT_TYPE + ",application/json"):
        request = urllib.request.Request(kube.sb.url + "/api/v1/namespaces/alpha", headers={"Accept": accept})
        with urllib.request.urlopen(request, timeout=10) as response:
            assert response.headers["Content-Type"] == "application/json"
            assert json.loads(response.read())["metadata"]["name"] == "alpha"


@pytest.mark.parametrize("name", sorted(KUBECTL_BODIES))
def test_a_corrupted_or_cut_kubectl_body_is_an_object_or_a_client_error_never_a_crash(name: str) -> None:
    raw = (BODIES / f"{name}.bin").read_bytes()
    outcomes = set()
    for at in range(len(MAGIC), len(raw)):
        for broken in (raw[:at], raw[:at] + b"\xff" + raw[at + 1 :], raw[:at] + b"\x00" + raw[at + 1 :]):
            try:
                outcomes.add(type(decode_object(broken)).__name__)
            except ApiError as err:
                assert err.code in (400, 415), err.message
                outcomes.add(str(err.code))
    assert "400" in outcomes  # the cut bodies at least
