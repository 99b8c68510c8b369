"""list and watch."""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from sandbox import errors
from sandbox.api.context import is_true
from sandbox.api.query import compile_field_selector, compile_label_selector, decode_continue, encode_continue
from sandbox.api.request import RequestIO
from sandbox.api.tables import table
from sandbox.errors import ApiError
from sandbox.kinds import (
    Kind,
)
from sandbox.store import Obj, Watcher, obj_key


class Lists(RequestIO):
    """list, with selectors and limit/continue pagination over a consistent snapshot."""

    def _predicate(self, kind: Kind, query: dict[str, str]) -> Callable[[Obj], bool]:
        labels = compile_label_selector(query.get("labelSelector", ""))
        fields = compile_field_selector(kind, query.get("fieldSelector", ""))
        return lambda obj: labels(obj) and fields(obj)

    def _list_body(self, kind: Kind, items: list[Obj], meta: dict[str, Any]) -> dict[str, Any]:
        if not kind.custom:
            items = [{k: v for k, v in item.items() if k not in ("apiVersion", "kind")} for item in items]
        return {"kind": kind.list_kind, "apiVersion": kind.api_version, "metadata": meta, "items": items}

    def _list(self, kind: Kind, namespace: str, query: dict[str, str]) -> None:
        predicate = self._predicate(kind, query)
        has_selector = bool(query.get("labelSelector") or query.get("fieldSelector"))
        try:
            limit = int(query.get("limit") or 0)
        except ValueError:
            raise errors.bad_request(f'invalid limit "{query.get("limit")}"') from None
        token = query.get("continue")
        store = self.api.store
        if token:
            rv, after = decode_continue(token)
            source: Iterable[Obj] = store.snapshot(kind, rv, namespace or None, after)
        else:
            rv_param = query.get("resourceVersion")
            match = query.get("resourceVersionMatch")
            with store.lock:
                rv = store.revision
                if rv_param and rv_param != "0" and match == "Exact":
                    try:
                        rv = int(rv_param)
                    except ValueError:
                        raise errors.bad_request(f'invalid resource version "{rv_param}"') from None
                    source = store.snapshot(kind, rv, namespace or None)
                else:
                    if rv_param and rv_param != "0":
                        try:
                            int(rv_param)
                        except ValueError:
                            raise errors.bad_request(f'invalid resource version "{rv_param}"') from None
                    source = store.items(kind, namespace or None)
        items: list[Obj] = []
        remaining = 0
        next_key = None
        for obj in source:
            if not predicate(obj):
                continue
            if limit and len(items) >= limit:
                remaining += 1
                if has_selector:
                    break
                continue
            items.append(obj)
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if remaining:
            next_key = obj_key(items[-1])
            meta["continue"] = encode_continue(rv, next_key)
            if not has_selector:
                meta["remainingItemCount"] = remaining
        if self._wants_table():
            self._send(200, table(kind, items, meta, self._include_object()))
        else:
            self._send(200, self._list_body(kind, items, meta))


class Watches(Lists):
    """watch from a resourceVersion, with bookmarks and sendInitialEvents."""

    def _watch(self, kind: Kind, namespace: str, query: dict[str, str]) -> None:
        predicate = self._predicate(kind, query)
        rv_param = query.get("resourceVersion") or ""
        bookmarks = is_true(query.get("allowWatchBookmarks"))
        send_initial = is_true(query.get("sendInitialEvents"))
        try:
            timeout = float(query.get("timeoutSeconds") or 1800)
        except ValueError:
            raise errors.bad_request("invalid timeoutSeconds") from None
        since = None
        if rv_param not in ("", "0"):
            try:
                since = int(rv_param)
            except ValueError:
                raise errors.bad_request(f'invalid resource version "{rv_param}"') from None
        initial = since is None or send_initial
        store = self.api.store
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.send_header("Transfer-Encoding", "chunked")
        self.send_header("Cache-Control", "no-cache, private")
        self.end_headers()
        watcher: Watcher | None = None
        try:
            try:
                with store.lock:
                    watcher = store.watch(kind, namespace or None, predicate, since, initial)
                    if initial and send_initial and bookmarks:
                        # queued under the lock: after the synthetic ADDED events, before any live event
                        watcher.push(("BOOKMARK-INITIAL", {"rv": store.revision}))
            except ApiError as err:
                self._chunk({"type": "ERROR", "object": err.status()})
                return
            deadline = time.monotonic() + timeout
            next_bookmark = time.monotonic() + self.api.bookmark_interval
            as_table = self._wants_table()
            while not self.api.stopping.is_set():
                now = time.monotonic()
                if now >= deadline:
                    break
                item = watcher.get(min(0.25, deadline - now))
                if item is None:
                    if watcher.closed:
                        break
                    if bookmarks and time.monotonic() >= next_bookmark:
                        with store.lock:
                            pending = bool(watcher.queue)
                            current = store.revision
                        if not pending:
                            self._chunk(self._bookmark(kind, current, False))
                        next_bookmark = time.monotonic() + self.api.bookmark_interval
                    continue
                event_type, obj = item
                if event_type == "BOOKMARK-INITIAL":
                    self._chunk(self._bookmark(kind, obj["rv"], True))
                    continue
                if as_table:
                    obj = table(
                        kind, [obj], {"resourceVersion": obj["metadata"]["resourceVersion"]}, self._include_object()
                    )
                self._chunk({"type": event_type, "object": obj})
        except (BrokenPipeError, ConnectionResetError, OSError):
            self.close_connection = True
            return
        finally:
            if watcher is not None:
                store.unwatch(watcher)
        try:
            self.wfile.write(b"0\r\n\r\n")
            self.wfile.flush()
        except OSError:
            self.close_connection = True

    def _bookmark(self, kind: Kind, rv: int, initial_end: bool) -> dict[str, Any]:
        meta: dict[str, Any] = {"resourceVersion": str(rv)}
        if initial_end:
            meta["annotations"] = {"k8s.io/initial-events-end": "true"}
        return {"type": "BOOKMARK", "object": {"kind": kind.kind, "apiVersion": kind.api_version, "metadata": meta}}
