"""Kubernetes label-selector strings and NodeSelector matching, exactly as apimachinery / component-helpers.

Grammar and validation follow k8s.io/apimachinery pkg/labels (v0.35 behaviour), matching follows
k8s.io/component-helpers scheduling/corev1 (MatchNodeSelectorTerms), and cluster selection follows Liqo's
MatchVirtualNodeSelectorTerms. See shared/docs/selector-semantics.md and liqo-semantics.md c.5.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any

from offloading.liqo import constants as c

__all__ = [
    "Requirement",
    "SelectorError",
    "UnformattableTermError",
    "cluster_matches",
    "cluster_selector",
    "cluster_selector_notes",
    "explain",
    "format_requirement",
    "format_term",
    "is_label_key",
    "is_label_value",
    "label_key_errors",
    "label_selector_matches",
    "label_value_errors",
    "lex",
    "matches",
    "new_requirement",
    "parse_go_int64",
    "parse_label_selector",
    "parse_operator",
    "parse_requirements",
    "requirement_errors",
    "validate_node_selector",
    "validate_term",
    "virtual_node_labels",
]


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


# --------------------------------------------------------------------------------------------------
# Validation of keys, values and integers (apimachinery validate/content, strconv.ParseInt).

_NAME_RE = re.compile(r"(?:[A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]")
_DNS1123_SUBDOMAIN_RE = re.compile(r"[a-z0-9](?:[-a-z0-9]*[a-z0-9])?(?:\.[a-z0-9](?:[-a-z0-9]*[a-z0-9])?)*")
_INT_RE = re.compile(r"[+-]?[0-9]+")
_INT64_MIN = -(2**63)
_INT64_MAX = 2**63 - 1
_NAME_FMT = "([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9]"
_NAME_MSG = (
    "must consist of alphanumeric characters, '-', '_' or '.', and must start and end with an alphanumeric character"
)
_VALUE_MSG = "a valid label must be an empty string or " + _NAME_MSG
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


def _blen(s: str) -> int:
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
            if _blen(prefix) > 253:
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
    elif _blen(name) > 63:
        errs.append("name part must be no more than 63 bytes")
    if not _NAME_RE.fullmatch(name):
        errs.append("name part " + _regex_error(_NAME_MSG, _NAME_FMT, "MyName", "my.name", "123-abc"))
    return errs


def label_value_errors(value: str) -> list[str]:
    """The problems of a label value (apimachinery IsLabelValue); empty when valid."""
    errs: list[str] = []
    if _blen(value) > 63:
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


# --------------------------------------------------------------------------------------------------
# Requirements (the parsed form of one selector clause).

# Go selection operators, in the spelling apimachinery uses internally.
_SEL_IN = "in"
_SEL_NOT_IN = "notin"
_SEL_EQUALS = "="
_SEL_DOUBLE_EQUALS = "=="
_SEL_NOT_EQUALS = "!="
_SEL_EXISTS = "exists"
_SEL_DOES_NOT_EXIST = "!"
_SEL_GT = "gt"
_SEL_LT = "lt"

_SEL_TO_NODE_OP = {
    _SEL_IN: c.OP_IN,
    _SEL_EQUALS: c.OP_IN,
    _SEL_DOUBLE_EQUALS: c.OP_IN,
    _SEL_NOT_IN: c.OP_NOT_IN,
    _SEL_NOT_EQUALS: c.OP_NOT_IN,
    _SEL_EXISTS: c.OP_EXISTS,
    _SEL_DOES_NOT_EXIST: c.OP_DOES_NOT_EXIST,
    _SEL_GT: c.OP_GT,
    _SEL_LT: c.OP_LT,
}
_NODE_OP_TO_SEL = {
    c.OP_IN: _SEL_IN,
    c.OP_NOT_IN: _SEL_NOT_IN,
    c.OP_EXISTS: _SEL_EXISTS,
    c.OP_DOES_NOT_EXIST: _SEL_DOES_NOT_EXIST,
    c.OP_GT: _SEL_GT,
    c.OP_LT: _SEL_LT,
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
        return _SEL_TO_NODE_OP[self.operator]

    def as_node_requirement(self) -> dict[str, Any]:
        """{"key", "operator", "values"} NodeSelectorRequirement dict."""
        return {"key": self.key, "operator": self.node_operator, "values": list(self.values)}

    def matches(self, labels: dict[str, str]) -> bool:
        """apimachinery Requirement.Matches."""
        return _requirement_matches(self.key, self.operator, self.values, labels)

    def __str__(self) -> str:
        """apimachinery Requirement.String()."""
        op = self.operator
        if op == _SEL_EXISTS:
            return self.key
        if op == _SEL_DOES_NOT_EXIST:
            return "!" + self.key
        joined = ",".join(sorted(self.values, key=_byte_key))
        if op in (_SEL_IN, _SEL_NOT_IN):
            return f"{self.key} {op} ({joined})"
        sym = {_SEL_GT: ">", _SEL_LT: "<"}.get(op, op)
        return f"{self.key}{sym}{joined}"


def _byte_key(s: str) -> bytes:
    return s.encode("utf-8", "surrogatepass")


def _requirement_matches(key: str, op: str, values: tuple[str, ...] | list[str], labels: dict[str, str]) -> bool:
    if op in (_SEL_IN, _SEL_EQUALS, _SEL_DOUBLE_EQUALS):
        return key in labels and labels[key] in values
    if op in (_SEL_NOT_IN, _SEL_NOT_EQUALS):
        return key not in labels or labels[key] not in values
    if op == _SEL_EXISTS:
        return key in labels
    if op == _SEL_DOES_NOT_EXIST:
        return key not in labels
    if op in (_SEL_GT, _SEL_LT):
        if key not in labels:
            return False
        have = parse_go_int64(labels[key])
        if have is None or len(values) != 1:
            return False
        want = parse_go_int64(values[0])
        if want is None:
            return False
        return have > want if op == _SEL_GT else have < want
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
            errs.append(f"{_join(path, 'key')}: Invalid value: {_q(key)}: {'; '.join(key_errs)}")
    vpath = _join(path, "values")
    if op in (_SEL_IN, _SEL_NOT_IN):
        if not values:
            errs.append(f"{vpath}: Invalid value: []: for 'in', 'notin' operators, values set can't be empty")
    elif op in (_SEL_EQUALS, _SEL_DOUBLE_EQUALS, _SEL_NOT_EQUALS):
        if len(values) != 1:
            errs.append(f"{vpath}: Invalid value: {_ql(values)}: exact-match compatibility requires one single value")
    elif op in (_SEL_EXISTS, _SEL_DOES_NOT_EXIST):
        if values:
            errs.append(
                f"{vpath}: Invalid value: {_ql(values)}: values set must be empty for exists and does not exist"
            )
    elif op in (_SEL_GT, _SEL_LT):
        if len(values) != 1:
            errs.append(
                f"{vpath}: Invalid value: {_ql(values)}: for 'Gt', 'Lt' operators, exactly one value is required"
            )
        for i, v in enumerate(values):
            if not isinstance(v, str) or parse_go_int64(v) is None:
                errs.append(
                    f"{vpath}[{i}]: Invalid value: {_q(v)}: for 'Gt', 'Lt' operators, the value must be an integer"
                )
    else:
        errs.append(
            f"{_join(path, 'operator')}: Unsupported value: {_q(op)}: supported values: "
            '"!", "!=", "=", "==", "exists", "gt", "in", "lt", "notin"'
        )
    for i, v in enumerate(values):
        if not isinstance(v, str):
            errs.append(f"{vpath}[{i}]: Invalid value: {v!r}: must be a string")
            continue
        msgs = label_value_errors(v)
        if msgs:
            errs.append(f"{vpath}[{i}][{key}]: Invalid value: {_q(v)}: {'; '.join(msgs)}")
    return errs


def new_requirement(key: str, op: str, values: list[str] | tuple[str, ...] = ()) -> Requirement:
    """apimachinery NewRequirement: a Requirement, or SelectorError listing every problem."""
    errs = requirement_errors(key, op, list(values))
    if errs:
        raise SelectorError(errs[0] if len(errs) == 1 else "[" + ", ".join(errs) + "]", path=errs[0].split(":")[0])
    return Requirement(key, op, tuple(values))


def _q(v: Any) -> str:
    if isinstance(v, str):
        return '"' + v.replace("\\", "\\\\").replace('"', '\\"') + '"'
    return repr(v)


def _ql(values: list[Any]) -> str:
    return "[" + ",".join(_q(v) for v in values) + "]"


# --------------------------------------------------------------------------------------------------
# Lexer and parser (byte-oriented, like apimachinery's).

_T_ERROR = "error"
_T_EOS = "end of string"
_T_CLOSE = ")"
_T_COMMA = ","
_T_NOT = "!"
_T_DEQ = "=="
_T_EQ = "="
_T_GT = ">"
_T_IDENT = "identifier"
_T_IN = "in"
_T_LT = "<"
_T_NEQ = "!="
_T_NOTIN = "notin"
_T_OPEN = "("

_STRING_TO_TOKEN = {
    ")": _T_CLOSE,
    ",": _T_COMMA,
    "!": _T_NOT,
    "==": _T_DEQ,
    "=": _T_EQ,
    ">": _T_GT,
    "in": _T_IN,
    "<": _T_LT,
    "!=": _T_NEQ,
    "notin": _T_NOTIN,
    "(": _T_OPEN,
}
_SPECIAL = frozenset(b"=!(),><")
_WHITESPACE = frozenset(b" \t\r\n")
_BINARY_OPERATORS = "in, notin, =, ==, !=, gt, lt"


_TOKEN_TO_OPERATOR = {
    _T_IN: _SEL_IN,
    _T_EQ: _SEL_EQUALS,
    _T_DEQ: _SEL_DOUBLE_EQUALS,
    _T_GT: _SEL_GT,
    _T_LT: _SEL_LT,
    _T_NOTIN: _SEL_NOT_IN,
    _T_NEQ: _SEL_NOT_EQUALS,
}


@dataclass
class _Tok:
    kind: str
    lit: str
    pos: int


def _decode(b: bytes) -> str:
    return b.decode("utf-8", "surrogatepass") if _is_utf8(b) else b.decode("utf-8", "replace")


def _is_utf8(b: bytes) -> bool:
    try:
        b.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return False
    return True


def _lex(data: bytes) -> list[_Tok]:
    """Tokenize like apimachinery's Lexer, stopping at the first end-of-string token."""
    pos = 0
    n = len(data)
    toks: list[_Tok] = []

    def read() -> int:
        nonlocal pos
        if pos < n:
            b = data[pos]
            pos += 1
            return b
        return 0

    while True:
        ch = read()
        while ch in _WHITESPACE:
            ch = read()
        if ch == 0:
            toks.append(_Tok(_T_EOS, "", pos))
            return toks
        pos -= 1
        start = pos
        if ch in _SPECIAL:
            buf = bytearray()
            last: tuple[str, str] | None = None
            while True:
                b = read()
                if b == 0:
                    break
                if b in _SPECIAL:
                    buf.append(b)
                    s = buf.decode("ascii")
                    if s in _STRING_TO_TOKEN:
                        last = (_STRING_TO_TOKEN[s], s)
                    elif last is not None:
                        pos -= 1
                        break
                else:
                    pos -= 1
                    break
            if last is None:  # pragma: no cover - every single special byte is a token
                toks.append(_Tok(_T_ERROR, f"error expected: keyword found '{buf.decode('ascii')}'", start))
            else:
                toks.append(_Tok(last[0], last[1], start))
        else:
            buf = bytearray()
            while True:
                b = read()
                if b == 0:
                    break
                if b in _SPECIAL or b in _WHITESPACE:
                    pos -= 1
                    break
                buf.append(b)
            s = _decode(bytes(buf))
            toks.append(_Tok(_STRING_TO_TOKEN.get(s, _T_IDENT), s, start))


