"""The kubectl -l selector grammar: apimachinery's byte-oriented lexer and parser (labels.Parse)."""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any

from offloading.liqo.selectors.labels import label_key_errors, label_value_errors, parse_go_int64
from offloading.liqo.selectors.requirements import (
    SEL_DOES_NOT_EXIST,
    SEL_DOUBLE_EQUALS,
    SEL_EQUALS,
    SEL_EXISTS,
    SEL_GT,
    SEL_IN,
    SEL_LT,
    SEL_NOT_EQUALS,
    SEL_NOT_IN,
    Requirement,
    SelectorError,
    byte_key,
    quote,
)

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
# An identifier's bytes: up to a special byte, whitespace, or a NUL byte (which ends it and is dropped).
_IDENTIFIER = re.compile(rb"[^=!(),><\x20\t\r\n\x00]*")
_BINARY_OPERATORS = "in, notin, =, ==, !=, gt, lt"


_TOKEN_TO_OPERATOR = {
    _T_IN: SEL_IN,
    _T_EQ: SEL_EQUALS,
    _T_DEQ: SEL_DOUBLE_EQUALS,
    _T_GT: SEL_GT,
    _T_LT: SEL_LT,
    _T_NOTIN: SEL_NOT_IN,
    _T_NEQ: SEL_NOT_EQUALS,
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
            found = _IDENTIFIER.match(data, pos)
            assert found is not None  # the pattern matches the empty string
            pos = found.end()
            if pos < n and data[pos] == 0:
                pos += 1
            s = _decode(found.group())
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
            op = SEL_DOES_NOT_EXIST
            t = self._take()
        if t.kind != _T_IDENT:
            raise self._err(f"found '{t.lit}', expected: identifier", t, requirement=True)
        key = t.lit
        key_errs = label_key_errors(key)
        if key_errs:
            raise self._err(f"invalid label key {quote(key)}: {'; '.join(key_errs)}", t, requirement=True)
        if self._look().kind in (_T_EOS, _T_COMMA) and op != SEL_DOES_NOT_EXIST:
            op = SEL_EXISTS
        if op in (SEL_EXISTS, SEL_DOES_NOT_EXIST):
            return Requirement(key, op, (), start)
        ot = self._take(values_ctx=False)
        op = _TOKEN_TO_OPERATOR.get(ot.kind)
        if op is None:
            raise self._err(f"found '{ot.lit}', expected: {_BINARY_OPERATORS}", ot, requirement=True)
        values = self._values() if op in (SEL_IN, SEL_NOT_IN) else self._exact_value()
        ordered = tuple(sorted(values, key=byte_key))
        for v in ordered:
            msgs = label_value_errors(v)
            if msgs:
                raise SelectorError(
                    f"unable to parse requirement: invalid label value {quote(v)} for key {quote(key)}: "
                    f"{'; '.join(msgs)} (in the requirement at position {start})",
                    text=self.text,
                    position=start,
                    token=v,
                )
        if op in (SEL_GT, SEL_LT) and parse_go_int64(ordered[0]) is None:
            raise SelectorError(
                f"unable to parse requirement: for 'Gt', 'Lt' operators, the value must be an integer, "
                f"got {quote(ordered[0])} (in the requirement at position {start})",
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
    return sorted(reqs, key=lambda r: byte_key(r.key))


def parse_label_selector(text: str) -> list[dict[str, Any]]:
    """Parse a kubectl -l selector into NodeSelectorRequirement dicts {"key", "operator", "values"}.

    = and == give In, != gives NotIn, in/notin give In/NotIn, a bare key gives Exists, !key gives
    DoesNotExist and >/< give Gt/Lt. Requirements come sorted by key, values sorted and de-duplicated.
    """
    return [r.as_node_requirement() for r in parse_requirements(text)]


def label_selector_matches(text: str, labels: dict[str, str]) -> bool:
    """Whether a kubectl -l selector matches a label set (the empty selector matches everything)."""
    return all(r.matches(labels) for r in parse_requirements(text))
