"""The request/response layer of the handler (HTTP/1.1 keep-alive, chunked bodies, Warning headers)."""

from __future__ import annotations

import json
import socket
import uuid
from http.server import BaseHTTPRequestHandler
from typing import Any
from urllib.parse import parse_qs, urlsplit

import yaml

from sandbox import errors
from sandbox.api.context import Api, ApiHTTPServer
from sandbox.api.tables import table
from sandbox.api.traffic import CountingWriter
from sandbox.errors import ApiError
from sandbox.kinds import (
    Kind,
)
from sandbox.protobuf import CONTENT_TYPE as PROTOBUF
from sandbox.store import Obj
from sandbox.strict import loads_tracking_duplicates


class RequestIO(BaseHTTPRequestHandler):
    """Reading request bodies and writing responses, objects, tables and watch chunks."""

    protocol_version = "HTTP/1.1"
    server: ApiHTTPServer
    server_version = "sandbox-kube-apiserver"

    def setup(self) -> None:
        super().setup()
        # headers and body go out in separate writes: without this, Nagle + delayed ACK add ~40 ms a request
        self.connection.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        self.client_identity = "anonymous"
        self.wfile = CountingWriter(self.wfile, self.api.traffic, self)  # type: ignore[assignment]

    def log_message(self, format: str, *args: Any) -> None:  # noqa: A002 - stdlib signature
        pass

    @property
    def api(self) -> Api:
        return self.server.api

    # -- responses -------------------------------------------------------------------------------
    def _send(
        self,
        code: int,
        body: Any,
        headers: dict[str, str] | None = None,
        warnings: list[str] | None = None,
        content_type: str = "application/json",
    ) -> None:
        data = body if isinstance(body, bytes) else json.dumps(body, separators=(",", ":")).encode()
        self.send_response(code)
        self.send_header("Content-Type", content_type)
        self.send_header("Content-Length", str(len(data)))
        self.send_header("Cache-Control", "no-cache, private")
        self.send_header("Audit-Id", str(uuid.uuid4()))
        for warning in warnings or []:
            self.send_header("Warning", '299 - "' + warning.replace('"', '\\"') + '"')
        for key, value in (headers or {}).items():
            self.send_header(key, value)
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)

    def _send_error(self, err: ApiError) -> None:
        headers = {"Retry-After": str(err.retry_after)} if err.retry_after else None
        self._send(err.code, err.status(), headers)

    def _body(self) -> bytes:
        length = int(self.headers.get("Content-Length") or 0)
        if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
            chunks = []
            while True:
                size = int(self.rfile.readline().strip() or b"0", 16)
                if size == 0:
                    self.rfile.readline()
                    break
                chunks.append(self.rfile.read(size))
                self.rfile.readline()
            return b"".join(chunks)
        return self.rfile.read(length) if length else b""

    def _json_body(self, raw: bytes) -> Any:
        if not raw:
            raise errors.bad_request("the body of the request is empty")
        content_type = (self.headers.get("Content-Type") or "application/json").split(";")[0].strip()
        if content_type == PROTOBUF:
            raise errors.unsupported_media_type(content_type)
        self.body_duplicates: list[str] = []
        try:
            if content_type in ("application/yaml", "application/apply-patch+yaml"):
                return yaml.safe_load(raw)
            doc, self.body_duplicates = loads_tracking_duplicates(raw)
            return doc
        except (ValueError, yaml.YAMLError) as exc:
            raise errors.bad_request(f"the body of the request could not be decoded: {exc}") from None

    def _wants_table(self) -> bool:
        return "as=Table" in (self.headers.get("Accept") or "")

    def _send_object(self, kind: Kind, obj: Obj, code: int, warnings: list[str] | None = None) -> None:
        if self._wants_table():
            meta = {"resourceVersion": obj["metadata"].get("resourceVersion", "")}
            body = table(kind, [obj], meta, self._include_object())
        else:
            body = obj
        self._send(code, body, warnings=warnings)

    def _include_object(self) -> str:
        split = urlsplit(self.path)
        values = parse_qs(split.query).get("includeObject")
        return values[-1] if values else "Metadata"

    def _chunk(self, event: dict[str, Any]) -> None:
        data = json.dumps(event, separators=(",", ":")).encode() + b"\n"
        self.wfile.write(f"{len(data):x}\r\n".encode() + data + b"\r\n")
        self.wfile.flush()
