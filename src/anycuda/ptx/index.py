"""The index of a PTX module: its top-level items, found without parsing function bodies.

Real modules are large (CuPy's CUB extension holds hundreds of template kernels in 15 MB of
PTX; cuBLAS registers 4,000 kernels at `cublasCreate`) and a program launches few of their
kernels. Loading a module therefore only splits its text into top-level items (`ModuleIndex`):
the header lines, variable declarations, functions and kernels with their text spans. What is
not a function (header, variables, module-scope directives) is parsed at once, so a malformed
declaration is reported at load, as is text that does not split (a missing `}`).

A kernel is parsed only when it is needed, from its *unit* (`ModuleIndex.kernel_unit`): the
header, the variables the kernel and the device functions it reaches name (every `.const`
one too: a generic address may point into any of them), those functions, and the kernel,
in the module's order. The unit's text keeps every item on its line and column of the module
(the space between them is blank), so that an error names the module's position; its `key`
is the items' text alone, so that a module that differs in one kernel keeps the other
kernels' keys (compiler/build/cache.py).

Cost: splitting is one pass over the text (regular expressions find braces, semicolons,
comments and strings); a unit costs the text of what it holds, plus one scan of each reached
function for the names it uses (kept per function).
"""
from __future__ import annotations

import re
from bisect import bisect_right
from dataclasses import dataclass

from .errors import PtxError
from .parser import parse

# what ends an item at module scope, or nests: strings and comments are matched so that a
# brace or semicolon inside them counts for nothing
_AT_SCOPE = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*.*?\*/|[{};]', re.DOTALL)
_BODY_MARK = re.compile(r'[{}"/]')
_STRING_OR_COMMENT = re.compile(r'"(?:[^"\\\n]|\\.)*"|//[^\n]*|/\*.*?\*/', re.DOTALL)
_SPACE = re.compile(r"(?:\s+|//[^\n]*|/\*.*?\*/)*", re.DOTALL)
# directives that take the rest of their line and no semicolon
_LINE_DIRECTIVE = re.compile(r"\.(?:version|target|address_size|file|loc)(?![\w$])")
_FUNCTION = re.compile(r"(?<![\w$.])\.(entry|func)(?![\w$])\s*(?:\([^)]*\)\s*)?([A-Za-z_$%][\w$]*)")
_NAME = re.compile(r"[A-Za-z_$%][\w$]*")


@dataclass
class Item:
    """One top-level item: its text span [start, end), line and column (1-based), and kind:
    'header' (.version, .target, .address_size, .file), 'variable', 'function' (a .func or
    .entry, `name` set, `body` whether it has one), 'section' (debug data) or 'other'."""
    start: int
    end: int
    line: int
    col: int
    kind: str
    name: str = ""
    is_kernel: bool = False
    body: bool = False


@dataclass
class Unit:
    """The PTX text of a part of a module (see the module docstring)."""
    text: str            # parseable, with the module's lines and columns
    key: str             # the items' text alone: what decides the code


class ModuleIndex:
    """The top-level items of a PTX module (module docstring). Raises PtxError where the text
    does not split into items, or a header or variable declaration is malformed."""

    def __init__(self, text: str, source_name: str = "<ptx>"):
        if isinstance(text, (bytes, bytearray)):
            text = bytes(text).decode("utf-8", errors="replace")
        self.text, self.source_name = text, source_name
        self.items = _Splitter(text, source_name).items()
        self.functions = {}                      # name -> [its items: prototypes, definition]
        self._kernels = {}                       # kernel name -> the item of its definition
        for item in self.items:
            if item.kind == "function":
                self.functions.setdefault(item.name, []).append(item)
                if item.is_kernel and item.body:
                    self._kernels.setdefault(item.name, item)
        self.kernels = list(self._kernels)       # in the module's order
        scope = parse(self._text_of([i for i in self.items if i.kind in ("header", "variable", "other")]),
                      source_name)
        self.variables = {}                      # variable name -> its item
        self._const_variables = set()
        starts = [i.line for i in self.items]
        for d in scope.variables:
            self.variables[d.name] = self.items[bisect_right(starts, d.loc.line) - 1]
            if d.space == "const":
                self._const_variables.add(d.name)
        self._names = {}                         # id(item) -> the names it uses of functions and variables

    def has_kernel(self, name: str) -> bool:
        return name in self._kernels

    # -------------------------------------------------------------- units
    def _text_of(self, items) -> str:
        """The items' text at their own lines and columns, blank between them."""
        parts, line = [], 1
        for item in items:
            if parts and item.line <= line:
                parts.append("\n")             # two items on one line: the second on the next
                line += 1
            parts.append("\n" * (item.line - line) + " " * (item.col - 1))
            body = self.text[item.start:item.end]
            parts.append(body)
            line = item.line + body.count("\n")
        return "".join(parts) + "\n"

    def _key_of(self, items) -> str:
        return "\0".join(self.text[i.start:i.end] for i in items)

    def names_used(self, item) -> frozenset:
        """The functions and variables of this module that `item` names (kept per item)."""
        names = self._names.get(id(item))
        if names is None:
            used = set(_NAME.findall(self.text, item.start, item.end))
            names = self._names[id(item)] = frozenset(n for n in used
                                                      if n in self.functions or n in self.variables)
        return names

    def reached(self, roots, through_initialisers=False) -> tuple:
        """(functions, variables): the names reached from the items `roots` through the
        functions they name, and with `through_initialisers` through what the initialisers of
        the variables they name name (a worklist: each item's text is scanned once)."""
        functions, variables, todo = set(), set(), list(roots)
        while todo:
            for name in self.names_used(todo.pop()):
                if name in self.functions:
                    if name not in functions:
                        functions.add(name)
                        todo.extend(self.functions[name])
                elif name not in variables:
                    variables.add(name)
                    if through_initialisers:
                        todo.append(self.variables[name])
        return functions, variables

    def kernel_unit(self, name: str) -> Unit:
        """The unit of kernel `name` (module docstring). KeyError for an unknown kernel."""
        kernel = self._kernels[name]
        functions, variables = self.reached([kernel])
        keep = {id(self.variables[n]) for n in variables | self._const_variables}
        return self._unit([kernel], functions, keep, also=lambda i: i.kind == "function" and i.name == name and not i.body)

    def variables_unit(self) -> Unit | None:
        """The unit that defines the module's variables: every variable, and the device
        functions their initialisers name (a table of function addresses); None where the
        module has no variables."""
        if not self.variables:
            return None
        roots = list({id(i): i for i in self.variables.values()}.values())
        functions, _ = self.reached(roots, through_initialisers=True)
        return self._unit(roots, functions, set())

    def _unit(self, roots, functions, keep, also=lambda item: False) -> Unit:
        """The unit of the items `roots`, the functions named `functions` (prototypes and
        definitions), the items whose ids are in `keep` and those `also` takes, with the header
        and module-scope directives, in the module's order."""
        keep = keep | {id(i) for i in roots} | {id(i) for n in functions for i in self.functions[n]}
        items = [i for i in self.items if id(i) in keep or i.kind in ("header", "other") or also(i)]
        return Unit(self._text_of(items), self._key_of(items))


