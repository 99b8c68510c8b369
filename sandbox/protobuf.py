"""Just enough of Kubernetes' protobuf encoding to read the bodies kubectl's typed clients send.

client-go's typed clients (`kubectl create namespace|configmap|secret|serviceaccount|service|deployment`,
`kubectl auth can-i`) POST `application/vnd.kubernetes.protobuf`: a `k8s\\0` magic prefix, then a
runtime.Unknown envelope (1: typeMeta {1: apiVersion, 2: kind}, 2: raw, the object's own message). The
sandbox turns the object into the JSON the API would have received and answers in JSON, which client-go
accepts. The messages it knows are in `sandbox.protoschema`; any other kind, or a field of a known
message the schema lacks that carries a value, is a 415 naming it (never a silently dropped field).

Go's generated marshallers write every non-pointer field, set or not (`name: ""`, `generation: 0`), so
zero values are dropped as JSON's `omitempty` would, except where the schema says a zero was set on
purpose (pointer fields: `replicas: 0`, `immutable: false`).
"""

from __future__ import annotations

import base64
import json
from datetime import UTC, datetime
from typing import Any

from sandbox.errors import ApiError, bad_request, unsupported_protobuf
from sandbox.protoschema import KINDS, Map, Message, Repeated, Type

MAGIC = b"k8s\x00"
CONTENT_TYPE = "application/vnd.kubernetes.protobuf"

# How deep an unknown field is looked into to tell whether it holds anything (Go writes empty
# sub-messages of zero fields); past this it counts as holding a value.
_EMPTY_DEPTH = 6


def _varint(data: bytes, pos: int) -> tuple[int, int]:
    result = shift = 0
    while True:
        if pos >= len(data) or shift > 63:
            raise bad_request("truncated protobuf body")
        byte = data[pos]
        pos += 1
        result |= (byte & 0x7F) << shift
        if not byte & 0x80:
            return result, pos
        shift += 7


def fields(data: bytes) -> list[tuple[int, int | bytes]]:
    """(field number, value) pairs: ints for varints, bytes for length-delimited and fixed-size fields."""
    out: list[tuple[int, int | bytes]] = []
    pos = 0
    while pos < len(data):
        key, pos = _varint(data, pos)
        number, wire = key >> 3, key & 7
        value: int | bytes
        if wire == 0:
            value, pos = _varint(data, pos)
        elif wire in (1, 2, 5):
            if wire == 2:
                length, pos = _varint(data, pos)
            else:
                length = 8 if wire == 1 else 4
            if pos + length > len(data):
                raise bad_request("truncated protobuf body")
            value, pos = data[pos : pos + length], pos + length
        else:
            raise bad_request(f"unsupported protobuf wire type {wire}")
        out.append((number, value))
    return out


def _empty(value: int | bytes, depth: int = 0) -> bool:
    """Whether a field holds nothing: zero, empty, or a message of such fields (as far as it parses)."""
    if isinstance(value, int) or not value:
        return not value
    if depth >= _EMPTY_DEPTH:
        return False
    try:
        return all(_empty(inner, depth + 1) for _, inner in fields(value))
    except ApiError:
        return False


def _signed(value: int) -> int:
    """int32/int64 varints hold negative numbers as 64-bit two's complement."""
    return value - (1 << 64) if value >= 1 << 63 else value


def _text(value: int | bytes, where: str) -> str:
    if not isinstance(value, bytes):
        raise bad_request(f"protobuf {where}: expected a string, got a number")
    try:
        return value.decode()
    except UnicodeDecodeError:
        raise bad_request(f"protobuf {where}: not valid UTF-8") from None


def _bytes(value: int | bytes, where: str) -> bytes:
    if not isinstance(value, bytes):
        raise bad_request(f"protobuf {where}: expected a message or bytes, got a number")
    return value


def _int(value: int | bytes, where: str) -> int:
    if not isinstance(value, int):
        raise bad_request(f"protobuf {where}: expected a number")
    return _signed(value)


