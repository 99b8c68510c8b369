"""The preview's JSON answer, byte for byte what DRF's ``JSONRenderer`` writes, written faster.

At the selector limits the answer is about 3 MB, two thirds of it the per-term verdicts of each virtual
node (50 terms x 200 nodes). Nodes alike for the selector share one explanation
(``liqo_rules.peers.select_clusters``) and the view hands them the same ``terms`` list, so that
list is encoded once per distinct object and its bytes repeated, instead of 10,000 small objects
encoded again. The answer is assembled as UTF-8 pieces joined once: a reason quotes "…", which makes a
3 MB ``str`` two bytes a character, and every copy of it costs milliseconds.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from rest_framework.compat import SHORT_SEPARATORS
from rest_framework.renderers import JSONRenderer


def _utf8(text: str) -> bytes:
    """What ``JSONRenderer`` does after ``json.dumps``: U+2028 and U+2029 escaped, UTF-8 (a piece at a
    time gives the same bytes: each replacement is one character)."""
    return text.replace("\u2028", "\\u2028").replace("\u2029", "\\u2029").encode()


def _ends_with_list(value: Any, last: str) -> bool:
    """Whether ``value`` is a dict with text keys whose last key is ``last``, holding a list."""
    return (
        isinstance(value, dict)
        and all(isinstance(key, str) for key in value)
        and bool(value)
        and next(reversed(value)) == last
        and isinstance(value[last], list)
    )


class _Writer:
    """The pieces of one answer: ``encode`` is the JSONRenderer's encoder with its options."""

    def __init__(self, encode: Callable[[Any], str]) -> None:
        self.encode = encode
        self.pieces: list[bytes] = []
        self.written: dict[int, bytes] = {}  # id of a list -> its bytes; the lists live as long as the data

    def value(self, value: Any) -> None:
        self.pieces.append(_utf8(self.encode(value)))

    def shared(self, value: list[Any]) -> None:
        found = self.written.get(id(value))
        if found is None:
            found = self.written[id(value)] = _utf8(self.encode(value))
        self.pieces.append(found)

    def items(self, values: list[Any], write: Callable[[Any], None]) -> None:
        self.pieces.append(b"[")
        for i, item in enumerate(values):
            if i:
                self.pieces.append(b",")
            write(item)
        self.pieces.append(b"]")

    def ending_with(self, value: Any, last: str, write_last: Callable[[list[Any]], None]) -> None:
        """``value``, a dict whose last key ``last`` holds a list written by ``write_last``; anything
        else is encoded whole."""
        if not _ends_with_list(value, last):
            self.value(value)
            return
        head = self.encode({key: item for key, item in value.items() if key != last})
        self.pieces.append(_utf8(("{" if head == "{}" else head[:-1] + ",") + self.encode(last) + ":"))
        write_last(value[last])
        self.pieces.append(b"}")

    def explanation(self, value: Any) -> None:
        self.ending_with(value, "terms", self.shared)

    def row(self, value: Any) -> None:
        self.ending_with(value, "explanations", lambda explanations: self.items(explanations, self.explanation))


class PreviewJSONRenderer(JSONRenderer):
    """``JSONRenderer`` for ``POST .../preview/``: the same bytes, the ``clusters`` rows assembled here
    with each explanation's ``terms`` list encoded once per object. Indented answers (``Accept:
    application/json; indent=4``, the browsable API) and other shapes are left to ``JSONRenderer``."""

    def render(self, data: Any, accepted_media_type: str | None = None, renderer_context: Any = None) -> bytes:
        indent = self.get_indent(accepted_media_type or "", renderer_context or {})
        plain = isinstance(data, dict) and all(isinstance(key, str) for key in data)
        if indent is not None or not self.compact or not plain or not isinstance(data.get("clusters"), list):
            rendered: bytes = super().render(data, accepted_media_type, renderer_context)
            return rendered
        encoder = self.encoder_class(
            ensure_ascii=self.ensure_ascii, allow_nan=not self.strict, separators=SHORT_SEPARATORS
        )
        out = _Writer(encoder.encode)
        out.pieces.append(b"{")
        for i, (key, value) in enumerate(data.items()):
            out.pieces.append(_utf8(("," if i else "") + out.encode(key) + ":"))
            if key == "clusters":
                out.items(value, out.row)
            else:
                out.value(value)
        out.pieces.append(b"}")
        return b"".join(out.pieces)
