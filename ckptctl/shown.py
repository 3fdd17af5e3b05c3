"""Text from outside ckptctl (a name read from a file, a listing, a path) as a line can show it: what
a terminal would act on instead of drawing, and line breaks, escaped as Python writes them. One rule
for the CLI's output (:mod:`ckptctl.cli.terminal`) and for the core's one-line errors
(:class:`ckptctl.errors.MetadataFormatError`). No imports but ``re``, so any layer may use it."""

from __future__ import annotations

import re

# Characters a terminal acts on instead of drawing (ESC starts a control sequence that can
# recolour, move the cursor or retitle the window; CR overwrites the line; bidi controls reorder
# what follows), and lone surrogates (a name's bytes that are no UTF-8, as Python decodes them):
# in a name they are shown as Python writes them (``\x1b``, ``\r``, ``\u202e``, ``\xff``).
_ACTED_ON = "\x00-\x09\x0b-\x1f\x7f-\x9f\u2028\u2029\u061c\u200e\u200f\u202a-\u202e\u2066-\u2069\ud800-\udfff"
_ESCAPED = re.compile(f"[\n{_ACTED_ON}]")
_ESCAPED_NOT_LINES = re.compile(f"[{_ACTED_ON}]")
_NAMED = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def _shown(match: re.Match) -> str:
    ch = match.group()
    if ch in _NAMED:
        return _NAMED[ch]
    if 0xDC80 <= ord(ch) <= 0xDCFF:  # surrogateescape: the byte it stands for
        return f"\\x{ord(ch) - 0xDC00:02x}"
    return f"\\x{ord(ch):02x}" if ord(ch) < 0x100 else f"\\u{ord(ch):04x}"


def visible(text: str, lines: bool = False) -> str:
    """``text`` as a terminal can show it without acting on it: control characters (C0, DEL, C1,
    line and paragraph separators, bidi controls) and lone surrogates as escapes, everything else
    as it is. ``lines``: a line break stays one (a string the console prints may be lines of
    ckptctl's own)."""
    if text.isprintable():
        return text
    return (_ESCAPED_NOT_LINES if lines else _ESCAPED).sub(_shown, text)
