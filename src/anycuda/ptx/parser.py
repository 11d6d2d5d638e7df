"""PTX parser: text -> ptx.ir.Module.

A recursive-descent parser over the token lists of `lexer.Tokens`. Instructions are parsed
generically (opcode, dot-modifiers, operands): a modifier that no form of its instruction
takes (modifiers.MODIFIERS) is an error here; what a modifier means is decided by the
compiler's tables. Nested `{ }` blocks inside a function body are flattened: every name a
block declares (variables, registers, labels, prototypes) gets a unique spelling
`name$sN`, and its uses inside the block are renamed.

Problems are collected: after a bad statement the parser skips to the next `;` (or the end
of the block) and goes on, and one PtxError listing every problem is raised at the end.
"""
from __future__ import annotations

import re
import struct

from . import ir
from .errors import PtxError, UnsupportedVersion
from .lexer import MAX_NAME, Tokens
from .parser_declarations import LINKAGE, MAX_NESTING, STATE_SPACES, _DeclarationSyntax
from .parser_instructions import _InstructionSyntax
from .targets import KNOWN_TARGETS, NEWEST_ISA

PERF_DIRECTIVES = frozenset((
    ".maxntid", ".reqntid", ".minnctapersm", ".maxnctapersm", ".maxnreg", ".noreturn",
    ".maxclusterrank", ".reqnctapercluster", ".explicitcluster", ".blocksareclusters",
    ".abi_preserve", ".abi_preserve_control"))


class _Fatal(Exception):
    """Parsing cannot go on (end of input inside a function, ...)."""


