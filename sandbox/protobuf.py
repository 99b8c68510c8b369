"""Just enough of Kubernetes' protobuf encoding to read the access reviews kubectl sends that way.

client-go's typed clients (e.g. `kubectl auth can-i`) POST `application/vnd.kubernetes.protobuf`: a
`k8s\\0` magic prefix, then a runtime.Unknown envelope whose `raw` field holds the object. The sandbox
answers in JSON, which client-go accepts. Only (Self)SubjectAccessReview bodies are decoded.
"""

from __future__ import annotations

from typing import Any

from sandbox.errors import bad_request

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data):
            raise bad_request("truncated protobuf body")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def fields(data: bytes) -> list[tuple[int, Any]]:
    """(field number, value) pairs: ints for varints, bytes for length-delimited fields."""
    out: list[tuple[int, Any]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire == 2:
            length, pos = _varint(data, pos)
            value, pos = data[pos : pos + length], pos + length
        elif wire == 1:
            value, pos = data[pos : pos + 8], pos + 8
        elif wire == 5:
            value, pos = data[pos : pos + 4], pos + 4
        else:
            raise bad_request(f"unsupported protobuf wire type {wire}")
        out.append((number, value))
    return out


def _strings(data: bytes, names: dict[int, str]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for number, value in fields(data):
        if number in names and isinstance(value, bytes):
            out[names[number]] = value.decode()
    return out


RESOURCE_ATTRIBUTES = {1: "namespace", 2: "verb", 3: "group", 4: "version", 5: "resource", 6: "subresource", 7: "name"}
NON_RESOURCE_ATTRIBUTES = {1: "path", 2: "verb"}


def decode_access_review(body: bytes) -> dict[str, Any]:
    """A SelfSubjectAccessReview or SubjectAccessReview as the JSON the API would have received."""
    if not body.startswith(MAGIC):
        raise bad_request("protobuf body without the k8s magic prefix")
    envelope = dict(fields(body[len(MAGIC) :]))
    type_meta = _strings(envelope.get(1, b""), {1: "apiVersion", 2: "kind"})
    obj = fields(envelope.get(2, b""))
    spec: dict[str, Any] = {}
    for number, value in obj:
        if number != 2:
            continue
        for spec_number, spec_value in fields(value):
            if spec_number == 1:
                spec["resourceAttributes"] = _strings(spec_value, RESOURCE_ATTRIBUTES)
            elif spec_number == 2:
                spec["nonResourceAttributes"] = _strings(spec_value, NON_RESOURCE_ATTRIBUTES)
            elif spec_number == 3 and type_meta.get("kind") == "SubjectAccessReview":
                spec["user"] = spec_value.decode()
            elif spec_number == 4 and type_meta.get("kind") == "SubjectAccessReview":
                spec.setdefault("groups", []).append(spec_value.decode())
    return {**type_meta, "metadata": {}, "spec": spec}
