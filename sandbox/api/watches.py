"""watch: from a resourceVersion (410 when too old) or with the initial state, bookmarks (periodic and
the end of `sendInitialEvents`), as chunks on one long response, until the timeout, the client or the
server's stop."""

from __future__ import annotations

import time
from typing import Any

from sandbox import errors
from sandbox.api.context import Api, is_true
from sandbox.api.lists import predicate
from sandbox.api.request import Exchange
from sandbox.api.tables import table
from sandbox.errors import ApiError
from sandbox.kinds import Kind
from sandbox.store import Watcher


def serve_watch(api: Api, exchange: Exchange, kind: Kind, namespace: str, query: dict[str, str]) -> None:
    matches = predicate(kind, query)
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
    store = api.store
    exchange.start_stream()
    watcher: Watcher | None = None
    try:
        try:
            with store.lock:
                watcher = store.watch(kind, namespace or None, matches, since, initial)
                if initial and send_initial and bookmarks:
                    # queued under the lock: after the synthetic ADDED events, before any live event
                    watcher.push(("BOOKMARK-INITIAL", {"rv": store.revision}))
        except ApiError as err:
            exchange.chunk({"type": "ERROR", "object": err.status()})
            return
        _stream(api, exchange, kind, watcher, timeout, bookmarks)
    except (BrokenPipeError, ConnectionResetError, OSError):
        exchange.drop()
        return
    finally:
        if watcher is not None:
            store.unwatch(watcher)
    exchange.end_stream()


def _stream(api: Api, exchange: Exchange, kind: Kind, watcher: Watcher, timeout: float, bookmarks: bool) -> None:
    """Send the watcher's events until the timeout, the watcher's end or the server's stop."""
    store = api.store
    deadline = time.monotonic() + timeout
    next_bookmark = time.monotonic() + api.bookmark_interval
    as_table = exchange.wants_table()
    while not api.stopping.is_set():
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
                    exchange.chunk(bookmark(kind, current, False))
                next_bookmark = time.monotonic() + api.bookmark_interval
            continue
        event_type, obj = item
        if event_type == "BOOKMARK-INITIAL":
            exchange.chunk(bookmark(kind, obj["rv"], True))
            continue
        if as_table:
            meta = {"resourceVersion": obj["metadata"]["resourceVersion"]}
            obj = table(kind, [obj], meta, exchange.include_object())
        exchange.chunk({"type": event_type, "object": obj})


def bookmark(kind: Kind, rv: int, initial_end: bool) -> dict[str, Any]:
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if initial_end:
        meta["annotations"] = {"k8s.io/initial-events-end": "true"}
    return {"type": "BOOKMARK", "object": {"kind": kind.kind, "apiVersion": kind.api_version, "metadata": meta}}
