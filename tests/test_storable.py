"""What the snapshot keeps of a listed or watched object: NUL characters (JSON and the API server allow
them, PostgreSQL's text and jsonb do not) become U+FFFD; anything else is the same object, not a copy."""

from __future__ import annotations

import json

from offloading.cluster.kube import _RawWatch, storable


def test_nul_characters_become_the_replacement_character_in_keys_and_values() -> None:
    obj = {"spec": {"remoteNamespaceName": "a\x00b", "list": ["x\x00", 1, None]}, "k\x00": True}
    assert storable(obj) == {"spec": {"remoteNamespaceName": "a\ufffdb", "list": ["x\ufffd", 1, None]}, "k\ufffd": True}
    assert obj["spec"]["remoteNamespaceName"] == "a\x00b"  # the original is left alone


def test_an_object_without_nul_is_returned_as_it_is() -> None:
    obj = {"metadata": {"name": "shop", "labels": {"a": "b"}}, "items": [{"x": [1, "y"]}]}
    assert storable(obj) is obj
    assert storable(obj["items"]) is obj["items"]


def test_a_watch_event_is_decoded_as_storable_would_leave_it() -> None:
    """The watch replaces NULs in the JSON text before decoding (not by walking the object): the same
    result, with escaped backslashes before a NUL and a literal backslash-u0000 text left right."""
    objects = [
        {"a\x00b": ["x\x00", {"k": "\\u0000 is text", "n": "\\\x00", "m": "\\\\\x00"}]},
        {"metadata": {"name": "shop"}, "spec": {"x": "\\\\u0000"}},
    ]
    for obj in objects:
        event = _RawWatch().unmarshal_event(json.dumps({"type": "MODIFIED", "object": obj}), "ignored")
        assert event["type"] == "MODIFIED" and event["raw_object"] == storable(obj)
    assert storable(objects[0])["a\ufffdb"][1]["k"] == "\\u0000 is text"  # text, not a NUL: kept
