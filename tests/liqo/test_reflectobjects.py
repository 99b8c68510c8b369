"""Object-by-object reflection and the references of pods (liqo_rules.reflectobjects)."""

from __future__ import annotations

from typing import Any

import pytest

from liqo_rules.reflection import ReflectionError
from liqo_rules.reflectobjects import (
    ObjectVerdict,
    Reference,
    ReferenceWarning,
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
            {
                "name": "api",
                "projected": {"sources": [{"configMap": {"name": "kube-root-ca.crt"}}, {"serviceAccountToken": {}}]},
            },
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
}


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


NO_SUPPORT = ReflectionConfig(apiserver_support=False)
TOKEN = "kubernetes.io/service-account-token"


def test_verdicts_before_the_policy_is_read() -> None:
    off = ReflectionConfig(disabled=frozenset({"secret"}))
    assert verdict("secret", _obj("s"), off) == ObjectVerdict(
        "secret", "s", False, "the secret reflector is disabled (0 workers)"
    )
    assert verdict("configmap", _obj("c"), off).reflected  # only the disabled kind
    assert verdict("secret", _obj("t", type=TOKEN), NO_SUPPORT) == ObjectVerdict(
        "secret", "t", False, "a service-account token secret, and API server support is disabled"
    )
    assert verdict("serviceaccount", _obj("d"), NO_SUPPORT) == ObjectVerdict(
        "serviceaccount", "d", False, "API server support is disabled: no token reaches the peers"
    )
    assert verdict("configmap", _obj("t", type=TOKEN), NO_SUPPORT).reflected  # only secrets carry tokens


def test_verdicts_from_the_policy() -> None:
    config = ReflectionConfig()
    assert verdict("configmap", _obj("app"), config) == ObjectVerdict(
        "configmap", "app", True, "DenyList policy and the configmap has no liqo.io/skip-reflection"
    )
    assert verdict("configmap", {"metadata": {}}, config).name == ""
    assert verdict("configmap", {}, config).name == ""
    assert verdict("pod", _obj("p"), config) == ObjectVerdict(
        "pod", "p", True, "pods follow Liqo's own reflection logic; the policy does not apply"
    )
    assert verdict("networkpolicy", _obj("n"), config) == ObjectVerdict(
        "networkpolicy", "n", False, "Liqo does not reflect networkpolicy resources"
    )
    message = 'reflection type "Maybe" is not valid for resource service. Ammitted values: "DenyList", "AllowList"'
    assert verdict("service", _obj("w"), ReflectionConfig({"service": "Maybe"})) == ObjectVerdict(
        "service", "w", False, message, message
    )
    both = 'object "shop/web-x" can\'t have both the allow and deny annotations set'
    annotated = {**SKIP, "liqo.io/allow-reflection": "true"}
    assert verdict("endpointslice", _obj("web-x", annotated), config) == ObjectVerdict(
        "endpointslice", "web-x", False, both, both
    )
    # The name reaches Liqo's rule with its namespace: kube-root-ca.crt is kept under an AllowList.
    allow = ReflectionConfig({"configmap": "AllowList"})
    assert verdict("configmap", _obj("kube-root-ca.crt"), allow) == ObjectVerdict(
        "configmap", "kube-root-ca.crt", True, "kube-root-ca.crt is always reflected unless explicitly annotated"
    )
    # A kind that is not customizable is judged with the default policy, whatever is configured.
    assert verdict("endpointslice", _obj("e"), ReflectionConfig({"service": "AllowList"})).reflected


def test_the_policy_of_each_kind() -> None:
    config = ReflectionConfig({"secret": "AllowList", "pod": "AllowList"})
    assert [config.policy(k) for k in ("pod", "serviceaccount", "persistentvolumeclaim")] == ["CustomLiqo"] * 3
    assert config.policy("secret") == "AllowList" and config.policy("configmap") == "DenyList"


def test_policies_parse_with_their_errors() -> None:
    assert parse_policies("Secret = AllowList,,") == {"secret": "AllowList"}
    kinds = "service, ingress, configmap, secret, event"
    for bad in ("secret", "pod=AllowList"):
        with pytest.raises(ReflectionError) as err:
            parse_policies(bad)
        assert str(err.value) == f"{bad!r}: expected <kind>=<policy>, the kind one of {kinds}"
    with pytest.raises(ReflectionError) as err:
        parse_policies("secret=Maybe")
    assert (
        str(err.value)
        == 'reflection type "Maybe" is not valid for resource secret. Ammitted values: "DenyList", "AllowList"'
    )


