"""NamespaceOffloading spec rules: defaults, schema, Liqo's validating webhook, naming, status and manifests.

See liqo-semantics.md sections a (CRD and controller), b (naming and webhook) and d.1 (liqoctl output).
"""

from __future__ import annotations

import copy
import re
from dataclasses import dataclass
from typing import Any

from offloading.liqo import constants as c
from offloading.liqo.goformat import go_json, go_yaml
from offloading.liqo.selectors import SelectorError, validate_node_selector

__all__ = [
    "Problem",
    "apply_defaults",
    "cluster_status_table",
    "compute_status",
    "condition_list",
    "is_dns1123_label",
    "manifest",
    "normalize_spec",
    "offloading_phase",
    "phase_from_namespace_maps",
    "remote_namespace_name",
    "render_manifest",
    "schema_errors",
    "validate_spec",
    "webhook_admission",
]

FIELD_MAPPING = "namespaceMappingStrategy"
FIELD_REMOTE_NAME = "remoteNamespaceName"
FIELD_POD = "podOffloadingStrategy"
FIELD_SELECTOR = "clusterSelector"
FIELD_NAMESPACE = "namespace"

SOURCE_SCHEMA = "schema"
SOURCE_WEBHOOK = "webhook"
SOURCE_DASHBOARD = "dashboard"

_DNS1123_LABEL = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?")


@dataclass(frozen=True)
class Problem:
    """One validation error or warning, attached to a form field, with where it comes from."""

    field: str
    message: str
    source: str


def is_dns1123_label(name: str) -> bool:
    """Whether name is a valid namespace name (RFC 1123 label, at most 63 characters)."""
    return isinstance(name, str) and len(name) <= 63 and _DNS1123_LABEL.fullmatch(name) is not None


def _dns1123_problems(name: str) -> list[str]:
    msgs = []
    if len(name) > 63:
        msgs.append(f"must be no more than 63 characters (it has {len(name)})")
    if not _DNS1123_LABEL.fullmatch(name):
        msgs.append(
            "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', "
            "and must start and end with an alphanumeric character (e.g. 'my-name', or '123-abc')"
        )
    return msgs


# --------------------------------------------------------------------------------------------------
# Defaults and canonical form.


def apply_defaults(spec: dict[str, Any]) -> dict[str, Any]:
    """The spec as the API server defaults it (DefaultName, LocalAndRemote); a new dict, clusterSelector as given."""
    out = copy.deepcopy(spec) if isinstance(spec, dict) else {}
    if out.get(FIELD_MAPPING) is None:
        out[FIELD_MAPPING] = c.DEFAULT_MAPPING_STRATEGY
    if out.get(FIELD_POD) is None:
        out[FIELD_POD] = c.DEFAULT_POD_STRATEGY
    return out


def _normalize_requirement(expr: Any) -> Any:
    if not isinstance(expr, dict):
        return expr
    out: dict[str, Any] = {"key": expr.get("key"), "operator": expr.get("operator")}
    if expr.get("values"):
        out["values"] = list(expr["values"])
    return out


def _normalize_term(term: Any) -> Any:
    if not isinstance(term, dict):
        return term
    out: dict[str, Any] = {}
    if term.get("matchExpressions"):
        out["matchExpressions"] = [_normalize_requirement(e) for e in term["matchExpressions"]]
    if term.get("matchFields"):
        out["matchFields"] = [_normalize_requirement(e) for e in term["matchFields"]]
    return out


def normalize_spec(spec: dict[str, Any]) -> dict[str, Any]:
    """apply_defaults plus the canonical form we store and compare.

    Keys in Go struct order; remoteNamespaceName dropped when empty; clusterSelector always
    {"nodeSelectorTerms": [...]}; empty values / matchExpressions / matchFields omitted (as Go's omitempty).
    """
    d = apply_defaults(spec)
    out: dict[str, Any] = {FIELD_MAPPING: d[FIELD_MAPPING]}
    if d.get(FIELD_REMOTE_NAME):
        out[FIELD_REMOTE_NAME] = d[FIELD_REMOTE_NAME]
    out[FIELD_POD] = d[FIELD_POD]
    selector = d.get(FIELD_SELECTOR) or {}
    terms = selector.get("nodeSelectorTerms") if isinstance(selector, dict) else None
    out[FIELD_SELECTOR] = {"nodeSelectorTerms": [_normalize_term(t) for t in terms or []]}
    return out


