"""Liqo's NamespaceOffloading validating webhook (b.2) and the full spec validation the dashboard runs."""

from __future__ import annotations

from typing import Any

from liqo_rules import constants as c
from liqo_rules.limits import node_selector_limit_problems
from liqo_rules.schema import schema_errors
from liqo_rules.selectors.match import validate_node_selector
from liqo_rules.selectors.requirements import SelectorError
from liqo_rules.spec import (
    FIELD_MAPPING,
    FIELD_NAMESPACE,
    FIELD_POD,
    FIELD_REMOTE_NAME,
    FIELD_SELECTOR,
    SOURCE_DASHBOARD,
    SOURCE_WEBHOOK,
    Problem,
    defaults_view,
    dns1123_problems,
    is_system_namespace,
    remote_namespace_name,
)


def webhook_admission(
    operation: str, name: str, spec: dict[str, Any], old_spec: dict[str, Any] | None
) -> tuple[list[str], list[str]]:
    """Liqo's NamespaceOffloading validating webhook (b.2) on defaulted specs: (denial messages, warnings).

    The webhook stops at the first denial, so at most one denial is returned.
    """
    if name != c.OFFLOADING_NAME:
        return [c.WEBHOOK_NAME_MESSAGE], []
    new = defaults_view(spec)
    if operation == "CREATE":
        if new[FIELD_MAPPING] == c.SELECTED_NAME and not new.get(FIELD_REMOTE_NAME):
            return [c.WEBHOOK_SELECTED_NAME_EMPTY_MESSAGE], []
        return [], []
    if operation == "UPDATE":
        old = defaults_view(old_spec or {})
        if old[FIELD_MAPPING] != new[FIELD_MAPPING]:
            return [c.WEBHOOK_MAPPING_IMMUTABLE_MESSAGE], []
        if (old.get(FIELD_REMOTE_NAME) or "") != (new.get(FIELD_REMOTE_NAME) or ""):
            return [c.WEBHOOK_REMOTE_NAME_IMMUTABLE_MESSAGE], []
        if new[FIELD_POD] != c.LOCAL_AND_REMOTE and old[FIELD_POD] != new[FIELD_POD]:
            return [], [c.WEBHOOK_RESTRICTIVE_POD_STRATEGY_WARNING]
        return [], []
    return [], []


_WEBHOOK_FIELD = {
    c.WEBHOOK_NAME_MESSAGE: FIELD_NAMESPACE,
    c.WEBHOOK_SELECTED_NAME_EMPTY_MESSAGE: FIELD_REMOTE_NAME,
    c.WEBHOOK_MAPPING_IMMUTABLE_MESSAGE: FIELD_MAPPING,
    c.WEBHOOK_REMOTE_NAME_IMMUTABLE_MESSAGE: FIELD_REMOTE_NAME,
    c.WEBHOOK_RESTRICTIVE_POD_STRATEGY_WARNING: FIELD_POD,
}


def field_of_message(message: str) -> str:
    """The spec field a message of Liqo's webhook is about, also when the API server wrapped it
    ('admission webhook "..." denied the request: <message>'); ``namespace`` when it names none."""
    for known, spec_field in _WEBHOOK_FIELD.items():
        if known in message:
            return spec_field
    return FIELD_NAMESPACE


def validate_spec(
    namespace: str,
    spec: dict[str, Any],
    old_spec: dict[str, Any] | None = None,
    *,
    local_cluster_id: str | None = None,
) -> tuple[list[Problem], list[Problem]]:
    """Errors and warnings for creating (old_spec None) or updating a NamespaceOffloading in `namespace`.

    The dashboard's size limits (``limits``) first, then schema errors, then the webhook's denial/warning, then our early checks for things Liqo only
    discovers later (invalid or too long remote names, system namespaces, invalid selectors).
    """
    errors: list[Problem] = []
    warnings: list[Problem] = []
    over = node_selector_limit_problems(spec.get(FIELD_SELECTOR))
    if over:  # checked first and alone: a selector over the limits is not worth reading further
        return [Problem(FIELD_SELECTOR, f"cluster selector too large: {m}", SOURCE_DASHBOARD) for m in over], warnings
    errors.extend(schema_errors(spec))
    if errors:
        return errors, warnings
    operation = "CREATE" if old_spec is None else "UPDATE"
    denials, webhook_warnings = webhook_admission(operation, c.OFFLOADING_NAME, spec, old_spec)
    errors.extend(Problem(_WEBHOOK_FIELD.get(m, FIELD_NAMESPACE), m, SOURCE_WEBHOOK) for m in denials)
    warnings.extend(Problem(_WEBHOOK_FIELD.get(m, FIELD_POD), m, SOURCE_WEBHOOK) for m in webhook_warnings)

    d = defaults_view(spec)
    strategy = d[FIELD_MAPPING]
    if is_system_namespace(namespace):
        errors.append(
            Problem(
                FIELD_NAMESPACE,
                f"namespace {namespace!r} is a Kubernetes or Liqo system namespace and must "
                "not be offloaded (Liqo does not prevent it)",
                SOURCE_DASHBOARD,
            )
        )
    remote = d.get(FIELD_REMOTE_NAME) or ""
    if strategy == c.SELECTED_NAME and remote:
        for msg in dns1123_problems(remote):
            errors.append(
                Problem(
                    FIELD_REMOTE_NAME,
                    f"remote namespace name {remote!r} is not a valid namespace name: {msg}; "
                    "Liqo would accept it but fail to create the remote namespace (CreationLoopBackOff)",
                    SOURCE_DASHBOARD,
                )
            )
    elif strategy != c.SELECTED_NAME and remote and old_spec is None:
        # Liqo would store it, ignore it and never let it change: the dashboard does not store it.
        errors.append(
            Problem(
                FIELD_REMOTE_NAME,
                f"a remote namespace name is only used with SelectedName; with {strategy} Liqo would "
                "store it, ignore it and never let it change: leave it empty or choose SelectedName",
                SOURCE_DASHBOARD,
            )
        )
    if strategy == c.DEFAULT_NAME and local_cluster_id:
        computed = remote_namespace_name(namespace, local_cluster_id, d)
        for msg in dns1123_problems(computed):
            errors.append(
                Problem(
                    FIELD_MAPPING,
                    f"the DefaultName remote namespace {computed!r} is not a valid namespace "
                    f"name: {msg}; Liqo does not shorten it, so remote creation would fail. Use SelectedName "
                    "or EnforceSameName",
                    SOURCE_DASHBOARD,
                )
            )
    selector = d.get(FIELD_SELECTOR)
    try:
        selector_errors = validate_node_selector(selector) if selector is not None else []
    except SelectorError as err:  # pragma: no cover - schema_errors already rejects malformed selectors
        selector_errors = [err.message]
    for msg in selector_errors:
        errors.append(
            Problem(
                FIELD_SELECTOR,
                f"invalid cluster selector: {msg} (Liqo accepts it, then reports "
                "'Invalid ClusterSelector' and may select no cluster)",
                SOURCE_DASHBOARD,
            )
        )
    return errors, warnings
