"""The PTX parser's declarations (ptx/parser.py): variables and registers in any state space,
their attributes, alignments, vector widths and array sizes, initialisers, and function
parameter lists.

A mixin of parser._Parser, which gives it the token stream and the error handling.
"""
from __future__ import annotations

from . import ir
from .errors import UnsupportedPtx
from .modifiers import BITS, FLOATS, HALVES, SIGNED, UNSIGNED, words

STATE_SPACES = frozenset((".reg", ".sreg", ".const", ".global", ".local", ".param", ".shared", ".tex"))
LINKAGE = frozenset((".extern", ".visible", ".weak", ".common"))
_VECTOR = {".v2": 2, ".v4": 4, ".v8": 8}
_PARAM_ATTR_SPACES = frozenset((".global", ".shared", ".const", ".local"))
MAX_EXPANSION = 1 << 19      # most names one `%r<N>` may declare
MAX_NESTING = 200            # deepest `{ }` nesting / initialiser nesting accepted
_TYPE_BYTES = {"8": 1, "16": 2, "32": 4, "64": 8, "128": 16}
# what a variable, register or parameter may be declared as: the ISA's fundamental types,
# the opaque texture, sampler and surface references, and the packed narrow floats that
# cvt writes to a register
DECLARABLE = words(BITS, UNSIGNED, SIGNED, FLOATS, HALVES, "pred texref samplerref surfref tf32 e4m3x2 e5m2x2")


# the largest .align a declaration may ask for: a variable on a worker's stack or in a code
# object's data cannot be aligned to gigabytes (ptxas takes 2^31)
MOST_ALIGNMENT = 1 << 20


