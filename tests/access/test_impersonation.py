"""Impersonation and SubjectAccessReview against the sandbox: the cluster has the last word.

The sandbox policy here lets operators change only the namespaces alpha and beta, while the dashboard
would let this operator change every namespace (scope ``*``): the cluster refuses, up front, with its
reason, and pushes made as the user are refused by the API server itself.
"""

from __future__ import annotations

from typing import Any

import pytest

from access import roles
from access.impersonation import Identity, identity_for
from access.policy import can_change
from access.review import checks_for, review_change
from offloading.cluster import kube
from offloading.cluster.errors import KubeError
from tests.access.conftest import offloading_body

pytestmark = pytest.mark.django_db


def test_the_identity_is_the_prefixed_user_and_the_group_of_its_role(
    make_user: Any, admin_user: Any, settings: Any
) -> None:
    settings.KUBE_IMPERSONATE = True
    settings.KUBE_IMPERSONATE_USER_PREFIX = "dash:"
    make_user("olga", "operator")
    make_user("vera", "viewer")
    make_user("nobody")
    assert identity_for("olga") == Identity("dash:olga", ("liqo-dash:operators",))
    assert identity_for("vera") == Identity("dash:vera", ("liqo-dash:viewers",))
    assert identity_for("admin") == Identity("dash:admin", ("liqo-dash:admins",))
    assert identity_for("nobody") == Identity("dash:nobody", ())
    assert identity_for("deleted-user") == Identity("dash:deleted-user", ())
    settings.KUBE_IMPERSONATE_GROUPS = "operator=team:ops"
    assert identity_for("olga") == Identity("dash:olga", ("team:ops",))
    assert identity_for("vera") == Identity("dash:vera", ())
    settings.KUBE_IMPERSONATE = False
    assert identity_for("olga") is None


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("operator", "is not ROLE=GROUP"),
        ("boss=x", "unknown role 'boss'"),
        ("viewer=a,viewer=b", "appears twice"),
    ],
)
def test_a_bad_group_map_fails_loudly(text: str, message: str) -> None:
    with pytest.raises(roles.RoleConfigError, match=message):
        roles.parse_role_map(text)


def test_pushes_reach_the_cluster_as_the_user_who_asked(rbac_sandbox: Any, make_user: Any, settings: Any) -> None:
    settings.KUBE_IMPERSONATE = True
    make_user("olga", "operator", globs=["*"])
    olga = identity_for("olga")
    assert olga is not None
    # Allowed for operators by the cluster: created, as olga.
    created = kube.create_offloading("alpha", offloading_body("alpha"), identity=olga).obj
    assert created["metadata"]["namespace"] == "alpha"
    kube.label_namespace("alpha", {"example.com/touched": "yes"}, identity=olga)
    # Not allowed for operators: the API server refuses olga by name.
    with pytest.raises(KubeError) as refused:
        kube.create_offloading("gamma", offloading_body("gamma"), identity=olga)
    assert refused.value.kind == "forbidden"
    assert 'User "liqo-dash:olga" cannot create resource "namespaceoffloadings"' in refused.value.message
    with pytest.raises(KubeError, match='User "liqo-dash:olga" cannot patch resource "namespaces"'):
        kube.label_namespace("gamma", {"example.com/touched": "yes"}, identity=olga)
    with pytest.raises(KubeError, match='User "liqo-dash:olga" cannot create'):
        kube.create_offloading("gamma", offloading_body("gamma"), dry_run=True, identity=olga)
    assert kube.get_offloading("gamma") is None
    # The same push without an identity is the dashboard's own (liqo-dash), which may.
    kube.create_offloading("gamma", offloading_body("gamma"))
    assert kube.get_offloading("gamma") is not None
    with pytest.raises(KubeError, match='User "liqo-dash:olga" cannot delete'):
        kube.delete_offloading("gamma", identity=olga)


def test_a_service_identity_that_may_not_impersonate_is_refused(
    rbac_sandbox: Any, tmp_path: Any, settings: Any
) -> None:
    kubeconfig = rbac_sandbox.write_kubeconfig(tmp_path / "operator-kubeconfig", user="operator")
    settings.LIQO_DASH = {**settings.LIQO_DASH, "KUBECONFIG": str(kubeconfig)}
    kube.reset_client()
    with pytest.raises(KubeError, match='User "operator" cannot impersonate resource "users"'):
        kube.create_offloading("alpha", offloading_body("alpha"), identity=Identity("olga", ("liqo-dash:operators",)))


def test_subject_access_review_returns_the_clusters_answer(rbac_sandbox: Any) -> None:
    operators = ("liqo-dash:operators",)
    nsoff = ("offloading.liqo.io", "namespaceoffloadings")
    assert kube.subject_access_review("olga", operators, "create", *nsoff, "alpha", "offloading") == (
        True,
        "allowed by sandbox RBAC policy",
    )
    assert kube.subject_access_review("olga", operators, "create", *nsoff, "gamma", "offloading")[0] is False
    assert kube.subject_access_review("olga", operators, "patch", "", "namespaces", "", "beta")[0] is True
    assert kube.subject_access_review("olga", operators, "patch", "", "namespaces", "", "gamma")[0] is False
    assert (
        kube.subject_access_review("vera", ("liqo-dash:viewers",), "delete", *nsoff, "alpha", "offloading")[0] is False
    )


def test_the_cluster_refuses_up_front_what_the_dashboard_would_allow(
    rbac_sandbox: Any, make_user: Any, settings: Any
) -> None:
    settings.KUBE_IMPERSONATE = True
    olga = make_user("olga", "operator", globs=["*"])
    assert can_change(olga, "gamma", {}, "offload").allowed  # the dashboard alone would allow it
    decision = review_change("olga", "offload", "gamma")
    assert not decision.allowed
    assert decision.reason.startswith(
        'the cluster does not allow "liqo-dash:olga" to create namespaceoffloadings in "gamma"'
    )
    assert review_change("olga", "offload", "alpha").allowed
    assert review_change("olga", "unoffload", "beta").allowed
    # In delta the offloading may be written but the namespace not labelled: refused, naming the patch.
    decision = review_change("olga", "offload", "delta")
    assert decision.reason.startswith('the cluster does not allow "liqo-dash:olga" to patch namespaces:')


def test_the_review_names_the_exact_verbs_and_the_first_denial_wins() -> None:
    assert [(c.verb, c.resource, c.namespace, c.name) for c in checks_for("unoffload", "team-a")] == [
        ("delete", "namespaceoffloadings", "team-a", "offloading"),
        ("patch", "namespaces", "", "team-a"),
    ]
    asked: list[str] = []

    def reviewer(user: str, groups: tuple[str, ...], verb: str, *rest: str) -> tuple[bool, str]:
        asked.append(verb)
        return (verb != "patch", "" if verb != "patch" else "RBAC: no rule grants patch")

    from access.review import review

    decision = review(Identity("olga", ()), checks_for("edit", "team-a"), reviewer)
    assert asked == ["update", "patch"]
    assert decision.reason == 'the cluster does not allow "olga" to patch namespaces: RBAC: no rule grants patch'


def test_without_impersonation_the_cluster_is_not_asked(make_user: Any, settings: Any) -> None:
    settings.KUBE_IMPERSONATE = False
    make_user("olga", "operator")

    def reviewer(*args: Any) -> tuple[bool, str]:
        raise AssertionError("asked the cluster with impersonation off")

    decision = review_change("olga", "offload", "gamma", reviewer)
    assert decision.allowed and "acts as itself" in decision.reason
