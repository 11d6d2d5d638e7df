"""The one table of PTX instruction handlers: opcode -> the function that lowers it
(`handles` registers one), the modifiers it lowers, and the operand counts each opcode's forms
may have. The handlers live by family in instructions.py, atomics.py and textures.py, which
register themselves here when compiler.ops.instructions is imported; nothing here knows a
handler.

Allow-lists: a handler names every modifier it lowers (HANDLED, for each of its opcodes the
part the ISA gives that opcode, ptx/modifiers.py) and how many type modifiers it reads
(TYPE_COUNTS). `refusal` answers, before anything is lowered, why an instruction cannot be:
a modifier outside its handler's list, a second type where it reads one, or no handler at
all. No modifier is lowered as if it were absent. A hint that changes nothing on the CPU (a
cache operator, an eviction priority, a scope: a CPU's memory is coherent at every scope) is
on the list: ignoring it is lowering it.
"""
from __future__ import annotations

from ...ptx.modifiers import MODIFIERS, TYPES, words
from ...ptx.opcodes import ALL
from ..types import type_mods

BOOL_OPS = ("and", "or", "xor")

HANDLERS = {}
HANDLED = {}         # opcode -> the modifiers its handler lowers
TYPE_COUNTS = {}     # opcode -> the most type modifiers its handler reads
CHECKS = {}          # opcode -> check(inst): why its handler refuses that form, or None


def handles(*opcodes, mods, types=1, check=None):
    """Register a handler of `opcodes` that lowers the modifiers `mods` (a set, a string of
    words, or a tuple of those) and reads up to `types` type modifiers; `check(inst)`, where
    given, says why it refuses a combination of them (a shape with types it lacks)."""
    mods = words(*mods) if isinstance(mods, tuple) else words(mods)

    def register(fn):
        for op in opcodes:
            HANDLERS[op] = fn
            HANDLED[op] = mods & MODIFIERS[op]
            TYPE_COUNTS[op] = types
            if check is not None:
                CHECKS[op] = check
        return fn
    return register


def takes(allowed: dict, inst) -> bool:
    """Whether a path whose allow-list is `allowed` (opcode -> the modifiers it handles) takes
    instruction `inst`: its opcode is there and each of its modifiers is."""
    mods = allowed.get(inst.opcode)
    return mods is not None and all(m in mods for m in inst.mods)


def refusal(inst) -> str | None:
    """Why the scalar lowering refuses `inst`, or None when its handler lowers it."""
    if inst.opcode not in HANDLERS:
        name = inst.opcode if inst.opcode in ALL else ".".join((inst.opcode,) + tuple(inst.mods))
        return f"instruction '{name}' is not supported by anycuda yet"
    handled = HANDLED[inst.opcode]
    bad = next((m for m in inst.mods if m not in handled), None)
    if bad is not None:
        return f"{inst.opcode}: modifier .{bad} is not supported by anycuda yet"
    types = [m for m in inst.mods if m in TYPES]
    if len(types) > TYPE_COUNTS[inst.opcode]:
        return f"{inst.opcode}: the types .{'.'.join(types)} together are not supported by anycuda yet"
    check = CHECKS.get(inst.opcode)
    return check(inst) if check is not None else None


# Operand counts of each opcode's forms, destinations included (`d|p` and `{a, b}` are one
# operand each), checked over a function's body before any pass reads operands
# (FunctionLowering._check_forms) so that a malformed instruction is reported with
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
    "elect": (2,), "setmaxnreg": (1,), "fence.proxy": (0, 2),  # the tensormap acquire form: [a], size
    # asynchronous copies and mbarriers: optional sizes, counts, hints and cache policies
    **dict.fromkeys(("cp.async.commit_group", "cp.async.wait_all", "cp.async.bulk.commit_group"), (0,)),
    **dict.fromkeys(("cp.async.wait_group", "cp.async.bulk.wait_group", "cp.async.mbarrier.arrive",
                     "mbarrier.inval"), (1,)),
    **dict.fromkeys(("mbarrier.init", "mbarrier.expect_tx", "mbarrier.complete_tx", "mbarrier.pending_count"), (2,)),
    **dict.fromkeys(("mbarrier.arrive", "mbarrier.arrive_drop"), (2, 3)),
    "mbarrier.test_wait": (3,), "mbarrier.try_wait": (3, 4), "cp.async": (3, 4, 5), "cp.async.bulk": (3, 4, 5),
    "cp.async.bulk.prefetch": (2, 3), "createpolicy": (1, 2, 4),     # fractional, cvt, range
    "wmma.mma": (4,), "mma": (4, 6), "mma.sp": (6,),         # d, a, b, c fragments; sparse: metadata, selector
    **dict.fromkeys(("ldmatrix", "stmatrix", "movmatrix"), (2,)),
    **dict.fromkeys(("wmma.load", "wmma.store"), (2, 3)),    # an optional stride
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
