"""What a body passes on its way into the store, in kube-apiserver's order: decoding (type meta, the
request's `fieldValidation`, structural pruning against the CRD schema), defaulting, validation (ObjectMeta,
the CRD schema and registered validators: 422 Invalid) and validating admission webhooks (a denial or
warnings).

`Admission` holds the hooks registered per kind; the Liqo simulation plugs its defaulter, validator and
webhook in (`sandbox.liqo.admission.install`)."""

from __future__ import annotations

from sandbox import errors, strict
from sandbox.apicommon import AdmissionHook, Defaulter, Validator
from sandbox.kinds import Kind
from sandbox.objects import Obj


def check_type_meta(kind: Kind, obj: Obj) -> None:
    """The body's apiVersion and kind must be the URL's (400 otherwise); both are set when absent."""
    api_version, body_kind = obj.get("apiVersion"), obj.get("kind")
    if body_kind and body_kind != kind.kind:
        raise errors.bad_request(
            f"the API version in the data ({api_version}) does not match the expected API version ({kind.api_version})"
            if api_version != kind.api_version
            else f"the kind in the data ({body_kind}) does not match the expected kind ({kind.kind})"
        )
    if api_version and api_version != kind.api_version:
        raise errors.bad_request(
            f"the API version in the data ({api_version}) does not match the expected API version ({kind.api_version})"
        )
    obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind


def decode(kind: Kind, obj: Obj, field_validation: str, duplicates: list[str] | None) -> list[str]:
    """Strict decoding and structural pruning (sandbox.strict), in place: the warnings, or 400 under Strict."""
    unknown = strict.prune(kind, obj)
    return strict.strict_problems(kind, field_validation, unknown, duplicates or [])


class Admission:
    """Defaulting, validation and validating webhooks, with the hooks registered per kind."""

    def __init__(self) -> None:
        self.defaulters: dict[str, Defaulter] = {}
        self.validators: dict[str, Validator] = {}
        self.webhooks: list[AdmissionHook] = []

    def default(self, kind: Kind, obj: Obj, subresource: str = "") -> None:
        """The schema's defaults; a write of the status subresource gets no registered defaulter."""
        strict.apply_defaults(kind, obj)
        if subresource != "status" and kind.key in self.defaulters:
            self.defaulters[kind.key](obj)

    def validate(self, kind: Kind, obj: Obj, old: Obj | None) -> None:
        """422 Invalid with every cause ObjectMeta's checks, the schema and the kind's validator find."""
        causes = strict.metadata_causes(obj) + strict.schema_causes(kind, obj, old)
        validator = self.validators.get(kind.key)
        if validator:
            causes += validator(obj, old)
        if causes:
            raise errors.invalid(kind, obj["metadata"].get("name", ""), causes)

    def admit(self, kind: Kind, operation: str, obj: Obj, old: Obj | None) -> list[str]:
        """Run the webhooks (CREATE or UPDATE): their warnings; a denial raises."""
        warnings: list[str] = []
        for hook in self.webhooks:
            warnings += hook(kind, operation, obj, old)
        return warnings