def _scalar(value: int | bytes, kind: str, where: str) -> Any:
    """One value of a scalar type (the names `protoschema` uses) as JSON has it."""
    if kind == "string":
        return _text(value, where)
    if kind == "bytes":
        return base64.b64encode(_bytes(value, where)).decode()
    if kind in ("int", "count"):
        return _int(value, where)
    if kind in ("bool", "flag"):
        return bool(_int(value, where))
    parts = dict(fields(_bytes(value, where)))
    if kind == "quantity":  # resource.Quantity: {1: string}
        return _text(parts.get(1, b""), where)
    if kind == "intstr":  # intstr.IntOrString: {1: type (0 int, 1 string), 2: intVal, 3: strVal}
        if _int(parts.get(1, 0), where):
            return _text(parts.get(3, b""), where)
        return _int(parts.get(2, 0), where)
    if kind == "time":  # meta/v1 Time: {1: seconds, 2: nanos}; the zero time is JSON's null (dropped)
        seconds = _int(parts.get(1, 0), where)
        if not seconds and not parts.get(2):
            return None
        try:
            return datetime.fromtimestamp(seconds, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
        except (OverflowError, OSError, ValueError):
            raise bad_request(f"protobuf {where}: a time out of range ({seconds} s)") from None
    if kind == "fieldsV1":  # meta/v1 FieldsV1: {1: the JSON of the field set}
        try:
            return json.loads(_bytes(parts.get(1, b"{}"), where) or b"{}")
        except ValueError:
            raise bad_request(f"protobuf {where}: managed fields that are not JSON") from None
    raise AssertionError(f"unknown scalar type {kind}")  # pragma: no cover - a typo in protoschema


def _value(value: int | bytes, kind: Type, where: str) -> Any:
    if isinstance(kind, Message):
        return decode_message(_bytes(value, where), kind, where)
    assert isinstance(kind, str)
    return _scalar(value, kind, where)


_DEFAULTS: dict[str, int | bytes] = {"int": 0, "count": 0, "bool": 0, "flag": 0}


def _entry(value: int | bytes, kind: Type, where: str) -> tuple[str, Any]:
    """A map entry: a message {1: key, 2: value}; a missing value is the type's zero."""
    parts = dict(fields(_bytes(value, where)))
    default = _DEFAULTS.get(kind, b"") if isinstance(kind, str) else b""
    return _text(parts.get(1, b""), where + " key"), _value(parts.get(2, default), kind, where)


def _zero(value: Any, kind: Type) -> bool:
    """Whether JSON's omitempty would leave the field out (pointer scalars keep their zero)."""
    if kind in ("int", "bool"):
        return False
    return value in (None, "", 0, False, {}, [])


def decode_message(data: bytes, message: Message, where: str = "") -> dict[str, Any]:
    """One message as its JSON object, following `message`'s field table."""
    where = where or message.name
    out: dict[str, Any] = {}
    for number, value in fields(data):
        known = message.fields.get(number)
        if known is None:
            if _empty(value):
                continue
            raise unsupported_protobuf(f"field {number} of the protobuf {message.name} ({where})")
        name, kind = known
        at = f"{where}.{name}"
        if isinstance(kind, Repeated):
            out.setdefault(name, []).append(_value(value, kind.item, at))
        elif isinstance(kind, Map):
            key, item = _entry(value, kind.value, at)
            out.setdefault(name, {})[key] = item
        elif not (_zero(decoded := _value(value, kind, at), kind)):
            out[name] = decoded
        else:
            out.pop(name, None)
    return out


def decode_object(body: bytes) -> dict[str, Any]:
    """The object of a protobuf request body as the JSON the API would have received."""
    if not body.startswith(MAGIC):
        raise bad_request("protobuf body without the k8s magic prefix")
    envelope = dict(fields(body[len(MAGIC) :]))
    type_meta = dict(fields(_bytes(envelope.get(1, b""), "typeMeta")))
    api_version = _text(type_meta.get(1, b""), "typeMeta.apiVersion")
    kind = _text(type_meta.get(2, b""), "typeMeta.kind")
    if envelope.get(3) or envelope.get(4):
        raise unsupported_protobuf("a protobuf body with a content encoding or content type of its own")
    message = KINDS.get((api_version, kind))
    if message is None:
        raise unsupported_protobuf(f'protobuf bodies of kind "{kind}" ({api_version or "no apiVersion"})')
    obj = decode_message(_bytes(envelope.get(2, b""), "raw"), message, kind)
    return {"apiVersion": api_version, "kind": kind, **obj}
