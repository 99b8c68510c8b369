"""Kubernetes' create and update strategies: what the server sets on a new object (uid, timestamps,
generation, a namespace's spec and status), what an update keeps of the stored one (identity, the status
behind the status subresource, managedFields, no new finalizers once deleting), the generation bumped on
spec changes only, and the rules for names and namespaces."""

from __future__ import annotations

import random
import re
import string
import uuid
from typing import Any

from sandbox import errors
from sandbox.apicommon import now_iso
from sandbox.errors import ApiError
from sandbox.kinds import NAMESPACES, Kind
from sandbox.objects import Obj, clone
from sandbox.store import Store

DNS_LABEL = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?")
DNS_SUBDOMAIN = re.compile(r"[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*")
LABEL_MSG = (
    "a lowercase RFC 1123 label must consist of lower case alphanumeric characters or '-', and must "
    "start and end with an alphanumeric character (e.g. 'my-name',  or '123-abc', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?')"
)
SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character (e.g. 'example.com', regex used for "
    "validation is '[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*')"
)
# Metadata only the server sets: dropped from a new object's body.
SERVER_META = (
    "uid",
    "resourceVersion",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "generation",
    "selfLink",
    "managedFields",
)
# Metadata an update cannot change: carried over from the stored object.
KEPT_ON_UPDATE = (
    "uid",
    "creationTimestamp",
    "deletionTimestamp",
    "deletionGracePeriodSeconds",
    "namespace",
    "name",
    "generation",
)


def spec_part(obj: Obj) -> dict[str, Any]:
    """Everything but metadata and status: what a change of bumps the generation."""
    return {k: v for k, v in obj.items() if k not in ("metadata", "status", "apiVersion", "kind")}


def comparable(obj: Obj) -> Obj:
    """The object without what every write changes (resourceVersion, managedFields): equal means a no-op."""
    meta = {k: v for k, v in (obj.get("metadata") or {}).items() if k not in ("resourceVersion", "managedFields")}
    return dict(obj, metadata=meta)


# -- names and namespaces ------------------------------------------------------------------------
def check_name(kind: Kind, name: str) -> None:
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
            [{"field": "metadata.name", "reason": "FieldValueInvalid", "message": f'Invalid value: "{name}": {msg}'}],
        )


def check_namespace(store: Store, kind: Kind, namespace: str, name: str) -> None:
    """A namespaced object needs its namespace to exist and not be terminating (caller holds the lock)."""
    if not kind.namespaced:
        return
    ns = store.get(NAMESPACES, "", namespace)
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


# -- create --------------------------------------------------------------------------------------
def prepare_create(kind: Kind, obj: Obj, namespace: str) -> tuple[str, str]:
    """Set what the server sets on a new object (in place): its namespace and name (from generateName),
    uid, creationTimestamp, generation, a namespace's spec and status. Returns (namespace, name)."""
    meta = obj["metadata"]
    if kind.namespaced:
        body_ns = meta.get("namespace")
        if body_ns and namespace and body_ns != namespace:
            raise errors.bad_request(
                "the namespace of the provided object does not match the namespace sent on the request"
            )
        namespace = namespace or body_ns or ""
        meta["namespace"] = namespace
    else:
        meta.pop("namespace", None)
    if not meta.get("name") and meta.get("generateName"):
        suffix = "".join(random.choice(string.ascii_lowercase + string.digits) for _ in range(5))
        meta["name"] = meta["generateName"] + suffix
    name = meta.get("name") or ""
    if not name:
        raise errors.invalid(
            kind,
            "",
            [
                {
                    "field": "metadata.name",
                    "reason": "FieldValueRequired",
                    "message": "Required value: name or generateName is required",
                }
            ],
        )
    check_name(kind, name)
    for key in SERVER_META:
        meta.pop(key, None)
    meta["uid"] = str(uuid.uuid4())
    meta["creationTimestamp"] = now_iso()
    if kind.generation:
        meta["generation"] = 1
    if kind.status_subresource and kind.custom:
        obj.pop("status", None)
    if kind is NAMESPACES:
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = name
        obj["spec"] = {"finalizers": ["kubernetes"]}
        obj["status"] = {"phase": "Active"}
    return namespace, name


# -- update --------------------------------------------------------------------------------------
def prepare_update(kind: Kind, current: Obj, new: Obj, *, subresource: str, managed_done: bool) -> Obj:
    """The object an update of `current` into `new` stores (before defaulting and validation): a status
    write changes only the status, a main-resource write never the status; identity and timestamps are
    kept; managedFields carry over unless the request sets them (or apply computed them:
    `managed_done`); no finalizer can be added once the object is being deleted."""
    name = current["metadata"]["name"]
    meta = new.setdefault("metadata", {})
    old_meta = current["metadata"]
    if subresource == "status":
        status = new.get("status")
        managed = meta.get("managedFields")
        new = clone(current)
        if status is None:
            new.pop("status", None)
        else:
            new["status"] = status
        if managed_done:
            new["metadata"]["managedFields"] = managed
        meta = new["metadata"]
    elif kind.status_subresource:
        if "status" in current:
            new["status"] = clone(current["status"])
        else:
            new.pop("status", None)
    for key in KEPT_ON_UPDATE:
        if key in old_meta:
            meta[key] = old_meta[key]
        else:
            meta.pop(key, None)
    if not managed_done:
        given = meta.get("managedFields")
        # A request that sets managedFields explicitly replaces them (kubectl's client-side to
        # server-side apply migration relies on this); otherwise the stored ones carry over.
        if not (isinstance(given, list) and given and given != old_meta.get("managedFields")):
            meta["managedFields"] = clone(old_meta.get("managedFields") or [])
    if kind is NAMESPACES:
        new["spec"] = clone(current.get("spec") or {})
        meta.setdefault("labels", {})["kubernetes.io/metadata.name"] = name
        if subresource != "status":
            new["status"] = clone(current.get("status") or {})
    if old_meta.get("deletionTimestamp"):
        _no_new_finalizers(kind, name, old_meta, meta)
    return new


def _no_new_finalizers(kind: Kind, name: str, old_meta: Obj, meta: Obj) -> None:
    added = [f for f in meta.get("finalizers") or [] if f not in (old_meta.get("finalizers") or [])]
    if added:
        listing = ", ".join(f'"{f}"' for f in added)
        raise errors.invalid(
            kind,
            name,
            [
                {
                    "field": "metadata.finalizers",
                    "reason": "FieldValueForbidden",
                    "message": f"Forbidden: no new finalizers can be added if the object is being deleted, "
                    f"found new finalizers []string{{{listing}}}",
                }
            ],
        )


def bump_generation(kind: Kind, current: Obj, new: Obj) -> None:
    """The generation goes up by one when the spec (anything but metadata and status) changed."""
    if kind.generation and spec_part(new) != spec_part(current):
        new["metadata"]["generation"] = int(current["metadata"].get("generation") or 1) + 1