# --------------------------------------------------------------------------------------------------
# CRD schema, webhook and dashboard checks.


def _type_name(v: Any) -> str:
    if v is None:
        return "null"
    if isinstance(v, bool):
        return "boolean"
    if isinstance(v, (int, float)):
        return "number" if isinstance(v, float) else "integer"
    if isinstance(v, str):
        return "string"
    if isinstance(v, list):
        return "array"
    if isinstance(v, dict):
        return "object"
    return type(v).__name__


def _requirement_schema_errors(expr: Any, path: str) -> list[str]:
    if not isinstance(expr, dict):
        return [
            f'{path}: Invalid value: "{_type_name(expr)}": {path} in body must be of type object: "{_type_name(expr)}"'
        ]
    errs = []
    for name in ("key", "operator"):
        if name not in expr or expr[name] is None:
            errs.append(f"{path}.{name}: Required value")
        elif not isinstance(expr[name], str):
            errs.append(
                f'{path}.{name}: Invalid value: "{_type_name(expr[name])}": {path}.{name} in body must be of type string'
            )
    values = expr.get("values")
    if values is not None:
        if not isinstance(values, list):
            errs.append(
                f'{path}.values: Invalid value: "{_type_name(values)}": {path}.values in body must be of type array'
            )
        else:
            for i, v in enumerate(values):
                if not isinstance(v, str):
                    errs.append(
                        f'{path}.values[{i}]: Invalid value: "{_type_name(v)}": '
                        f"{path}.values[{i}] in body must be of type string"
                    )
    return errs


def schema_errors(spec: dict[str, Any]) -> list[Problem]:
    """What the CRD's structural schema rejects (after defaulting): enums, types, required nodeSelectorTerms.

    The CRD has no enum for selector operators and no pattern for remoteNamespaceName; those are
    checked by validate_spec as dashboard checks.
    """
    if not isinstance(spec, dict):
        return [
            Problem(
                "spec",
                f'spec: Invalid value: "{_type_name(spec)}": spec in body must be of type object',
                SOURCE_SCHEMA,
            )
        ]
    d = apply_defaults(spec)
    out: list[Problem] = []
    enums = ((FIELD_MAPPING, c.MAPPING_STRATEGIES), (FIELD_POD, ("Local", "Remote", "LocalAndRemote")))
    for name, allowed in enums:
        value = d[name]
        if not isinstance(value, str):
            out.append(
                Problem(
                    name,
                    f'spec.{name}: Invalid value: "{_type_name(value)}": spec.{name} in body must be of type string',
                    SOURCE_SCHEMA,
                )
            )
        elif value not in allowed:
            shown = ", ".join(f'"{a}"' for a in allowed)
            out.append(
                Problem(
                    name,
                    f'spec.{name}: Unsupported value: "{value}": supported values: {shown}',
                    SOURCE_SCHEMA,
                )
            )
    remote = d.get(FIELD_REMOTE_NAME)
    if remote is not None and not isinstance(remote, str):
        out.append(
            Problem(
                FIELD_REMOTE_NAME,
                f'spec.remoteNamespaceName: Invalid value: "{_type_name(remote)}": '
                "spec.remoteNamespaceName in body must be of type string",
                SOURCE_SCHEMA,
            )
        )
    if FIELD_SELECTOR in d and d[FIELD_SELECTOR] is not None:
        out.extend(Problem(FIELD_SELECTOR, m, SOURCE_SCHEMA) for m in _selector_schema_errors(d[FIELD_SELECTOR]))
    return out


