"""What the snapshot keeps of a listed or watched object: NUL characters (JSON and the API server allow
them, PostgreSQL's text and jsonb do not) become U+FFFD; anything else is the same object, not a copy."""

from __future__ import annotations

from offloading.cluster.kube import storable


def test_nul_characters_become_the_replacement_character_in_keys_and_values() -> None:
    obj = {"spec": {"remoteNamespaceName": "a\x00b", "list": ["x\x00", 1, None]}, "k\x00": True}
    assert storable(obj) == {"spec": {"remoteNamespaceName": "a\ufffdb", "list": ["x\ufffd", 1, None]}, "k\ufffd": True}
    assert obj["spec"]["remoteNamespaceName"] == "a\x00b"  # the original is left alone


def test_an_object_without_nul_is_returned_as_it_is() -> None:
    obj = {"metadata": {"name": "shop", "labels": {"a": "b"}}, "items": [{"x": [1, "y"]}]}
    assert storable(obj) is obj
    assert storable(obj["items"]) is obj["items"]
