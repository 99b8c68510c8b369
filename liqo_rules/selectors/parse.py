"""The kubectl -l selector grammar: apimachinery's byte-oriented lexer and parser (labels.Parse)."""

from __future__ import annotations

import re
from typing import Any

from liqo_rules.selectors.labels import label_key_errors, label_value_errors, parse_go_int64
from liqo_rules.selectors.requirements import (
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
    quote,
)

# Token kinds, named as apimachinery names them (labels.Token).
_T_EOS = "EndOfStringToken"
_T_CLOSE = "ClosedParToken"
_T_COMMA = "CommaToken"
_T_NOT = "DoesNotExistToken"
_T_DEQ = "DoubleEqualsToken"
_T_EQ = "EqualsToken"
_T_GT = "GreaterThanToken"
_T_IDENT = "IdentifierToken"
_T_IN = "InToken"
_T_LT = "LessThanToken"
_T_NEQ = "NotEqualsToken"
_T_NOTIN = "NotInToken"
_T_OPEN = "OpenParToken"

# The symbols the Lexer knows, with their text; "in" and "notin" are keywords only where an operator
# is expected (apimachinery's Parser turns them back into identifiers everywhere else).
_SYMBOLS = {
    b")": (_T_CLOSE, ")"),
    b",": (_T_COMMA, ","),
    b"!": (_T_NOT, "!"),
    b"==": (_T_DEQ, "=="),
    b"=": (_T_EQ, "="),
    b">": (_T_GT, ">"),
    b"<": (_T_LT, "<"),
    b"!=": (_T_NEQ, "!="),
    b"(": (_T_OPEN, "("),
}
_KEYWORDS = {"in": _T_IN, "notin": _T_NOTIN}
# One token of apimachinery's Lexer, after any whitespace: (1) the end of the string, or a NUL byte
# (its read() returns 0 for both); (2) a special symbol, "==" or "!=" when they are there (the longest
# symbol it knows), else one byte; (3) an identifier, every byte up to a special one, whitespace or NUL.
# A NUL byte right after a symbol or an identifier is swallowed: the Lexer reads it as the end of the
# token and does not put it back.
_TOKEN = re.compile(rb"[ \t\r\n]*(?:(\x00|\Z)|(==|!=|[=!(),><])\x00?|([^=!(),><\x20\t\r\n\x00]+)\x00?)")
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

# A token: (kind, literal, byte position). Plain tuples: a selector at the limits has 17,500 of them.
_Tok = tuple[str, str, int]


def _decode(b: bytes) -> str:
    """An identifier's text: its UTF-8 (lone surrogates kept), or with U+FFFD where it is not UTF-8."""
    try:
        return b.decode("utf-8", "surrogatepass")
    except UnicodeDecodeError:
        return b.decode("utf-8", "replace")


def _lex(data: bytes) -> list[_Tok]:
    """Tokenize like apimachinery's Lexer, stopping at the first end-of-string token; "in" and "notin"
    come out as identifiers (see ``_Parser._operator``)."""
    toks: list[_Tok] = []
    for found in _TOKEN.finditer(data):
        symbol, identifier = found.group(2, 3)
        if symbol is not None:
            kind, text = _SYMBOLS[symbol]
            toks.append((kind, text, found.start(2)))
        elif identifier is not None:
            toks.append((_T_IDENT, _decode(identifier), found.start(3)))
        else:
            toks.append((_T_EOS, "", found.end()))
            break
    return toks


