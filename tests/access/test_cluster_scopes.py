"""Scopes naming managed clusters (issue 28): the grammar, matching in the default cluster and in a named
one, refusals naming the cluster, validation where admins enter scopes, and one look-up of the default
cluster per user object, never one per namespace."""

from __future__ import annotations

import io
from typing import Any

import pytest
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command

from access import policy
from access.models import Scope as ScopeRow
from access.scopes import (
    GLOB,
    SELECTOR,
    Parsed,
    Scope,
    ScopeError,
    describe,
    in_scope,
    matches,
    needs_default_cluster,
    out_of_scope_reason,
    split,
    validate,
)
from offloading.models import ManagedCluster

# --- the grammar -------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("kind", "value", "cluster", "rest"),
    [
        (GLOB, "team-a-*", None, "team-a-*"),
        (GLOB, "prod-eu/team-a-*", "prod-eu", "team-a-*"),
        (GLOB, "*/team-a-*", "*", "team-a-*"),
        (GLOB, "prod-[ab]?/alpha", "prod-[ab]?", "alpha"),
        (SELECTOR, "team=a", None, "team=a"),
        (SELECTOR, "prod-eu: team=a", "prod-eu", "team=a"),
        (SELECTOR, "prod-eu:team=a", "prod-eu", "team=a"),
        # A label key with a '/': no cluster part, the '/' belongs to the key.
        (SELECTOR, "example.com/team=a", None, "example.com/team=a"),
        (SELECTOR, "example.com/team in (a,b),tier!=x", None, "example.com/team in (a,b),tier!=x"),
        # A cluster part and a key with a '/': only the ':' separates them.
        (SELECTOR, "prod-eu: example.com/team=a", "prod-eu", "example.com/team=a"),
        (SELECTOR, "*: example.com/team", "*", "example.com/team"),
    ],
)
def test_a_scope_splits_into_its_cluster_part_and_its_namespace_part(
    kind: str, value: str, cluster: str | None, rest: str
) -> None:
    validate(kind, value)
    assert split(kind, value) == Parsed(cluster, rest)
    assert Scope(kind, value).cluster == cluster
    assert Scope(kind, value).rest == rest


@pytest.mark.parametrize(
    ("kind", "value", "message"),
    [
        (GLOB, "/team-a-*", "cluster part is empty"),
        (GLOB, "prod eu/team-a-*", "cluster part 'prod eu' is not a managed cluster name glob"),
        (GLOB, "prod.eu/team-a-*", "cluster part 'prod.eu' is not a managed cluster name glob"),
        (GLOB, "prod-[eu/team-a-*", "cluster part 'prod-[eu' has unbalanced brackets"),
        (GLOB, "a/b/team-a-*", "more than one '/'"),
        (GLOB, "prod-eu/Team-A", "'Team-A' is not a namespace name glob"),
        (GLOB, "prod-eu/", "'' is not a namespace name glob"),
        (SELECTOR, ": team=a", "cluster part is empty"),
        (SELECTOR, "prod/eu: team=a", "cluster part 'prod/eu' is not a managed cluster name glob"),
        (SELECTOR, "prod-eu: ", "empty label selector"),
        (SELECTOR, "prod-eu: team in a", "'team in a' is not a label selector"),
        (SELECTOR, "a: b: team=a", "'b: team=a' is not a label selector"),
        (SELECTOR, "x" * 64 + ": team=a", "is not a managed cluster name glob"),
    ],
)
def test_a_bad_cluster_part_is_refused_with_a_message_naming_it(kind: str, value: str, message: str) -> None:
    with pytest.raises(ScopeError, match=message.replace("[", r"\[").replace("(", r"\(")):
        validate(kind, value)


def test_no_scope_valid_before_the_cluster_part_changes_its_reading() -> None:
    """Every value valid before issue 28 had neither separator: the selector parser refuses ':'
    anywhere, and a namespace name glob has no '/'."""
    for value in ("team=a", "example.com/team=a", "team in (a,b)", "!team"):
        validate(SELECTOR, value)
        assert split(SELECTOR, value).cluster is None
    with pytest.raises(ScopeError):
        validate(SELECTOR, "team=a:b")  # a ':' in a value would be taken as a cluster part: still refused
    for value in ("team-a-*", "*", "team-[!ab]"):
        assert split(GLOB, value).cluster is None