class _Parser:
    """apimachinery's recursive-descent selector parser."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _lex(text.encode("utf-8", "surrogatepass"))
        self.i = 0

    def _look(self, values_ctx: bool = True) -> _Tok:
        t = self.toks[self.i]
        if values_ctx and t.kind in (_T_IN, _T_NOTIN):
            return _Tok(_T_IDENT, t.lit, t.pos)
        return t

    def _take(self, values_ctx: bool = True) -> _Tok:
        t = self._look(values_ctx)
        self.i += 1
        return t

    def _err(self, detail: str, tok: _Tok, *, requirement: bool = False) -> SelectorError:
        where = f"at position {tok.pos}" if tok.kind != _T_EOS else "at the end of the selector"
        prefix = "unable to parse requirement: " if requirement else ""
        return SelectorError(
            f"{prefix}{detail} ({where})",
            text=self.text,
            position=tok.pos,
            token=tok.lit,
        )

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            t = self._look()
            if t.kind in (_T_IDENT, _T_NOT):
                reqs.append(self._requirement())
                t2 = self._take()
                if t2.kind == _T_EOS:
                    return reqs
                if t2.kind == _T_COMMA:
                    t3 = self._look()
                    if t3.kind not in (_T_IDENT, _T_NOT):
                        raise self._err(f"found '{t3.lit}', expected: identifier after ','", t3)
                    continue
                raise self._err(f"found '{t2.lit}', expected: ',' or 'end of string'", t2)
            if t.kind == _T_EOS:
                return reqs
            raise self._err(f"found '{t.lit}', expected: !, identifier, or 'end of string'", t)

    def _requirement(self) -> Requirement:
        t = self._take()
        start = t.pos
        op: str | None = None
        if t.kind == _T_NOT:
            op = _SEL_DOES_NOT_EXIST
            t = self._take()
        if t.kind != _T_IDENT:
            raise self._err(f"found '{t.lit}', expected: identifier", t, requirement=True)
        key = t.lit
        key_errs = label_key_errors(key)
        if key_errs:
            raise self._err(f"invalid label key {_q(key)}: {'; '.join(key_errs)}", t, requirement=True)
        if self._look().kind in (_T_EOS, _T_COMMA) and op != _SEL_DOES_NOT_EXIST:
            op = _SEL_EXISTS
        if op in (_SEL_EXISTS, _SEL_DOES_NOT_EXIST):
            return Requirement(key, op, (), start)
        ot = self._take(values_ctx=False)
        op = _TOKEN_TO_OPERATOR.get(ot.kind)
        if op is None:
            raise self._err(f"found '{ot.lit}', expected: {_BINARY_OPERATORS}", ot, requirement=True)
        values = self._values() if op in (_SEL_IN, _SEL_NOT_IN) else self._exact_value()
        ordered = tuple(sorted(values, key=_byte_key))
        for v in ordered:
            msgs = label_value_errors(v)
            if msgs:
                raise SelectorError(
                    f"unable to parse requirement: invalid label value {_q(v)} for key {_q(key)}: "
                    f"{'; '.join(msgs)} (in the requirement at position {start})",
                    text=self.text,
                    position=start,
                    token=v,
                )
        if op in (_SEL_GT, _SEL_LT) and parse_go_int64(ordered[0]) is None:
            raise SelectorError(
                f"unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer, "
                f"got {_q(ordered[0])} (in the requirement at position {start})",
                text=self.text,
                position=start,
                token=ordered[0],
            )
        return Requirement(key, op, ordered, start)

    def _values(self) -> set[str]:
        t = self._take()
        if t.kind != _T_OPEN:
            raise self._err(f"found '{t.lit}' expected: '('", t, requirement=True)
        t = self._look()
        if t.kind in (_T_IDENT, _T_COMMA):
            s = self._identifiers()
            t2 = self._take()
            if t2.kind != _T_CLOSE:  # pragma: no cover - _identifiers only returns before ')'
                raise self._err(f"found '{t.lit}', expected: ')'", t2, requirement=True)
            return s
        if t.kind == _T_CLOSE:
            self._take()
            return {""}
        raise self._err(f"found '{t.lit}', expected: ',', ')' or identifier", t, requirement=True)

    def _identifiers(self) -> set[str]:
        s: set[str] = set()
        while True:
            t = self._take()
            if t.kind == _T_IDENT:
                s.add(t.lit)
                t2 = self._look()
                if t2.kind == _T_COMMA:
                    continue
                if t2.kind == _T_CLOSE:
                    return s
                raise self._err(f"found '{t2.lit}', expected: ',' or ')'", t2, requirement=True)
            if t.kind == _T_COMMA:
                if not s:
                    s.add("")
                t2 = self._look()
                if t2.kind == _T_CLOSE:
                    s.add("")
                    return s
                if t2.kind == _T_COMMA:
                    s.add("")
                continue
            raise self._err(f"found '{t.lit}', expected: ',', or identifier", t, requirement=True)

    def _exact_value(self) -> set[str]:
        t = self._look()
        if t.kind in (_T_EOS, _T_COMMA):
            return {""}
        t = self._take()
        if t.kind == _T_IDENT:
            return {t.lit}
        raise self._err(f"found '{t.lit}', expected: identifier", t, requirement=True)


_GO_TOKEN_NAMES = {
    _T_ERROR: "ErrorToken",
    _T_EOS: "EndOfStringToken",
    _T_CLOSE: "ClosedParToken",
    _T_COMMA: "CommaToken",
    _T_NOT: "DoesNotExistToken",
    _T_DEQ: "DoubleEqualsToken",
    _T_EQ: "EqualsToken",
    _T_GT: "GreaterThanToken",
    _T_IDENT: "IdentifierToken",
    _T_IN: "InToken",
    _T_LT: "LessThanToken",
    _T_NEQ: "NotEqualsToken",
    _T_NOTIN: "NotInToken",
    _T_OPEN: "OpenParToken",
}


def lex(text: str) -> list[tuple[str, str]]:
    """The (token name, literal) pairs apimachinery's lexer yields, ending with EndOfStringToken."""
    return [(_GO_TOKEN_NAMES[t.kind], t.lit) for t in _lex(text.encode("utf-8", "surrogatepass"))]