class _Parser:
    """apimachinery's recursive-descent selector parser."""

    def __init__(self, text: str) -> None:
        self.text = text
        self.toks = _lex(text.encode("utf-8", "surrogatepass"))
        self.i = 0

    def _look(self) -> _Tok:
        return self.toks[self.i]

    def _take(self) -> _Tok:
        t = self.toks[self.i]
        self.i += 1
        return t

    def _operator(self) -> _Tok:
        """The next token, where an operator is expected: "in" and "notin" are keywords there (only an
        identifier can be spelt so)."""
        kind, lit, pos = self._take()
        return _KEYWORDS.get(lit, kind), lit, pos

    def _err(self, detail: str, tok: _Tok, *, requirement: bool = False) -> SelectorError:
        kind, lit, pos = tok
        where = f"at position {pos}" if kind != _T_EOS else "at the end of the selector"
        prefix = "unable to parse requirement: " if requirement else ""
        return SelectorError(f"{prefix}{detail} ({where})", text=self.text, position=pos, token=lit)

    def parse(self) -> list[Requirement]:
        reqs: list[Requirement] = []
        while True:
            t = self._look()
            if t[0] in (_T_IDENT, _T_NOT):
                reqs.append(self._requirement())
                t2 = self._take()
                if t2[0] == _T_EOS:
                    return reqs
                if t2[0] == _T_COMMA:
                    t3 = self._look()
                    if t3[0] not in (_T_IDENT, _T_NOT):
                        raise self._err(f"found '{t3[1]}', expected: identifier after ','", t3)
                    continue
                raise self._err(f"found '{t2[1]}', expected: ',' or 'end of string'", t2)
            if t[0] == _T_EOS:
                return reqs
            raise self._err(f"found '{t[1]}', expected: !, identifier, or 'end of string'", t)

    def _requirement(self) -> Requirement:
        t = self._take()
        start = t[2]
        negated = t[0] == _T_NOT
        if negated:
            t = self._take()
        if t[0] != _T_IDENT:
            raise self._err(f"found '{t[1]}', expected: identifier", t, requirement=True)
        key = t[1]
        key_errs = label_key_errors(key)
        if key_errs:
            raise self._err(f"invalid label key {quote(key)}: {'; '.join(key_errs)}", t, requirement=True)
        if negated:
            return Requirement(key, SEL_DOES_NOT_EXIST, (), start)
        if self._look()[0] in (_T_EOS, _T_COMMA):
            return Requirement(key, SEL_EXISTS, (), start)
        ot = self._operator()
        op = _TOKEN_TO_OPERATOR.get(ot[0])
        if op is None:
            raise self._err(f"found '{ot[1]}', expected: {_BINARY_OPERATORS}", ot, requirement=True)
        values = self._values() if op in (SEL_IN, SEL_NOT_IN) else self._exact_value()
        # Sorted as apimachinery sorts them, by bytes: the UTF-8 of two strings (lone surrogates too)
        # compares as their code points do, so Python's order is that order.
        ordered = tuple(sorted(values))
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
        if t[0] != _T_OPEN:
            raise self._err(f"found '{t[1]}' expected: '('", t, requirement=True)
        t = self._look()
        if t[0] in (_T_IDENT, _T_COMMA):
            return self._identifiers()
        if t[0] == _T_CLOSE:
            self._take()
            return {""}
        raise self._err(f"found '{t[1]}', expected: ',', ')' or identifier", t, requirement=True)

    def _identifiers(self) -> set[str]:
        """The values up to and including the closing ')'."""
        s: set[str] = set()
        toks = self.toks  # the loop of a 100-value list: tokens read in place, not through _take/_look
        i = self.i
        while True:
            t = toks[i]
            i += 1
            if t[0] == _T_IDENT:
                s.add(t[1])
                t2 = toks[i]
                if t2[0] == _T_COMMA:
                    continue
                if t2[0] == _T_CLOSE:
                    self.i = i + 1
                    return s
                raise self._err(f"found '{t2[1]}', expected: ',' or ')'", t2, requirement=True)
            if t[0] == _T_COMMA:
                if not s:
                    s.add("")
                t2 = toks[i]
                if t2[0] == _T_CLOSE:
                    s.add("")
                    self.i = i + 1
                    return s
                if t2[0] == _T_COMMA:
                    s.add("")
                continue
            raise self._err(f"found '{t[1]}', expected: ',', or identifier", t, requirement=True)

    def _exact_value(self) -> set[str]:
        t = self._look()
        if t[0] in (_T_EOS, _T_COMMA):
            return {""}
        t = self._take()
        if t[0] == _T_IDENT:
            return {t[1]}
        raise self._err(f"found '{t[1]}', expected: identifier", t, requirement=True)


def lex(text: str) -> list[tuple[str, str]]:
    """The (token name, literal) pairs apimachinery's lexer yields, ending with EndOfStringToken."""
    return [(_KEYWORDS.get(lit, kind), lit) for kind, lit, _ in _lex(text.encode("utf-8", "surrogatepass"))]


def parse_operator(token: str) -> str:
    """The apimachinery operator for an operator token (in, notin, =, ==, !=, >, <), else SelectorError."""
    parser = _Parser(token)
    kind, lit, pos = parser._operator()
    op = _TOKEN_TO_OPERATOR.get(kind)
    if op is None:
        raise SelectorError(f"found '{lit}', expected: {_BINARY_OPERATORS}", text=token, position=pos, token=lit)
    return op


def parse_requirements(text: str) -> list[Requirement]:
    """labels.ParseToRequirements: the clauses of a kubectl -l selector, sorted by key (stable)."""
    if not isinstance(text, str):
        raise SelectorError(f"a selector must be a string, not {type(text).__name__}")
    reqs = _Parser(text).parse()
    return sorted(reqs, key=lambda r: r.key)  # by bytes, as apimachinery: see _requirement


def parse_label_selector(text: str) -> list[dict[str, Any]]:
    """Parse a kubectl -l selector into NodeSelectorRequirement dicts {"key", "operator", "values"}.

    = and == give In, != gives NotIn, in/notin give In/NotIn, a bare key gives Exists, !key gives
    DoesNotExist and >/< give Gt/Lt. Requirements come sorted by key, values sorted and de-duplicated.
    """
    return [r.as_node_requirement() for r in parse_requirements(text)]


def label_selector_matches(text: str, labels: dict[str, str]) -> bool:
    """Whether a kubectl -l selector matches a label set (the empty selector matches everything)."""
    return all(r.matches(labels) for r in parse_requirements(text))
