"""The namespace page's reflection section, read live from the sandbox over HTTP: the policy per kind,
the objects left out and why, and the pods' references that will not resolve on the peers."""

from __future__ import annotations

from typing import Any

import pytest

from offloading.cluster import kube
from offloading.cluster.errors import KubeError
from offloading.insight import reflection as reflectioninfo
from offloading.models import Namespace

pytestmark = pytest.mark.django_db

SKIP = {"liqo.io/skip-reflection": "true"}
HTMX = {"HTTP_HX_REQUEST": "true"}


def _objects(k8s: Any) -> None:
    k8s.core.create_namespace({"metadata": {"name": "shop"}})
    Namespace.objects.create(name="shop", offloaded=True)
    k8s.core.create_namespaced_config_map("shop", {"metadata": {"name": "flags"}, "data": {"mode": "fast"}})
    k8s.core.create_namespaced_config_map("shop", {"metadata": {"name": "local-only", "annotations": SKIP}})
    k8s.core.create_namespaced_secret("shop", {"metadata": {"name": "db"}, "type": "Opaque", "data": {"url": "eA=="}})
    k8s.core.create_namespaced_secret(
        "shop",
        {
            "metadata": {"name": "robot-token", "annotations": {"kubernetes.io/service-account.name": "robot"}},
            "type": "kubernetes.io/service-account-token",
        },
    )
    k8s.core.create_namespaced_service("shop", {"metadata": {"name": "web"}, "spec": {"ports": [{"port": 80}]}})
    k8s.core.create_namespaced_service_account("shop", {"metadata": {"name": "robot"}})
    pod = {
        "metadata": {"name": "web-0"},
        "spec": {
            "serviceAccountName": "robot",
            "containers": [
                {
                    "name": "app",
                    "image": "x",
                    "envFrom": [{"configMapRef": {"name": "local-only"}}],
                    "env": [{"name": "DB", "valueFrom": {"secretKeyRef": {"name": "db", "key": "url"}}}],
                }
            ],
            "volumes": [{"name": "certs", "secret": {"secretName": "tls"}}],
        },
    }
    k8s.core.create_namespaced_pod("shop", pod)


def test_the_section_lists_policies_exclusions_and_references_left_behind(
    sandbox: Any, k8s: Any, admin_client: Any
) -> None:
    _objects(k8s)
    page = admin_client.get("/namespaces/shop/").content.decode()
    assert 'hx-get="/namespaces/shop/reflection/" hx-trigger="load"' in page, "the page loads it afterwards"
    body = admin_client.get("/namespaces/shop/reflection/", **HTMX).content.decode()
    assert "<html" not in body, "an htmx fragment"
    assert "1 of 2 reflected" in body and "<code>local-only</code>" in body  # configmaps
    assert "DenyList policy and the configmap has liqo.io/skip-reflection" in body
    assert "2 of 2 reflected" in body, "secrets: the token too, with API server support (the default)"
    assert "Pods use 2 objects that will not be on the peers" in body
    assert "pod <code>web-0</code> uses configmap <code>local-only</code>" in body and "(envFrom)" in body
    assert "uses secret <code>tls</code>" in body and "<strong>missing</strong>" in body
    assert "uses secret <code>db</code>" not in body, "db is reflected"
    assert "CustomLiqo" in body and "deployments" in body and "not read" in body
    from django.utils.html import escape

    from offloading.insight.reflection import KIND_NOTES

    assert [kind for kind, note in KIND_NOTES.items() if escape(note) not in body] == [], "every kind's note"
    assert "c2VjcmV0" not in body and "eA==" not in body, "no secret data"
    alone = admin_client.get("/namespaces/shop/reflection/").content.decode()
    assert "<html" in alone and "1 of 2 reflected" in alone, "without htmx: a page of its own"


def test_the_installed_settings_change_the_verdicts(sandbox: Any, k8s: Any, admin_client: Any, settings: Any) -> None:
    _objects(k8s)
    settings.LIQO_DASH = {
        **settings.LIQO_DASH,
        "REFLECTION_POLICIES": "configmap=AllowList",
        "REFLECTION_APISERVER_SUPPORT": False,
        "REFLECTION_DISABLED": ["service"],
    }
    body = admin_client.get("/namespaces/shop/reflection/", **HTMX).content.decode()
    assert "0 of 2 reflected" in body, "AllowList: neither configmap is annotated"
    assert "a service-account token secret, and API server support is disabled" in body
    assert "the service reflector is disabled (0 workers)" in body
    assert "uses serviceaccount <code>robot</code>" in body
    settings.LIQO_DASH = {**settings.LIQO_DASH, "REFLECTION_POLICIES": "configmap=Sometimes"}
    body = admin_client.get("/namespaces/shop/reflection/", **HTMX).content.decode()
    assert "LIQO_DASH_REFLECTION_POLICIES" in body and "Ammitted values" in body and "1 of 2 reflected" in body


def test_an_unreachable_api_server_is_asked_once_and_said(admin_client: Any, monkeypatch: Any) -> None:
    Namespace.objects.create(name="shop")
    calls = []

    def down(kind: str, *args: Any) -> Any:
        calls.append(kind)
        raise KubeError("transient", "cannot reach the Kubernetes API: timed out", unreachable=True)

    monkeypatch.setattr(kube, "list_in_namespace", down)
    response = admin_client.get("/namespaces/shop/reflection/", **HTMX)
    body = response.content.decode()
    assert response.status_code == 200 and calls == ["configmaps"], "no second try against a dead server"
    assert body.count("could not read") == len(reflectioninfo.READ_KINDS), "each kind, briefly"
    assert (
        "Could not read the namespace's objects from the cluster (cannot reach the Kubernetes API: timed out)" in body
    )
    assert "Not offloaded: this is what Liqo would reflect once it is" in body


def test_a_kind_the_user_may_not_list_says_so_and_the_rest_is_read(admin_client: Any, monkeypatch: Any) -> None:
    Namespace.objects.create(name="shop", offloaded=True)

    def partly(kind: str, *args: Any) -> Any:
        if kind == "secrets":
            raise KubeError("forbidden", "secrets is forbidden", 403)
        if kind == "pods":
            pod = {"metadata": {"name": "p"}, "spec": {"volumes": [{"name": "s", "secret": {"secretName": "x"}}]}}
            return [pod], True
        return [], False

    monkeypatch.setattr(kube, "list_in_namespace", partly)
    body = admin_client.get("/namespaces/shop/reflection/", **HTMX).content.decode()
    assert "not allowed to list them" in body and "none here" in body
    assert "uses secret" not in body, "secrets could not be read: no guess about them"
    assert "<td>1+" in body.replace("\n", "").replace("      ", ""), "a truncated pod list says so"
