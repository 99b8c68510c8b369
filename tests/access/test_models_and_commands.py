"""Scope validation, token storage, the role groups migration, and the grant / create_api_token
commands."""

from __future__ import annotations

import io
from datetime import timedelta
from typing import Any

import pytest
from django.contrib.auth.models import Group
from django.core.exceptions import ValidationError
from django.core.management import CommandError, call_command
from django.utils import timezone

from access import roles
from access.models import ApiToken, Scope
from access.policy import can_change, partition

pytestmark = pytest.mark.django_db


def test_the_migration_creates_the_three_role_groups() -> None:
    assert set(Group.objects.filter(name__in=roles.ROLES).values_list("name", flat=True)) == set(roles.ROLES)


def test_a_scope_is_validated_on_save(make_user: Any) -> None:
    user = make_user("alice", "operator")
    with pytest.raises(ValidationError, match="not a namespace name glob"):
        Scope.objects.create(user=user, kind="glob", value="Team A")
    with pytest.raises(ValidationError, match="not a label selector"):
        Scope.objects.create(user=user, kind="selector", value="team in a")
    with pytest.raises(ValidationError, match="exactly one user or one group"):
        Scope.objects.create(user=user, group=Group.objects.get(name="operator"), kind="glob", value="a-*")
    with pytest.raises(ValidationError, match="exactly one user or one group"):
        Scope.objects.create(kind="glob", value="a-*")
    assert not Scope.objects.exists()


def test_scopes_come_from_the_user_and_the_users_groups(make_user: Any) -> None:
    user = make_user("alice", "operator", globs=["team-a-*"])
    team = Group.objects.create(name="team-b")
    Scope.objects.create(group=team, kind="selector", value="team=b")
    user.groups.add(team)
    roles.forget(user)
    assert [str(s) for s in roles.scopes_of(user)] == ["team-a-*", "label team=b"]
    assert can_change(user, "team-a-web", {}, "offload").allowed
    assert can_change(user, "shared", {"team": "b"}, "unoffload").allowed
    refused = can_change(user, "shared", {"team": "c"}, "edit")
    assert not refused.allowed
    assert refused.reason == 'namespace "shared" is out of scope (your scopes: label team=b, team-a-*)'


def test_policy_by_role(make_user: Any, admin_user: Any) -> None:
    viewer = make_user("vera", "viewer", globs=["*"])
    nobody = make_user("nobody")
    assert can_change(admin_user, "anything", {}, "unoffload").allowed
    assert (
        can_change(viewer, "anything", {}, "offload").reason == "viewers may not offload namespaces (your role: viewer)"
    )
    assert "no role" in can_change(nobody, "anything", {}, "offload").reason
    with pytest.raises(ValueError, match="unknown action"):
        can_change(admin_user, "anything", {}, "drop")


def test_partition_for_bulk_names_what_it_leaves_out(make_user: Any) -> None:
    user = make_user("alice", "operator", globs=["team-a-*"])
    allowed, left_out = partition(user, [("team-a-1", {}), ("beta", {"team": "a"}), ("team-a-2", None)], "offload")
    assert allowed == ["team-a-1", "team-a-2"]
    assert left_out == [("beta", 'namespace "beta" is out of scope (your scopes: team-a-*)')]


def test_a_token_is_stored_only_as_a_salted_digest(make_user: Any) -> None:
    user = make_user("alice", "viewer")
    row, text = ApiToken.issue(user, "ci", 30)
    other, other_text = ApiToken.issue(user, "ci2", 0)
    stored = ApiToken.objects.filter(pk=row.pk).values().get()
    assert text.startswith(f"ldt_{row.prefix}_") and len(text) > 50
    assert all(text not in str(value) and text.split("_")[-1] not in str(value) for value in stored.values())
    assert row.matches(text) and not row.matches(other_text) and not row.matches(text + "x")
    assert row.salt != other.salt
    assert abs(row.expires - (timezone.now() + timedelta(days=30))) < timedelta(minutes=1)
    assert other.expires is None and other.state == "active"
    row.revoke()
    assert ApiToken.objects.get(pk=row.pk).state == "revoked"
    assert list(ApiToken.objects.active()) == [other]


def _grant(*args: str, stdin: str | None = None, monkeypatch: Any = None) -> str:
    out = io.StringIO()
    if stdin is not None:
        monkeypatch.setattr("sys.stdin", io.StringIO(stdin))
    call_command("grant", *args, stdout=out)
    return out.getvalue()


def test_grant_creates_a_user_without_a_usable_password(django_user_model: Any) -> None:
    output = _grant("alice", "--role", "operator", "--namespaces", "team-a-*", "--namespace-selector", "team=a")
    user = django_user_model.objects.get(username="alice")
    assert not user.has_usable_password()
    assert "created user alice" in output
    assert "alice: operator: may read everything; may offload" in output
    assert "(scopes: label team=a, team-a-*)" in output
    assert roles.role_of(user) == "operator"


def test_grant_reads_a_new_users_password_from_stdin(django_user_model: Any, monkeypatch: Any) -> None:
    _grant("bob", "--role", "viewer", "--password-stdin", stdin="s3cret-pass-word\n", monkeypatch=monkeypatch)
    assert django_user_model.objects.get(username="bob").check_password("s3cret-pass-word")
    with pytest.raises(CommandError, match="only sets a new user's password"):
        _grant("bob", "--role", "viewer", "--password-stdin", stdin="other\n", monkeypatch=monkeypatch)


def test_grant_replaces_the_role_and_scopes_and_revoke_removes(django_user_model: Any) -> None:
    _grant("alice", "--role", "operator", "--namespaces", "team-a-*")
    output = _grant("alice", "--role", "viewer")
    user = django_user_model.objects.get(username="alice")
    assert list(user.groups.values_list("name", flat=True)) == ["viewer"]
    assert "viewer: may read everything, may change nothing" in output
    _grant("alice", "--role", "operator", "--namespaces", "team-b-*")
    assert list(Scope.objects.filter(user=user).values_list("value", flat=True)) == ["team-b-*"]
    _grant("alice", "--revoke", "--namespaces", "team-b-*")
    assert not Scope.objects.filter(user=user).exists()
    assert roles.role_of(django_user_model.objects.get(username="alice")) == "operator"
    output = _grant("alice", "--revoke")
    assert "no role: may not use the dashboard or the API" in output
    assert not django_user_model.objects.get(username="alice").groups.exists()


def test_grant_refuses_bad_input() -> None:
    with pytest.raises(CommandError, match="--role is required"):
        _grant("alice")
    with pytest.raises(CommandError, match="not a label selector"):
        _grant("alice", "--role", "operator", "--namespace-selector", "team in a")
    with pytest.raises(CommandError, match="no user"):
        _grant("ghost", "--revoke")


def test_create_api_token_prints_only_the_token(make_user: Any) -> None:
    user = make_user("alice", "viewer")
    out = io.StringIO()
    call_command("create_api_token", "alice", "--name", "ci", "--expires-in", "7", stdout=out)
    text = out.getvalue().strip()
    assert "\n" not in text and text.startswith("ldt_")
    row = ApiToken.objects.get(user=user)
    assert row.name == "ci" and row.matches(text)
    assert timedelta(days=6, hours=23) < row.expires - timezone.now() <= timedelta(days=7)
    with pytest.raises(CommandError, match="no user"):
        call_command("create_api_token", "ghost", stdout=io.StringIO())
