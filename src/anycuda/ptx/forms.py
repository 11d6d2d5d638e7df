"""What a PTX instruction statement must look like beyond the names of its modifiers.

modifiers.py says which modifier words an instruction takes at all; this module says how
they combine and what operands go with them, as the syntax blocks of the PTX ISA's
instruction chapter do (`add{.sat}.s32 d, a, b;`, `mul.mode.type d, a, b;`):

* TYPES_WRITTEN: how many type words (`.u32`, `.f16x2`, modifiers.TYPES) the instruction
  names: one for most, two for conversions (`cvt.f32.s32`), none for barriers and branches;
* ONLY_WITH: modifiers that go with some of the instruction's types only (`.sat` of integer
  addition is `.s32`'s alone; `.hi`, `.lo`, `.wide` are integer multiplication's);
* REQUIRED: groups one of which an instruction must name for some types (`mul` of integers
  names `.hi`, `.lo` or `.wide`; `fma` names its rounding);
* ONE_OF: groups of which an instruction names at most one (two rounding modes, two state
  spaces of a load); no modifier other than a type may be written twice;
* OPERANDS: the operands, in order, each one letter: `d` a destination (a register, a vector
  of registers or `_`, a `p|q` pair), `a` a value (a register, an immediate, a symbol, a
  vector), `m` a memory address `[...]`, `t` a texture or surface operand (`[tex, {x, y}]`),
  `l` a label or function, `x` anything; a `?` marks an operand that may be left off (only
  at the end). A vector access (`.v4`) names a vector of as many registers.

`problems(opcode, mods, operands)` lists what a statement breaks, each with the modifier or
operand it concerns, so the parser can point at it. The rules were checked against the ISA's
syntax and against ptxas, which refuses each broken form the tests write (tests/test_ptx_forms.py).
Instructions absent from OPERANDS (video instructions, wgmma, tcgen05, multimem, bulk tensor
copies, tensormap, clusterlaunchcontrol, st.async, red.async, st.bulk) have their modifiers
checked only; TYPES_WRITTEN has None where type words are not counted (mma, tex, video).
What anycuda implements of these forms is the compiler's to say (compiler/ops/table.py:
HANDLED for modifiers, OPERAND_COUNTS for the operand counts its handlers lower).
"""
from __future__ import annotations

import functools

from . import ir
from .modifiers import FLOATS, HALVES, INTEGERS, ROUNDING, INTEGER_ROUNDING, SCOPES, SPACES, TYPES, VECTORS, \
    COMPARISONS, words

# ---------------------------------------------------------------- operands
_SIMPLE = {
    "d a": "abs neg not cnot popc clz brev bfind rcp sqrt rsqrt sin cos lg2 ex2 tanh mov testp isspacep cvta"
           " getctarank elect movmatrix istypep mbarrier.pending_count",
    "d a a": "add sub mul div rem and or xor shl shr copysign mul24 szext bmsk addc subc mapa match redux set setp"
             " min max",
    "d a a a": "mad mad24 madc sad fma slct selp shf prmt bfe dp4a dp2a fns wmma.mma",
    "d a a? a? a?": "cvt",                 # packing conversions take two or four sources
    "d a a a a": "bfi",
    "d a a a a a?": "lop3",
    "d a a?": "vote alloca",
    "d a a a a?": "shfl",
    "d m a?": "ld mbarrier.arrive mbarrier.arrive_drop wmma.load",
    "d m": "ldu ldmatrix",
    "m a a?": "st red wmma.store cp.async.bulk.prefetch",
    "d m a a? a?": "atom",
    "m": "prefetch prefetchu mbarrier.inval cp.async.mbarrier.arrive",
    "m a": "applypriority discard mbarrier.init mbarrier.expect_tx mbarrier.complete_tx stmatrix",
    "d x? x? x?": "createpolicy",
    "d": "stacksave activemask",
    "a": "stackrestore nanosleep setmaxnreg pmevent cp.async.wait_group cp.async.bulk.wait_group",
    "l": "bra",
    "a l": "brx",
    "": "ret exit trap brkpt membar fence griddepcontrol cp.async.commit_group cp.async.wait_all"
        " cp.async.bulk.commit_group",
    "a x? x? x?": "bar",
    "x? x? x? x?": "barrier",
    "x? x?": "fence.proxy",
    "m m a a? a?": "cp.async",
    "m m a x? x? x?": "cp.async.bulk",
    "d m a": "mbarrier.test_wait",
    "d m a a?": "mbarrier.try_wait",
    "d a a a x? x? x? x?": "mma",
    "d a a a a a x? x? x? x?": "mma.sp",
    "d t x? x? x?": "tex",
    "d t x? x?": "tld4",
    "d t a?": "txq",
    "d t": "suld suq",
    "t a": "sust sured",
}
OPERANDS = {opcode: tuple(spec.split()) for spec, names in _SIMPLE.items() for opcode in names.split()}
# forms with one operand more, and the modifiers that make them: set and setp with a BoolOp
# (.and, .or, .xor) combine the comparison with a predicate c; min and max of .f32 take a
# third source (ptxas refuses three sources for any other type)
LONGER_FORMS = {
    "set": (words("and or xor"), ("d", "a", "a", "a")),
    "setp": (words("and or xor"), ("d", "a", "a", "a")),
    "min": (words("f32"), ("d", "a", "a", "a?")),
    "max": (words("f32"), ("d", "a", "a", "a?")),
}