class _Splitter:
    """Splits a module's text into its top-level items (one pass; see the module docstring)."""

    def __init__(self, text: str, source_name: str):
        self.text, self.source_name = text, source_name
        self._last_line = (0, 1)                # (position, its line) last asked for

    def items(self) -> list:
        return list(self._split())

    def _split(self):
        text, pos, n = self.text, 0, len(self.text)
        while True:
            pos = _SPACE.match(text, pos).end()
            if pos >= n:
                return
            if _LINE_DIRECTIVE.match(text, pos):
                end = text.find("\n", pos)
                end = n if end < 0 else end
                yield self._item(pos, end, "header")
            else:
                end, braces = self._item_end(pos)
                yield self._classify(pos, end, braces)
            pos = end

    def _item_end(self, pos):
        """(where the item starting at `pos` ends, whether at a closing brace): at a ';' at
        module scope, or at the '}' closing a function's (or a section's) body; the braces of
        an initialiser (after '=') are passed over, and its ';' ends the item."""
        text, at = self.text, pos
        while True:
            m = _AT_SCOPE.search(text, at)
            if m is None:
                raise self._error("unexpected end of input (missing ';')", len(text))
            c = text[m.start()]
            if c == ";":
                return m.end(), False
            if c == "}":
                raise self._error("unexpected '}' at module scope", m.start())
            if c != "{":
                at = m.end()                    # a string or a comment
                continue
            close = self._closing_brace(m.end())
            if "=" not in text[pos:m.start()]:
                return close, True
            at = close

    def _closing_brace(self, pos):
        """Where the '}' closing a '{' just before `pos` ends. Searches for the few characters
        that matter and only then tells strings and comments apart (one regex alternation tried
        at every character was 5x slower on CuPy's 21 MB CUB module)."""
        depth, text, at = 1, self.text, pos
        while True:
            m = _BODY_MARK.search(text, at)
            if m is None:
                raise self._error("unexpected end of input (missing '}')", len(text))
            c, at = m.group(), m.end()
            if c == "{":
                depth += 1
            elif c == "}":
                depth -= 1
                if depth == 0:
                    return at
            else:                               # a string or a comment, or a lone '/'
                skipped = _STRING_OR_COMMENT.match(text, at - 1)
                if skipped is not None:
                    at = skipped.end()

    def _classify(self, start, end, braces):
        head = self.text[start:end]
        if head.startswith(".section"):
            return self._item(start, end, "section")
        m = _FUNCTION.search(head.split("{", 1)[0] if braces else head)
        if m is not None:
            return self._item(start, end, "function", m.group(2), m.group(1) == "entry", braces)
        if braces:
            return self._item(start, end, "other")
        return self._item(start, end, "variable" if _is_declaration(head) else "other")

    def _item(self, start, end, kind, name="", is_kernel=False, body=False):
        line, col = self._linecol(start)
        return Item(start, end, line, col, kind, name, is_kernel, body)

    def _linecol(self, pos):
        """(line, column) of `pos`, counting newlines from the last position asked (items come
        in order) or from the start."""
        last, line = self._last_line if self._last_line[0] <= pos else (0, 1)
        line += self.text.count("\n", last, pos)
        self._last_line = (pos, line)
        return line, pos - (self.text.rfind("\n", 0, pos) + 1) + 1

    def _error(self, message, pos):
        line, col = self._linecol(pos)
        start = pos - col + 1
        end = self.text.find("\n", start)
        return PtxError(message, line, col, self.source_name, self.text[start:end if end >= 0 else None])


def split_items(text: str, source_name: str = "<ptx>") -> list:
    """The top-level items of PTX `text`, with their text (`text[item.start:item.end]`).
    Raises PtxError where the text does not split (a missing '}' or ';')."""
    return _Splitter(text, source_name).items()


_SPACES = (".global", ".const", ".shared", ".local", ".tex", ".param", ".reg", ".sreg")


def _is_declaration(head: str) -> bool:
    """Whether a module-scope statement is a variable declaration (a state space among its
    leading directives, after linkage)."""
    for word in head.split():
        if word in _SPACES:
            return True
        if not word.startswith("."):
            return False
    return False