def _selector_schema_errors(selector: Any) -> list[str]:
    base = "spec.clusterSelector"
    if not isinstance(selector, dict):
        return [
            f'{base}: Invalid value: "{_type_name(selector)}": {base} in body must be of type object: "{_type_name(selector)}"'
        ]
    terms = selector.get("nodeSelectorTerms")
    if terms is None:
        return [f"{base}.nodeSelectorTerms: Required value"]
    if not isinstance(terms, list):
        return [
            f'{base}.nodeSelectorTerms: Invalid value: "{_type_name(terms)}": {base}.nodeSelectorTerms in body must be of type array'
        ]
    errs: list[str] = []
    for i, term in enumerate(terms):
        tp = f"{base}.nodeSelectorTerms[{i}]"
        if term is None:
            continue
        if not isinstance(term, dict):
            errs.append(
                f'{tp}: Invalid value: "{_type_name(term)}": {tp} in body must be of type object: "{_type_name(term)}"'
            )
            continue
        for part in ("matchExpressions", "matchFields"):
            exprs = term.get(part)
            if exprs is None:
                continue
            if not isinstance(exprs, list):
                errs.append(
                    f'{tp}.{part}: Invalid value: "{_type_name(exprs)}": {tp}.{part} in body must be of type array'
                )
                continue
            for j, expr in enumerate(exprs):
                errs.extend(_requirement_schema_errors(expr, f"{tp}.{part}[{j}]"))
    return errs


def webhook_admission(
    operation: str, name: str, spec: dict[str, Any], old_spec: dict[str, Any] | None
) -> tuple[list[str], list[str]]:
    """Liqo's NamespaceOffloading validating webhook (b.2) on defaulted specs: (denial messages, warnings).

    The webhook stops at the first denial, so at most one denial is returned.
    """
    if name != c.OFFLOADING_NAME:
        return [c.WEBHOOK_NAME_MESSAGE], []
    new = apply_defaults(spec)
    if operation == "CREATE":
        if new[FIELD_MAPPING] == c.SELECTED_NAME and not new.get(FIELD_REMOTE_NAME):
            return [c.WEBHOOK_SELECTED_NAME_EMPTY_MESSAGE], []
        return [], []
    if operation == "UPDATE":
        old = apply_defaults(old_spec or {})
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


def remote_namespace_name(namespace: str, local_cluster_id: str, spec: dict[str, Any]) -> str:
    """The remote namespace name Liqo computes (b.1): no hashing or truncation for DefaultName."""
    strategy = apply_defaults(spec)[FIELD_MAPPING]
    if strategy == c.ENFORCE_SAME_NAME:
        return namespace
    if strategy == c.SELECTED_NAME:
        return str(spec.get(FIELD_REMOTE_NAME) or "")
    return f"{namespace}-{local_cluster_id}"


def phase_is_settled(phase: str) -> bool:
    """Whether Liqo has finished converging for now (nothing changes until the spec or the fleet does)."""
    return phase in (c.PHASE_READY, c.PHASE_NO_CLUSTER_SELECTED, c.PHASE_SOME_FAILED, c.PHASE_ALL_FAILED)


def local_cluster_id_from(namespace: str, spec: dict[str, Any], remote_name: str) -> str | None:
    """The local cluster id, read back from a DefaultName offloading's remote name (``<ns>-<id>``);
    None when the offloading does not tell (another strategy, or no remote name yet)."""
    if apply_defaults(spec)[FIELD_MAPPING] != c.DEFAULT_NAME or not remote_name.startswith(namespace + "-"):
        return None
    return remote_name[len(namespace) + 1 :] or None


def is_system_namespace(namespace: str) -> bool:
    """Kubernetes' and Liqo's own namespaces (and Liqo tenant namespaces): never to be offloaded."""
    return namespace in c.SYSTEM_NAMESPACES or namespace.startswith(c.TENANT_NAMESPACE_PREFIX)


