"""The write path's shared vocabulary, used by the API server, its HTTP front end and the simulated
controllers: patch content types, timestamps, the result of a write and the admission hook types."""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from dataclasses import dataclass, field

from sandbox.kinds import Kind
from sandbox.objects import Obj

PATCH_MERGE = "application/merge-patch+json"
PATCH_JSON = "application/json-patch+json"
PATCH_STRATEGIC = "application/strategic-merge-patch+json"
PATCH_APPLY = "application/apply-patch+yaml"
PATCH_APPLY_CBOR = "application/apply-patch+cbor"


def now_iso() -> str:
    return dt.datetime.now(dt.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")


@dataclass
class Result:
    obj: Obj
    warnings: list[str] = field(default_factory=list)
    created: bool = False


# (kind, operation CREATE|UPDATE, new object, old object or None) -> warnings; raise ApiError to deny.
AdmissionHook = Callable[[Kind, str, Obj, "Obj | None"], list[str]]
Defaulter = Callable[[Obj], None]
# (new object, old object or None) -> list of causes {field, message, reason}
Validator = Callable[[Obj, "Obj | None"], list[dict[str, str]]]
