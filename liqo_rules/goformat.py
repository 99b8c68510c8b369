"""Byte-exact emulation of Go's json.MarshalIndent and sigs.k8s.io/yaml (go-yaml v2) output."""

from __future__ import annotations

import json
import re
from typing import Any

__all__ = ["go_json", "go_yaml", "yaml_scalar"]


def go_json(obj: Any, indent: str = "    ") -> str:
    """json.MarshalIndent(obj, "", indent): key order as given (use struct order), HTML-safe escapes."""
    text = json.dumps(obj, indent=len(indent), ensure_ascii=False, separators=(",", ": "))
    if indent != " " * len(indent):  # pragma: no cover - only spaces are used by Kubernetes printers
        raise ValueError("only space indentation is supported")
    # Go escapes <, > and & (HTML-safe) and U+2028 / U+2029; inside JSON these only occur in strings.
    return (
        text.replace("<", "\\u003c")
        .replace(">", "\\u003e")
        .replace("&", "\\u0026")
        .replace("\u2028", "\\u2028")
        .replace("\u2029", "\\u2029")
    )


# go-yaml v2 resolves these plain scalars to non-strings, so strings equal to them are double-quoted.
_YAML_SPECIAL = {
    "~",
    "null",
    "Null",
    "NULL",
    "y",
    "Y",
    "yes",
    "Yes",
    "YES",
    "on",
    "On",
    "ON",
    "true",
    "True",
    "TRUE",
    "n",
    "N",
    "no",
    "No",
    "NO",
    "off",
    "Off",
    "OFF",
    "false",
    "False",
    "FALSE",
    ".inf",
    ".Inf",
    ".INF",
    "+.inf",
    "+.Inf",
    "+.INF",
    "-.inf",
    "-.Inf",
    "-.INF",
    ".nan",
    ".NaN",
    ".NAN",
    "<<",
}
_YAML_FLOAT = re.compile(r"^[-+]?(\.[0-9]+|[0-9]+(\.[0-9]*)?)([eE][-+]?[0-9]+)?$")
_YAML_TIMESTAMP = re.compile(
    r"^[0-9]{4}-[0-9]{1,2}-[0-9]{1,2}"
    r"(([Tt]|[ \t]+)[0-9]{1,2}:[0-9]{2}:[0-9]{2}(\.[0-9]*)?([ \t]*(Z|[-+][0-9]{1,2}(:[0-9]{2})?))?)?$"
)
_BASE60 = re.compile(r"^[-+]?[0-9][0-9_]*(?::[0-5]?[0-9])+(?:\.[0-9_]*)?$")
_GO_INT = re.compile(r"^[-+]?(0[xX][0-9a-fA-F]+|0[oO][0-7]+|0[bB][01]+|0[0-7]*|[1-9][0-9]*)$")
_PLAIN_UNSAFE_START = set("-?:,[]{}#&*!|>'\"%@`")


def _resolves_to_non_string(s: str) -> bool:
    if s in _YAML_SPECIAL:
        return True
    if not s or s[0] not in "0123456789+-.":
        return False
    plain = s.replace("_", "")
    if _GO_INT.match(plain):
        return True
    if _YAML_FLOAT.match(plain):
        return True
    if _YAML_TIMESTAMP.match(s):
        return True
    return plain.startswith(("0b", "-0b", "+0b"))


def _plain_allowed(s: str) -> bool:
    if s == "" or s != s.strip(" ") or s[0] in _PLAIN_UNSAFE_START:
        return False
    if ": " in s or " #" in s or s.endswith(":"):
        return False
    return s.isprintable()  # tabs and line breaks are not printable


def _double_quoted(s: str) -> str:
    out = []
    for ch in s:
        if ch == '"':
            out.append('\\"')
        elif ch == "\\":
            out.append("\\\\")
        elif ch == "\n":
            out.append("\\n")
        elif ch == "\t":
            out.append("\\t")
        elif ch == "\r":
            out.append("\\r")
        elif not ch.isprintable():
            code = ord(ch)
            out.append(f"\\x{code:02X}" if code <= 0xFF else f"\\u{code:04X}" if code <= 0xFFFF else f"\\U{code:08X}")
        else:
            out.append(ch)
    return '"' + "".join(out) + '"'


def yaml_scalar(value: Any) -> str:
    """One scalar as go-yaml v2 writes it."""
    if value is None:
        return "null"
    if value is True:
        return "true"
    if value is False:
        return "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, float):  # pragma: no cover - manifests carry no floats
        return repr(value)
    s = str(value)
    if s == "" or _resolves_to_non_string(s) or _BASE60.match(s):
        return _double_quoted(s)
    if not s.isprintable():  # also true of "\n", "\r" and "\t"
        return _double_quoted(s)
    if not _plain_allowed(s):
        return "'" + s.replace("'", "''") + "'"
    return s


class _YamlLines:
    """The lines go-yaml writes for one document. A string is formatted once however often it occurs
    (a manifest at the selector limits has 15,000 scalars, 2,600 of them distinct)."""

    def __init__(self) -> None:
        self.lines: list[str] = []
        self.strings: dict[str, str] = {}

    def scalar(self, value: Any) -> str:
        if not isinstance(value, str):
            return yaml_scalar(value)
        text = self.strings.get(value)
        if text is None:
            text = self.strings[value] = yaml_scalar(value)
        return text

    def inline(self, value: Any) -> str:
        if isinstance(value, dict):
            return "{}"
        if isinstance(value, list):
            return "[]"
        return self.scalar(value)

    def node(self, obj: Any, indent: int) -> None:
        pad = " " * indent
        lines = self.lines
        if isinstance(obj, dict):
            for key in sorted(obj, key=lambda k: str(k)):
                value = obj[key]
                k = self.scalar(str(key))
                if isinstance(value, dict) and value:
                    lines.append(f"{pad}{k}:")
                    self.node(value, indent + 2)
                elif isinstance(value, list) and value:
                    lines.append(f"{pad}{k}:")
                    self.node(value, indent)
                else:
                    lines.append(f"{pad}{k}: {self.inline(value)}")
        elif isinstance(obj, list):
            for item in obj:
                if isinstance(item, (dict, list)) and item:
                    first = len(lines)
                    self.node(item, indent + 2)  # its first line then moves up next to the dash
                    lines[first] = f"{pad}- {lines[first][indent + 2 :]}"
                else:
                    lines.append(f"{pad}- {self.inline(item)}")
        else:
            lines.append(pad + self.inline(obj))


def go_yaml(obj: Any) -> str:
    """sigs.k8s.io/yaml.Marshal(obj): sorted keys, 2-space indent, unindented sequences, [] and {}."""
    document = _YamlLines()
    if isinstance(obj, (dict, list)) and not obj:
        return document.inline(obj) + "\n"  # an empty document is "{}" or "[]", not a blank line
    document.node(obj, 0)
    return "\n".join(document.lines) + "\n"