def test_scopes_are_described_with_their_cluster_in_front() -> None:
    scopes = [
        Scope(GLOB, "team-a-*"),
        Scope(GLOB, "prod-eu/team-b-*"),
        Scope(SELECTOR, "team=a"),
        Scope(SELECTOR, "prod-eu:example.com/team=c"),
    ]
    assert describe(scopes) == "label team=a, prod-eu/team-b-*, prod-eu: label example.com/team=c, team-a-*"


# --- matching, pure ----------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "cluster", "default_cluster", "expected"),
    [
        # Without a cluster part: the default cluster only.
        ("team-a-*", None, None, True),
        ("team-a-*", None, "rome", True),
        ("team-a-*", "rome", "rome", True),
        ("team-a-*", "milan", "rome", False),
        ("team-a-*", "milan", None, False),  # the default unknown: a named cluster is not taken for it
        # A cluster glob: the namespace's cluster, the default's name when it is in the default cluster.
        ("milan/team-a-*", "milan", "rome", True),
        ("milan/team-a-*", "rome", "rome", False),
        ("milan/team-a-*", None, "milan", True),
        ("milan/team-a-*", None, "rome", False),
        ("milan/team-a-*", None, None, False),
        ("mil*/team-a-*", "milan", "rome", True),
        ("Milan/team-a-*", "milan", "rome", False),  # case-sensitive, like the namespace part
        # Every cluster.
        ("*/team-a-*", "milan", "rome", True),
        ("*/team-a-*", None, None, True),
        ("*/team-a-*", "naples", None, True),
        # The namespace part still decides.
        ("*/team-a-*", "milan", "rome", True),
        ("milan/team-b-*", "milan", "rome", False),
    ],
)
def test_globs_by_cluster(value: str, cluster: str | None, default_cluster: str | None, expected: bool) -> None:
    name = "team-a-web"
    assert matches(Scope(GLOB, value), name, {}, cluster, default_cluster=default_cluster) is expected


@pytest.mark.parametrize(
    ("value", "cluster", "expected"),
    [
        ("team=a", None, True),
        ("team=a", "rome", True),
        ("team=a", "milan", False),
        ("milan: team=a", "milan", True),
        ("milan: team=a", None, False),
        ("milan: team=b", "milan", False),
        ("*: example.com/team=a", "naples", True),
        ("*: example.com/team=b", "naples", False),
        ("example.com/team=a", "rome", True),
        ("example.com/team=a", "naples", False),
    ],
)
def test_label_selectors_by_cluster(value: str, cluster: str | None, expected: bool) -> None:
    labels = {"team": "a", "example.com/team": "a"}
    assert matches(Scope(SELECTOR, value), "shared", labels, cluster, default_cluster="rome") is expected


def test_legacy_callers_ask_about_the_default_cluster() -> None:
    """Callers that pass no cluster (governance, every caller before issue 28) keep their answers."""
    assert matches(Scope(GLOB, "team-a-*"), "team-a-web", {})
    assert matches(Scope(SELECTOR, "team=a"), "x", {"team": "a"})
    assert in_scope([Scope(GLOB, "team-a-*")], "team-a-web")
    assert not in_scope([Scope(GLOB, "team-a-*")], "team-b-web")


def test_the_default_clusters_name_is_needed_only_when_a_scope_or_the_namespace_names_a_cluster() -> None:
    plain = [Scope(GLOB, "team-a-*"), Scope(SELECTOR, "team=a")]
    assert not needs_default_cluster(plain, None)
    assert needs_default_cluster(plain, "milan")
    assert not needs_default_cluster([Scope(GLOB, "*/team-a-*")], None)
    assert needs_default_cluster([Scope(GLOB, "milan/team-a-*")], None)
    assert not needs_default_cluster([Scope(GLOB, "milan/team-a-*")], "milan")


def test_refusals_name_the_cluster_and_what_scopes_without_one_cover() -> None:
    scopes = [Scope(GLOB, "team-a-*"), Scope(GLOB, "naples/team-b-*")]
    assert out_of_scope_reason(scopes, "team-a-web", "milan", default_cluster="rome") == (
        'namespace "team-a-web" in cluster milan is out of scope (your scopes: naples/team-b-*, team-a-*; '
        "scopes without a cluster cover the default cluster (rome) only)"
    )
    assert out_of_scope_reason([Scope(GLOB, "naples/x")], "y", "milan") == (
        'namespace "y" in cluster milan is out of scope (your scopes: naples/x)'
    )
    assert out_of_scope_reason([], "y", "milan") == (
        'namespace "y" in cluster milan is out of scope: you have no scopes (an admin grants them)'
    )
    # Without a cluster, the message every page and test knows.
    assert out_of_scope_reason(scopes, "beta") == (
        'namespace "beta" is out of scope (your scopes: naples/team-b-*, team-a-*)'
    )


