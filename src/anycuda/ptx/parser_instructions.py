"""The PTX parser's instruction statements (ptx/parser.py): the opcode and its dot-modifiers,
each checked against what some form of the instruction takes (modifiers.MODIFIERS, forms),
and the operands: registers, vectors, immediates, symbols, addresses `[base+offset]`, call
argument lists and constant expressions.

A mixin of parser._Parser, which gives it the token stream and the error handling.
"""
from __future__ import annotations

from . import forms, ir
from .modifiers import TYPES, unknown_modifier
from .opcodes import split_opcode


class _InstructionSyntax:
    """Instruction statements, for parser._Parser."""

    def instruction(self):
        kinds, texts = self.kinds, self.texts
        first = self.i
        guard = None
        if texts[first] == "@" and kinds[first] == "punct":
            self.advance()
            neg = self.accept("!")
            g = self.i
            if kinds[g] != "name" or "." in texts[g]:
                raise self.fail(f"expected a predicate register after '@', found {self.describe()}")
            self.advance()
            guard = ir.Guard(ir.Reg(self.resolve(texts[g])[0]), neg)
        op_i = self.i
        if kinds[op_i] != "name" or texts[op_i][0] in "%$":
            if kinds[op_i] == "eof":
                raise self.error("unexpected end of input, expected an instruction")
            raise self.fail(f"expected an instruction, found {self.describe()}")
        split = split_opcode(texts[op_i])
        if split is None:
            raise self.error(f"unknown instruction '{texts[op_i]}'", op_i)
        opcode, mods = split
        bad = unknown_modifier(opcode, mods)
        if bad is not None:
            what = "type" if bad in TYPES else "modifier"
            raise self.error(f"{opcode}: unknown {what} .{bad}", op_i, offset=self.modifier_column(op_i, opcode, bad))
        self.advance()
        starts = []                   # the token of each operand, to point at a wrong one
        if opcode == "call":
            operands = self.call_operands()
        else:
            operands = []
            if not (texts[self.i] == ";" and kinds[self.i] == "punct"):
                while True:
                    starts.append(self.i)
                    operands.append(self.operand(0))
                    if kinds[self.i] == "punct":
                        t = texts[self.i]
                        if t == ",":
                            self.advance()
                            continue
                        if t == ";":
                            break
                    raise self.missing_separator()
        end = self.i
        for message, where in forms.problems(opcode, mods, tuple(operands)):
            if isinstance(where, int):
                self.errors.append(self.error(message, starts[where]))
            else:
                offset = self.modifier_column(op_i, opcode, where) if where else 0
                self.errors.append(self.error(message, op_i, offset=offset))
        self.advance()
        return ir.Instruction(opcode, mods, tuple(operands), self.loc(first), guard, self.debug,
                              self.statement_text(first, end))

    def modifier_column(self, op_i, opcode, modifier):
        """How far into the token `opcode.mod1.mod2...` at `op_i` modifier `modifier` is."""
        words = self.texts[op_i].split(".")
        return len(".".join(words[:words.index(modifier, opcode.count(".") + 1)]))

    def missing_separator(self):
        i = self.i
        if self.kinds[i] != "eof" and self.tk.linecol(i)[0] != self.tk.linecol(i - 1)[0]:
            return self.fail(f"expected ';' at the end of the statement, found {self.describe()}")
        return self.fail(f"expected ',' or ';' after an operand, found {self.describe()}")

    def call_operands(self):
        rets = ir.ParamList(())
        if self.texts[self.i] == "(" and self.kinds[self.i] == "punct":
            rets = self.paren_list()
            self.expect(",", "',' after the return list")
        ops = [rets, self.operand(0), ir.ParamList(())]
        if self.accept(","):
            if self.texts[self.i] == "(" and self.kinds[self.i] == "punct":
                ops[2] = self.paren_list()
                if self.accept(","):
                    ops.append(self.operand(0))
            else:
                ops.append(self.operand(0))
        if not (self.texts[self.i] == ";" and self.kinds[self.i] == "punct"):
            raise self.missing_separator()
        return ops

    def paren_list(self):
        self.advance()
        items = []
        if self.accept(")"):
            return ir.ParamList(())
        while True:
            items.append(self.operand(1))
            if self.accept(")"):
                return ir.ParamList(tuple(items))
            self.expect(",", "',' or ')'")

    def operand(self, depth):
        i = self.i
        k, t = self.kinds[i], self.texts[i]
        if k == "name":
            self.advance()
            op = self.name_operand(t, i)
            if self.kinds[self.i] == "punct":
                nt = self.texts[self.i]
                if nt == "|":
                    self.advance()
                    j = self.i
                    if self.kinds[j] != "name":
                        raise self.fail(f"expected a register after '|', found {self.describe()}")
                    self.advance()
                    second = self.name_operand(self.texts[j], j)
                    # (elect.sync's lane may be the sink: `_|%p`)
                    if not isinstance(op, ir.Reg) and op != ir.Sym("_") or not isinstance(second, ir.Reg):
                        raise self.error("'|' joins two registers", i)
                    return ir.Pair(op, second)
                if nt in ("+", "-") and isinstance(op, ir.Sym) and op.name != "_":
                    return ir.Addr(op, self.offset())
                if nt == "[" and isinstance(op, ir.Sym):
                    return self.indexed(op, i)
            return op
        if k == "punct":
            if t == "[":
                return self.address(depth)
            if t == "{":
                if depth > 2:
                    raise self.error("vector operand nested too deeply")
                self.advance()
                items = []
                while True:
                    items.append(self.operand(depth + 1))
                    if self.accept("}"):
                        vec = ir.Vec(tuple(items))
                        if depth == 0 and self.texts[self.i] == "|" and self.kinds[self.i] == "punct":
                            return self.vector_pair(vec)
                        return vec
                    self.expect(",", "',' or '}' in the vector operand")
            if t == "!":
                self.advance()
                j = self.i
                inner = self.operand(depth + 1) if self.kinds[j] == "name" else None
                if not isinstance(inner, ir.Reg):
                    raise self.fail(f"'!' applies to a predicate register, found {self.describe(j)}", j)
                return ir.Not(inner)
            if t in ("-", "+"):
                self.advance()
                if self.kinds[self.i] in ("int", "hexf", "dec"):
                    return self.number(t == "-")
                if self.texts[self.i] == "(":
                    v = self.const_expr(0)
                    return ir.Imm(-v if t == "-" else v)
                raise self.fail(f"expected a number after {t!r}, found {self.describe()}")
            if t == "(":
                return ir.Imm(self.const_expr(0))
        if k in ("int", "hexf", "dec"):
            return self.number()
        if k == "eof":
            raise self.error("unexpected end of input, expected an operand")
        raise self.fail(f"expected an operand, found {self.describe()}")

    def vector_pair(self, vec):
        """`{d0, ...}|p`: a vector result with a predicate (sparse tex and tld4)."""
        self.advance()
        j = self.i
        if self.kinds[j] != "name":
            raise self.fail(f"expected a register after '|', found {self.describe()}")
        self.advance()
        return ir.Pair(vec, self.name_operand(self.texts[j], j))

    def name_operand(self, name, i):
        if name[0] == "%":
            spelling, is_reg = self.resolve(name)
            if is_reg is not None:
                return ir.Reg(spelling) if is_reg else ir.Sym(spelling)
            base, _, comp = name[1:].partition(".")
            kind = ir.SPECIAL_REGISTERS.get(base)
            if kind is not None:
                if comp and (not kind.startswith("v4") or comp not in ir.SPECIAL_COMPONENTS):
                    raise self.error(f"bad special register {name!r}: %{base} has "
                                     + ("components .x, .y and .z" if kind.startswith("v4") else "no components"), i)
                return ir.SpecialReg(base, comp or None)
            return ir.Reg(name)
        if name in ir.PREDEFINED_CONSTANTS and self.resolve(name)[1] is None:
            return ir.Imm(ir.PREDEFINED_CONSTANTS[name])      # WARP_SZ
        if name == "_":
            return ir.Sym("_")
        if "." in name or "::" in name:
            raise self.error(f"unexpected {name!r} in an operand (missing ';' before it?)"
                             if split_opcode(name) else f"bad operand {name!r}", i)
        spelling, is_reg = self.resolve(name)
        return ir.Reg(spelling) if is_reg else ir.Sym(spelling)

    def offset(self):
        """`+4`, `-4`, `+-4`, `+0x10` after an address base."""
        sign = 1
        seen = False
        while self.kinds[self.i] == "punct" and self.texts[self.i] in ("+", "-"):
            if self.texts[self.i] == "-":
                sign = -sign
            self.advance()
            seen = True
        if not seen:
            return 0
        if self.kinds[self.i] == "int":
            return sign * self.number().value
        if self.texts[self.i] == "(" and self.kinds[self.i] == "punct":
            return sign * self.const_expr(0)
        if self.predefined_constant_here():
            return sign * self.predefined_constant()
        raise self.fail(f"expected an integer offset, found {self.describe()}")

    def predefined_constant_here(self) -> bool:
        """Whether the next token is a predefined constant (WARP_SZ) that no declaration hides."""
        t = self.texts[self.i]
        return self.kinds[self.i] == "name" and t in ir.PREDEFINED_CONSTANTS and self.resolve(t)[1] is None

    def predefined_constant(self) -> int:
        return ir.PREDEFINED_CONSTANTS[self.texts[self.advance()]]

    def indexed(self, sym, i):
        """`arr[3]` as an operand: the address of element 3."""
        self.advance()
        idx = self.int_value()
        self.expect("]")
        size = self.var_sizes.get(sym.name)
        if size is None:
            raise self.error(f"cannot index {sym.name!r}: not a declared variable", i)
        return ir.Addr(sym, idx * size + self.offset())

    def address(self, depth):
        self.advance()
        i = self.i
        k = self.kinds[i]
        base, off = None, 0
        if k == "name":
            self.advance()
            base = self.name_operand(self.texts[i], i)
            if not isinstance(base, (ir.Reg, ir.Sym)):
                raise self.error("a special register cannot be used as an address", i)
            off = self.offset()
        else:
            off = self.int_value() if self.texts[i] != "(" else self.const_expr(0)
            off += self.offset()
        if self.texts[self.i] == "," and self.kinds[self.i] == "punct":
            # texture / surface operands: [tex, {x, y}] or [tex, sampler, {x, y}]
            items = [base if base is not None else ir.Imm(off)]
            while self.accept(","):
                items.append(self.operand(depth + 1))
            self.expect("]", "']' closing the operand")
            return ir.Vec(tuple(items))
        self.expect("]", "']' or an offset in the address")
        return ir.Addr(base, off)

    # ------------------------------------------------------------------ constant expressions
    def const_expr(self, depth):
        """A parenthesised integer constant expression, `(4*8+1)`, as PTX allows."""
        if depth > 50:
            raise self.error("constant expression nested too deeply")
        self.expect("(")
        v = self._binary(0, depth)
        self.expect(")", "')' closing the constant expression")
        return v

    def _op_here(self):
        t = self.texts[self.i]
        if self.kinds[self.i] != "punct":
            return None
        nt = self.texts[self.i + 1] if self.i + 1 <= self.last else ""
        two = t + nt if self.kinds[min(self.i + 1, self.last)] == "punct" else None
        if two in ("<<", ">>", "<=", ">=", "==", "!=", "&&", "||"):
            return two
        return t

    def _binary(self, level, depth):
        if level == len(self._PREC):
            return self._unary(depth)
        v = self._binary(level + 1, depth)
        while True:
            op = self._op_here()
            if op not in self._PREC[level]:
                return v
            oi = self.i
            self.i += len(op)
            w = self._binary(level + 1, depth)
            v = _apply(op, v, w)
            if v is None:
                raise self.error("division by zero in a constant expression", oi)
            if abs(v) > 1 << 130:
                raise self.error("constant expression out of range", oi)

    def _unary(self, depth):
        t = self.texts[self.i]
        if self.kinds[self.i] == "punct":
            if t in ("-", "+", "~", "!"):
                self.advance()
                v = self._unary(depth)
                return {"-": -v, "+": v, "~": ~v, "!": int(not v)}[t]
            if t == "(":
                return self.const_expr(depth + 1)
        if self.kinds[self.i] == "int":
            return self.number().value
        if self.predefined_constant_here():
            return self.predefined_constant()
        raise self.fail(f"expected an integer in the constant expression, found {self.describe()}")


def _apply(op, a, b):
    if op in ("/", "%"):
        if b == 0:
            return None
        q = abs(a) // abs(b) * (1 if (a >= 0) == (b >= 0) else -1)
        return q if op == "/" else a - q * b
    if op in ("<<", ">>"):
        b = max(0, min(b, 128))
        return a << b if op == "<<" else a >> b
    return {"+": a + b, "-": a - b, "*": a * b, "&": a & b, "|": a | b, "^": a ^ b,
            "==": int(a == b), "!=": int(a != b), "<": int(a < b), ">": int(a > b), "<=": int(a <= b),
            ">=": int(a >= b), "&&": int(bool(a and b)), "||": int(bool(a or b))}[op]
