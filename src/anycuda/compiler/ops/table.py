"""The one table of PTX instruction handlers: opcode -> the function that lowers it
(`handles` registers one), and the operand counts each opcode's forms may have. The handlers
live by family in instructions.py, atomics.py and textures.py, which register themselves
here when compiler.ops.instructions is imported; nothing here knows a handler."""
from __future__ import annotations

from ..types import type_mods

BOOL_OPS = ("and", "or", "xor")

HANDLERS = {}

def handles(*opcodes):
    def register(fn):
        for op in opcodes:
            HANDLERS[op] = fn
        return fn
    return register


# Operand counts of each opcode's forms, destinations included (`d|p` and `{a, b}` are one
# operand each), checked over a function's body before any pass reads operands
# (FunctionLowering._check_operand_counts) so that a malformed instruction is reported with
# its line. A handler whose forms vary more than a count can say (call, atom/red, barriers,
# hints) checks its own operands (VARIABLE_FORMS).
OPERAND_COUNTS = {
    **dict.fromkeys(("ret", "exit", "trap", "membar", "fence"), (0,)),
    **dict.fromkeys(("bra", "activemask"), (1,)),
    **dict.fromkeys(("mov", "cvta", "isspacep", "abs", "neg", "not", "cnot", "popc", "clz", "brev", "bfind",
                     "testp", "rcp", "sqrt", "rsqrt", "sin", "cos", "ex2", "lg2", "tanh", "brx"), (2,)),
    **dict.fromkeys(("add", "sub", "mul", "div", "rem", "and", "or", "xor", "shl", "shr", "addc", "subc",
                     "mul24", "copysign", "bmsk", "szext", "redux", "match"), (3,)),
    **dict.fromkeys(("mad", "fma", "madc", "mad24", "sad", "bfe", "prmt", "shf", "fns", "dp4a", "dp2a",
                     "selp", "slct"), (4,)),
    **dict.fromkeys(("bfi", "lop3"), (5,)),
    **dict.fromkeys(("min", "max"), (3, 4)),                 # two or three sources
    **dict.fromkeys(("ld", "ldu", "st"), (2, 3)),            # an optional cache policy
    "cvt": (2, 3),                                           # a packed destination has two sources
    "shfl": (4, 5), "vote": (2, 3),                          # .sync forms add a member mask
}
VARIABLE_FORMS = frozenset(("call", "atom", "red", "bar", "barrier", "prefetch", "prefetchu", "nanosleep",
                            "pmevent", "griddepcontrol", "brkpt", "discard", "applypriority"))


def operand_counts(inst):
    """The operand counts `inst` may have, or None when its handler checks them itself."""
    if inst.opcode in ("set", "setp"):
        # d (or p|q), a, b, and c with a BoolOp
        return (4,) if any(m in BOOL_OPS for m in inst.mods) else (3,)
    return OPERAND_COUNTS.get(inst.opcode)


def inst_type(f, inst, index=-1):
    ts = type_mods(inst.mods)
    if not ts:
        raise f.error(f"'{inst.opcode}' needs a type modifier")
    return ts[index]
