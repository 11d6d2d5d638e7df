"""PTX parser: text -> ptx.ir.Module.

A regex tokenizer and a recursive-descent parser over statements. Instructions are parsed
generically (opcode, dot-modifiers, operands), so the compiler's tables decide what a
modifier means. Nested `{ }` scopes are flattened, renaming what they declare.
"""
from __future__ import annotations

import re
import struct

from . import ir
from .errors import PtxError
from .opcodes import split_opcode

_TOKEN = re.compile(r"""
    (?P<ws>[ \t\r]+|\n)
  | (?P<comment>//[^\n]*|/\*.*?\*/)
  | (?P<string>"(?:[^"\\\n]|\\.)*")
  | (?P<float>0[fF][0-9a-fA-F]{8}|0[dD][0-9a-fA-F]{16})
  | (?P<number>(?:0[xX][0-9a-fA-F]+|0[bB][01]+|\d+\.\d*(?:[eE][+-]?\d+)?|\d+[eE][+-]?\d+|\d+)U?)
  | (?P<name>[%$._a-zA-Z][%$._a-zA-Z0-9]*(?:::[%$._a-zA-Z0-9]+)*)
  | (?P<punct>[{}()\[\];,:<>@!|+\-=*/_])
""", re.VERBOSE | re.DOTALL)


class Token:
    __slots__ = ("kind", "text", "line", "col")

    def __init__(self, kind, text, line, col):
        self.kind, self.text, self.line, self.col = kind, text, line, col

    def __repr__(self):
        return f"{self.kind}:{self.text!r}@{self.line}:{self.col}"


def tokenize(text: str, source_name: str):
    tokens = []
    pos, line, line_start = 0, 1, 0
    n = len(text)
    while pos < n:
        m = _TOKEN.match(text, pos)
        if m is None:
            raise PtxError(f"unexpected character {text[pos]!r}", line, pos - line_start + 1, source_name,
                           _line_of(text, line))
        kind = m.lastgroup
        s = m.group()
        if kind == "ws":
            if s == "\n":
                line += 1
                line_start = m.end()
        elif kind == "comment":
            nl = s.count("\n")
            if nl:
                line += nl
                line_start = pos + s.rfind("\n") + 1
        else:
            tokens.append(Token(kind, s, line, pos - line_start + 1))
        pos = m.end()
    tokens.append(Token("eof", "", line, pos - line_start + 1))
    return tokens


def _line_of(text, line):
    lines = text.split("\n")
    return lines[line - 1] if 0 < line <= len(lines) else ""


SPECIAL_REGS = {
    "tid", "ntid", "laneid", "warpid", "nwarpid", "ctaid", "nctaid", "smid", "nsmid", "gridid",
    "lanemask_eq", "lanemask_le", "lanemask_lt", "lanemask_ge", "lanemask_gt", "clock", "clock_hi",
    "clock64", "globaltimer", "globaltimer_lo", "globaltimer_hi", "total_smem_size",
    "aggr_smem_size", "dynamic_smem_size", "current_graph_exec", "is_explicit_cluster",
    "clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid", "cluster_ctarank",
    "cluster_nctarank", "reserved_smem_offset_begin", "reserved_smem_offset_end",
    "reserved_smem_offset_cap", "reserved_smem_offset_2",
}

STATE_SPACES = {".reg", ".sreg", ".const", ".global", ".local", ".param", ".shared", ".tex"}
LINKAGE = {".extern", ".visible", ".weak", ".common"}
PERF_DIRECTIVES = {".maxntid", ".reqntid", ".minnctapersm", ".maxnctapersm", ".maxnreg", ".noreturn",
                   ".maxclusterrank", ".reqnctapercluster", ".explicitcluster", ".blocksareclusters",
                   ".abi_preserve", ".abi_preserve_control"}