class _Parser(_DeclarationSyntax, _InstructionSyntax):
    """The parser's state and its module-level grammar; declarations and instruction statements
    are its mixins (parser_declarations.py, parser_instructions.py)."""

    def __init__(self, text: str, source_name: str):
        self.src = text
        self.name = source_name
        self.tk = Tokens(text)
        self.kinds = self.tk.kinds
        self.texts = self.tk.texts
        self.starts = self.tk.starts
        self.last = len(self.kinds) - 1          # index of eof
        self.i = 0
        self.errors = []
        self.debug = None
        self.scope_counter = 0
        self.block_labels = None                 # _labels_of_blocks, made at the first nested block
        self.envs = [{}]                         # name -> (spelling, is_register), innermost last
        self.var_sizes = {}                      # variable name -> element size in bytes

    # ------------------------------------------------------------------ token helpers
    def error(self, msg, i=None, cls=PtxError, offset=0):
        """A PtxError at token `i` (or here), `offset` characters into the token."""
        if i is None:
            i = self.i
        i = min(i, self.last)
        line, col = self.tk.linecol(i)
        return cls(msg, line, col + offset, self.name, self.tk.line_text(line))

    def describe(self, i=None):
        if i is None:
            i = self.i
        k = self.kinds[i]
        if k == "eof":
            return "end of input"
        if k == "bad":
            t = self.texts[i]
            if t.startswith("/*"):
                return "an unterminated comment"
            if t.startswith('"'):
                return "an unterminated string"
            if len(t) > MAX_NAME:
                return f"a name of {len(t):,} characters (at most {MAX_NAME:,})"
            return f"unexpected character(s) {t!r}"
        return repr(self.texts[i])

    def fail(self, msg, i=None):
        """An error for the token at `i` (or here), naming a bad token first."""
        if i is None:
            i = self.i
        if self.kinds[i] == "bad":
            return self.error(f"{self.describe(i)}", i)
        return self.error(msg, i)

    def advance(self):
        i = self.i
        if i < self.last:
            self.i = i + 1
        return i

    def expect(self, text, what=None):
        if self.texts[self.i] != text or self.kinds[self.i] in ("str", "eof", "bad"):
            raise self.fail(f"expected {what or repr(text)}, found {self.describe()}")
        return self.advance()

    def accept(self, text):
        if self.texts[self.i] == text and self.kinds[self.i] in ("punct", "dir", "name"):
            self.i += 1
            return True
        return False

    def loc(self, i):
        return ir.Loc(*self.tk.linecol(i))

    def statement_text(self, first, last):
        raw = self.src[self.starts[first]:self.starts[last] + len(self.texts[last])]
        if "\n" in raw or "/" in raw:
            raw = re.sub(r"//[^\n]*|/\*.*?\*/", " ", raw, flags=re.DOTALL)
            raw = re.sub(r"\s*\n\s*", " ", raw)
        return raw.strip()

    def skip_statement(self, stop_at_brace=True):
        """After an error: skip past the next ';' at this nesting level, or up to a '}'
        that closes the current block, or to a new line that starts a directive."""
        depth = 0
        kinds, texts = self.kinds, self.texts
        start = self.i
        line_of = self.tk.linecol
        start_line = line_of(start)[0]
        while kinds[self.i] != "eof":
            t = texts[self.i]
            k = kinds[self.i]
            if k == "punct":
                if t == ";" and depth <= 0:
                    self.i += 1
                    return
                if t == "{":
                    depth += 1
                elif t == "}":
                    if depth <= 0 and stop_at_brace:
                        return
                    depth -= 1
            elif depth <= 0 and self.i > start and k == "dir" and t in _RESYNC_DIRS \
                    and line_of(self.i)[0] != start_line:
                return
            self.i += 1

    # ------------------------------------------------------------------ numbers
    def number(self, negative=False):
        """An immediate from a number token (after an optional '-' already consumed)."""
        i = self.i
        k = self.kinds[i]
        t = self.texts[i]
        if k == "int":
            self.i += 1
            v = _int_value(t)
            if v is None:
                raise self.error(f"malformed integer {t!r}", i)
            return ir.Imm(-v if negative else v)
        if k == "hexf":
            self.i += 1
            bits = int(t[2:], 16)
            if t[1] in "fF":
                if negative:
                    bits ^= 0x80000000
                return ir.Imm(struct.unpack("<f", struct.pack("<I", bits))[0], bits, 32)
            if negative:
                bits ^= 1 << 63
            return ir.Imm(struct.unpack("<d", struct.pack("<Q", bits))[0], bits, 64)
        if k == "dec":
            self.i += 1
            v = float(t)
            return ir.Imm(-v if negative else v)
        raise self.fail(f"expected a number, found {self.describe()}")

    def int_value(self):
        neg = False
        if self.texts[self.i] in ("-", "+") and self.kinds[self.i] == "punct":
            neg = self.texts[self.i] == "-"
            self.i += 1
        if self.kinds[self.i] != "int":
            raise self.fail(f"expected an integer, found {self.describe()}")
        return self.number(neg).value

    # ------------------------------------------------------------------ module
    def parse_module(self):
        version, target, address_size = None, (), 64
        variables, functions, files = [], [], {}
        kinds, texts = self.kinds, self.texts
        while kinds[self.i] != "eof":
            start = self.i
            try:
                t = texts[self.i]
                if t == ".version":
                    self.advance()
                    version = self.parse_version()
                elif t == ".target":
                    self.advance()
                    names = [self.target_name()]
                    while self.accept(","):
                        names.append(self.target_name())
                    target = tuple(names)
                elif t == ".address_size":
                    self.advance()
                    address_size = self.int_value()
                    if address_size not in (32, 64):
                        raise self.error(f".address_size must be 32 or 64, not {address_size}", start + 1)
                elif t == ".file":
                    idx, path = self.parse_file()
                    files[idx] = path
                elif t == ".section":
                    self.skip_section()
                elif t == ".pragma":
                    self.advance()
                    self.pragma_strings()
                    self.expect(";")
                elif t == ".loc":
                    self.parse_loc()
                elif t == ".alias":
                    self.advance()
                    self.symbol_name()
                    self.expect(",")
                    self.symbol_name()
                    self.expect(";")
                elif t in ("{", "}") and kinds[self.i] == "punct":
                    raise self.error(f"unexpected {t!r} at module scope")
                else:
                    linkage = self.linkage()
                    t = texts[self.i]
                    if t in (".entry", ".func") and kinds[self.i] == "dir":
                        self.debug = None
                        functions.append(self.parse_function(linkage))
                    elif t in STATE_SPACES and kinds[self.i] == "dir":
                        decls = self.parse_var_decl(linkage)
                        self.expect(";")
                        for d in decls:
                            self.note_var(d)
                        variables.extend(decls)
                    elif kinds[self.i] == "eof":
                        raise self.error("unexpected end of input after linkage directive")
                    else:
                        raise self.fail(f"unexpected {self.describe()} at module scope")
            except PtxError as e:
                self.errors.append(e)
                if self.i == start:
                    self.advance()
                self.skip_statement(stop_at_brace=False)
            except _Fatal:
                break
        if version is None and not self.errors:
            raise self.error("missing .version directive", 0)
        return ir.Module(version or (0, 0), target, address_size, variables, functions, files, self.name)

    def parse_version(self):
        i = self.i
        k, t = self.kinds[i], self.texts[i]
        if k == "dec" and re.fullmatch(r"\d+\.\d+", t):
            version = tuple(int(part) for part in t.split("."))
        elif k == "int" and t.isdigit():
            version = (int(t), 0)
        else:
            raise self.fail(f"expected a version number like 9.0, found {self.describe()}")
        if version < (1, 0):
            raise self.fail(f"PTX ISA version {t} does not exist (the first is 1.0)")
        if version > NEWEST_ISA:
            newest = ".".join(map(str, NEWEST_ISA))
            raise self.error(f"unsupported .version {t}: anycuda reads PTX ISA 1.0 to {newest}", i,
                             UnsupportedVersion)
        self.advance()
        return version

    def target_name(self):
        i = self.i
        if self.kinds[i] != "name":
            raise self.fail(f"expected a target name, found {self.describe()}")
        if self.texts[i] not in KNOWN_TARGETS:
            raise self.error(f"unsupported .target {self.texts[i]!r}: not an architecture or option of PTX ISA "
                             f"{NEWEST_ISA[0]}.x", i)
        self.advance()
        return self.texts[i]

    def symbol_name(self):
        i = self.i
        if self.kinds[i] != "name" or "." in self.texts[i]:
            raise self.fail(f"expected a name, found {self.describe()}")
        self.advance()
        return self.texts[i]

    def linkage(self):
        linkage = ""
        while self.texts[self.i] in LINKAGE and self.kinds[self.i] == "dir":
            linkage = self.texts[self.i][1:]
            self.advance()
        return linkage

    def parse_file(self):
        """`.file N "path" [, timestamp, size]`"""
        self.advance()
        idx = self.int_value()
        i = self.i
        if self.kinds[i] != "str":
            raise self.fail(f"expected a file name string, found {self.describe()}")
        self.advance()
        path = _unquote(self.texts[i])
        while self.accept(","):
            self.int_value()
        self.accept(";")
        return idx, path

    def pragma_strings(self):
        out = []
        while True:
            i = self.i
            if self.kinds[i] != "str":
                raise self.fail(f"expected a pragma string, found {self.describe()}")
            self.advance()
            out.append(_unquote(self.texts[i]))
            if not self.accept(","):
                return out

    def skip_section(self):
        """`.section .debug_xxx { ... }`: skipped entirely."""
        first = self.i
        self.advance()
        if self.kinds[self.i] not in ("dir", "name"):
            raise self.fail(f"expected a section name, found {self.describe()}")
        self.advance()
        if not self.accept("{"):
            raise self.fail(f"expected '{{' after the section name, found {self.describe()}")
        depth = 1
        kinds, texts = self.kinds, self.texts
        while depth:
            k = kinds[self.i]
            if k == "eof":
                raise self.error("unterminated .section (missing '}')", first)
            if k == "punct":
                t = texts[self.i]
                if t == "{":
                    depth += 1
                elif t == "}":
                    depth -= 1
            self.i += 1

    def parse_loc(self):
        """`.loc file line col [, function_name label, inlined_at f l c ...]`"""
        first = self.i
        self.advance()
        f = self.int_value()
        line = self.int_value()
        col = self.int_value() if self.kinds[self.i] == "int" else 0
        inlined_at = None
        # extra attributes run to the end of the line
        if self.texts[self.i] == ",":
            line_of = self.tk.linecol
            here = line_of(first)[0]
            while self.kinds[self.i] != "eof" and line_of(self.i)[0] == here and self.texts[self.i] not in (";", "{", "}"):
                kinds = self.kinds[self.i + 1:self.i + 3]
                if self.texts[self.i] == "inlined_at" and kinds == ["int", "int"]:
                    self.advance()
                    at = (self.int_value(), self.int_value())
                    inlined_at = at + ((self.int_value() if self.kinds[self.i] == "int" else 0),)
                    continue
                self.advance()
        self.debug = ir.DebugLoc(f, line, col, inlined_at)

    # ------------------------------------------------------------------ functions
    def parse_function(self, linkage):
        kind_i = self.i
        kind = self.texts[kind_i][1:]
        self.advance()
        directives = {}
        self.directives(directives)
        rets = []
        if self.texts[self.i] == "(" and self.kinds[self.i] == "punct":
            if kind == "entry":
                raise self.error("a kernel (.entry) has no return values")
            rets = self.param_list()
        name = self.symbol_name()
        params = self.param_list() if self.texts[self.i] == "(" and self.kinds[self.i] == "punct" else []
        self.directives(directives)
        fn = ir.Function(name, kind, params, rets, None, self.loc(kind_i), linkage, directives)
        if self.accept(";"):
            return fn
        if not (self.texts[self.i] == "{" and self.kinds[self.i] == "punct"):
            raise self.fail(f"expected '{{' or ';' after the signature of {name}, found {self.describe()}")
        self.advance()
        self.envs = [{}]
        top = self.envs[0]
        for p in rets + params:
            top[p.name] = (p.name, p.space == "reg")
            self.note_var(p)
        fn.body = self.parse_body()
        self.envs = [{}]
        return fn

    def directives(self, out):
        """Performance directives: `.maxntid 256, 1, 1`, `.noreturn`, `.pragma "..."; `."""
        kinds, texts = self.kinds, self.texts
        while kinds[self.i] == "dir":
            d = texts[self.i]
            if d == ".pragma":
                self.advance()
                out["pragma"] = out.get("pragma", ()) + tuple(self.pragma_strings())
                self.expect(";")
            elif d == ".attribute":
                self.advance()
                out["attribute"] = out.get("attribute", ()) + tuple(self.attribute_list())
            elif d in PERF_DIRECTIVES:
                self.advance()
                vals = []
                if kinds[self.i] == "int":
                    vals.append(self.int_value())
                    while self.accept(","):
                        vals.append(self.int_value())
                out[d[1:]] = tuple(vals)
            else:
                return

    # ------------------------------------------------------------------ bodies
    def parse_body(self):
        """Statements up to the '}' closing the function body (nested blocks flattened)."""
        body = []
        self.defined_labels = set()              # this body's labels so far (statement)
        kinds, texts = self.kinds, self.texts
        envs = self.envs
        while True:
            k = kinds[self.i]
            t = texts[self.i]
            if k == "eof":
                self.errors.append(self.error("unexpected end of input inside a function body (missing '}')"))
                raise _Fatal()
            if k == "punct" and t == "}":
                self.advance()
                if len(envs) == 1:
                    return body
                envs.pop()
                continue
            if k == "punct" and t == "{":
                if len(envs) > MAX_NESTING:
                    self.errors.append(self.error("blocks nested too deeply"))
                    raise _Fatal()
                self.advance()
                self.open_scope()
                continue
            start = self.i
            try:
                self.statement(body)
            except PtxError as e:
                self.errors.append(e)
                if self.i == start:
                    self.advance()
                self.skip_statement()

    def open_scope(self):
        """Enter a nested block: the labels it defines are renamed from the start (they may be
        used before their definition); its declarations are added as they come."""
        self.scope_counter += 1
        suffix = f"$s{self.scope_counter}"
        if self.block_labels is None:
            self.block_labels = self._labels_of_blocks()
        env = {name: (name + suffix, False) for name in self.block_labels.get(self.i, ())}
        env["$suffix"] = (suffix, False)
        self.envs.append(env)

    def _labels_of_blocks(self) -> dict:
        """{index of the first token inside each `{`: the labels defined in that block itself,
        not in blocks nested in it}, in one pass over the tokens (a scan per block from its
        start to its end was quadratic in the nesting: 200 nested blocks took seconds)."""
        kinds, texts = self.kinds, self.texts
        labels, open_blocks = {}, []
        for j, k in enumerate(kinds):
            if k != "punct":
                continue
            t = texts[j]
            if t == "{":
                open_blocks.append(j + 1)
                labels[j + 1] = []
            elif t == "}":
                if open_blocks:
                    open_blocks.pop()
            elif t == ":" and open_blocks and j > 0 and kinds[j - 1] == "name":
                labels[open_blocks[-1]].append(texts[j - 1])
        return labels

    def declare(self, name, is_reg):
        """Spelling of a name declared in the current block."""
        envs = self.envs
        if len(envs) == 1:
            envs[0][name] = (name, is_reg)
            return name
        env = envs[-1]
        new = name + env["$suffix"][0]
        env[name] = (new, is_reg)
        return new

    def resolve(self, name):
        """(spelling, is_register or None when undeclared) of a name used here."""
        envs = self.envs
        for n in range(len(envs) - 1, -1, -1):
            hit = envs[n].get(name)
            if hit is not None:
                return hit
        return name, None

    def statement(self, body):
        i = self.i
        k, t = self.kinds[i], self.texts[i]
        if k == "dir":
            if t in STATE_SPACES or t in LINKAGE:
                linkage = self.linkage()
                if self.texts[self.i] not in STATE_SPACES or self.kinds[self.i] != "dir":
                    raise self.fail(f"expected a state space, found {self.describe()}")
                decls = self.parse_var_decl(linkage)
                self.expect(";")
                for d in decls:
                    new = self.declare(d.name, d.space == "reg")
                    if new != d.name:
                        d = ir.VarDecl(d.space, d.type, new, d.loc, d.count, d.dims, d.align, d.vector, d.init,
                                       d.linkage, d.attrs)
                    self.note_var(d)
                    body.append(d)
                return
            if t == ".loc":
                self.parse_loc()
                return
            if t == ".pragma":
                self.advance()
                texts = self.pragma_strings()
                self.expect(";")
                body.extend(ir.Pragma(s, self.loc(i)) for s in texts)
                return
            if t == ".file":
                self.parse_file()
                return
            if t == ".section":
                self.skip_section()
                return
            raise self.error(f"unexpected directive {t} in a function body")
        if k == "name" and self.texts[i + 1] == ":" and self.kinds[i + 1] == "punct":
            if "." in t or "::" in t:
                raise self.error(f"bad label name {t!r}")
            self.i += 2
            name = self.resolve(t)[0]
            if name in self.defined_labels:      # (a block's own labels are spelled apart)
                raise self.error(f"duplicate label {t}", i)
            self.defined_labels.add(name)
            nt = self.texts[self.i]
            if nt == ".callprototype" and self.kinds[self.i] == "dir":
                body.append(self.prototype(name, i))
            elif nt in (".branchtargets", ".calltargets") and self.kinds[self.i] == "dir":
                self.advance()
                targets = [self.resolve(self.symbol_name())[0]]
                while self.accept(","):
                    targets.append(self.resolve(self.symbol_name())[0])
                self.expect(";")
                if nt == ".branchtargets":
                    body.append(ir.BranchTargets(name, tuple(targets), self.loc(i)))
            else:
                body.append(ir.Label(name, self.loc(i)))
            return
        body.append(self.instruction())

    def prototype(self, name, first):
        self.advance()
        rets = self.param_list() if self.texts[self.i] == "(" else []
        if self.texts[self.i] != "_":
            raise self.fail(f"expected '_' in .callprototype, found {self.describe()}")
        self.advance()
        params = self.param_list() if self.texts[self.i] == "(" else []
        while self.texts[self.i] in PERF_DIRECTIVES and self.kinds[self.i] == "dir":
            self.advance()
        self.expect(";")
        return ir.Prototype(name, tuple(rets), tuple(params), self.loc(first))

    _PREC = [("||",), ("&&",), ("|",), ("^",), ("&",), ("==", "!="), ("<", ">", "<=", ">="), ("<<", ">>"),
             ("+", "-"), ("*", "/", "%")]