# --- policy, with the database -------------------------------------------------------------------------


@pytest.fixture
def clusters(db: Any) -> tuple[str, str]:
    """The default managed cluster renamed rome (migration 0021 made it) and a second one, milan."""
    default = ManagedCluster.objects.get(is_default=True)
    default.name = "rome"
    default.save(update_fields=["name"])
    ManagedCluster.objects.create(name="milan", context="milan")
    return "rome", "milan"


def test_the_default_cluster_is_the_one_marked_default(clusters: tuple[str, str]) -> None:
    assert policy.default_cluster_name() == "rome"


@pytest.mark.django_db
def test_without_a_default_cluster_only_plain_and_every_cluster_scopes_cover_it(make_user: Any) -> None:
    ManagedCluster.objects.all().delete()
    assert policy.default_cluster_name() == ""
    user = make_user("olga", "operator", globs=("milan/team-a-*", "*/team-b-*", "team-c-*"))
    assert not policy.can_change(user, "team-a-web", {}, "edit")
    assert policy.can_change(user, "team-b-web", {}, "edit")
    assert policy.can_change(user, "team-c-web", {}, "edit")


def test_an_operator_in_the_default_cluster_and_in_a_named_one(clusters: tuple[str, str], make_user: Any) -> None:
    rome, milan = clusters
    user = make_user(
        "alice",
        "operator",
        globs=("team-a-*", "milan/team-m-*", "*/shared-*"),
        selectors=("milan: example.com/team=a",),
    )
    # The default cluster, asked without a cluster (every caller today) or by its name.
    for cluster in (None, rome):
        assert policy.can_change(user, "team-a-web", {}, "edit", cluster=cluster)
        assert policy.can_change(user, "shared-x", {}, "edit", cluster=cluster)
        assert not policy.can_change(user, "team-m-web", {}, "edit", cluster=cluster)
        assert not policy.can_change(user, "labelled", {"example.com/team": "a"}, "edit", cluster=cluster)
    # Milan: its own scopes and the every-cluster one, not the plain team-a-*.
    assert policy.can_change(user, "team-m-web", {}, "offload", cluster=milan)
    assert policy.can_change(user, "shared-x", {}, "offload", cluster=milan)
    assert policy.can_change(user, "labelled", {"example.com/team": "a"}, "edit", cluster=milan)
    refused = policy.can_change(user, "team-a-web", {}, "edit", cluster=milan)
    assert not refused
    assert refused.reason == (
        'namespace "team-a-web" in cluster milan is out of scope (your scopes: */shared-*, milan/team-m-*, '
        "milan: label example.com/team=a, team-a-*; scopes without a cluster cover the default cluster (rome) only)"
    )
    # Refused in the default cluster: the message callers know, without a cluster.
    assert policy.can_change(user, "team-m-web", {}, "edit").reason.startswith(
        'namespace "team-m-web" is out of scope (your scopes: '
    )
    # Admins and viewers: their role decides, in every cluster.
    admin = make_user("root", "admin")
    viewer = make_user("vera", "viewer", globs=("*/team-a-*",))
    assert policy.can_change(admin, "anything", {}, "unoffload", cluster=milan)
    assert not policy.can_change(viewer, "team-a-web", {}, "edit", cluster=milan)


def test_partition_takes_the_cluster(clusters: tuple[str, str], make_user: Any) -> None:
    user = make_user("bob", "operator", globs=("team-a-*", "milan/team-b-*"))
    allowed, left_out = policy.partition(user, [("team-a-1", {}), ("team-b-1", {})], "edit", cluster="milan")
    assert allowed == ["team-b-1"]
    assert [name for name, _ in left_out] == ["team-a-1"]
    assert "in cluster milan" in left_out[0][1]
    assert policy.partition(user, [("team-a-1", {}), ("team-b-1", {})], "edit")[0] == ["team-a-1"]