class _Parser:
    def __init__(self, text, source_name):
        self.text = text
        self.source_name = source_name
        self.toks = tokenize(text, source_name)
        self.i = 0
        self.errors = []
        self.debug = None
        self.scope_counter = 0

    # ------------------------------------------------------------ token helpers
    @property
    def tok(self):
        return self.toks[self.i]

    def peek(self, k=1):
        j = min(self.i + k, len(self.toks) - 1)
        return self.toks[j]

    def advance(self):
        t = self.toks[self.i]
        if t.kind != "eof":
            self.i += 1
        return t

    def error(self, msg, tok=None):
        tok = tok or self.tok
        return PtxError(msg, tok.line, tok.col, self.source_name, _line_of(self.text, tok.line))

    def expect(self, text):
        if self.tok.text != text:
            what = "end of input" if self.tok.kind == "eof" else repr(self.tok.text)
            raise self.error(f"expected {text!r}, found {what}")
        return self.advance()

    def accept(self, text):
        if self.tok.text == text:
            return self.advance()
        return None

    def loc(self, tok=None):
        tok = tok or self.tok
        return ir.Loc(tok.line, tok.col)

    def skip_statement(self):
        """After an error: skip to the next ';' or to a line boundary that starts a statement."""
        depth = 0
        start_line = self.tok.line
        while self.tok.kind != "eof":
            t = self.tok
            if t.text == ";" and depth <= 0:
                self.advance()
                return
            if t.text == "{":
                depth += 1
            elif t.text == "}":
                if depth == 0:
                    return
                depth -= 1
            elif t.line != start_line and depth == 0 and (t.text.startswith(".") or t.text.startswith("@")):
                return
            self.advance()

    # ------------------------------------------------------------ numbers
    def number(self, negative=False):
        t = self.advance()
        if t.kind == "float":
            bits = int(t.text[2:], 16)
            if t.text[1] in "fF":
                value = struct.unpack("<f", struct.pack("<I", bits))[0]
                return ir.Imm(-value if negative else value, bits ^ (0x80000000 if negative else 0), 32)
            value = struct.unpack("<d", struct.pack("<Q", bits))[0]
            return ir.Imm(-value if negative else value, bits ^ (1 << 63 if negative else 0), 64)
        if t.kind != "number":
            raise self.error(f"expected a number, found {t.text!r}", t)
        s = t.text.rstrip("U")
        if "." in s or ("e" in s.lower() and not s.lower().startswith("0x")):
            v = float(s)
            return ir.Imm(-v if negative else v)
        if s.lower().startswith("0x"):
            v = int(s, 16)
        elif s.lower().startswith("0b"):
            v = int(s, 2)
        elif len(s) > 1 and s.startswith("0"):
            v = int(s, 8)
        else:
            v = int(s)
        return ir.Imm(-v if negative else v)

    def int_value(self):
        neg = bool(self.accept("-"))
        imm = self.number(neg)
        if imm.is_float:
            raise self.error("expected an integer")
        return imm.value

    # ------------------------------------------------------------ module
    def parse_module(self):
        version, target, address_size = (0, 0), (), 64
        variables, functions, files = [], [], {}
        while self.tok.kind != "eof":
            start = self.i
            try:
                t = self.tok
                if t.text == ".version":
                    self.advance()
                    num = self.advance().text
                    major, _, minor = num.partition(".")
                    if not major.isdigit():
                        raise self.error("bad .version", t)
                    version = (int(major), int(minor or 0))
                elif t.text == ".target":
                    self.advance()
                    names = [self.advance().text]
                    while self.accept(","):
                        names.append(self.advance().text)
                    target = tuple(names)
                elif t.text == ".address_size":
                    self.advance()
                    address_size = self.int_value()
                elif t.text == ".file":
                    self.advance()
                    idx = self.int_value()
                    name = self.advance().text.strip('"')
                    while self.accept(","):
                        self.advance()
                    files[idx] = name
                elif t.text == ".section":
                    self.skip_section()
                elif t.text == ".pragma":
                    self.advance()
                    while self.tok.text != ";" and self.tok.kind != "eof":
                        self.advance()
                    self.expect(";")
                elif t.text == ".loc":
                    self.parse_loc()
                else:
                    linkage = ""
                    while self.tok.text in LINKAGE:
                        linkage = self.advance().text[1:]
                    if self.tok.text in (".entry", ".func"):
                        functions.append(self.parse_function(linkage))
                    elif self.tok.text in STATE_SPACES:
                        variables.extend(self.parse_var_decl(linkage))
                        self.expect(";")
                    elif self.tok.kind == "eof":
                        raise self.error("unexpected end of input")
                    else:
                        raise self.error(f"unexpected {self.tok.text!r} at module scope")
            except PtxError as e:
                self.errors.append(e)
                if self.i == start:
                    self.advance()
                self.skip_statement()
        if self.errors:
            raise PtxError(self.errors[0].message, self.errors[0].line, self.errors[0].col,
                           self.source_name, self.errors[0].source_line, errors=self.errors)
        return ir.Module(version, target, address_size, variables, functions, files, self.source_name)

    def skip_section(self):
        self.advance()
        self.advance()
        if self.accept("{"):
            depth = 1
            while depth and self.tok.kind != "eof":
                t = self.advance()
                if t.text == "{":
                    depth += 1
                elif t.text == "}":
                    depth -= 1
            if depth:
                raise self.error("unterminated .section")

    def parse_loc(self):
        self.advance()
        f = self.int_value()
        line = self.int_value()
        col = self.int_value() if self.tok.kind == "number" else 0
        while self.accept(","):
            while self.tok.text not in (",",) and self.tok.kind != "eof" and self.tok.line == self.toks[self.i - 1].line:
                self.advance()
        self.debug = ir.DebugLoc(f, line, col)

    # ------------------------------------------------------------ declarations
    def parse_var_decl(self, linkage="", single=False):
        """`.space [.align n] [.vN] .type name[dims] [= init]` and comma lists of names."""
        tok = self.tok
        space = self.advance().text[1:]
        align = vector = None
        type_ = None
        attrs = []
        while self.tok.text.startswith(".") and self.tok.kind == "name":
            d = self.advance().text
            if d == ".align":
                align = self.int_value()
            elif d in (".v2", ".v4", ".v8"):
                vector = int(d[2:])
            elif d == ".ptr":
                attrs.append("ptr")
            elif d in (".global", ".shared", ".const", ".local") and space == "param":
                attrs.append(d[1:])
            elif d in (".attribute",):
                self.expect("(")
                while not self.accept(")"):
                    self.advance()
            else:
                type_ = d[1:]
        if type_ is None:
            raise self.error("declaration without a type", tok)
        decls = []
        while True:
            ntok = self.tok
            if ntok.kind != "name":
                raise self.error(f"expected a name, found {ntok.text!r}")
            name = self.advance().text
            if self.accept("<"):
                count = self.int_value()
                self.expect(">")
                for k in range(count):
                    decls.append(ir.VarDecl(space, type_, f"{name}{k}", self.loc(ntok), align=align,
                                            vector=vector, linkage=linkage, attrs=tuple(attrs)))
            else:
                dims = []
                while self.accept("["):
                    if self.accept("]"):
                        dims.append(0)
                        continue
                    dims.append(self.int_value())
                    self.expect("]")
                count = None
                if dims:
                    count = 1
                    for d in dims:
                        count *= d
                init = None
                if self.accept("="):
                    init = tuple(self.parse_initialiser())
                    if count == 0 and dims:
                        count = len(init)
                decls.append(ir.VarDecl(space, type_, name, self.loc(ntok), count=count, dims=tuple(dims),
                                        align=align, vector=vector, init=init, linkage=linkage,
                                        attrs=tuple(attrs)))
            if single or not self.accept(","):
                break
        return decls

    def parse_initialiser(self):
        if self.accept("{"):
            out = []
            if not self.accept("}"):
                while True:
                    out.extend(self.parse_initialiser())
                    if self.accept("}"):
                        break
                    self.expect(",")
            return out
        t = self.tok
        if t.text == "generic":
            self.advance()
            self.expect("(")
            name = self.advance().text
            self.expect(")")
            return [ir.GenericSym(name)]
        if t.kind == "name":
            self.advance()
            name = t.text
            if self.accept("+"):
                self.int_value()
            return [ir.Sym(name)]
        neg = bool(self.accept("-"))
        return [self.number(neg).value]

    def parse_param_list(self):
        self.expect("(")
        params = []
        if self.accept(")"):
            return params
        while True:
            if self.tok.text not in (".param", ".reg"):
                raise self.error(f"expected .param, found {self.tok.text!r}")
            params.extend(self.parse_var_decl(single=True))
            if self.accept(")"):
                return params
            self.expect(",")

    # ------------------------------------------------------------ functions
    def parse_function(self, linkage):
        kind_tok = self.advance()
        kind = kind_tok.text[1:]
        rets = []
        if self.tok.text == "(":
            rets = self.parse_param_list()
        name_tok = self.advance()
        if name_tok.kind != "name":
            raise self.error("expected a function name", name_tok)
        params = self.parse_param_list() if self.tok.text == "(" else []
        directives = {}
        while self.tok.text in PERF_DIRECTIVES or self.tok.text == ".pragma":
            d = self.advance().text
            if d == ".pragma":
                self.advance()
                self.accept(";")
                continue
            vals = []
            while self.tok.kind == "number":
                vals.append(self.int_value())
                if not self.accept(","):
                    break
            directives[d[1:]] = tuple(vals)
        fn = ir.Function(name_tok.text, kind, params, rets, None, self.loc(kind_tok), linkage, directives)
        if self.accept(";"):
            return fn
        self.expect("{")
        fn.body = self.parse_block({}, top=True)
        return fn

    def parse_block(self, rename, top=False):
        """Statements up to the matching '}'. `rename` maps names declared in enclosing
        nested scopes to their unique spellings."""
        body = []
        local = dict(rename)
        while True:
            if self.tok.kind == "eof":
                raise self.error("unexpected end of input inside a function body (missing '}')")
            if self.accept("}"):
                return body
            start = self.i
            try:
                self.parse_statement(body, local, top)
            except PtxError as e:
                self.errors.append(e)
                if self.i == start:
                    self.advance()
                self.skip_statement()

    def parse_statement(self, body, local, top):
        t = self.tok
        if t.text == "{":
            self.advance()
            self.scope_counter += 1
            inner = dict(local)
            inner["$scope"] = self.scope_counter
            body.extend(self.parse_block(inner))
            return
        if t.text in STATE_SPACES:
            decls = self.parse_var_decl()
            self.expect(";")
            for d in decls:
                if not top:
                    new = f"{d.name}$s{local['$scope']}"
                    local[d.name] = new
                    d = ir.VarDecl(d.space, d.type, new, d.loc, d.count, d.dims, d.align, d.vector, d.init,
                                   d.linkage, d.attrs)
                body.append(d)
            return
        if t.text == ".loc":
            self.parse_loc()
            return
        if t.text == ".pragma":
            self.advance()
            txt = self.advance().text
            self.expect(";")
            body.append(ir.Pragma(txt.strip('"'), self.loc(t)))
            return
        if t.text in (".file", ".section"):
            if t.text == ".section":
                self.skip_section()
            else:
                while not self.accept(";") and self.tok.kind != "eof" and self.tok.line == t.line:
                    self.advance()
            return
        if t.kind == "name" and self.peek().text == ":" and not t.text.startswith("."):
            self.advance()
            self.advance()
            name = local.get(t.text, t.text)
            if self.tok.text == ".callprototype":
                body.append(self.parse_prototype(name, t, local))
                return
            if self.tok.text == ".branchtargets":
                self.advance()
                targets = [self.advance().text]
                while self.accept(","):
                    targets.append(self.advance().text)
                self.expect(";")
                body.append(ir.BranchTargets(name, tuple(targets), self.loc(t)))
                return
            body.append(ir.Label(name, self.loc(t)))
            return
        body.append(self.parse_instruction(local))

    def parse_prototype(self, name, tok, local):
        self.advance()
        rets = self.parse_param_list() if self.tok.text == "(" else []
        self.expect("_")
        params = self.parse_param_list() if self.tok.text == "(" else []
        while self.tok.text in PERF_DIRECTIVES:
            self.advance()
        self.expect(";")
        return ir.Prototype(name, tuple(rets), tuple(params), self.loc(tok))

    # ------------------------------------------------------------ instructions
    def parse_instruction(self, local):
        first = self.tok
        guard = None
        if self.accept("@"):
            neg = bool(self.accept("!"))
            g = self.advance()
            if g.kind != "name":
                raise self.error("expected a predicate register after '@'", g)
            guard = ir.Guard(ir.Reg(local.get(g.text, g.text)), neg)
        op_tok = self.advance()
        if op_tok.kind != "name" or op_tok.text.startswith("%"):
            raise self.error(f"expected an instruction, found {op_tok.text!r}", op_tok)
        split = split_opcode(op_tok.text)
        if split is None:
            raise self.error(f"unknown instruction '{op_tok.text.split('.')[0]}'", op_tok)
        opcode, mods = split
        if opcode == "call":
            operands = self.parse_call_operands(local)
        else:
            operands = []
            if self.tok.text != ";":
                while True:
                    operands.append(self.parse_operand(local))
                    if not self.accept(","):
                        break
        end = self.tok
        self.expect(";")
        text = self.text_between(first, end)
        return ir.Instruction(opcode, tuple(mods), tuple(operands), self.loc(op_tok if guard is None else first),
                              guard, self.debug, text)

    def text_between(self, first, end):
        lines = self.text.split("\n") if not hasattr(self, "_lines") else self._lines
        self._lines = lines
        if first.line == end.line:
            return lines[first.line - 1][first.col - 1:end.col].strip()
        parts = [lines[first.line - 1][first.col - 1:]] + lines[first.line:end.line - 1] + \
                [lines[end.line - 1][:end.col]]
        return " ".join(p.strip() for p in parts)

    def parse_call_operands(self, local):
        rets = ir.ParamList(())
        if self.tok.text == "(":
            rets = self.parse_paren_list(local)
            self.expect(",")
        target = self.parse_operand(local)
        args = ir.ParamList(())
        ops = [rets, target]
        if self.accept(","):
            if self.tok.text == "(":
                args = self.parse_paren_list(local)
                ops.append(args)
                if self.accept(","):
                    ops.append(self.parse_operand(local))
            else:
                ops.append(args)
                ops.append(self.parse_operand(local))
        else:
            ops.append(args)
        return ops

    def parse_paren_list(self, local):
        self.expect("(")
        items = []
        if not self.accept(")"):
            while True:
                items.append(self.parse_operand(local))
                if self.accept(")"):
                    break
                self.expect(",")
        return ir.ParamList(tuple(items))

    def parse_operand(self, local):
        t = self.tok
        if t.text == "[":
            return self.parse_address(local)
        if t.text == "{":
            self.advance()
            items = []
            while True:
                items.append(self.parse_operand(local))
                if self.accept("}"):
                    break
                self.expect(",")
            return ir.Vec(tuple(items))
        if t.text == "!":
            self.advance()
            inner = self.parse_operand(local)
            if not isinstance(inner, ir.Reg):
                raise self.error("'!' applies to a predicate register", t)
            return ir.Not(inner)
        if t.text == "-" or t.kind in ("number", "float"):
            neg = bool(self.accept("-"))
            return self.number(neg)
        if t.text == "_":
            self.advance()
            return ir.Sym("_")
        if t.kind == "name":
            self.advance()
            op = self.name_operand(t, local)
            if self.tok.text == "|":
                self.advance()
                second = self.advance()
                return ir.Pair(op, ir.Reg(local.get(second.text, second.text)))
            if self.tok.text == "+" and isinstance(op, ir.Sym) and self.peek().kind == "number":
                # sym+offset outside brackets (e.g. in mov): keep as an address-less symbol offset
                self.advance()
                off = self.int_value()
                return ir.Addr(op, off)
            return op
        raise self.error(f"unexpected {t.text!r} in operand" if t.kind != "eof" else "unexpected end of input")

    def name_operand(self, t, local):
        name = t.text
        if name.startswith("%"):
            base, _, comp = name[1:].partition(".")
            if name not in local and base in SPECIAL_REGS or base.startswith("envreg") or \
                    (base.startswith("pm") and base[2:].isdigit()):
                return ir.SpecialReg(base, comp or None)
            return ir.Reg(local.get(name, name))
        renamed = local.get(name, name)
        # a plain identifier is a register when it was declared with .reg; else a symbol
        return ir.Reg(renamed) if name in self.reg_names else ir.Sym(renamed)

    def is_register(self, name):
        return name in self.reg_names

    def parse_address(self, local):
        self.expect("[")
        base, offset = None, 0
        t = self.tok
        if t.kind == "name":
            self.advance()
            base = self.name_operand(t, local)
            if isinstance(base, ir.SpecialReg):
                raise self.error("a special register cannot be an address", t)
            if self.accept("+"):
                offset = self.int_value()
            elif self.tok.text == "-":
                offset = self.int_value()
        else:
            offset = self.int_value()
        if self.tok.text == ",":
            # texture and surface coordinates: [tex, {x, y}] -- kept as a vector of operands
            items = [base if base is not None else ir.Imm(offset)]
            while self.accept(","):
                items.append(self.parse_operand(local))
            self.expect("]")
            return ir.Vec(tuple(items))
        self.expect("]")
        return ir.Addr(base, offset)


def _register_names(text: str) -> set:
    """Every name declared with .reg (plain identifiers must be told apart from symbols)."""
    names = set()
    for m in re.finditer(r"\.reg\b([^;]*);", text):
        decl = m.group(1)
        decl = re.sub(r"\.\w+", " ", decl)
        for part in decl.split(","):
            part = part.strip()
            part = re.sub(r"<\d+>", "", part)
            if part:
                names.add(part.split()[-1])
    return names


def parse(text: str, source_name: str = "<ptx>") -> ir.Module:
    """Parse PTX text. Raises PtxError (listing every problem found) for malformed input."""
    if not isinstance(text, str):
        raise TypeError("PTX text must be a str")
    p = _Parser(text, source_name)
    p.reg_names = _register_names(text)
    return p.parse_module()