def operand_spec(opcode: str, mods) -> tuple | None:
    """The operand kinds of `opcode.mods` (OPERANDS), or None where they are not checked."""
    longer = LONGER_FORMS.get(opcode)
    if longer is not None and longer[0] & set(mods):
        return longer[1]
    return OPERANDS.get(opcode)

# ---------------------------------------------------------------- how many types
_TYPE_COUNTS = {
    (0, 0): "bra brx call ret exit trap brkpt membar fence fence.proxy griddepcontrol elect isspacep istypep"
            " prefetch prefetchu applypriority discard pmevent cp.async cp.async.commit_group cp.async.wait_group"
            " cp.async.wait_all cp.async.bulk cp.async.bulk.prefetch cp.async.bulk.commit_group"
            " cp.async.bulk.wait_group",
    (0, 1): "bar barrier ldmatrix",
    (1, 2): "add sub fma",                 # mixed precision: add.f32.f16, fma.rn.f32.bf16
    (2, 2): "set slct dp4a dp2a",
    (2, 3): "cvt",                         # cvt.pack.sat.u8.s32.b32
    None: "mma mma.sp wmma.mma tex tld4",
}
TYPES_WRITTEN = {opcode: counts for counts, names in _TYPE_COUNTS.items() for opcode in names.split()}


def type_counts(opcode: str):
    """(fewest, most) type words `opcode` names, or None where they are not counted."""
    if opcode in TYPES_WRITTEN:
        return TYPES_WRITTEN[opcode]
    return (1, 1) if opcode in OPERANDS else None


# two types in an arithmetic instruction: the mixed-precision forms (`add.rn.f32.bf16`) only
MIXED = dict.fromkeys(("add", "sub", "fma"), (frozenset({"f32"}), frozenset({"f16", "bf16"})))

# ---------------------------------------------------------------- modifiers that need some types
HALF_OR_SINGLE = words("f32 f32x2 f16 f16x2")     # what .ftz and a float .sat go with
FLOATING = words(FLOATS, HALVES, "f32x2")
WIDENING = words("u16 u32 s16 s32")
CARRIES = words("u32 s32 u64 s64")


def _only(opcodes: str, modifiers, types):
    return {(op, m): frozenset(types) for op in opcodes.split() for m in words(modifiers)}


