"""Scopes, pure: globs, label selectors (the dashboard's one selector parser), explanations."""

from __future__ import annotations

import pytest

from access.scopes import GLOB, SELECTOR, Scope, ScopeError, describe, in_scope, matches, out_of_scope_reason, validate


@pytest.mark.parametrize(
    ("glob", "name", "expected"),
    [
        ("team-a-*", "team-a-web", True),
        ("team-a-*", "team-a-", True),
        ("team-a-*", "team-b-web", False),
        ("team-a-*", "Team-a-web", False),  # case-sensitive, like namespace names
        ("team-?", "team-a", True),
        ("team-?", "team-ab", False),
        ("team-[ab]", "team-b", True),
        ("team-[!ab]", "team-b", False),
        ("alpha", "alpha", True),
        ("alpha", "alphabet", False),
        ("*", "anything", True),
    ],
)
def test_globs(glob: str, name: str, expected: bool) -> None:
    assert matches(Scope(GLOB, glob), name, {}) is expected


@pytest.mark.parametrize(
    ("selector", "labels", "expected"),
    [
        ("team=a", {"team": "a"}, True),
        ("team=a", {"team": "b"}, False),
        ("team=a", {}, False),
        ("team=a,env=prod", {"team": "a", "env": "prod"}, True),
        ("team=a,env=prod", {"team": "a", "env": "dev"}, False),
        ("team in (a,b)", {"team": "b"}, True),
        ("team notin (a,b)", {"team": "c"}, True),
        ("team notin (a,b)", {"team": "a"}, False),
        ("team", {"team": ""}, True),
        ("!team", {"team": "a"}, False),
        ("team!=a", {}, True),  # like Kubernetes: != matches a missing label
    ],
)
def test_label_selectors(selector: str, labels: dict[str, str], expected: bool) -> None:
    assert matches(Scope(SELECTOR, selector), "any-name", labels) is expected


def test_a_namespace_is_in_scope_when_any_scope_matches() -> None:
    scopes = [Scope(GLOB, "team-a-*"), Scope(SELECTOR, "team=a")]
    assert in_scope(scopes, "team-a-web", {})
    assert in_scope(scopes, "shared", {"team": "a"})
    assert not in_scope(scopes, "shared", {"team": "b"})
    assert not in_scope([], "team-a-web", {})


@pytest.mark.parametrize(
    ("kind", "value"),
    [
        (GLOB, ""),
        (GLOB, "Team-A"),
        (GLOB, "team a"),
        (GLOB, "team-[a"),
        (GLOB, "x" * 64),
        (SELECTOR, ""),
        (SELECTOR, "   "),
        (SELECTOR, "team=(a"),
        (SELECTOR, "team in a"),
        ("regex", "team-.*"),
    ],
)
def test_invalid_scopes_are_refused(kind: str, value: str) -> None:
    with pytest.raises(ScopeError):
        validate(kind, value)


@pytest.mark.parametrize(("kind", "value"), [(GLOB, "team-a-*"), (GLOB, "*"), (SELECTOR, "team in (a,b),env")])
def test_valid_scopes_pass(kind: str, value: str) -> None:
    validate(kind, value)


def test_the_explanation_names_the_users_scopes() -> None:
    scopes = [Scope(SELECTOR, "team=a"), Scope(GLOB, "team-a-*"), Scope(GLOB, "team-a-*")]
    assert describe(scopes) == "label team=a, team-a-*"
    assert (
        out_of_scope_reason(scopes, "beta") == 'namespace "beta" is out of scope (your scopes: label team=a, team-a-*)'
    )
    assert "you have no scopes" in out_of_scope_reason([], "beta")