def parse_operator(token: str) -> str:
    """The apimachinery operator for an operator token (in, notin, =, ==, !=, >, <), else SelectorError."""
    parser = _Parser(token)
    t = parser._take(values_ctx=False)
    op = _TOKEN_TO_OPERATOR.get(t.kind)
    if op is None:
        raise SelectorError(f"found '{t.lit}', expected: {_BINARY_OPERATORS}", text=token, position=t.pos, token=t.lit)
    return op


def parse_requirements(text: str) -> list[Requirement]:
    """labels.ParseToRequirements: the clauses of a kubectl -l selector, sorted by key (stable)."""
    if not isinstance(text, str):
        raise SelectorError(f"a selector must be a string, not {type(text).__name__}")
    reqs = _Parser(text).parse()
    return sorted(reqs, key=lambda r: _byte_key(r.key))


def parse_label_selector(text: str) -> list[dict[str, Any]]:
    """Parse a kubectl -l selector into NodeSelectorRequirement dicts {"key", "operator", "values"}.

    = and == give In, != gives NotIn, in/notin give In/NotIn, a bare key gives Exists, !key gives
    DoesNotExist and >/< give Gt/Lt. Requirements come sorted by key, values sorted and de-duplicated.
    """
    return [r.as_node_requirement() for r in parse_requirements(text)]