class _DeclarationSyntax:
    """Declarations, for parser._Parser."""

    def parse_var_decl(self, linkage="", single=False, space_required=True):
        """`.space [.align n] [.vN] [.ptr .space .align n] .type name[dims] [= init]`, with
        a comma list of names unless `single`."""
        first = self.i
        space = self.texts[first][1:]
        self.advance()
        align = vector = type_ = None
        attrs = []
        after_ptr = False
        kinds, texts = self.kinds, self.texts
        while kinds[self.i] == "dir":
            d = texts[self.i]
            di = self.i
            self.advance()
            if d == ".align":
                n = self.int_value()
                if n <= 0 or n & (n - 1):
                    raise self.error(f"alignment must be a power of two, not {n}", di + 1)
                if n > MOST_ALIGNMENT:
                    raise self.error(f"alignment {n}: anycuda aligns variables to at most {MOST_ALIGNMENT} bytes "
                                     f"(ptxas takes up to 2^31, CUDA's allocations are 256-byte aligned)", di + 1)
                if after_ptr:
                    attrs.append(f"align {n}")
                else:
                    align = n
            elif d in _VECTOR:
                vector = _VECTOR[d]
            elif d == ".ptr":
                attrs.append("ptr")
                after_ptr = True
            elif after_ptr and d in _PARAM_ATTR_SPACES:
                attrs.append(d[1:])
            elif d == ".attribute":
                attrs.extend(self.attribute_list())
            elif d in LINKAGE or d in STATE_SPACES:
                raise self.error(f"misplaced {d} in a declaration", di)
            else:
                if type_ is not None:
                    raise self.error(f"declaration has two types (.{type_} and {d})", di)
                type_, type_at = d[1:], di
        if type_ is None:
            raise self.fail(f"expected a type in this declaration, found {self.describe()}")
        if type_ not in DECLARABLE:
            raise self.error(f"no variable is of type .{type_}", type_at)
        decls = []
        while True:
            ni = self.i
            if kinds[ni] != "name" or "." in texts[ni] or "::" in texts[ni]:
                raise self.fail(f"expected a variable name, found {self.describe()}")
            name = texts[ni]
            self.advance()
            loc = self.loc(ni)
            if self.texts[self.i] == "<" and kinds[self.i] == "punct":
                self.advance()
                ci = self.i
                n = self.int_value()
                if not 0 <= n <= MAX_EXPANSION:
                    raise self.error(f"register count {n} out of range", ci)
                self.expect(">")
                mk = ir.VarDecl
                attrs_t = tuple(attrs)
                decls.extend(mk(space, type_, f"{name}{k}", loc, None, (), align, vector, None, linkage, attrs_t)
                             for k in range(n))
            else:
                dims = []
                while self.texts[self.i] == "[" and kinds[self.i] == "punct":
                    self.advance()
                    if self.accept("]"):
                        dims.append(0)
                        continue
                    di = self.i
                    n = self.int_value()
                    if n < 0:
                        raise self.error("negative array size", di)
                    dims.append(n)
                    self.expect("]")
                count = None
                if dims:
                    count = 1
                    for n in dims:
                        count *= n
                init = None
                if self.accept("="):
                    ii = self.i
                    init = tuple(self.initialiser(0))
                    if count == 0 and len(dims) == 1:
                        count = len(init)
                        dims = [count]
                    elif count is None and vector is None and len(init) > 1:
                        raise self.error("a scalar has one initial value", ii)
                    elif count and len(init) > count * (vector or 1):
                        raise self.error(f"{len(init)} initial values for {count} elements", ii)
                decls.append(ir.VarDecl(space, type_, name, loc, count, tuple(dims), align, vector, init,
                                        linkage, tuple(attrs)))
            if single or not self.accept(","):
                return decls

    def attribute_list(self):
        """`.attribute(.managed)` / `.attribute(.unified(a, b))` -> ('managed',) ..."""
        self.expect("(")
        out = []
        depth = 1
        while depth:
            k, t = self.kinds[self.i], self.texts[self.i]
            if k == "eof" or (k == "punct" and t == ";"):
                raise self.fail(f"expected ')' closing .attribute, found {self.describe()}")
            if t == "(" and k == "punct":
                depth += 1
            elif t == ")" and k == "punct":
                depth -= 1
            elif k == "dir" and depth == 1:
                out.append(t[1:])
            self.advance()
        return out

    def initialiser(self, depth):
        if depth > MAX_NESTING:
            raise self.error("initialiser nested too deeply")
        if self.accept("{"):
            out = []
            if self.accept("}"):
                return out
            while True:
                out.extend(self.initialiser(depth + 1))
                if self.accept("}"):
                    return out
                self.expect(",", "',' or '}' in the initialiser")
        i = self.i
        k, t = self.kinds[i], self.texts[i]
        if k == "name":
            self.advance()
            if t == "generic" and self.accept("("):
                name = self.symbol_name()
                self.expect(")")
                item = ir.GenericSym(name)
            else:
                if "." in t:
                    raise self.error(f"expected a symbol, found {t!r}", i)
                item = ir.Sym(t)
            if self.texts[self.i] in ("+", "-") and self.kinds[self.i] == "punct":
                raise self.error("a symbol with an offset in an initialiser is not supported", self.i,
                                 UnsupportedPtx)
            return [item]
        neg = False
        if t in ("-", "+") and k == "punct":
            neg = t == "-"
            self.advance()
        return [self.number(neg).value]

    def param_list(self):
        """`( .param ... , .reg ... )` of a function or prototype -> list of VarDecl."""
        self.expect("(")
        params = []
        if self.accept(")"):
            return params
        while True:
            t = self.texts[self.i]
            if t not in (".param", ".reg") or self.kinds[self.i] != "dir":
                raise self.fail(f"expected .param or .reg, found {self.describe()}")
            params.extend(self.parse_var_decl(single=True))
            if self.accept(")"):
                return params
            self.expect(",", "',' or ')' in the parameter list")

    def note_var(self, d):
        """Remember a variable's element size (for `name[index]` operands)."""
        width = _TYPE_BYTES.get(d.type.lstrip("bsuf").split("x")[0], None) if d.type != "pred" else 1
        if width is not None:
            self.var_sizes[d.name] = width * (d.vector or 1)
