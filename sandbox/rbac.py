"""Authentication (bearer tokens) and authorization (a small RBAC-like policy file), plus impersonation.

Policy format (YAML or a dict):

    users:
      - {name: sandbox-admin, token: sandbox-admin-token, groups: [system:masters]}
      - {name: viewer, token: viewer-token, groups: [liqo-dash:viewers]}
    rules:
      - subjects: [{kind: Group, name: liqo-dash:viewers}]      # or kind: User
        apiGroups: ["*"]
        resources: ["*"]                # "plural", "plural/subresource", "plural/*", "*"
        verbs: [get, list, watch]       # or "*"; "impersonate" on users / groups (apiGroup "")
        namespaces: ["team-*"]          # optional: only these namespaces (globs); absent = everywhere
        resourceNames: []               # optional

Requests without credentials: kubectl (client-go) never sends a token to a plain-http server, so by default
anonymous requests act as `anonymous` (default: sandbox-admin). Set `anonymous: null` in the policy to
answer them 401 instead; `kubectl --as USER` (impersonation headers) still lets kubectl act as anyone.

Members of `system:masters` may do everything, like in Kubernetes. Every authenticated user is in
`system:authenticated`. Non-resource URLs (discovery, /version) are open to authenticated users.
"""

from __future__ import annotations

import fnmatch
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

ADMIN_USER = "sandbox-admin"
ADMIN_TOKEN = "sandbox-admin-token"
# The dashboard's own service identity: reads everything, writes offloadings and labels, impersonates.
SERVICE_USER = "liqo-dash"

DEFAULT_POLICY: dict[str, Any] = {
    "anonymous": ADMIN_USER,
    "users": [
        {"name": ADMIN_USER, "token": ADMIN_TOKEN, "groups": ["system:masters"]},
        {"name": SERVICE_USER, "token": "liqo-dash-token", "groups": ["liqo-dash:service"]},
        {"name": "viewer", "token": "viewer-token", "groups": ["liqo-dash:viewers"]},
        {"name": "operator", "token": "operator-token", "groups": ["liqo-dash:operators"]},
        {"name": "outsider", "token": "outsider-token", "groups": []},
    ],
    "rules": [
        # The dashboard's service account: reads everything, writes offloadings and namespace labels, and
        # impersonates end users so the cluster's RBAC decides for them.
        {
            "subjects": [{"kind": "Group", "name": "liqo-dash:service"}],
            "apiGroups": ["*"],
            "resources": ["*"],
            "verbs": ["get", "list", "watch"],
        },
        {
            "subjects": [{"kind": "Group", "name": "liqo-dash:service"}],
            "apiGroups": ["offloading.liqo.io"],
            "resources": ["namespaceoffloadings"],
            "verbs": ["*"],
        },
        {
            "subjects": [{"kind": "Group", "name": "liqo-dash:service"}],
            "apiGroups": [""],
            "resources": ["namespaces"],
            "verbs": ["get", "list", "watch", "patch", "update"],
        },
        # Any user name (the dashboard prefixes them), but only the three groups its roles map to: never
        # a "system:" group, as in deploy/components/impersonation/rbac.yaml.
        {
            "subjects": [{"kind": "Group", "name": "liqo-dash:service"}],
            "apiGroups": [""],
            "resources": ["users"],
            "verbs": ["impersonate"],
        },
        {
            "subjects": [{"kind": "Group", "name": "liqo-dash:service"}],
            "apiGroups": [""],
            "resources": ["groups"],
            "verbs": ["impersonate"],
            "resourceNames": ["liqo-dash:viewers", "liqo-dash:operators", "liqo-dash:admins"],
        },
        {
            "subjects": [{"kind": "Group", "name": "liqo-dash:service"}],
            "apiGroups": ["authorization.k8s.io"],
            "resources": ["subjectaccessreviews"],
            "verbs": ["create"],
        },
        {
            "subjects": [
                {"kind": "Group", "name": "liqo-dash:viewers"},
                {"kind": "Group", "name": "liqo-dash:operators"},
            ],
            "apiGroups": ["*"],
            "resources": ["*"],
            "verbs": ["get", "list", "watch"],
        },
        {
            "subjects": [{"kind": "Group", "name": "liqo-dash:service"}],
            "apiGroups": ["coordination.k8s.io"],
            "resources": ["leases"],
            "verbs": ["create", "update", "patch"],
        },
        {
            # The dashboard's admins: read everything, write every offloading and namespace label.
            "subjects": [{"kind": "Group", "name": "liqo-dash:admins"}],
            "apiGroups": ["*"],
            "resources": ["*"],
            "verbs": ["get", "list", "watch"],
        },
        {
            "subjects": [
                {"kind": "Group", "name": "liqo-dash:admins"},
                {"kind": "Group", "name": "liqo-dash:operators"},
            ],
            "apiGroups": ["offloading.liqo.io"],
            "resources": ["namespaceoffloadings"],
            "verbs": ["*"],
        },
        {
            "subjects": [
                {"kind": "Group", "name": "liqo-dash:admins"},
                {"kind": "Group", "name": "liqo-dash:operators"},
            ],
            "apiGroups": [""],
            "resources": ["namespaces"],
            "verbs": ["patch", "update"],
        },
        {
            "subjects": [{"kind": "Group", "name": "system:authenticated"}],
            "apiGroups": ["authorization.k8s.io"],
            "resources": ["selfsubjectaccessreviews"],
            "verbs": ["create"],
        },
    ],
}