def test_a_policy_is_split_at_the_first_equals_sign() -> None:
    with pytest.raises(ReflectionError) as err:
        parse_policies("secret=AllowList=x")
    assert 'reflection type "AllowList=x"' in str(err.value)


def test_every_reference_of_a_pod_in_order() -> None:
    assert pod_references(POD) == [
        Reference("web", "configmap", "app-config", "volume conf"),
        Reference("web", "secret", "db", "volume creds", True),
        Reference("web", "configmap", "kube-root-ca.crt", "volume api"),
        Reference("web", "secret", "init-env", "envFrom"),
        Reference("web", "configmap", "flags", "envFrom"),
        Reference("web", "secret", "db", "env DB_URL"),
        Reference("web", "configmap", "flags", "env MODE"),
        Reference("web", "secret", "registry", "imagePullSecrets"),
        Reference("web", "serviceaccount", "robot", "serviceAccountName"),
    ]


def test_optional_references_and_nameless_ones() -> None:
    pod: dict[str, Any] = {
        "metadata": {"name": "opt"},
        "spec": {
            "serviceAccount": "legacy",
            "imagePullSecrets": [{}],
            "volumes": [
                {"name": "v", "configMap": {"name": "cm", "optional": True}},
                {
                    "name": "p",
                    "projected": {"sources": [{"secret": {"name": "ps", "optional": True}}, {"configMap": {}}]},
                },
                {"name": "nameless", "secret": {}},
            ],
            "containers": [
                {
                    "name": "c",
                    "envFrom": [{"configMapRef": {"name": "ef", "optional": True}}, {"secretRef": {"name": "es"}}],
                    "env": [{"name": "K", "valueFrom": {"configMapKeyRef": {"name": "kr", "optional": True}}}],
                }
            ],
        },
    }
    assert pod_references(pod) == [
        Reference("opt", "configmap", "cm", "volume v", True),
        Reference("opt", "secret", "ps", "volume p", True),
        Reference("opt", "configmap", "ef", "envFrom", True),
        Reference("opt", "secret", "es", "envFrom"),
        Reference("opt", "configmap", "kr", "env K", True),
        Reference("opt", "serviceaccount", "legacy", "serviceAccountName"),
    ]
    assert pod_references({}) == [Reference("", "serviceaccount", "default", "serviceAccountName")]


def test_warnings_whole() -> None:
    config = ReflectionConfig()
    skipped = verdict("configmap", _obj("app-config", SKIP), config)
    verdicts = {
        ("configmap", "app-config"): skipped,
        ("configmap", "flags"): verdict("configmap", _obj("flags"), config),
        ("configmap", "kube-root-ca.crt"): verdict("configmap", _obj("kube-root-ca.crt"), config),
        ("secret", "registry"): verdict("secret", _obj("registry"), config),
        ("secret", "init-env"): verdict("secret", _obj("init-env"), config),
    }
    warnings = reference_warnings([POD], verdicts, {"configmap", "secret", "serviceaccount"})
    assert warnings == [
        ReferenceWarning(Reference("web", "configmap", "app-config", "volume conf"), "not reflected", skipped.reason),
        # The optional volume came first; the required env use of the same secret replaces it.
        ReferenceWarning(Reference("web", "secret", "db", "env DB_URL"), "missing", "no secret db in the namespace"),
    ]
    # Only optional uses of a missing object, or a missing service account: no warning.
    optional_only: dict[str, Any] = {
        "metadata": {"name": "o"},
        "spec": {"volumes": [{"name": "v", "secret": {"secretName": "gone", "optional": True}}]},
    }
    assert reference_warnings([optional_only], {}, {"secret", "serviceaccount"}) == []
    # A required use first and an optional one after: the required one stays.
    twice: dict[str, Any] = {
        "metadata": {"name": "t"},
        "spec": {
            "volumes": [
                {"name": "a", "secret": {"secretName": "gone"}},
                {"name": "b", "secret": {"secretName": "gone", "optional": True}},
            ]
        },
    }
    assert reference_warnings([twice], {}, {"secret"}) == [
        ReferenceWarning(Reference("t", "secret", "gone", "volume a"), "missing", "no secret gone in the namespace")
    ]
    assert reference_warnings([twice], {}, {"configmap"}) == []  # secrets could not be read: nothing said


def test_plurals() -> None:
    assert [plural(k) for k in ("class", "policy", "pod", "endpointslice")] == [
        "classes",
        "policies",
        "pods",
        "endpointslices",
    ]