def label_selector_matches(text: str, labels: dict[str, str]) -> bool:
    """Whether a kubectl -l selector matches a label set (the empty selector matches everything)."""
    return all(r.matches(labels) for r in parse_requirements(text))


# --------------------------------------------------------------------------------------------------
# liqoctl --selector conversion.


def _liqoctl_term(text: str) -> tuple[dict[str, Any], list[str]]:
    reqs = parse_requirements(text)
    exprs: list[dict[str, Any]] = []
    equals: dict[str, str] = {}
    notes: list[str] = []
    for r in reqs:
        if r.operator in (_SEL_EQUALS, _SEL_DOUBLE_EQUALS):
            if r.key in equals and equals[r.key] != r.values[0]:
                notes.append(
                    f"{text!r}: {r.key} is compared with = more than once; liqoctl keeps only the last value "
                    f"({r.key}={r.values[0]})"
                )
            equals[r.key] = r.values[0]
            continue
        expr: dict[str, Any] = {"key": r.key, "operator": r.node_operator}
        if r.values:
            expr["values"] = list(r.values)
        if r.operator == _SEL_NOT_EQUALS:
            notes.append(
                f"{text!r}: liqoctl rejects '!=' (\"!=\" is not a valid label selector operator); "
                f"it is stored as {r.key} NotIn ({r.values[0]}), which Liqo accepts"
            )
        elif r.operator in (_SEL_GT, _SEL_LT):
            notes.append(
                f"{text!r}: liqoctl rejects '{'>' if r.operator == _SEL_GT else '<'}' "
                f'("{r.operator}" isn\'t supported in label selectors); it is stored as {r.key} '
                f"{r.node_operator} ({r.values[0]}), which Liqo accepts"
            )
        exprs.append(expr)
    # liqoctl appends the equality requirements after the others (from a Go map: random order; we keep key order).
    for key, value in equals.items():
        exprs.append({"key": key, "operator": c.OP_IN, "values": [value]})
    term: dict[str, Any] = {"matchExpressions": exprs} if exprs else {}
    if not exprs:
        notes.append(f"{text!r}: an empty selector gives an empty term, which selects no cluster")
    return term, notes


