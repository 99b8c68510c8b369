"""The checks a change meets before it is recorded, each raising (or returning) a
:class:`~offloading.changes.errors.ChangeRejected` on the field it is about: Liqo's rules, the
precondition, nothing to change, remote-name collisions (this cluster's and a managed provider's),
confirmation of a destructive change, the GitOps override and the server-side dry-run.

The rules and the order they are asked in are :mod:`offloading.changes.requests`' (its docstring), which
builds and submits a change with them; bulk and the form ask some of them on their own.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from liqo_rules.admission import field_of_message as field_of_webhook_message
from liqo_rules.admission import validate_spec
from liqo_rules.constants import SCHEDULING_LABEL, SELECTED_NAME
from liqo_rules.spec import FIELD_MAPPING, FIELD_REMOTE_NAME, mapping_strategy, normalize_spec
from offloading.changes import authorize
from offloading.changes.errors import ChangeRejected, Refusal
from offloading.choices import ChangeAction
from offloading.cluster.errors import KubeError
from offloading.cluster.identity import acting_as
from offloading.cluster.managed import talking_to
from offloading.cluster.remote import managed_providers
from offloading.cluster.twins import remote_collisions
from offloading.context import Actor
from offloading.gitops.managed import detection_of, who
from offloading.models import ChangeRequest, Namespace
from offloading.snapshot.refresh import local_cluster_id
from offloading.whatif.collisions import collisions, selected_clusters
from offloading.whatif.destructive import is_destructive
from offloading.whatif.preview import dry_run

log = logging.getLogger(__name__)


def _problems_by_field(problems: list[Any]) -> dict[str, list[str]]:
    grouped: dict[str, list[str]] = {}
    for problem in problems:
        grouped.setdefault(problem.field, []).append(problem.message)
    return grouped


@dataclass
class Validation:
    spec: dict[str, Any]
    errors: dict[str, list[str]]
    warnings: dict[str, list[str]]


def validate(namespace: Namespace, spec: dict[str, Any], local_id: str | None = None) -> Validation:
    """Check a desired spec for ``namespace`` against its observed one with Liqo's rules
    (``local_id``: the local cluster id, when the caller already has it)."""
    normalized = normalize_spec(spec)
    old = namespace.offloading_spec if namespace.offloaded else None
    if local_id is None:
        local_id = local_cluster_id(namespace.managed_id)
    errors, warnings = validate_spec(namespace.name, normalized, old, local_cluster_id=local_id or None)
    return Validation(normalized, _problems_by_field(errors), _problems_by_field(warnings))


NOTHING_TO_CHANGE = "nothing to change"


class NothingToChange(ChangeRejected):
    """The change would leave the namespace as it is (see the module docstring)."""

    def __init__(self, namespace_name: str) -> None:
        message = f"{NOTHING_TO_CHANGE}: the offloading of namespace {namespace_name} already has this spec"
        super().__init__({"namespace": [message]}, Refusal.CONFLICT)


def changes_nothing(namespace: Namespace, spec: dict[str, Any], label_namespace: bool) -> bool:
    """Whether ``spec`` (normalized) is the namespace's offloading spec already, and labelling the namespace
    adds nothing (it carries the scheduling label, or none is asked for)."""
    if not namespace.offloaded:
        return False
    if label_namespace and (namespace.labels or {}).get(SCHEDULING_LABEL) != "true":
        return False
    return normalize_spec(namespace.offloading_spec or {}) == normalize_spec(spec)


def refuse_collisions(namespace: Namespace, spec: dict[str, Any], local_id: str | None = None) -> None:
    """Refuse a spec whose remote namespace another local namespace already uses on a peer both would
    use (``offloading.whatif.collisions``). An existing offloading keeps its remote name (Liqo's
    webhook locks it), so only a new one is checked."""
    if namespace.offloaded:
        return
    local_id = local_id if local_id is not None else local_cluster_id(namespace.managed_id)
    found = collisions(namespace.name, spec, local_id, managed=namespace.managed_id)
    if found:
        raise _name_taken(spec, [found[0].message()])


def refuse_remote_collisions(
    namespace: Namespace, spec: dict[str, Any], actor: Actor, local_id: str | None = None
) -> None:
    """Refuse a new offloading whose remote name a selected peer that is a managed cluster too already has
    as a namespace that is not this cluster's twin (``offloading.cluster.twins.remote_collisions``:
    Liqo would fail there with CreationLoopBackOff), asked as the requester. Only an answer refuses: a
    provider that could not be asked in time (UNCHECKED) never does, the change goes on as without a
    managed provider. Skipped with one query when no managed cluster is known, with two when none is
    among the selected peers; only then are the providers asked (at once, for ``remote.DEADLINE`` s at
    most, the preview's answers reused from the cache for a few seconds)."""
    if namespace.offloaded:
        return  # Liqo's webhook keeps an existing offloading's remote name
    local_id = local_id if local_id is not None else local_cluster_id(namespace.managed_id)
    providers = managed_providers(local_id, namespace.managed_id)
    if not providers:
        return
    peers = selected_clusters(spec, namespace.managed_id) & providers.keys()
    if not peers:
        return
    checks = remote_collisions(
        namespace.name, spec, peers, local_id=local_id, identity=authorize.readers(actor), own=namespace.managed_id
    )
    taken = [check.message() for check in checks if check.fails]
    if taken:
        raise _name_taken(spec, taken)


def _name_taken(spec: dict[str, Any], messages: list[str]) -> ChangeRejected:
    """The refusal of a remote name already in use, on the field that chose it."""
    field = FIELD_REMOTE_NAME if mapping_strategy(spec) == SELECTED_NAME else FIELD_MAPPING
    return ChangeRejected({field: [m[:1].upper() + m[1:] for m in messages]}, Refusal.CONFLICT)


def check_precondition(namespace: Namespace, expected: int | None) -> None:
    """Refuse a change based on another version than the snapshot's (``expected``: the generation the
    requester loaded, 0 for "not offloaded"; None: no precondition).

    The rule is in the module docstring: refused up front with ``STALE`` when the snapshot already
    knows the base is stale; races after queuing are left to the apply-time conflict check.
    """
    if expected is None:
        return
    current = namespace.offloading_generation if namespace.offloaded else 0
    if expected == current or (expected > current > 0):
        # A requester ahead of the snapshot saw a write the snapshot has not caught up with yet (or an
        # object recreated since): only the apply can tell, by generation and uid.
        return
    if expected == 0:
        message = (
            f"namespace {namespace.name} was offloaded by someone else after you loaded it "
            f"(it is now at generation {current}); review its offloading and submit again"
        )
    elif current == 0:
        message = f"namespace {namespace.name} was unoffloaded after you loaded it; review it and submit again"
    else:
        message = (
            f"the offloading of namespace {namespace.name} changed after you loaded it (generation {expected} "
            f"is now {current}); review it and submit again"
        )
    raise ChangeRejected({"namespace": [message]}, Refusal.STALE)


CONFIRM_FIELD = "confirm"


def unconfirmed(reason: str) -> ChangeRejected:
    """The refusal of a destructive change that was not confirmed, on the field ``confirm``."""
    message = f"{reason[:1].upper()}{reason[1:]}: confirm this destructive change to go on"
    return ChangeRejected({CONFIRM_FIELD: [message]}, Refusal.UNCONFIRMED)


def require_confirmation(namespace: Namespace, built: ChangeRequest, confirmed: bool) -> None:
    """Refuse ``built`` (the change of ``namespace``) when it is destructive and was not confirmed."""
    if confirmed:
        return
    why = is_destructive(namespace, built.action, built.desired_spec)
    if why:
        raise unconfirmed(why)


GITOPS_FIELD = "gitopsOverride"
# The unsaved change's note of an override, for its audit row (set by build_change, read on save).
OVERRIDE_NOTE = "gitops_override_note"


def gitops_refusal(namespace: Namespace, action: str) -> str:
    """Who would undo a direct ``action`` on the namespace's offloading, in words; "" when nobody."""
    return who(detection_of(namespace), deleting=action == ChangeAction.UNOFFLOAD)


def not_overridden(managers: str) -> ChangeRejected:
    """The refusal of a direct push that a GitOps tool would undo, on the field ``gitopsOverride``."""
    message = (
        f"{managers}: it would undo this change at its next sync. Change the offloading in Git "
        "(download the change as files), or override to push it anyway"
    )
    return ChangeRejected({GITOPS_FIELD: [message]}, Refusal.GITOPS)


def require_gitops_override(namespace: Namespace, built: ChangeRequest, override: bool) -> None:
    """Refuse ``built`` when a GitOps tool manages the offloading and would undo it, unless ``override``;
    an override is noted on ``built`` for its audit row."""
    managers = gitops_refusal(namespace, built.action)
    if not managers:
        return
    if not override:
        raise not_overridden(managers)
    setattr(built, OVERRIDE_NOTE, f"GitOps override: pushed although {managers[:1].lower()}{managers[1:]}")


def on_cluster_dry_run(
    cluster: Any, who: Any, namespace_name: str, spec: dict[str, Any], managed: int | None = None
) -> ChangeRejected | None:
    """:func:`dry_run_refusal` on ``cluster``'s API server (a ManagedCluster; None: the process's own), as
    ``who`` (``managed``: the namespace's cluster pk, for its snapshot). A cluster without a usable
    configuration is one that cannot be asked: no refusal."""
    try:
        with acting_as(who), talking_to(cluster):
            return dry_run_refusal(namespace_name, spec, managed)
    except KubeError as exc:
        log.info("dry-run of %s not asked: %s", namespace_name, exc)
        return None


def dry_run_refusal(namespace_name: str, spec: dict[str, Any], managed: int | None = None) -> ChangeRejected | None:
    """What the API server (and so Liqo's webhook) says of ``spec``, as a refusal on the field the
    message is about; None when it accepts it, when dry-runs are off, or when it cannot be asked (an
    unreachable API server does not block a request: the worker applies it when the server is back)."""
    if not settings.LIQO_DASH["DRY_RUN_ON_SUBMIT"]:
        return None
    result = dry_run(namespace_name, spec, managed)
    if not result.errors:
        return None
    errors: dict[str, list[str]] = {}
    for message in result.errors:
        errors.setdefault(field_of_webhook_message(message), []).append(
            f"The API server refused this change: {message}"
        )
    return ChangeRejected(errors, Refusal.INVALID)