_RESYNC_DIRS = frozenset((".reg", ".local", ".shared", ".param", ".global", ".const", ".entry", ".func",
                          ".visible", ".extern", ".weak", ".loc", ".version", ".target", ".file"))


def _int_value(t):
    s = t[:-1] if t.endswith("U") else t
    c = s[1:2]
    try:
        if c in ("x", "X"):
            return int(s[2:], 16)
        if c in ("b", "B"):
            return int(s[2:], 2)
        if len(s) > 1 and s[0] == "0":
            return int(s, 8)
        return int(s)
    except ValueError:
        return None


def _unquote(s):
    body = s[1:-1]
    if "\\" not in body:
        return body
    return re.sub(r"\\(.)", lambda m: {"n": "\n", "t": "\t"}.get(m.group(1), m.group(1)), body)


def parse(text: str, source_name: str = "<ptx>") -> ir.Module:
    """Parse PTX text into an ir.Module. Raises PtxError (listing every problem found, each
    with line:col) for malformed input."""
    if isinstance(text, (bytes, bytearray)):
        text = bytes(text).decode("utf-8", errors="replace")
    if not isinstance(text, str):
        raise TypeError("PTX text must be a str")
    p = _Parser(text, source_name)
    try:
        module = p.parse_module()
    except PtxError as e:
        p.errors.append(e)
        module = None
    except (IndexError, ValueError, KeyError, TypeError, RecursionError, OverflowError,
            struct.error) as e:   # a parser bug must still read as a positioned PtxError
        p.errors.append(p.error(f"malformed PTX ({type(e).__name__}: {e})"))
        module = None
    if p.errors:
        # a too new ISA explains whatever else is refused: it leads
        p.errors.sort(key=lambda e: (not isinstance(e, UnsupportedVersion), e.line, e.col))
        first = p.errors[0]
        if len(p.errors) == 1:
            raise first
        raise type(first)(first.message, first.line, first.col, source_name, first.source_line,
                          errors=p.errors)
    return module