def cluster_selector(texts: list[str]) -> dict[str, Any]:
    """The clusterSelector `liqoctl offload namespace --selector T1 --selector T2 ...` builds.

    One NodeSelectorTerm per text (ORed); [] gives no terms (all clusters). Also accepts != and >/<,
    which liqoctl rejects (see cluster_selector_notes). Raises SelectorError on invalid text, with
    the index of the offending text in `.path`.
    """
    terms: list[dict[str, Any]] = []
    for i, text in enumerate(texts):
        try:
            term, _ = _liqoctl_term(text)
        except SelectorError as err:
            raise SelectorError(
                f"selector #{i + 1} {text!r}: {err.message}",
                text=text,
                position=err.position,
                token=err.token,
                path=f"nodeSelectorTerms[{i}]",
            ) from err
        terms.append(term)
    return {"nodeSelectorTerms": terms}


def cluster_selector_notes(texts: list[str]) -> list[str]:
    """Things to tell the user about cluster_selector(texts): where liqoctl would differ or reject it."""
    notes: list[str] = []
    for text in texts:
        try:
            notes.extend(_liqoctl_term(text)[1])
        except SelectorError:
            continue
    return notes


# --------------------------------------------------------------------------------------------------
# Formatting NodeSelectorTerms back into text.


def format_requirement(expr: dict[str, Any]) -> str:
    """One NodeSelectorRequirement as selector text; raises UnformattableTermError when impossible."""
    if not isinstance(expr, dict):
        raise UnformattableTermError(f"expression {expr!r} is not an object")
    key = expr.get("key")
    op = expr.get("operator")
    values = expr.get("values") or []
    sel = _NODE_OP_TO_SEL.get(op) if isinstance(op, str) else None
    if sel is None:
        raise UnformattableTermError(f"operator {op!r} cannot be written as selector text")
    if not isinstance(values, list):
        raise UnformattableTermError(f"values of {key!r} must be a list")
    errs = requirement_errors(key, sel, values, "expression")
    if errs:
        raise UnformattableTermError("; ".join(errs))
    assert isinstance(key, str)
    if sel == _SEL_EXISTS:
        return key
    if sel == _SEL_DOES_NOT_EXIST:
        return "!" + key
    distinct = sorted(set(values), key=_byte_key)
    if sel == _SEL_GT:
        return f"{key}>{values[0]}"
    if sel == _SEL_LT:
        return f"{key}<{values[0]}"
    if sel == _SEL_IN and len(distinct) == 1 and distinct[0] != "":
        return f"{key}={distinct[0]}"
    return f"{key} {sel} ({','.join(distinct)})"


