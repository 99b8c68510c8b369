"""The API server's state and the checks every write makes (part of ApiServer)."""

from __future__ import annotations

from sandbox import errors, strict
from sandbox.apicommon import DNS_LABEL, DNS_SUBDOMAIN, LABEL_MSG, SUBDOMAIN_MSG, Admission, Defaulter, Validator
from sandbox.errors import ApiError
from sandbox.kinds import NAMESPACES, Kind
from sandbox.store import Obj, Store


class CheckedServer:
    """The API server's state and the checks every write makes (names, namespaces, type meta, validation,
    admission)."""

    def __init__(self, store: Store) -> None:
        self.store = store
        self.defaulters: dict[str, Defaulter] = {}
        self.validators: dict[str, Validator] = {}
        self.admission: list[Admission] = []

    # -- helpers ---------------------------------------------------------------------------------
    def _check_name(self, kind: Kind, name: str) -> None:
        if kind is NAMESPACES:
            ok, msg, limit = DNS_LABEL.fullmatch(name), LABEL_MSG, 63
        else:
            ok, msg, limit = DNS_SUBDOMAIN.fullmatch(name), SUBDOMAIN_MSG, 253
        if not ok or len(name) > limit:
            if len(name) > limit:
                msg = f"must be no more than {limit} characters"
            raise errors.invalid(
                kind,
                name,
                [
                    {
                        "field": "metadata.name",
                        "reason": "FieldValueInvalid",
                        "message": f'Invalid value: "{name}": {msg}',
                    }
                ],
            )

    def _check_namespace(self, kind: Kind, namespace: str, name: str) -> None:
        if not kind.namespaced:
            return
        ns = self.store.get(NAMESPACES, "", namespace)
        if ns is None:
            raise errors.not_found(NAMESPACES, namespace)
        if ns["metadata"].get("deletionTimestamp"):
            raise ApiError(
                403,
                "Forbidden",
                f'{kind.qualified} "{name}" is forbidden: unable to create new content in namespace {namespace} '
                f"because it is being terminated",
                {
                    "name": name,
                    "group": kind.group,
                    "kind": kind.plural,
                    "causes": [
                        {
                            "reason": "NamespaceTerminating",
                            "message": f"namespace {namespace} is being terminated",
                            "field": "metadata.namespace",
                        }
                    ],
                },
            )

    def _type_meta(self, kind: Kind, obj: Obj) -> None:
        api_version, body_kind = obj.get("apiVersion"), obj.get("kind")
        if body_kind and body_kind != kind.kind:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected "
                f"API version ({kind.api_version})"
                if api_version != kind.api_version
                else f"the kind in the data ({body_kind}) does not match the expected kind ({kind.kind})"
            )
        if api_version and api_version != kind.api_version:
            raise errors.bad_request(
                f"the API version in the data ({api_version}) does not match the expected "
                f"API version ({kind.api_version})"
            )
        obj["apiVersion"], obj["kind"] = kind.api_version, kind.kind

    def _decode(self, kind: Kind, obj: Obj, field_validation: str, duplicates: list[str] | None) -> list[str]:
        """Strict decoding and structural pruning (sandbox.strict): the warnings, or 400 under Strict."""
        unknown = strict.prune(kind, obj)
        return strict.strict_problems(kind, field_validation, unknown, duplicates or [])

    def _default(self, kind: Kind, obj: Obj) -> None:
        strict.apply_defaults(kind, obj)
        if kind.key in self.defaulters:
            self.defaulters[kind.key](obj)

    def _validate(self, kind: Kind, obj: Obj, old: Obj | None) -> None:
        causes = strict.metadata_causes(obj) + strict.schema_causes(kind, obj, old)
        validator = self.validators.get(kind.key)
        if validator:
            causes += validator(obj, old)
        if causes:
            raise errors.invalid(kind, obj["metadata"].get("name", ""), causes)

    def _admit(self, kind: Kind, op: str, obj: Obj, old: Obj | None) -> list[str]:
        warnings: list[str] = []
        for hook in self.admission:
            warnings += hook(kind, op, obj, old)
        return warnings
