"""PTX tokenizer.

One regular expression recognises a token together with the whitespace and comments in
front of it, so the lexer does a single `finditer` pass over the text. Tokens are kept in
three parallel lists (kind, text, start offset); line and column are computed only when a
position is needed (`Tokens.linecol`).

Token kinds:
  name   identifiers, including dotted instruction names and special registers
         (`ld.global.nc.v4.f32`, `%tid.x`, `L2::cache_hint`, `$L__BB0_1`, `_`)
  dir    a directive or type word starting with a dot (`.reg`, `.b32`, `.shared`)
  int    an integer literal (decimal, 0x hex, 0b binary, 0-prefixed octal, optional U)
  hexf   a float written by its bits (`0f3F800000`, `0d3FF0000000000000`)
  dec    a decimal float (`1.5`, `1e-3`, `9.0`)
  str    a string literal
  punct  one punctuation character
  bad    text that is no token at all (reported by the parser with its position)
  eof    the end of the text
"""
from __future__ import annotations

import re
from bisect import bisect_right

_SKIP = r"(?:[ \t\r\n\f\v]+|//[^\n]*|/\*.*?\*/)*"

_TOKEN = re.compile(_SKIP + r"""(?:
    (?P<hexf>0[fF][0-9a-fA-F]{8}(?![\w$])|0[dD][0-9a-fA-F]{16}(?![\w$]))
  | (?P<dec>(?:\d+\.\d*|\.\d+)(?:[eE][+-]?\d+)?(?![\w$.])|\d+[eE][+-]?\d+(?![\w$.]))
  | (?P<int>(?:0[xX][0-9a-fA-F]+|0[bB][01]+|\d+)U?(?![\w$.]))
  | (?P<name>[A-Za-z_$%][\w$]*(?:(?:\.|::)[\w$]+)*)
  | (?P<dir>\.[A-Za-z_][\w$]*(?:::[\w$]+)*)
  | (?P<str>"(?:[^"\\\n]|\\.)*")
  | (?P<badcomment>/\*)
  | (?P<punct>[{}()\[\];,:<>@!|+\-=*/~&^?])
  | (?P<bad>\d[\w$.]*|"[^\n]*|\S)
)?""", re.VERBOSE | re.DOTALL)


# the longest name accepted: PTX sets no bound, but a name becomes the name of an LLVM value,
# whose length LLVM bounds (compiler/build/jit.py raises its bound to this); longer is `bad`
MAX_NAME = 1 << 24


class Tokens:
    """The token lists of one text. Index `n - 1` is always the `eof` token."""

    __slots__ = ("text", "kinds", "texts", "starts", "_line_starts")

    def __init__(self, text: str):
        self.text = text
        kinds, texts, starts = [], [], []
        kadd, tadd, sadd = kinds.append, texts.append, starts.append
        for m in _TOKEN.finditer(text):
            group = m.lastgroup
            if group is None:
                continue            # whitespace and comments only (end of text)
            kadd("bad" if group == "badcomment" else group)
            tadd(m.group(group))
            sadd(m.start(group))
        kadd("eof")
        tadd("")
        sadd(len(text))
        if len(text) > MAX_NAME:          # (only a text this long can hold such a name)
            for i, t in enumerate(texts):
                if kinds[i] == "name" and len(t) > MAX_NAME:
                    kinds[i] = "bad"
        self.kinds, self.texts, self.starts = kinds, texts, starts
        self._line_starts = None

    def __len__(self):
        return len(self.kinds)

    def linecol(self, i: int):
        """(line, column), both 1-based, of token `i`."""
        return self.pos_linecol(self.starts[min(i, len(self.starts) - 1)])

    def pos_linecol(self, pos: int):
        ls = self._line_starts
        if ls is None:
            ls = [0]
            ls.extend(m.end() for m in re.finditer("\n", self.text))
            self._line_starts = ls
        line = bisect_right(ls, pos)
        return line, pos - ls[line - 1] + 1

    def line_text(self, line: int) -> str:
        """The source text of 1-based line `line` (without its newline)."""
        self.pos_linecol(0)
        ls = self._line_starts
        if not 0 < line <= len(ls):
            return ""
        start = ls[line - 1]
        end = ls[line] - 1 if line < len(ls) else len(self.text)
        return self.text[start:end]


def tokenize(text: str) -> Tokens:
    return Tokens(text)