ONLY_WITH = {
    **_only("add sub mul fma mad div", ROUNDING, FLOATING),
    **_only("add sub", "sat", HALF_OR_SINGLE | {"s32"}),
    **_only("add sub mad", "cc", CARRIES),
    **_only("add sub mul fma abs neg min max set setp", "ftz", HALF_OR_SINGLE),
    **_only("mad div", "ftz", {"f32"}),
    **_only("mul fma", "sat", HALF_OR_SINGLE),
    **_only("mad", "sat", {"s32", "f32"}),
    **_only("mul mad", "hi lo", INTEGERS),
    **_only("mul mad", "wide", WIDENING),
    **_only("fma", "relu", HALVES),
    **_only("div", "approx full", {"f32"}),
    **_only("rcp", "approx ftz", FLOATS),
    **_only("sqrt", "approx ftz", {"f32"}),
    **_only("rsqrt", "ftz", FLOATS),
    **_only("min max", "NaN xorsign abs", words("f32", HALVES)),
}


# (opcode, the types the rule is for, the group, how a message names the group)
_REQUIRED_RULES = (
    ("mul", INTEGERS, "hi lo wide", ".hi, .lo or .wide"),
    ("mad", INTEGERS, "hi lo wide", ".hi, .lo or .wide"),
    ("mul24", "u32 s32", "hi lo", ".hi or .lo"),
    ("mad24", "u32 s32", "hi lo", ".hi or .lo"),
    ("mad", FLOATING, ROUNDING, "a rounding mode"),
    ("fma", FLOATING, ROUNDING, "a rounding mode"),
    ("div", FLOATING, words(ROUNDING, "approx full"), "a rounding mode, .approx or .full"),
    ("rcp", FLOATING, words(ROUNDING, "approx"), "a rounding mode or .approx"),
    ("sqrt", FLOATING, words(ROUNDING, "approx"), "a rounding mode or .approx"),
    *((op, FLOATING, "approx", ".approx") for op in ("rsqrt", "sin", "cos", "lg2", "ex2", "tanh")),
)
REQUIRED = {}
for _op, _types, _group, _what in _REQUIRED_RULES:
    REQUIRED.setdefault(_op, []).append((words(_types), words(_group), _what))

# groups of which an instruction names one at most
ONE_OF = (
    words(ROUNDING, INTEGER_ROUNDING, "rna rs"),
    words("hi lo wide"),
    VECTORS,
    COMPARISONS,
    SCOPES,
    words("weak volatile relaxed acquire release acq_rel sc mmio"),
)
# what a statement may name twice: types (`cvt.rni.f32.f32`) and matrix layouts (`wmma.mma.row.row`)
REPEATABLE = TYPES | {"row", "col"}
_ONE_SPACE = frozenset("ld ldu st atom red prefetch cvta isspacep".split())
_ONE_OPERATION = {"atom": words("add inc dec min max and or xor cas exch"),
                  "red": words("add inc dec min max and or xor")}


def _modifier_problems(opcode, mods):
    types = [m for m in mods if m in TYPES]
    counts = type_counts(opcode)
    if counts is not None and not counts[0] <= len(types) <= counts[1]:
        yield _type_count_message(opcode, counts, types), None
    elif len(types) == 2 and opcode in MIXED:
        first, second = MIXED[opcode]
        if types[0] not in first or types[1] not in second:
            yield f"{opcode}: .{types[0]}.{types[1]} is no mixed-precision form (.f32.f16 or .f32.bf16)", types[1]
    seen = set()
    for m in mods:
        if m in seen and m not in REPEATABLE:
            yield f"{opcode}: .{m} written twice", m
        seen.add(m)
    groups = list(ONE_OF)
    if opcode in _ONE_SPACE:
        groups.append(SPACES)
    if opcode in _ONE_OPERATION:
        groups.append(_ONE_OPERATION[opcode])
    for group in groups:
        named = [m for m in dict.fromkeys(mods) if m in group]
        if len(named) > 1:
            yield f"{opcode}: .{named[0]} and .{named[1]} exclude each other", named[1]
    for m in mods:
        allowed = ONLY_WITH.get((opcode, m))
        if allowed is not None and types and not allowed & set(types):
            yield f"{opcode}: .{m} does not apply to .{'.'.join(types)}", m
    for applies, group, what in REQUIRED.get(opcode, ()):
        if types and types[0] in applies and not group & set(mods):
            yield f"{opcode}.{types[0]} requires {what}", None