@pytest.mark.parametrize("cluster", [None, "milan"])
def test_a_loop_of_can_change_reads_the_default_cluster_once(
    clusters: tuple[str, str], make_user: Any, django_assert_num_queries: Any, cluster: str | None
) -> None:
    """Like offloading.changes.bulk: one user object, can_change per namespace. The role, the scopes and
    the default cluster's name are read once (3 queries), whatever the number of namespaces."""
    user = make_user("carol", "operator", globs=("team-a-*", "rome/team-r-*", "milan/team-m-*"))
    names = [f"team-{t}-{i}" for i in range(200) for t in "arm"]
    with django_assert_num_queries(3):
        decisions = [policy.can_change(user, name, {"team": "a"}, "edit", cluster=cluster) for name in names]
    allowed = {name.split("-")[1] for name, decision in zip(names, decisions, strict=True) if decision}
    assert allowed == ({"a", "r"} if cluster is None else {"m"})
    with django_assert_num_queries(0):
        policy.can_change(user, "team-a-0", {}, "edit", cluster=cluster)
    policy.forget(user)
    with django_assert_num_queries(3):
        policy.can_change(user, "team-a-0", {}, "edit", cluster=cluster)


def test_plain_scopes_in_the_default_cluster_cost_no_extra_query(
    clusters: tuple[str, str], make_user: Any, django_assert_num_queries: Any
) -> None:
    """The scopes every install had before issue 28, asked about the default cluster: no look-up at all
    (the queries of the pages and bulks measured before stay what they were)."""
    user = make_user("dan", "operator", globs=("team-a-*", "*/shared-*"), selectors=("team=a",))
    with django_assert_num_queries(2):  # the role, the scopes
        for i in range(100):
            policy.can_change(user, f"team-a-{i}", {}, "edit")


# --- where admins enter scopes ---------------------------------------------------------------------------


@pytest.mark.django_db
def test_the_model_reports_a_bad_cluster_part_on_the_value_field(make_user: Any) -> None:
    user = make_user("erin", "operator")
    with pytest.raises(ValidationError) as caught:
        ScopeRow.objects.create(user=user, kind=GLOB, value="prod eu/team-a-*")
    assert list(caught.value.message_dict) == ["value"]
    assert "cluster part 'prod eu' is not a managed cluster name glob" in caught.value.message_dict["value"][0]
    ScopeRow.objects.create(user=user, kind=GLOB, value="prod-eu/team-a-*")
    ScopeRow.objects.create(user=user, kind=SELECTOR, value="prod-eu: example.com/team=a")
    assert sorted(ScopeRow.objects.values_list("value", flat=True)) == [
        "prod-eu/team-a-*",
        "prod-eu: example.com/team=a",
    ]


@pytest.mark.django_db
def test_the_admin_form_shows_a_bad_cluster_part_on_the_value_field(admin_client: Any, make_user: Any) -> None:
    user = make_user("fay", "operator")
    response = admin_client.post(
        "/admin/access/scope/add/", {"user": user.pk, "group": "", "kind": SELECTOR, "value": "prod/eu: team=a"}
    )
    assert response.status_code == 200  # the form again, with the error
    form = response.context["adminform"].form
    assert list(form.errors) == ["value"]
    assert "cluster part 'prod/eu' is not a managed cluster name glob" in form.errors["value"][0]
    assert not ScopeRow.objects.exists()
    response = admin_client.post(
        "/admin/access/scope/add/", {"user": user.pk, "group": "", "kind": GLOB, "value": "*/team-a-*"}
    )
    assert response.status_code == 302
    assert ScopeRow.objects.get().value == "*/team-a-*"
    assert b"prod-eu/team-a-*" in admin_client.get("/admin/access/scope/add/").content  # the help text


@pytest.mark.django_db
def test_the_grant_command_takes_cluster_scopes_and_refuses_bad_ones(make_user: Any) -> None:
    make_user("gus")
    out = io.StringIO()
    call_command(
        "grant",
        "gus",
        "--role",
        "operator",
        "--namespaces",
        "milan/team-a-*",
        "--namespace-selector",
        "*: team=a",
        stdout=out,
    )
    assert sorted(ScopeRow.objects.values_list("kind", "value")) == [(GLOB, "milan/team-a-*"), (SELECTOR, "*: team=a")]
    assert "scopes: *: label team=a, milan/team-a-*" in out.getvalue()
    with pytest.raises(CommandError, match="cluster part 'mil an' is not a managed cluster name glob"):
        call_command("grant", "gus", "--role", "operator", "--namespaces", "mil an/team-a-*", stdout=io.StringIO())
