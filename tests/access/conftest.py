"""Fixtures of the access tests: the project's URLs with the access app's, and personas."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from typing import Any

import pytest

from access import roles
from access.models import Scope
from offloading.cluster import kube
from tests.fixtures.cluster import Sandboxes, point_at


@pytest.fixture(autouse=True)
def _access_urls(settings: Any) -> None:
    from django.urls import reverse
    from django.urls.exceptions import NoReverseMatch

    try:
        reverse("access:tokens")  # already included by liqo_dash/urls.py
    except NoReverseMatch:
        settings.ROOT_URLCONF = "tests.access.urls"


@pytest.fixture
def make_user(django_user_model: Any) -> Callable[..., Any]:
    """make_user("alice", "operator", globs=["team-a-*"], selectors=["team=a"]) -> a saved user."""

    def make(
        username: str, role: str | None = None, globs: tuple[str, ...] = (), selectors: tuple[str, ...] = ()
    ) -> Any:
        from django.contrib.auth.models import Group

        user = django_user_model.objects.create_user(username, password=f"{username}-password-123")
        if role is not None:
            user.groups.add(Group.objects.get(name=role))
        for value in globs:
            Scope.objects.create(user=user, kind="glob", value=value)
        for value in selectors:
            Scope.objects.create(user=user, kind="selector", value=value)
        roles.forget(user)
        return user

    return make


def offloading_body(namespace: str) -> dict[str, Any]:
    from liqo_rules.manifest import manifest

    body = manifest(namespace, {})
    body.pop("status", None)
    return body


@pytest.fixture
def rbac_sandbox(sandboxes: Sandboxes, settings: Any) -> Iterator[Any]:
    """A sandbox whose policy lets operators change only namespaces alpha and beta, and in delta write
    the offloading but not label the namespace (the dashboard's
    scopes may allow more: the cluster has the last word), with the dashboard connected as its own
    service identity ``liqo-dash`` (which may impersonate), not as the sandbox admin."""
    from sandbox.rbac import DEFAULT_POLICY

    rules = [
        r for r in DEFAULT_POLICY["rules"] if {"kind": "Group", "name": "liqo-dash:operators"} not in r["subjects"]
    ]
    rules += [
        {
            "subjects": [{"kind": "Group", "name": "liqo-dash:operators"}],
            "apiGroups": ["*"],
            "resources": ["*"],
            "verbs": ["get", "list", "watch"],
        },
        {
            "subjects": [{"kind": "Group", "name": "liqo-dash:operators"}],
            "apiGroups": ["offloading.liqo.io"],
            "resources": ["namespaceoffloadings"],
            "verbs": ["*"],
            "namespaces": ["alpha", "beta", "delta"],
        },
        {
            "subjects": [{"kind": "Group", "name": "liqo-dash:operators"}],
            "apiGroups": [""],
            "resources": ["namespaces"],
            "verbs": ["patch"],
            "resourceNames": ["alpha", "beta"],
        },
        {
            "subjects": [{"kind": "Group", "name": "liqo-dash:admins"}],
            "apiGroups": ["*"],
            "resources": ["*"],
            "verbs": ["*"],
        },
    ]
    policy = {**DEFAULT_POLICY, "rules": rules}
    sb = sandboxes.get("minimal", name="rbac-operators-alpha-beta", rbac=policy, user="liqo-dash")
    point_at(sb.kubeconfig_path, settings)  # type: ignore[attr-defined]
    yield sb
    kube.reset_client()
