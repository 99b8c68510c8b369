"""One selector clause (apimachinery labels.Requirement): operators, validation, matching, errors."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from liqo_rules import constants as c
from liqo_rules.selectors.labels import label_key_errors, label_value_errors, parse_go_int64


class SelectorError(ValueError):
    """An invalid selector string or NodeSelector; says what is wrong and where."""

    def __init__(
        self,
        message: str,
        *,
        text: str | None = None,
        position: int | None = None,
        token: str | None = None,
        path: str | None = None,
    ) -> None:
        super().__init__(message)
        self.message = message
        self.text = text
        self.position = position
        self.token = token
        self.path = path


class UnformattableTermError(SelectorError):
    """A NodeSelectorTerm that cannot be written as a selector string (e.g. it has matchFields)."""


# Go selection operators, in the spelling apimachinery uses internally.
SEL_IN = "in"
SEL_NOT_IN = "notin"
SEL_EQUALS = "="
SEL_DOUBLE_EQUALS = "=="
SEL_NOT_EQUALS = "!="
SEL_EXISTS = "exists"
SEL_DOES_NOT_EXIST = "!"
SEL_GT = "gt"
SEL_LT = "lt"

SEL_TO_NODE_OP = {
    SEL_IN: c.OP_IN,
    SEL_EQUALS: c.OP_IN,
    SEL_DOUBLE_EQUALS: c.OP_IN,
    SEL_NOT_IN: c.OP_NOT_IN,
    SEL_NOT_EQUALS: c.OP_NOT_IN,
    SEL_EXISTS: c.OP_EXISTS,
    SEL_DOES_NOT_EXIST: c.OP_DOES_NOT_EXIST,
    SEL_GT: c.OP_GT,
    SEL_LT: c.OP_LT,
}
NODE_OP_TO_SEL = {
    c.OP_IN: SEL_IN,
    c.OP_NOT_IN: SEL_NOT_IN,
    c.OP_EXISTS: SEL_EXISTS,
    c.OP_DOES_NOT_EXIST: SEL_DOES_NOT_EXIST,
    c.OP_GT: SEL_GT,
    c.OP_LT: SEL_LT,
}


@dataclass(frozen=True)
class Requirement:
    """One parsed selector clause: key, apimachinery operator, sorted distinct values, source position."""

    key: str
    operator: str
    values: tuple[str, ...] = ()
    position: int = field(default=0, compare=False)

    @property
    def node_operator(self) -> str:
        """The NodeSelectorRequirement operator this clause corresponds to."""
        return SEL_TO_NODE_OP[self.operator]

    def as_node_requirement(self) -> dict[str, Any]:
        """{"key", "operator", "values"} NodeSelectorRequirement dict."""
        return {"key": self.key, "operator": self.node_operator, "values": list(self.values)}

    def matches(self, labels: dict[str, str]) -> bool:
        """apimachinery Requirement.Matches."""
        return requirement_matches(self.key, self.operator, self.values, labels)

    def __str__(self) -> str:
        """apimachinery Requirement.String()."""
        op = self.operator
        if op == SEL_EXISTS:
            return self.key
        if op == SEL_DOES_NOT_EXIST:
            return "!" + self.key
        joined = ",".join(sorted(self.values))  # code point order is UTF-8 byte order, as Go sorts
        if op in (SEL_IN, SEL_NOT_IN):
            return f"{self.key} {op} ({joined})"
        sym = {SEL_GT: ">", SEL_LT: "<"}.get(op, op)
        return f"{self.key}{sym}{joined}"


def requirement_matches(key: str, op: str, values: tuple[str, ...] | list[str], labels: dict[str, str]) -> bool:
    if op in (SEL_IN, SEL_EQUALS, SEL_DOUBLE_EQUALS):
        return key in labels and labels[key] in values
    if op in (SEL_NOT_IN, SEL_NOT_EQUALS):
        return key not in labels or labels[key] not in values
    if op == SEL_EXISTS:
        return key in labels
    if op == SEL_DOES_NOT_EXIST:
        return key not in labels
    if op in (SEL_GT, SEL_LT):
        if key not in labels:
            return False
        have = parse_go_int64(labels[key])
        if have is None or len(values) != 1:
            return False
        want = parse_go_int64(values[0])
        if want is None:
            return False
        return have > want if op == SEL_GT else have < want
    return False


def _join(path: str, child: str) -> str:
    return f"{path}.{child}" if path else child


def requirement_errors(key: Any, op: str, values: list[Any], path: str = "") -> list[str]:
    """apimachinery NewRequirement validation: one "<field path>: <problem>" message per Go field error.

    `op` is an apimachinery operator: in, notin, =, ==, !=, exists, !, gt, lt.
    """
    errs: list[str] = []
    if not isinstance(key, str):
        errs.append(f"{_join(path, 'key')}: Invalid value: {key!r}: must be a string")
    else:
        key_errs = label_key_errors(key)
        if key_errs:
            errs.append(f"{_join(path, 'key')}: Invalid value: {quote(key)}: {'; '.join(key_errs)}")
    vpath = _join(path, "values")
    if op in (SEL_IN, SEL_NOT_IN):
        if not values:
            errs.append(f"{vpath}: Invalid value: []: for 'in', 'notin' operators, values set can't be empty")
    elif op in (SEL_EQUALS, SEL_DOUBLE_EQUALS, SEL_NOT_EQUALS):
        if len(values) != 1:
            errs.append(
                f"{vpath}: Invalid value: {quote_list(values)}: exact-match compatibility requires one single value"
            )
    elif op in (SEL_EXISTS, SEL_DOES_NOT_EXIST):
        if values:
            errs.append(
                f"{vpath}: Invalid value: {quote_list(values)}: values set must be empty for exists and does not exist"
            )
    elif op in (SEL_GT, SEL_LT):
        if len(values) != 1:
            errs.append(
                f"{vpath}: Invalid value: {quote_list(values)}: for 'Gt', 'Lt' operators, exactly one value is required"
            )
        for i, v in enumerate(values):
            if not isinstance(v, str) or parse_go_int64(v) is None:
                errs.append(
                    f"{vpath}[{i}]: Invalid value: {quote(v)}: for 'Gt', 'Lt' operators, the value must be an integer"
                )
    else:
        errs.append(
            f"{_join(path, 'operator')}: Unsupported value: {quote(op)}: supported values: "
            '"!", "!=", "=", "==", "exists", "gt", "in", "lt", "notin"'
        )
    for i, v in enumerate(values):
        if not isinstance(v, str):
            errs.append(f"{vpath}[{i}]: Invalid value: {v!r}: must be a string")
            continue
        msgs = label_value_errors(v)
        if msgs:
            errs.append(f"{vpath}[{i}][{key}]: Invalid value: {quote(v)}: {'; '.join(msgs)}")
    return errs


def new_requirement(key: str, op: str, values: list[str] | tuple[str, ...] = ()) -> Requirement:
    """apimachinery NewRequirement: a Requirement, or SelectorError listing every problem."""
    errs = requirement_errors(key, op, list(values))
    if errs:
        raise SelectorError(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]", path=errs[0].split(":")[0])
    return Requirement(key, op, tuple(values))


def quote(v: Any) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(v)


def quote_list(values: list[Any]) -> str:
    return "[" + ",".join(quote(v) for v in values) + "]"
