"""Query parameters of list / watch / deletecollection: label and field selectors, continue tokens."""

from __future__ import annotations

import base64
import binascii
import json
from collections.abc import Callable
from typing import Any

from liqo_rules.selectors.parse import parse_requirements
from liqo_rules.selectors.requirements import SelectorError
from sandbox import errors
from sandbox.kinds import Kind
from sandbox.objects import Obj


# -- selectors -------------------------------------------------------------------------------------
def compile_label_selector(text: str) -> Callable[[Obj], bool]:
    if not text:
        return lambda obj: True
    try:
        requirements = parse_requirements(text)
    except SelectorError as err:
        raise errors.bad_request(f"unable to parse requirement: {err}") from None

    def predicate(obj: Obj) -> bool:
        labels = (obj.get("metadata") or {}).get("labels") or {}
        return all(r.matches(labels) for r in requirements)

    return predicate


def field_value(obj: Obj, path: str) -> str:
    node: Any = obj
    for part in path.split("."):
        if not isinstance(node, dict):
            return ""
        node = node.get(part)
    if node is None:
        return "false" if path == "spec.unschedulable" else ""
    if isinstance(node, bool):
        return "true" if node else "false"
    return str(node)


def compile_field_selector(kind: Kind, text: str) -> Callable[[Obj], bool]:
    if not text:
        return lambda obj: True
    requirements: list[tuple[str, str, str]] = []
    for clause in text.split(","):
        clause = clause.strip()
        if not clause:
            continue
        for op in ("!=", "==", "="):
            if op in clause:
                key, value = clause.split(op, 1)
                requirements.append((key.strip(), "!=" if op == "!=" else "=", value.strip()))
                break
        else:
            raise errors.bad_request(f"invalid selector: '{text}'; can't understand '{clause}'")
    allowed = kind.allowed_field_selectors()
    for key, _, _ in requirements:
        if key not in allowed:
            raise errors.bad_request(f"field label not supported: {key}")

    def predicate(obj: Obj) -> bool:
        for key, op, value in requirements:
            actual = field_value(obj, key)
            if (actual == value) != (op == "="):
                return False
        return True

    return predicate


# -- continue tokens -------------------------------------------------------------------------------
def encode_continue(rv: int, key: tuple[str, str]) -> str:
    raw = json.dumps({"v": "meta.k8s.io/v1", "rv": rv, "start": list(key)}, separators=(",", ":"))
    return base64.urlsafe_b64encode(raw.encode()).decode().rstrip("=")


def decode_continue(token: str) -> tuple[int, tuple[str, str]]:
    try:
        padded = token + "=" * (-len(token) % 4)
        data = json.loads(base64.urlsafe_b64decode(padded.encode()))
        return int(data["rv"]), (str(data["start"][0]), str(data["start"][1]))
    except (ValueError, KeyError, IndexError, TypeError, binascii.Error):
        raise errors.bad_request("continue key is not valid: illegal base64 data or incorrect format") from None
