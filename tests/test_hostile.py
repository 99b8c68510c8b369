"""Hostile input: limits, the 500s of issue 11, unknown parameters, request ids. Every refusal is a
Kubernetes-style ``Status`` (or an error on the field), never a 500."""

from __future__ import annotations

import json
from typing import Any

import pytest
from rest_framework.test import APIClient

from liqo_rules import limits
from offloading.models import ChangeRequest

pytestmark = pytest.mark.django_db


# ``api``: the admin's token client (tests/fixtures/personas.py).


def _status(response: Any, code: int) -> dict[str, Any]:
    assert response.status_code == code, (response.status_code, response.content[:500])
    body = response.json()
    assert body["kind"] == "Status" and body["status"] == "Failure" and body["code"] == code, body
    return body


def _causes(body: dict[str, Any]) -> list[str]:
    return [cause["field"] for cause in body["details"]["causes"]]


def test_a_percent_selector_is_a_400_on_the_field(api: APIClient, fleet: Any) -> None:
    response = api.get("/api/v1/namespaces/?selector=%25")
    assert _causes(_status(response, 400)) == ["selector"]


def test_an_if_match_with_non_ascii_bytes_is_a_400(api: APIClient, fleet: Any) -> None:
    for value in ('"3é"', "\u00b3", "３"):
        response = api.delete("/api/v1/namespaces/shop/offloading/", HTTP_IF_MATCH=value)
        assert _causes(_status(response, 400)) == ["If-Match"], value
    raw = b'"\xff\xfe"'.decode("latin-1")  # what a WSGI server hands over for undecodable bytes
    response = api.put("/api/v1/namespaces/shop/offloading/", {}, format="json", HTTP_IF_MATCH=raw)
    assert _causes(_status(response, 400)) == ["If-Match"]
    assert not ChangeRequest.objects.exists()


def test_json_nested_a_thousand_deep_is_a_400_not_a_500(api: APIClient, fleet: Any) -> None:
    for depth in (33, 1_000, 100_000):
        body = "[" * depth + "]" * depth
        response = api.put("/api/v1/namespaces/shop/offloading/", body, content_type="application/json")
        assert "nested" in _status(response, 400)["message"], depth
    ok = {"clusterSelector": {"nodeSelectorTerms": [{"matchExpressions": []}]}}
    response = api.post("/api/v1/namespaces/payments/preview/", ok, format="json")
    assert response.status_code == 200


def test_a_body_over_one_mib_is_a_413(api: APIClient, fleet: Any) -> None:
    body = json.dumps({"remoteNamespaceName": "x" * (1024 * 1024)})
    response = api.put("/api/v1/namespaces/shop/offloading/", body, content_type="application/json")
    assert "1048576" in _status(response, 413)["message"]
    response = api.post("/api/v1/bulk/", body, content_type="application/json")
    _status(response, 413)


def _selector(terms: int, expressions: int, values: int) -> dict[str, Any]:
    expression = {"key": "region", "operator": "In", "values": [f"v{i}" for i in range(values)]}
    return {"nodeSelectorTerms": [{"matchExpressions": [expression] * expressions} for _ in range(terms)]}


@pytest.mark.parametrize(
    ("shape", "words"),
    [
        ((limits.MAX_TERMS + 1, 1, 1), "terms"),
        ((1, limits.MAX_EXPRESSIONS + 1, 1), "expressions"),
        ((1, 1, limits.MAX_VALUES + 1), "values"),
    ],
)
def test_selector_limits_hold_in_the_api_the_preview_and_bulk(
    api: APIClient,
    fleet: Any,
    shape: tuple[int, int, int],
    words: str,
) -> None:
    spec = {"clusterSelector": _selector(*shape)}
    response = api.put("/api/v1/namespaces/payments/offloading/", spec, format="json")
    body = _status(response, 422)
    assert _causes(body) == ["spec.clusterSelector"] and words in body["message"]
    preview = api.post("/api/v1/namespaces/payments/preview/", spec, format="json").json()
    assert preview["valid"] is False and words in preview["errors"]["clusterSelector"][0]
    bulk = {"action": "offload", "namespaceSelector": "team=pay", "spec": spec}
    response = api.post("/api/v1/bulk/", bulk, format="json")
    assert response.status_code == 422 and words in response.json()["message"]
    assert not ChangeRequest.objects.exists()


