"""Label keys, label values and integers as apimachinery validates them (validation, strconv.ParseInt)."""

from __future__ import annotations

import re

_NAME_RE = re.compile(r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN_RE = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*")
_INT_RE = re.compile(r"[+-]?[0-9]+")
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_VALUE_MSG = "a valid label must be an empty string or " + _NAME_MSG.removeprefix("must ")
_SUBDOMAIN_FMT = "[a-z0-9]([-a-z0-9]*[a-z0-9])?(\\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*"
_SUBDOMAIN_MSG = (
    "a lowercase RFC 1123 subdomain must consist of lower case alphanumeric characters, '-' or '.', "
    "and must start and end with an alphanumeric character"
)


def _regex_error(msg: str, fmt: str, *examples: str) -> str:
    """apimachinery RegexError (including its doubled spaces)."""
    if not examples:
        return f"{msg} (regex used for validation is '{fmt}')"
    shown = " or ".join(f"'{e}', " for e in examples)
    return f"{msg} (e.g. {shown}regex used for validation is '{fmt}')"


def byte_len(s: str) -> int:
    """Length in bytes, as Go's len() on a string."""
    return len(s.encode("utf-8", "surrogatepass"))


def label_key_errors(key: str) -> list[str]:
    """The problems of a label key (apimachinery IsLabelKey, v0.35 messages); empty when valid."""
    errs: list[str] = []
    parts = key.split("/")
    if len(parts) == 1:
        name = parts[0]
    elif len(parts) == 2:
        prefix, name = parts
        if not prefix:
            errs.append("prefix part must be non-empty")
        else:
            if byte_len(prefix) > 253:
                errs.append("prefix part must be no more than 253 bytes")
            if not _DNS1123_SUBDOMAIN_RE.fullmatch(prefix):
                errs.append("prefix part " + _regex_error(_SUBDOMAIN_MSG, _SUBDOMAIN_FMT, "example.com"))
    else:
        return [
            "a valid label key "
            + _regex_error(_NAME_MSG, _NAME_FMT, "MyName", "my.name", "123-abc")
            + " with an optional DNS subdomain prefix and '/' (e.g. 'example.com/MyName')"
        ]
    if not name:
        errs.append("name part must be non-empty")
    elif byte_len(name) > 63:
        errs.append("name part must be no more than 63 bytes")
    if not _NAME_RE.fullmatch(name):
        errs.append("name part " + _regex_error(_NAME_MSG, _NAME_FMT, "MyName", "my.name", "123-abc"))
    return errs


def label_value_errors(value: str) -> list[str]:
    """The problems of a label value (apimachinery IsLabelValue); empty when valid."""
    errs: list[str] = []
    if byte_len(value) > 63:
        errs.append("must be no more than 63 bytes")
    if value and not _NAME_RE.fullmatch(value):
        errs.append(_regex_error(_VALUE_MSG, "(" + _NAME_FMT + ")?", "MyValue", "my_value", "12345"))
    return errs


def is_label_key(key: str) -> bool:
    """Whether key is a valid Kubernetes label key."""
    return isinstance(key, str) and not label_key_errors(key)


def is_label_value(value: str) -> bool:
    """Whether value is a valid Kubernetes label value."""
    return isinstance(value, str) and not label_value_errors(value)


def parse_go_int64(text: str) -> int | None:
    """strconv.ParseInt(text, 10, 64): the integer, or None where Go returns an error."""
    if not isinstance(text, str) or not _INT_RE.fullmatch(text):
        return None
    value = int(text)
    if value < _INT64_MIN or value > _INT64_MAX:
        return None
    return value
