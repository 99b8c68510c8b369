"""list: label and field selectors, `limit` / `continue` pagination over a consistent snapshot, Tables."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from sandbox import errors
from sandbox.api.context import Api
from sandbox.api.query import compile_field_selector, compile_label_selector, decode_continue, encode_continue
from sandbox.api.request import Exchange
from sandbox.api.tables import table
from sandbox.kinds import Kind
from sandbox.objects import Obj, obj_key


def predicate(kind: Kind, query: dict[str, str]) -> Callable[[Obj], bool]:
    """The request's label and field selectors as one test."""
    labels = compile_label_selector(query.get("labelSelector", ""))
    fields = compile_field_selector(kind, query.get("fieldSelector", ""))
    return lambda obj: labels(obj) and fields(obj)


def list_body(kind: Kind, items: list[Obj], meta: dict[str, Any]) -> dict[str, Any]:
    if not kind.custom:
        items = [{k: v for k, v in item.items() if k not in ("apiVersion", "kind")} for item in items]
    return {"kind": kind.list_kind, "apiVersion": kind.api_version, "metadata": meta, "items": items}


def serve_list(api: Api, exchange: Exchange, kind: Kind, namespace: str, query: dict[str, str]) -> None:
    matches = predicate(kind, query)
    has_selector = bool(query.get("labelSelector") or query.get("fieldSelector"))
    try:
        limit = int(query.get("limit") or 0)
    except ValueError:
        raise errors.bad_request(f'invalid limit "{query.get("limit")}"') from None
    rv, source = _source(api, kind, namespace, query)
    items: list[Obj] = []
    remaining = 0
    for obj in source:
        if not matches(obj):
            continue
        if limit and len(items) >= limit:
            remaining += 1
            if has_selector:
                break
            continue
        items.append(obj)
    meta: dict[str, Any] = {"resourceVersion": str(rv)}
    if remaining:
        meta["continue"] = encode_continue(rv, obj_key(items[-1]))
        if not has_selector:
            meta["remainingItemCount"] = remaining
    if exchange.wants_table():
        exchange.send(200, table(kind, items, meta, exchange.include_object()))
    else:
        exchange.send(200, list_body(kind, items, meta))


def _source(api: Api, kind: Kind, namespace: str, query: dict[str, str]) -> tuple[int, Iterable[Obj]]:
    """The revision the list is at and its objects: a continue token's snapshot, an exact past revision or now."""
    store = api.store
    token = query.get("continue")
    if token:
        rv, after = decode_continue(token)
        return rv, store.snapshot(kind, rv, namespace or None, after)
    rv_param = query.get("resourceVersion")
    match = query.get("resourceVersionMatch")
    with store.lock:
        rv = store.revision
        if rv_param and rv_param != "0" and match == "Exact":
            try:
                rv = int(rv_param)
            except ValueError:
                raise errors.bad_request(f'invalid resource version "{rv_param}"') from None
            return rv, store.snapshot(kind, rv, namespace or None)
        if rv_param and rv_param != "0":
            try:
                int(rv_param)
            except ValueError:
                raise errors.bad_request(f'invalid resource version "{rv_param}"') from None
        return rv, store.items(kind, namespace or None)