def format_term(term: dict[str, Any]) -> str:
    """A selector string that parses back (with cluster_selector) to a term equivalent to `term`.

    Raises UnformattableTermError for terms that cannot be written as text: matchFields, unknown
    operators or otherwise invalid expressions. The empty term gives "" (an empty term).
    """
    if not isinstance(term, dict):
        raise UnformattableTermError(f"term {term!r} is not an object")
    if term.get("matchFields"):
        raise UnformattableTermError(
            "the term uses matchFields ("
            + ", ".join(_describe_expr(e) for e in term["matchFields"] if isinstance(e, dict))
            + "), which selector text cannot express"
        )
    exprs = term.get("matchExpressions") or []
    if not isinstance(exprs, list):
        raise UnformattableTermError("matchExpressions must be a list")
    parts = [format_requirement(e) for e in exprs]
    # liqoctl keeps one value per key written with "=", so repeated keys use the "in (...)" form.
    eq_keys = [p.split("=", 1)[0] for p in parts if _is_equality(p)]
    return ",".join(_as_set_form(p) if _is_equality(p) and eq_keys.count(p.split("=", 1)[0]) > 1 else p for p in parts)


def _is_equality(text: str) -> bool:
    return "=" in text and " " not in text


def _as_set_form(text: str) -> str:
    key, value = text.split("=", 1)
    return f"{key} in ({value})"


def _describe_expr(expr: dict[str, Any]) -> str:
    """Human form of a NodeSelectorRequirement, e.g. `region In (eu,us)`."""
    key = expr.get("key")
    op = expr.get("operator")
    values = expr.get("values") or []
    if op in (c.OP_EXISTS, c.OP_DOES_NOT_EXIST) and not values:
        return f"{key} {op}"
    shown = ",".join(str(v) for v in values) if isinstance(values, list) else str(values)
    return f"{key} {op} ({shown})"


def _term_text(term: Any) -> str:
    try:
        return format_term(term)
    except UnformattableTermError:
        if not isinstance(term, dict):
            return repr(term)
        parts = [_describe_expr(e) for e in term.get("matchExpressions") or [] if isinstance(e, dict)]
        parts += ["field " + _describe_expr(e) for e in term.get("matchFields") or [] if isinstance(e, dict)]
        return " AND ".join(parts)


# --------------------------------------------------------------------------------------------------
# NodeSelector validation and matching (component-helpers nodeaffinity).


@dataclass
class _ParsedTerm:
    index: int
    empty: bool
    exprs: list[dict[str, Any]]
    fields: list[dict[str, Any]]
    errors: list[str]