@dataclass(frozen=True)
class User:
    name: str
    groups: tuple[str, ...] = ()
    extra: dict[str, Any] = field(default_factory=dict, hash=False, compare=False)


@dataclass(frozen=True)
class Attributes:
    verb: str
    group: str = ""
    resource: str = ""
    subresource: str = ""
    namespace: str = ""
    name: str = ""
    path: str = ""  # non-resource URL

    @property
    def resource_request(self) -> bool:
        return bool(self.resource)


def _match(patterns: list[str] | None, value: str) -> bool:
    return any(p == "*" or p == value for p in patterns or [])


class Policy:
    def __init__(self, source: dict[str, Any] | str | Path | None = None) -> None:
        data: dict[str, Any] = (
            yaml.safe_load(Path(source).read_text()) if isinstance(source, (str, Path)) else source or {}
        )
        data = data or DEFAULT_POLICY
        self.users = {u["token"]: User(u["name"], tuple(u.get("groups") or ())) for u in data.get("users") or []}
        self.rules = list(data.get("rules") or [])
        self.anonymous: User | None = None
        anonymous = data.get("anonymous")
        if anonymous:
            known = {u.name: u for u in self.users.values()}
            self.anonymous = known.get(anonymous) or User(anonymous, ())

    def authenticate(self, authorization: str | None) -> User | None:
        if not authorization and self.anonymous is not None:
            return User(self.anonymous.name, tuple(dict.fromkeys(self.anonymous.groups + ("system:authenticated",))))
        if not authorization or not authorization.lower().startswith("bearer "):
            return None
        token = authorization.split(" ", 1)[1].strip()
        user = self.users.get(token)
        if user is None:
            return None
        return User(user.name, tuple(dict.fromkeys(user.groups + ("system:authenticated",))))

    def token_for(self, user: str) -> str:
        for token, candidate in self.users.items():
            if candidate.name == user:
                return token
        raise KeyError(user)

    def allowed(self, user: User, attrs: Attributes) -> bool:
        if "system:masters" in user.groups:
            return True
        if not attrs.resource_request:
            return True
        resource = attrs.resource + ("/" + attrs.subresource if attrs.subresource else "")
        for rule in self.rules:
            subjects = rule.get("subjects") or []
            if not any(
                (s.get("kind") == "User" and s.get("name") == user.name)
                or (s.get("kind") == "Group" and s.get("name") in user.groups)
                for s in subjects
            ):
                continue
            if not _match(rule.get("verbs"), attrs.verb):
                continue
            if not _match(rule.get("apiGroups"), attrs.group):
                continue
            resources = rule.get("resources") or []
            if not any(
                r == "*" or r == resource or (r.endswith("/*") and attrs.subresource and r[:-2] == attrs.resource)
                for r in resources
            ):
                continue
            names = rule.get("resourceNames")
            if names and attrs.name not in names:
                continue
            namespaces = rule.get("namespaces")
            if namespaces is not None and (
                not attrs.namespace or not any(fnmatch.fnmatchcase(attrs.namespace, p) for p in namespaces)
            ):
                continue
            return True
        return False

    @staticmethod
    def denial(user: User, attrs: Attributes, qualified: str) -> str:
        group = attrs.group
        resource = attrs.resource + ("/" + attrs.subresource if attrs.subresource else "")
        subject = f'{qualified} "{attrs.name}"' if attrs.name else qualified
        scope = f'in the namespace "{attrs.namespace}"' if attrs.namespace else "at the cluster scope"
        return (
            f'{subject} is forbidden: User "{user.name}" cannot {attrs.verb} resource "{resource}" in API '
            f'group "{group}" {scope}'
        )
