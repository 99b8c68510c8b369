"""PATCH: a merge, JSON or strategic-merge patch applied to the stored object, or server-side apply
(the applied configuration merged by field ownership, `apply`); then the update path (`Writer.write`)."""

from __future__ import annotations

from typing import Any

import yaml

from sandbox import errors, strict
from sandbox.apicommon import PATCH_APPLY, PATCH_APPLY_CBOR, PATCH_JSON, PATCH_MERGE, PATCH_STRATEGIC, Result, now_iso
from sandbox.apiserver.admission import check_type_meta, decode
from sandbox.apiserver.apply import server_side_apply
from sandbox.apiserver.patch import json_patch, merge_patch, strategic_merge_patch
from sandbox.apiserver.writes import Writer
from sandbox.errors import ApiError
from sandbox.kinds import Kind
from sandbox.objects import clone
from sandbox.store import Store

UNSUPPORTED_PATCH = (
    f"the body of the request was in an unknown format - accepted media types include: "
    f"{PATCH_JSON}, {PATCH_MERGE}, {PATCH_APPLY}, {PATCH_APPLY_CBOR}"
)


class Patcher:
    """Patches and server-side apply, finished by the writer's update path."""

    def __init__(self, store: Store, writer: Writer) -> None:
        self.store = store
        self.writer = writer

    def patch(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        patch_type: str,
        body: bytes | Any,
        *,
        manager: str,
        subresource: str = "",
        force: bool = False,
        dry_run: bool = False,
        field_validation: str = strict.IGNORE,
        duplicates: list[str] | None = None,
    ) -> Result:
        if patch_type in (PATCH_APPLY, PATCH_APPLY_CBOR):
            return self.apply(
                kind,
                namespace,
                name,
                body,
                manager=manager,
                subresource=subresource,
                force=force,
                dry_run=dry_run,
                field_validation=field_validation,
            )
        if patch_type not in (PATCH_MERGE, PATCH_JSON, PATCH_STRATEGIC) or (
            patch_type == PATCH_STRATEGIC and kind.custom
        ):
            raise ApiError(415, "UnsupportedMediaType", UNSUPPORTED_PATCH)
        with self.store.lock:
            current = self.store.must_get(kind, namespace, name)
            doc = clone(current)
            if patch_type == PATCH_JSON:
                patched = json_patch(doc, body)
            elif patch_type == PATCH_MERGE:
                if not isinstance(body, dict):
                    raise errors.bad_request("merge patch must be a JSON object")
                patched = merge_patch(doc, body)
            else:
                if not isinstance(body, dict):
                    raise errors.bad_request("strategic merge patch must be a JSON object")
                patched = strategic_merge_patch(doc, body)
            if not isinstance(patched, dict):
                raise errors.bad_request("the patched object is not a JSON object")
            meta = patched.setdefault("metadata", {})
            rv = meta.get("resourceVersion")
            if rv and rv != current["metadata"]["resourceVersion"]:
                raise errors.conflict(kind, name)
            if meta.get("name") != name:
                raise errors.invalid(
                    kind,
                    name,
                    [
                        {
                            "field": "metadata.name",
                            "reason": "FieldValueInvalid",
                            "message": "Invalid value: the name cannot be changed",
                        }
                    ],
                )
            check_type_meta(kind, patched)
            decoded = decode(kind, patched, field_validation, duplicates)
            result = self.writer.write(
                kind, current, patched, manager=manager, subresource=subresource, dry_run=dry_run
            )
            result.warnings[:0] = decoded
            return result

    def apply(
        self,
        kind: Kind,
        namespace: str,
        name: str,
        body: bytes | Any,
        *,
        manager: str,
        subresource: str = "",
        force: bool = False,
        dry_run: bool = False,
        field_validation: str = strict.IGNORE,
    ) -> Result:
        if not manager:
            raise errors.bad_request("PATCH requests must have fieldManager specified for apply patches")
        if isinstance(body, (bytes, str)):
            try:
                applied = yaml.safe_load(body)
            except yaml.YAMLError as exc:
                raise errors.bad_request(f"error decoding YAML: {exc}") from None
        else:
            applied = body
        if not isinstance(applied, dict):
            raise errors.bad_request("the applied configuration must be an object")
        meta = applied.get("metadata") or {}
        if not applied.get("apiVersion") or not applied.get("kind"):
            raise errors.bad_request("invalid object type: apiVersion and kind must be set")
        applied = clone(applied)
        decoded = decode(kind, applied, field_validation, None)
        meta = applied.get("metadata") or {}
        if meta.get("name") and meta["name"] != name:
            raise errors.bad_request(
                f"the name of the object ({meta['name']}) does not match the name on the URL ({name})"
            )
        with self.store.lock:
            current = self.store.get(kind, namespace, name)
            if current is None:
                if subresource:
                    raise errors.not_found(kind, name)
                merged = server_side_apply(None, applied, kind, manager, force, now_iso())
                merged.setdefault("metadata", {})
                merged["metadata"]["name"] = name
                if kind.namespaced:
                    merged["metadata"]["namespace"] = namespace
                managed = merged["metadata"].pop("managedFields")
                result = self.writer.create(kind, namespace, merged, manager=manager, dry_run=dry_run, managed=managed)
                result.warnings[:0] = decoded
                return result
            check_type_meta(kind, dict(applied))
            merged = server_side_apply(current, applied, kind, manager, force, now_iso(), subresource=subresource)
            rv = meta.get("resourceVersion")
            if rv and rv != current["metadata"]["resourceVersion"]:
                raise errors.conflict(kind, name)
            merged["apiVersion"], merged["kind"] = kind.api_version, kind.kind
            result = self.writer.write(
                kind,
                current,
                merged,
                manager=manager,
                subresource=subresource,
                dry_run=dry_run,
                operation="Apply",
                managed_done=True,
            )
            result.warnings[:0] = decoded
            return result