def _terms_of(node_selector: Any) -> list[Any]:
    if node_selector is None:
        return []
    if not isinstance(node_selector, dict):
        raise SelectorError("a NodeSelector must be an object with nodeSelectorTerms")
    terms = node_selector.get("nodeSelectorTerms")
    if terms is None:
        return []
    if not isinstance(terms, list):
        raise SelectorError("nodeSelectorTerms must be a list", path="nodeSelectorTerms")
    return terms


def _parse_term(term: Any, index: int) -> _ParsedTerm:
    path = f"nodeSelectorTerms[{index}]"
    if not isinstance(term, dict):
        return _ParsedTerm(index, False, [], [], [f"{path}: Invalid value: {term!r}: must be an object"])
    exprs = term.get("matchExpressions") or []
    flds = term.get("matchFields") or []
    errors: list[str] = []
    if not isinstance(exprs, list):
        errors.append(f"{path}.matchExpressions: must be a list")
        exprs = []
    if not isinstance(flds, list):
        errors.append(f"{path}.matchFields: must be a list")
        flds = []
    if not exprs and not flds and not errors:
        return _ParsedTerm(index, True, [], [], [])
    for i, expr in enumerate(exprs):
        p = f"{path}.matchExpressions[{i}]"
        if not isinstance(expr, dict):
            errors.append(f"{p}: Invalid value: {expr!r}: must be an object")
            continue
        op = expr.get("operator")
        sel = _NODE_OP_TO_SEL.get(op) if isinstance(op, str) else None
        if sel is None:
            errors.append(
                f'{p}.operator: Unsupported value: {_q(op)}: supported values: "DoesNotExist", "Exists", '
                '"Gt", "In", "Lt", "NotIn"'
            )
            continue
        values = expr.get("values") or []
        if not isinstance(values, list):
            errors.append(f"{p}.values: Invalid value: {values!r}: must be a list")
            continue
        errors.extend(requirement_errors(expr.get("key"), sel, values, p))
    for i, expr in enumerate(flds):
        p = f"{path}.matchFields[{i}]"
        if not isinstance(expr, dict):
            errors.append(f"{p}: Invalid value: {expr!r}: must be an object")
            continue
        op = expr.get("operator")
        values = expr.get("values") or []
        if op in (c.OP_IN, c.OP_NOT_IN):
            if not isinstance(values, list) or len(values) != 1 or not isinstance(values[0], str):
                errors.append(
                    f"{p}.values: Invalid value: {_ql(values if isinstance(values, list) else [values])}: "
                    "must have one element"
                )
        else:
            errors.append(f'{p}.operator: Unsupported value: {_q(op)}: supported values: "In", "NotIn"')
        if not isinstance(expr.get("key"), str):
            errors.append(f"{p}.key: Invalid value: {expr.get('key')!r}: must be a string")
    return _ParsedTerm(index, False, list(exprs), list(flds), errors)


def validate_term(term: dict[str, Any], index: int = 0) -> list[str]:
    """The errors Kubernetes reports for one NodeSelectorTerm (empty list when valid; empty terms are valid)."""
    return _parse_term(term, index).errors


def validate_node_selector(node_selector: dict[str, Any] | None) -> list[str]:
    """All errors of all terms, as NewNodeSelector (the strict constructor) would report them."""
    errs: list[str] = []
    for i, term in enumerate(_terms_of(node_selector)):
        errs.extend(_parse_term(term, i).errors)
    return errs


def _field_expr_matches(expr: dict[str, Any], fields: dict[str, str]) -> bool:
    have = fields.get(expr["key"], "")
    want = expr["values"][0]
    return have == want if expr["operator"] == c.OP_IN else have != want


def _expr_matches(expr: dict[str, Any], labels: dict[str, str]) -> bool:
    return _requirement_matches(expr["key"], _NODE_OP_TO_SEL[expr["operator"]], expr.get("values") or [], labels)


def _first_failure(pt: _ParsedTerm, labels: dict[str, str], fields: dict[str, str]) -> str | None:
    """None when a valid, non-empty term matches; otherwise the human reason for the first failure."""
    if pt.empty:
        return "the term is empty, and an empty term never matches"
    if pt.errors:
        return "the term is invalid: " + "; ".join(pt.errors)
    for expr in pt.exprs:
        if not _expr_matches(expr, labels):
            return _why_not(expr, labels)
    if fields:
        for expr in pt.fields:
            if not _field_expr_matches(expr, fields):
                have = fields.get(expr["key"])
                shown = f"{expr['key']}={have}" if have is not None else f"no field {expr['key']}"
                return f"field {_describe_expr(expr)} but the cluster has {shown}"
    return None