def validate_spec(
    namespace: str,
    spec: dict[str, Any],
    old_spec: dict[str, Any] | None = None,
    *,
    local_cluster_id: str | None = None,
) -> tuple[list[Problem], list[Problem]]:
    """Errors and warnings for creating (old_spec None) or updating a NamespaceOffloading in `namespace`.

    Schema errors, then the webhook's denial/warning, then our early checks for things Liqo only
    discovers later (invalid or too long remote names, system namespaces, invalid selectors).
    """
    errors: list[Problem] = []
    warnings: list[Problem] = []
    errors.extend(schema_errors(spec))
    if errors:
        return errors, warnings
    operation = "CREATE" if old_spec is None else "UPDATE"
    denials, webhook_warnings = webhook_admission(operation, c.OFFLOADING_NAME, spec, old_spec)
    errors.extend(Problem(_WEBHOOK_FIELD.get(m, FIELD_NAMESPACE), m, SOURCE_WEBHOOK) for m in denials)
    warnings.extend(Problem(_WEBHOOK_FIELD.get(m, FIELD_POD), m, SOURCE_WEBHOOK) for m in webhook_warnings)

    d = apply_defaults(spec)
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
        for msg in _dns1123_problems(remote):
            errors.append(
                Problem(
                    FIELD_REMOTE_NAME,
                    f"remote namespace name {remote!r} is not a valid namespace name: {msg}; "
                    "Liqo would accept it but fail to create the remote namespace (CreationLoopBackOff)",
                    SOURCE_DASHBOARD,
                )
            )
    elif strategy != c.SELECTED_NAME and remote and old_spec is None:
        warnings.append(
            Problem(
                FIELD_REMOTE_NAME,
                f"remoteNamespaceName is only used with SelectedName; with {strategy} it is "
                "stored but ignored, and it cannot be changed later",
                SOURCE_DASHBOARD,
            )
        )
    if strategy == c.DEFAULT_NAME and local_cluster_id:
        computed = remote_namespace_name(namespace, local_cluster_id, d)
        for msg in _dns1123_problems(computed):
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


# --------------------------------------------------------------------------------------------------
# Status: phase, conditions, per-cluster table.


def offloading_phase(*, deleting: bool, required: int, ready: int, failed: int) -> str:
    """status.offloadingPhase from the controller's counters (a.4); first matching rule wins."""
    if deleting:
        return c.PHASE_TERMINATING
    if required == 0:
        return c.PHASE_NO_CLUSTER_SELECTED
    if ready == required:
        return c.PHASE_READY
    if failed == required:
        return c.PHASE_ALL_FAILED
    if failed > 0:
        return c.PHASE_SOME_FAILED
    return c.PHASE_IN_PROGRESS


def phase_from_namespace_maps(namespace: str, namespace_maps: list[dict[str, Any]], *, deleting: bool) -> str:
    """offloading_phase computed from NamespaceMap objects (desiredMapping / currentMapping) like the controller."""
    required = ready = failed = 0
    for nm in namespace_maps:
        if namespace in ((nm.get("spec") or {}).get("desiredMapping") or {}):
            required += 1
        phase = (((nm.get("status") or {}).get("currentMapping") or {}).get(namespace) or {}).get("phase")
        if phase == c.MAPPING_ACCEPTED:
            ready += 1
        elif phase == c.MAPPING_CREATION_LOOP_BACKOFF:
            failed += 1
    return offloading_phase(deleting=deleting, required=required, ready=ready, failed=failed)


def _required_condition(required: bool, now: str) -> dict[str, Any]:
    if required:
        status, reason, message = "True", c.REASON_CLUSTER_SELECTED, c.MESSAGE_CLUSTER_SELECTED
    else:
        status, reason, message = "False", c.REASON_CLUSTER_NOT_SELECTED, c.MESSAGE_CLUSTER_NOT_SELECTED
    return {
        "type": c.CONDITION_OFFLOADING_REQUIRED,
        "status": status,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }


def _ready_condition(phase: str | None, now: str) -> dict[str, Any]:
    status, reason, message = {
        c.MAPPING_ACCEPTED: ("True", c.REASON_NAMESPACE_CREATED, c.MESSAGE_NAMESPACE_CREATED),
        c.MAPPING_CREATION_LOOP_BACKOFF: (
            "False",
            c.REASON_CREATION_LOOP_BACKOFF,
            c.MESSAGE_CREATION_LOOP_BACKOFF,
        ),
        c.MAPPING_TERMINATING: ("False", c.REASON_TERMINATING, c.MESSAGE_TERMINATING),
    }.get(phase or "", ("False", c.REASON_CREATING, c.MESSAGE_CREATING))
    return {
        "type": c.CONDITION_READY,
        "status": status,
        "lastTransitionTime": now,
        "reason": reason,
        "message": message,
    }


def _set_condition(conditions: list[dict[str, Any]], new: dict[str, Any]) -> None:
    for i, cond in enumerate(conditions):
        if cond.get("type") == new["type"]:
            if cond.get("status") == new["status"] and cond.get("reason") == new["reason"]:
                return
            conditions[i] = new
            return
    conditions.append(new)


def condition_list(
    existing: list[dict[str, Any]] | None,
    *,
    required: bool,
    mapping_phase: str | None,
    now: str,
    deleting: bool = False,
) -> list[dict[str, Any]]:
    """The RemoteNamespaceConditions of one NamespaceMap after a reconcile (a.3 rules 1-5).

    OffloadingRequired is always set; Ready only when required or a mapping phase exists; a condition
    whose status and reason are unchanged is kept as is (with its lastTransitionTime). With
    deleting=True, a cluster neither required nor mapped gets [] (its entry is removed).
    """
    if deleting and not required and not mapping_phase:
        return []
    conditions = copy.deepcopy(list(existing or []))
    _set_condition(conditions, _required_condition(required, now))
    if required or mapping_phase:
        _set_condition(conditions, _ready_condition(mapping_phase, now))
    return conditions


def compute_status(
    namespace: str,
    obj: dict[str, Any],
    namespace_maps: list[dict[str, Any]],
    *,
    local_cluster_id: str,
    now: str,
) -> dict[str, Any]:
    """The status the controller writes for a NamespaceOffloading given the local NamespaceMaps (a.3, a.4).

    `obj` is the NamespaceOffloading (metadata.generation / deletionTimestamp, spec, previous status);
    each NamespaceMap is named after its cluster id and carries spec.desiredMapping and
    status.currentMapping. Conditions of vanished NamespaceMaps are dropped; unchanged ones keep their time.
    """
    meta = obj.get("metadata") or {}
    old = copy.deepcopy(obj.get("status") or {})
    deleting = bool(meta.get("deletionTimestamp"))
    names = {(nm.get("metadata") or {}).get("name") for nm in namespace_maps}
    conditions = {k: v for k, v in (old.get("remoteNamespacesConditions") or {}).items() if k in names}
    required = ready = failed = 0
    for nm in namespace_maps:
        name = (nm.get("metadata") or {}).get("name")
        requested = namespace in ((nm.get("spec") or {}).get("desiredMapping") or {})
        required += requested
        phase = (((nm.get("status") or {}).get("currentMapping") or {}).get(namespace) or {}).get("phase") or None
        ready += phase == c.MAPPING_ACCEPTED
        failed += phase == c.MAPPING_CREATION_LOOP_BACKOFF
        new = condition_list(conditions.get(name), required=requested, mapping_phase=phase, now=now, deleting=deleting)
        if new:
            conditions[name] = new
        else:
            conditions.pop(name, None)
    status: dict[str, Any] = {
        "remoteNamespaceName": remote_namespace_name(namespace, local_cluster_id, obj.get("spec") or {}),
        "offloadingPhase": offloading_phase(deleting=deleting, required=required, ready=ready, failed=failed),
    }
    if conditions:
        status["remoteNamespacesConditions"] = conditions
    if meta.get("generation"):
        status["observedGeneration"] = meta["generation"]
    return status