def _type_count_message(opcode, counts, types):
    low, high = counts
    if not types:
        return f"{opcode}: a type is required (.u32, .f32, ...)"
    if high == 0:
        return f"{opcode} takes no type, found .{'.'.join(types)}"
    want = str(low) if low == high else f"{low} to {high}"
    return f"{opcode}: {want} type(s) expected, found .{'.'.join(types)}"


# ---------------------------------------------------------------- operand kinds
def _is_destination(op) -> bool:
    if isinstance(op, ir.Reg) or op == ir.Sym("_"):
        return True
    if isinstance(op, ir.Vec):
        return all(isinstance(x, ir.Reg) or x == ir.Sym("_") for x in op.items)
    return isinstance(op, ir.Pair)


def _is_value(op) -> bool:
    if isinstance(op, ir.Addr):
        return isinstance(op.base, ir.Sym)       # `sym+4`; `[%rd1]` is an access, not a value
    return not isinstance(op, ir.ParamList)


_KINDS = {
    "d": (_is_destination, "a destination register"),
    "a": (_is_value, "a value"),
    "m": (lambda op: isinstance(op, ir.Addr), "a memory address [...]"),
    "t": (lambda op: isinstance(op, (ir.Addr, ir.Vec)), "a texture or surface operand [...]"),
    "l": (lambda op: isinstance(op, ir.Sym), "a label"),
    "x": (lambda op: not isinstance(op, ir.ParamList), "an operand"),
}

_DESCRIPTIONS = ((ir.Imm, "an immediate"), (ir.Reg, "a register"), (ir.SpecialReg, "a special register"),
                 (ir.Addr, "an address"), (ir.Vec, "a vector"), (ir.Sym, "a symbol"), (ir.Not, "a negated predicate"),
                 (ir.Pair, "a register pair"), (ir.ParamList, "a parameter list"))


def describe(op) -> str:
    return next(text for cls, text in _DESCRIPTIONS if isinstance(op, cls))


def _operand_problems(opcode, mods, operands):
    form = _operand_form(opcode, tuple(mods))
    if form is None:
        return
    checks, fewest, most, width, data = form
    if not fewest <= len(operands) <= most:
        want = str(most) if fewest == most else f"{fewest} to {most}"
        yield f"'{opcode}' takes {want} operands, got {len(operands)}", None
        return
    for n, ((accepts, what), op) in enumerate(zip(checks, operands)):
        if not accepts(op):
            yield f"{opcode}: operand {n + 1} must be {what}, found {describe(op)}", n
    if width is not None and data is not None:
        op = operands[data]
        if not isinstance(op, ir.Vec) or len(op.items) != width:
            yield f"{opcode}.v{width}: operand {data + 1} must be a vector of {width}, found {describe(op)}", data


@functools.lru_cache(maxsize=4096)
def _operand_form(opcode: str, mods: tuple):
    """What _operand_problems checks of `opcode.mods`, once per spelling: each operand's
    (test, description), the fewest and most operands, and a vector access's width and data
    operand; None where operands are not checked."""
    spec = operand_spec(opcode, mods)
    if spec is None:
        return None
    width = next((int(m[1:]) for m in mods if m in VECTORS), None)
    return (tuple(_KINDS[kind.rstrip("?")] for kind in spec), sum(not s.endswith("?") for s in spec), len(spec),
            width, {"ld": 0, "ldu": 0, "st": 1}.get(opcode))


def problems(opcode: str, mods: tuple, operands: tuple) -> list:
    """What instruction `opcode.mods operands` breaks (module docstring): a list of (message,
    where), `where` the modifier (a str) or the operand's index (an int) it concerns, or None."""
    return list(_modifier_problems_of(opcode, tuple(mods))) + list(_operand_problems(opcode, mods, operands))


@functools.lru_cache(maxsize=4096)
def _modifier_problems_of(opcode: str, mods: tuple) -> tuple:
    """_modifier_problems, once per spelling: a module repeats a few hundred of them (half
    of the parser's time went to checking each instruction's modifiers again)."""
    return tuple(_modifier_problems(opcode, mods))
