"""A JSON body with the same key twice in one object, at any depth, is a 400 ``Status`` naming the key
(Python's json keeps the last value silently: a proxy or audit reader that keeps the first would see
another request than the one applied). Nothing is queued."""

from __future__ import annotations

from typing import Any

import pytest
from rest_framework.test import APIClient

from offloading.models import BulkRequest, ChangeRequest

pytestmark = pytest.mark.django_db

OFFLOADING = "/api/v1/namespaces/payments/offloading/"


def _send(api: APIClient, method: str, url: str, raw: str) -> Any:
    return getattr(api, method)(url, data=raw, content_type="application/json")


def _duplicate(response: Any, key: str, field: str) -> None:
    assert response.status_code == 400, response.content
    body = response.json()
    assert body["kind"] == "Status" and body["status"] == "Failure" and body["code"] == 400
    assert body["reason"] == "BadRequest"
    assert f'duplicate key "{key}"' in body["message"]
    assert body["details"]["causes"] == [
        {"field": field, "reason": "FieldValueDuplicate", "message": f'duplicate key "{key}"'}
    ]


def test_put_with_a_duplicated_top_level_key(api: APIClient, fleet: Any) -> None:
    raw = '{"podOffloadingStrategy": "Local", "podOffloadingStrategy": "Remote"}'
    _duplicate(_send(api, "put", OFFLOADING, raw), "podOffloadingStrategy", "podOffloadingStrategy")
    assert not ChangeRequest.objects.exists()


def test_put_with_a_duplicated_nested_key(api: APIClient, fleet: Any) -> None:
    raw = """{"clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": [
        {"key": "topology.kubernetes.io/region", "operator": "In", "operator": "NotIn", "values": ["eu-west"]}
    ]}]}}"""
    _duplicate(
        _send(api, "put", OFFLOADING, raw),
        "operator",
        "clusterSelector.nodeSelectorTerms[0].matchExpressions[0].operator",
    )
    assert not ChangeRequest.objects.exists()


def test_post_with_duplicated_keys(api: APIClient, fleet: Any) -> None:
    top = '{"action": "offload", "namespaceSelector": "team=pay", "namespaceSelector": "team=shop"}'
    _duplicate(_send(api, "post", "/api/v1/bulk/", top), "namespaceSelector", "namespaceSelector")
    nested = '{"action": "offload", "namespaceSelector": "team=pay", "spec": {"podOffloadingStrategy": "Remote", "podOffloadingStrategy": "Local"}}'  # noqa: E501
    _duplicate(_send(api, "post", "/api/v1/bulk/", nested), "podOffloadingStrategy", "spec.podOffloadingStrategy")
    assert not BulkRequest.objects.exists() and not ChangeRequest.objects.exists()
    preview = '{"selectors": ["a=b"], "selectors": []}'
    _duplicate(_send(api, "post", "/api/v1/namespaces/payments/preview/", preview), "selectors", "selectors")


def test_the_same_bodies_without_duplicates_still_work(api: APIClient, fleet: Any) -> None:
    """Equal keys in different objects are not duplicates."""
    raw = '{"action": "offload", "namespaceSelector": "team=pay", "dryRun": true, "spec": {"podOffloadingStrategy": "Remote"}}'  # noqa: E501
    assert _send(api, "post", "/api/v1/bulk/", raw).status_code == 200
    raw = '{"podOffloadingStrategy": "Remote", "clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": [{"key": "topology.kubernetes.io/region", "operator": "In", "values": ["eu-west"]}]}, {"matchExpressions": [{"key": "topology.kubernetes.io/region", "operator": "In", "values": ["eu-south"]}]}]}}'  # noqa: E501
    assert _send(api, "put", OFFLOADING, raw).status_code == 202


@pytest.mark.parametrize(
    ("raw", "key", "field"),
    [
        ('{"a": 1, "a": 2}', "a", "a"),
        ('{"a": 1, "b": 2, "a": 1}', "a", "a"),  # the same value twice is still two keys
        ('{"a": {"b": [{"c": 1}, {"c": 1, "d": 0, "c": 2}]}}', "c", "a.b[1].c"),
        ('[{"x": 1}, {"y": {"z": 1, "z": 1}}]', "z", "[1].y.z"),
        ('{"a": {"x": 1, "x": 2}, "b": {"y": 1, "y": 2}}', "x", "a.x"),  # the first in document order
        ('{"a\\"b": 1, "a\\"b": 2}', 'a\\"b', 'a"b'),  # the key quoted as JSON
    ],
)
def test_the_parser_names_the_first_duplicate(raw: str, key: str, field: str) -> None:
    import io

    from offloading.api.parsers import DuplicateKey, LimitedJSONParser  # not at import: DRF's settings import it

    with pytest.raises(DuplicateKey) as caught:
        LimitedJSONParser().parse(io.BytesIO(raw.encode()))
    assert f'duplicate key "{key}"' in str(caught.value.detail)
    assert caught.value.causes[0]["field"] == field