def test_a_selector_at_the_limits_is_accepted(api: APIClient, fleet: Any) -> None:
    # All three at once would be a body over 1 MiB: every term and expression at the limit, then the values.
    for shape in ((limits.MAX_TERMS, limits.MAX_EXPRESSIONS, 20), (1, 1, limits.MAX_VALUES)):
        spec = {"clusterSelector": _selector(*shape)}
        preview = api.post("/api/v1/namespaces/payments/preview/", spec, format="json").json()
        assert preview["valid"] is True, preview["errors"]


def test_label_selectors_in_queries_and_bulk_have_the_same_limits(api: APIClient, fleet: Any) -> None:
    many = ",".join(f"k{i}" for i in range(limits.MAX_EXPRESSIONS + 1))
    assert "expressions" in _status(api.get("/api/v1/namespaces/", {"selector": many}), 400)["message"]
    wide = "team in (" + ",".join(f"v{i}" for i in range(limits.MAX_VALUES + 1)) + ")"
    assert "values" in _status(api.get("/api/v1/namespaces/", {"selector": wide}), 400)["message"]
    response = api.post("/api/v1/bulk/", {"action": "unoffload", "namespaceSelector": wide}, format="json")
    assert _causes(_status(response, 400)) == ["namespaceSelector"]
    long_value = "team=" + "v" * 64
    assert _causes(_status(api.get("/api/v1/namespaces/", {"selector": long_value}), 400)) == ["selector"]
    body = _status(api.get("/api/v1/namespaces/", {"selector": "%"}), 400)
    assert '"%"' in body["message"] and "%%" not in body["message"]
    response = api.post("/api/v1/bulk/", {"action": "unoffload", "namespaceSelector": "%"}, format="json")
    assert '"%"' in response.json()["message"] and "%%" not in response.json()["message"]


def test_unknown_query_parameters_are_a_400_listing_the_accepted_ones(api: APIClient, fleet: Any) -> None:
    body = _status(api.get("/api/v1/namespaces/", {"phse": "Ready"}), 400)
    assert _causes(body) == ["phse"]
    for accepted in ("q", "phase", "cluster", "selector", "offloaded", "limit", "offset"):
        assert accepted in body["message"]
    assert _causes(_status(api.get("/api/v1/clusters/", {"x": "1"}), 400)) == ["x"]
    assert api.get("/api/v1/namespaces/", {"phase": "Ready", "limit": "5"}).status_code == 200


def test_namespaces_filter_by_offloaded(api: APIClient, fleet: Any) -> None:
    on = {n["name"] for n in api.get("/api/v1/namespaces/", {"offloaded": "true"}).json()["results"]}
    off = {n["name"] for n in api.get("/api/v1/namespaces/", {"offloaded": "false"}).json()["results"]}
    assert "shop" in on and "payments" in off and not on & off
    assert _causes(_status(api.get("/api/v1/namespaces/", {"offloaded": "maybe"}), 400)) == ["offloaded"]


@pytest.mark.parametrize(
    ("sent", "kept"),
    [("abc-DEF_1.2", True), ("a" * 64, True), ("a" * 65, False), ("a:b", False), ("a b", False), ("é", False)],
)
def test_a_client_request_id_is_kept_only_when_sane(api: APIClient, sent: str, kept: bool) -> None:
    response = api.get("/api/v1/snapshot/", HTTP_X_REQUEST_ID=sent)
    assert response.status_code == 200
    assert (response["X-Request-ID"] == sent) is kept
    assert response["X-Request-ID"].isascii() and 1 <= len(response["X-Request-ID"]) <= 64


def test_the_docs_page_answers_options_and_errors_in_json(api: APIClient) -> None:
    assert api.get("/api/docs/").status_code == 200
    response = api.options("/api/docs/")  # rendered with the docs' HTML template, it was a 500
    _status(response, 405)
    assert _causes(_status(api.get("/api/v1/no-such-route/"), 404)) == []