def _find(conditions: list[dict[str, Any]], ctype: str) -> dict[str, Any] | None:
    for cond in conditions or []:
        if isinstance(cond, dict) and cond.get("type") == ctype:
            return cond
    return None


def cluster_status_table(obj: dict[str, Any]) -> list[dict[str, Any]]:
    """Per-cluster rows from a NamespaceOffloading object, sorted by cluster id.

    Rows: cluster_id, selected, remote_namespace, state (Ready reason or "NotSelected"), reason, message,
    last_transition, stale (status.observedGeneration != metadata.generation).
    """
    meta = obj.get("metadata") or {}
    status = obj.get("status") or {}
    stale = status.get("observedGeneration") != meta.get("generation")
    remote = status.get("remoteNamespaceName") or ""
    rows = []
    for cluster_id, conditions in sorted((status.get("remoteNamespacesConditions") or {}).items()):
        conditions = conditions or []
        req = _find(conditions, c.CONDITION_OFFLOADING_REQUIRED)
        ready = _find(conditions, c.CONDITION_READY)
        selected = bool(req and req.get("status") == "True")
        if ready is not None:
            state = ready.get("reason") or ("Ready" if ready.get("status") == "True" else "Unknown")
            shown = ready
        else:
            state = "NotSelected" if not selected else "Unknown"
            shown = req or {}
        rows.append(
            {
                "cluster_id": cluster_id,
                "selected": selected,
                "remote_namespace": remote,
                "state": state,
                "reason": shown.get("reason"),
                "message": shown.get("message"),
                "last_transition": shown.get("lastTransitionTime"),
                "stale": stale,
            }
        )
    return rows


# --------------------------------------------------------------------------------------------------
# liqoctl offload namespace --output yaml|json.


def _go_requirement(expr: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {"key": expr.get("key", ""), "operator": expr.get("operator", "")}
    if expr.get("values"):
        out["values"] = list(expr["values"])
    return out


def _go_term(term: dict[str, Any]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    if term.get("matchExpressions"):
        out["matchExpressions"] = [_go_requirement(e) for e in term["matchExpressions"]]
    if term.get("matchFields"):
        out["matchFields"] = [_go_requirement(e) for e in term["matchFields"]]
    return out


def manifest(namespace: str, spec: dict[str, Any]) -> dict[str, Any]:
    """The NamespaceOffloading object liqoctl builds, as a dict in Go struct field order."""
    d = apply_defaults(spec)
    go_spec: dict[str, Any] = {FIELD_MAPPING: d[FIELD_MAPPING]}
    if d.get(FIELD_REMOTE_NAME):
        go_spec[FIELD_REMOTE_NAME] = d[FIELD_REMOTE_NAME]
    go_spec[FIELD_POD] = d[FIELD_POD]
    terms = ((d.get(FIELD_SELECTOR) or {}).get("nodeSelectorTerms")) or []
    go_spec[FIELD_SELECTOR] = {"nodeSelectorTerms": [_go_term(t) for t in terms]}
    return {
        "kind": c.KIND,
        "apiVersion": c.API_VERSION,
        "metadata": {"name": c.OFFLOADING_NAME, "namespace": namespace},
        "spec": go_spec,
        "status": {},
    }


def render_manifest(namespace: str, spec: dict[str, Any], output: str = "yaml") -> str:
    """Exactly what `liqoctl offload namespace NS ... --output yaml|json` prints for one namespace.

    YAML: sorted keys followed by a `---` line; JSON: 4-space MarshalIndent in Go field order plus newline.
    """
    obj = manifest(namespace, spec)
    if output == "yaml":
        return go_yaml(obj) + "---\n"
    if output == "json":
        return go_json(obj) + "\n"
    raise ValueError(f"unsupported output format {output!r}")
