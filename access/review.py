"""Ask the cluster before queuing: a SubjectAccessReview per verb a change needs, as the impersonated
user. The first denial wins and its reason, quoted from the cluster, is the refusal shown to the user.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from access.impersonation import Identity, identity_for
from access.policy import Decision
from offloading.cluster import kube
from offloading.models import ManagedCluster

OFFLOADINGS = ("offloading.liqo.io", "namespaceoffloadings")
NAMESPACES = ("", "namespaces")


@dataclass(frozen=True)
class Check:
    verb: str
    group: str
    resource: str
    namespace: str
    name: str


def checks_for(action: str, namespace: str, offloading_name: str = "offloading", *, label: bool = True) -> list[Check]:
    """The exact requests a change makes: the NamespaceOffloading write, and (``label``) the patch of
    the namespace's scheduling label."""
    verbs = {"offload": "create", "edit": "update", "reapply": "update", "unoffload": "delete"}
    if action not in verbs:
        raise ValueError(f"unknown action {action!r}")
    checks = [Check(verbs[action], *OFFLOADINGS, namespace, offloading_name)]
    if label:
        checks.append(Check("patch", *NAMESPACES, "", namespace))
    return checks


# (user, groups, verb, group, resource, namespace, name) -> (allowed, reason)
Reviewer = Callable[[str, tuple[str, ...], str, str, str, str, str], tuple[bool, str]]


def review(identity: Identity, checks: list[Check], reviewer: Reviewer) -> Decision:
    for check in checks:
        allowed, reason = reviewer(
            identity.user, identity.groups, check.verb, check.group, check.resource, check.namespace, check.name
        )
        if not allowed:
            what = f"{check.verb} {check.resource}" + (f' in "{check.namespace}"' if check.namespace else "")
            detail = reason or "no reason given"
            return Decision(False, f'the cluster does not allow "{identity.user}" to {what}: {detail}')
    return Decision(True, "allowed by the cluster")


LOOK_UP = "look up"  # review_change's identity: found from the user name


def review_change(
    username: str,
    action: str,
    namespace: str,
    reviewer: Reviewer | None = None,
    *,
    label: bool = True,
    identity: Identity | None | str = LOOK_UP,
    cluster: ManagedCluster | None = None,
) -> Decision:
    """The cluster's answer for ``username`` doing ``action`` on ``namespace``; allowed without asking
    when impersonation is off (the dashboard then acts as itself). ``identity``: the user's, when the
    caller already has it (a bulk asks for hundreds of namespaces as one user), else looked up for
    ``cluster`` (its impersonation and groups; None: the default cluster's)."""
    if isinstance(identity, str):
        identity = identity_for(username, cluster)
    if identity is None:
        return Decision(True, "impersonation is off: the dashboard acts as itself")
    if reviewer is None:
        reviewer = kube.subject_access_review
    return review(identity, checks_for(action, namespace, label=label), reviewer)
