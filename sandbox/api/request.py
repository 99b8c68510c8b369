"""One HTTP exchange: reading the request body and writing responses, objects, tables and watch chunks
(HTTP/1.1 keep-alive, chunked bodies, Warning headers)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from email.message import Message
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from sandbox import errors
from sandbox.api.tables import table
from sandbox.errors import ApiError
from sandbox.kinds import Kind
from sandbox.objects import Obj
from sandbox.protobuf import CONTENT_TYPE as PROTOBUF
from sandbox.protobuf import decode_object
from sandbox.strict import loads_tracking_duplicates


class Exchange:
    """The request and the response of one call, over the handler's connection."""

    def __init__(self, handler: BaseHTTPRequestHandler) -> None:
        self.handler = handler
        # the fields a JSON body gave twice (strict decoding reports them)
        self.duplicates: list[str] = []
        # called once, just before the response goes out (the request stops counting as in flight then:
        # a client that sends its next request the moment it reads this answer must not be counted twice)
        self.before_send: Callable[[], None] | None = None

    @property
    def command(self) -> str:
        return self.handler.command

    @property
    def headers(self) -> Message:
        return self.handler.headers

    def content_type(self, default: str = "") -> str:
        return (self.headers.get("Content-Type") or default).split(";")[0].strip()

    def drop(self) -> None:
        """Close the connection after this exchange."""
        self.handler.close_connection = True

    # -- the request body ------------------------------------------------------------------------
    def body(self) -> bytes:
        rfile = self.handler.rfile
        length = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(rfile.readline().strip() or b"0", 16)
                if size == 0:
                    rfile.readline()
                    break
                chunks.append(rfile.read(size))
                rfile.readline()
            return b"".join(chunks)
        return rfile.read(length) if length else b""

    def json_body(self, raw: bytes) -> Any:
        if not raw:
            raise errors.bad_request("the body of the request is empty")
        content_type = self.content_type("application/json")
        self.duplicates = []
        if content_type == PROTOBUF:  # kubectl's typed clients (`kubectl create namespace ...`)
            return decode_object(raw)
        try:
            if content_type in ("application/yaml", "application/apply-patch+yaml"):
                return yaml.safe_load(raw)
            doc, self.duplicates = loads_tracking_duplicates(raw)
            return doc
        except (ValueError, yaml.YAMLError) as exc:
            raise errors.bad_request(f"the body of the request could not be decoded: {exc}") from None

    # -- responses -------------------------------------------------------------------------------
    def send(
        self,
        code: int,
        body: Any,
        headers: dict[str, str] | None = None,
        warnings: list[str] | None = None,
        content_type: str = "application/json",
    ) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body, separators=(",", ":")).encode()
        self.settle()
        handler = self.handler
        handler.send_response(code)
        handler.send_header("Content-Type", content_type)
        handler.send_header("Content-Length", str(len(data)))
        handler.send_header("Cache-Control", "no-cache, private")
        handler.send_header("Audit-Id", str(uuid.uuid4()))
        for warning in warnings or []:
            handler.send_header("Warning", '299 - "' + warning.replace('"', '\\"') + '"')
        for key, value in (headers or {}).items():
            handler.send_header(key, value)
        handler.end_headers()
        if self.command != "HEAD":
            handler.wfile.write(data)

    def settle(self) -> None:
        hook, self.before_send = self.before_send, None
        if hook is not None:
            hook()

    def send_error(self, err: ApiError) -> None:
        headers = {"Retry-After": str(err.retry_after)} if err.retry_after else None
        self.send(err.code, err.status(), headers)

    def wants_table(self) -> bool:
        return "as=Table" in (self.headers.get("Accept") or "")

    def include_object(self) -> str:
        values = parse_qs(urlsplit(self.handler.path).query).get("includeObject")
        return values[-1] if values else "Metadata"

    def send_object(self, kind: Kind, obj: Obj, code: int, warnings: list[str] | None = None) -> None:
        if self.wants_table():
            meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
            body = table(kind, [obj], meta, self.include_object())
        else:
            body = obj
        self.send(code, body, warnings=warnings)

    # -- streams (watches) -----------------------------------------------------------------------
    def start_stream(self) -> None:
        handler = self.handler
        handler.send_response(200)
        handler.send_header("Content-Type", "application/json")
        handler.send_header("Transfer-Encoding", "chunked")
        handler.send_header("Cache-Control", "no-cache, private")
        handler.end_headers()

    def chunk(self, event: dict[str, Any]) -> None:
        data = json.dumps(event, separators=(",", ":")).encode() + b"\n"
        self.handler.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.handler.wfile.flush()

    def end_stream(self) -> None:
        try:
            self.handler.wfile.write(b"0\r\n\r\n")
            self.handler.wfile.flush()
        except OSError:
            self.drop()