def _why_not(expr: dict[str, Any], labels: dict[str, str]) -> str:
    key = expr["key"]
    op = expr["operator"]
    desc = _describe_expr(expr)
    has = key in labels
    have = f"{key}={labels[key]}" if has else ""
    if op == c.OP_IN:
        return f"{desc} but the cluster has {have}" if has else f"{desc} but the cluster has no label {key}"
    if op == c.OP_NOT_IN:
        return f"{desc} but the cluster has {have}"
    if op == c.OP_EXISTS:
        return f"{desc} but the cluster has no label {key}"
    if op == c.OP_DOES_NOT_EXIST:
        return f"{desc} but the cluster has {have}"
    if not has:
        return f"{desc} but the cluster has no label {key}"
    if parse_go_int64(labels[key]) is None:
        return f"{desc} but the cluster has {have}, which is not an integer"
    return f"{desc} but the cluster has {have}"


def matches(node_selector: dict[str, Any] | None, labels: dict[str, str], fields: dict[str, str] | None = None) -> bool:
    """Kubernetes MatchNodeSelectorTerms: terms ORed, expressions ANDed, empty terms never match.

    A missing selector or one without terms matches nothing. Raises SelectorError (listing every
    error) only when some term is invalid and no valid term matches.
    """
    fields = {k: v for k, v in (fields or {}).items() if v}
    errors: list[str] = []
    for i, term in enumerate(_terms_of(node_selector)):
        pt = _parse_term(term, i)
        if pt.empty:
            continue
        if pt.errors:
            errors.extend(pt.errors)
            continue
        if _first_failure(pt, labels, fields) is None:
            return True
    if errors:
        msg = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
        raise SelectorError(msg, path="nodeSelectorTerms")
    return False


def cluster_matches(
    cluster_selector: dict[str, Any] | None, labels: dict[str, str], fields: dict[str, str] | None = None
) -> bool:
    """Liqo's MatchVirtualNodeSelectorTerms: no selector or no terms selects every cluster, else matches()."""
    if not _terms_of(cluster_selector):
        return True
    return matches(cluster_selector, labels, fields)


def explain(
    cluster_selector: dict[str, Any] | None, labels: dict[str, str], fields: dict[str, str] | None = None
) -> dict[str, Any]:
    """Why a cluster is (not) selected: the matching term, or for each term its first failing expression.

    Returns {"selected", "matched_term", "error", "all_clusters", "terms": [{"index", "matched",
    "failed", "invalid", "text"}]}. `error` is set when Liqo would fail (invalid term, nothing matched).
    """
    terms = _terms_of(cluster_selector)
    out_terms: list[dict[str, Any]] = []
    result: dict[str, Any] = {
        "selected": False,
        "matched_term": None,
        "error": None,
        "all_clusters": not terms,
        "terms": out_terms,
    }
    if not terms:
        result["selected"] = True
        return result
    flds = {k: v for k, v in (fields or {}).items() if v}
    errors: list[str] = []
    for i, term in enumerate(terms):
        pt = _parse_term(term, i)
        failed = _first_failure(pt, labels, flds)
        matched = failed is None
        if pt.errors:
            errors.extend(pt.errors)
        if matched and result["matched_term"] is None:
            result["matched_term"] = i
            result["selected"] = True
        out_terms.append(
            {
                "index": i,
                "matched": matched,
                "failed": failed,
                "invalid": "; ".join(pt.errors) if pt.errors else None,
                "text": _term_text(term),
            }
        )
    if not result["selected"] and errors:
        result["error"] = errors[0] if len(errors) == 1 else "[" + ", ".join(errors) + "]"
    return result


def virtual_node_labels(virtual_node: dict[str, Any], node: dict[str, Any] | None) -> dict[str, str]:
    """The labels Liqo matches a ClusterSelector against for a VirtualNode (liqo-semantics.md c.5).

    The Node's labels when the Node exists; otherwise VirtualNode spec.labels plus the remote cluster id
    and storage.liqo.io/available = "true" when the VirtualNode has *no* storage classes (Liqo's inversion).
    """
    if node is not None:
        return dict((node.get("metadata") or {}).get("labels") or {})
    spec = virtual_node.get("spec") or {}
    labels = dict(spec.get("labels") or {})
    labels[c.REMOTE_CLUSTER_ID_LABEL] = str(spec.get("clusterID") or "")
    labels[c.STORAGE_AVAILABLE_LABEL] = "true" if not spec.get("storageClasses") else "false"
    return labels
