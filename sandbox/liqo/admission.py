"""Admission of NamespaceOffloadings: the CRD's structural defaults and schema, and Liqo's validating
webhook (liqo-semantics.md a.2, b.2). The rules come from `liqo_rules`; this module plugs them into
the API server's defaulting, validation and admission hooks."""

from __future__ import annotations

from liqo_rules import constants as c
from liqo_rules.admission import webhook_admission
from liqo_rules.schema import schema_errors
from liqo_rules.spec import apply_defaults
from sandbox.apiserver import ApiServer
from sandbox.errors import ApiError
from sandbox.kinds import NAMESPACE_OFFLOADINGS, Kind
from sandbox.objects import Obj


def install(server: ApiServer) -> None:
    server.admission.defaulters[NAMESPACE_OFFLOADINGS.key] = defaulter
    server.admission.validators[NAMESPACE_OFFLOADINGS.key] = validator
    server.admission.webhooks.append(admission)


def defaulter(obj: Obj) -> None:
    """The CRD's structural defaults (applied on every write, like the API server)."""
    if isinstance(obj.get("spec"), dict):
        obj["spec"] = apply_defaults(obj["spec"])


def _reason(detail: str) -> str:
    if detail.startswith("Unsupported value"):
        return "FieldValueNotSupported"
    if detail.startswith("Required value"):
        return "FieldValueRequired"
    return "FieldValueInvalid"


def validator(obj: Obj, old: Obj | None) -> list[dict[str, str]]:
    """The CRD's structural schema, as the causes of a 422 Invalid."""
    if "spec" not in obj or obj["spec"] is None:
        return [{"field": "spec", "reason": "FieldValueRequired", "message": "Required value"}]
    causes = []
    for problem in schema_errors(obj["spec"]):
        field_path, _, detail = problem.message.partition(": ")
        if not detail:
            field_path, detail = "spec." + problem.field, problem.message
        causes.append({"field": field_path, "reason": _reason(detail), "message": detail})
    return causes


def _skipped(obj: Obj | None) -> bool:
    return ((obj or {}).get("metadata") or {}).get("labels", {}).get(c.WEBHOOK_SKIP_LABEL) == "true"


def admission(kind: Kind, operation: str, obj: Obj, old: Obj | None) -> list[str]:
    """The validating webhook nsoff.validate.liqo.io (objectSelector: liqo.io/webhook-skip NotIn [true])."""
    if kind is not NAMESPACE_OFFLOADINGS:
        return []
    # The object selector is evaluated on the new and the old object; the webhook runs if either matches.
    if _skipped(obj) and (old is None or _skipped(old)):
        return []
    name = obj["metadata"].get("name", "")
    denials, warnings = webhook_admission(
        operation, name, obj.get("spec") or {}, (old or {}).get("spec") if old is not None else None
    )
    if denials:
        raise ApiError(
            403,
            "Forbidden",
            f'admission webhook "{c.WEBHOOK_NAME}" denied the request: {denials[0]}',
            {"name": name, "group": kind.group, "kind": kind.plural},
        )
    return warnings
