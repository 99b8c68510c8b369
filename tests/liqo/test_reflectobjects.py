"""Object-by-object reflection and the references of pods (offloading.liqo.reflectobjects)."""

from __future__ import annotations

from typing import Any

import pytest

from offloading.liqo.reflection import ReflectionError
from offloading.liqo.reflectobjects import (
    ReflectionConfig,
    parse_policies,
    plural,
    pod_references,
    reference_warnings,
    verdict,
)

SKIP = {"liqo.io/skip-reflection": ""}
ALLOW = {"liqo.io/allow-reflection": "true"}


def _obj(name: str, annotations: dict[str, str] | None = None, **extra: Any) -> dict[str, Any]:
    return {"metadata": {"name": name, "namespace": "shop", "annotations": annotations or {}}, **extra}


def test_deny_list_reflects_all_but_the_opted_out() -> None:
    config = ReflectionConfig()
    assert verdict("configmap", _obj("app"), config).reflected
    skipped = verdict("configmap", _obj("app", SKIP), config)
    assert not skipped.reflected and "skip-reflection" in skipped.reason
    assert verdict("configmap", _obj("app", {"liqo.io/skip-reflection": "False"}), config).reflected


def test_allow_list_reflects_only_the_opted_in_and_kube_root_ca_always() -> None:
    config = ReflectionConfig(policies={"configmap": "AllowList"})
    assert not verdict("configmap", _obj("app"), config).reflected
    assert verdict("configmap", _obj("app", ALLOW), config).reflected
    root = verdict("configmap", _obj("kube-root-ca.crt"), config)
    assert root.reflected and "always" in root.reason
    assert not verdict("configmap", _obj("kube-root-ca.crt", SKIP), config).reflected


def test_service_account_tokens_follow_the_api_server_support() -> None:
    token = _obj("default-token", type="kubernetes.io/service-account-token")
    assert verdict("secret", token, ReflectionConfig()).reflected
    off = ReflectionConfig(apiserver_support=False)
    assert not verdict("secret", token, off).reflected
    assert verdict("secret", _obj("plain", type="Opaque"), off).reflected
    assert not verdict("serviceaccount", _obj("default"), off).reflected
    assert verdict("serviceaccount", _obj("default", SKIP), ReflectionConfig()).reflected, "custom Liqo logic"


def test_a_disabled_reflector_and_conflicting_annotations() -> None:
    assert not verdict("secret", _obj("s"), ReflectionConfig(disabled=frozenset({"secret"}))).reflected
    both = {**SKIP, **ALLOW}
    assert not verdict("service", _obj("web", both), ReflectionConfig()).reflected, "DenyList reads the skip"
    assert verdict("service", _obj("web", both), ReflectionConfig({"service": "AllowList"})).reflected
    slice_both = verdict("endpointslice", _obj("web-x", {**SKIP, **ALLOW}), ReflectionConfig())
    assert not slice_both.reflected and slice_both.error


def test_policies_parse_and_refuse_unknown_kinds_and_values() -> None:
    assert parse_policies(" secret=AllowList , configmap=DenyList") == {"secret": "AllowList", "configmap": "DenyList"}
    assert parse_policies("") == {}
    for bad in ("secret=Maybe", "pod=AllowList", "secret"):
        with pytest.raises(ReflectionError):
            parse_policies(bad)


POD = {
    "metadata": {"name": "web"},
    "spec": {
        "serviceAccountName": "robot",
        "imagePullSecrets": [{"name": "registry"}],
        "volumes": [
            {"name": "conf", "configMap": {"name": "app-config"}},
            {"name": "creds", "secret": {"secretName": "db", "optional": True}},
            {"name": "api", "projected": {"sources": [{"configMap": {"name": "kube-root-ca.crt"}}, {"serviceAccountToken": {}}]}},
        ],
        "initContainers": [{"name": "init", "envFrom": [{"secretRef": {"name": "init-env"}}]}],
        "containers": [
            {
                "name": "app",
                "envFrom": [{"configMapRef": {"name": "flags"}}],
                "env": [
                    {"name": "A", "value": "1"},
                    {"name": "DB_URL", "valueFrom": {"secretKeyRef": {"name": "db", "key": "url"}}},
                    {"name": "MODE", "valueFrom": {"configMapKeyRef": {"name": "flags", "key": "mode"}}},
                    {"name": "POD", "valueFrom": {"fieldRef": {"fieldPath": "metadata.name"}}},
                ],
            }
        ],
    },
}  # fmt: skip


def test_every_reference_of_a_pod_is_found() -> None:
    found = {(ref.kind, ref.name, ref.how, ref.optional) for ref in pod_references(POD)}
    assert found == {
        ("configmap", "app-config", "volume conf", False),
        ("secret", "db", "volume creds", True),
        ("configmap", "kube-root-ca.crt", "volume api", False),
        ("secret", "init-env", "envFrom", False),
        ("configmap", "flags", "envFrom", False),
        ("secret", "db", "env DB_URL", False),
        ("configmap", "flags", "env MODE", False),
        ("secret", "registry", "imagePullSecrets", False),
        ("serviceaccount", "robot", "serviceAccountName", False),
    }
    plain = pod_references({"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c"}]}})
    assert [(r.kind, r.name) for r in plain] == [("serviceaccount", "default")]


def test_references_to_objects_left_out_or_missing_are_warned_once_per_object() -> None:
    config = ReflectionConfig()
    objects = {
        ("configmap", "app-config"): verdict("configmap", _obj("app-config", SKIP), config),
        ("configmap", "flags"): verdict("configmap", _obj("flags"), config),
        ("configmap", "kube-root-ca.crt"): verdict("configmap", _obj("kube-root-ca.crt"), config),
        ("secret", "registry"): verdict("secret", _obj("registry"), config),
        ("secret", "init-env"): verdict("secret", _obj("init-env", SKIP), config),
    }
    warnings = reference_warnings([POD], objects, {"configmap", "secret", "serviceaccount"})
    found = {(w.reference.kind, w.reference.name, w.problem) for w in warnings}
    assert found == {
        ("configmap", "app-config", "not reflected"),
        ("secret", "init-env", "not reflected"),
        ("secret", "db", "missing"),  # the env reference is required even if the volume one is optional
    }, found
    assert {w.reference.kind for w in reference_warnings([POD], objects, {"configmap"})} == {"configmap"}


def test_kind_plurals() -> None:
    assert [plural(k) for k in ("configmap", "ingress", "networkpolicy")] == [
        "configmaps",
        "ingresses",
        "networkpolicies",
    ]
