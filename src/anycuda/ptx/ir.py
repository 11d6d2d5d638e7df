"""Typed IR of a PTX module, as the parser produces it.

The IR is deliberately generic: an instruction is an opcode, the tuple of its dot-modifiers
in source order and a tuple of operands. What a modifier means is decided by the compiler's
tables, so a new PTX variant needs no change here.

Scoped declarations (`{ .reg .b32 t; ... }` blocks inside a function body, as nvcc emits
around calls) are flattened by the parser: every name declared in a nested block is given a
unique spelling (`param0` -> `param0$s3`) and its uses inside the block are renamed, so a
function body is one flat list of statements.
"""
from __future__ import annotations

from dataclasses import dataclass, field
from typing import Optional, Union


@dataclass(frozen=True)
class Loc:
    """A position in the PTX text (1-based line and column)."""
    line: int
    col: int

    def __str__(self) -> str:
        return f"{self.line}:{self.col}"


# ---------------------------------------------------------------- operands

@dataclass(frozen=True)
class Reg:
    """A declared register, e.g. `%r1`, `%p3`, `%SP`, or a name declared with `.reg` (`low`)."""
    name: str


@dataclass(frozen=True)
class SpecialReg:
    """A special register: `%tid.x` -> SpecialReg('tid', 'x'); `%laneid` -> SpecialReg('laneid', None)."""
    name: str
    component: Optional[str] = None


def _numbered(stem: str, n: int, suffix: str = "") -> tuple:
    return tuple(f"{stem}{i}{suffix}" for i in range(n))


# Every special register of PTX ISA 9.x (chapter 10, "Special Registers") and its type. A
# .v4 register is read one component at a time: %tid.x, %tid.y, %tid.z (the ISA's fourth
# element is unused); the others have no components. `%reserved_smem_offset_<2>` is the
# ISA's way of writing %reserved_smem_offset_0 and %reserved_smem_offset_1.
SPECIAL_REGISTERS = {
    **dict.fromkeys(("tid", "ntid", "ctaid", "nctaid", "clusterid", "nclusterid", "cluster_ctaid",
                     "cluster_nctaid"), "v4.u32"),
    **dict.fromkeys(("laneid", "warpid", "nwarpid", "smid", "nsmid", "cluster_ctarank", "cluster_nctarank",
                     "lanemask_eq", "lanemask_le", "lanemask_lt", "lanemask_ge", "lanemask_gt",
                     "clock", "clock_hi", "globaltimer_lo", "globaltimer_hi",
                     "total_smem_size", "aggr_smem_size", "dynamic_smem_size") + _numbered("pm", 8), "u32"),
    **dict.fromkeys(("gridid", "clock64", "globaltimer", "current_graph_exec") + _numbered("pm", 8, "_64"), "u64"),
    **dict.fromkeys(("reserved_smem_offset_begin", "reserved_smem_offset_end", "reserved_smem_offset_cap")
                    + _numbered("reserved_smem_offset_", 2) + _numbered("envreg", 32), "b32"),
    "is_explicit_cluster": "pred",
}
SPECIAL_COMPONENTS = ("x", "y", "z")

# PTX's predefined constants (chapter 5, "Predefined Identifiers"): WARP_SZ may stand wherever
# an immediate may. Every NVIDIA GPU, and anycuda's device model, has 32-thread warps.
PREDEFINED_CONSTANTS = {"WARP_SZ": 32}


@dataclass(frozen=True)
class Imm:
    """An immediate. `value` is a Python int (any sign, as written) or float.

    Float immediates keep their exact bits when written in hex: `0f3F800000` gives
    value=1.0, bits=0x3F800000, width=32; `0d...` gives width=64. A decimal float (`1.5`)
    has bits=None and width=None.
    """
    value: Union[int, float]
    bits: Optional[int] = None
    width: Optional[int] = None

    @property
    def is_float(self) -> bool:
        return isinstance(self.value, float)


@dataclass(frozen=True)
class Sym:
    """A symbol: a label, a variable, a function or a prototype name."""
    name: str


@dataclass(frozen=True)
class Addr:
    """A memory operand `[base+offset]`; base is None for an absolute address `[0x100]`."""
    base: Union[Reg, Sym, None]
    offset: int = 0


@dataclass(frozen=True)
class Vec:
    """A vector operand `{%f1, %f2, _, 0}`; `_` is Sym('_')."""
    items: tuple


@dataclass(frozen=True)
class Not:
    """A negated predicate operand `!%p1` (as in `vote.ballot.b32 %r, !%p`)."""
    operand: Reg


@dataclass(frozen=True)
class Pair:
    """Two destinations joined by `|`, as in `setp.lt.s32 %p|%q, a, b` or `shfl... %r|%p`
    (first is a Vec in a sparse texture fetch: `tex... {%f1, %f2, %f3, %f4}|%p, [...]`)."""
    first: Union[Reg, Vec]
    second: Reg


@dataclass(frozen=True)
class ParamList:
    """A parenthesised list of a `call`: `(retval0)` or `(param0, param1)`."""
    items: tuple


Operand = Union[Reg, SpecialReg, Imm, Sym, Addr, Vec, Not, Pair, ParamList]


# ---------------------------------------------------------------- statements

@dataclass(frozen=True)
class Guard:
    """`@%p` (negated=False) or `@!%p` (negated=True) in front of an instruction."""
    reg: Reg
    negated: bool = False


@dataclass(frozen=True)
class DebugLoc:
    """The latest `.loc file line col` in force for an instruction; `inlined_at`: the (file,
    line, col) of the call its code was inlined into (nvcc's `inlined_at` attribute), if any."""
    file: int
    line: int
    col: int
    inlined_at: tuple = None


@dataclass(frozen=True)
class Instruction:
    """One PTX instruction.

    `ld.global.nc.v4.f32 {%f1,%f2,%f3,%f4}, [%rd1+16];` becomes
    Instruction(opcode='ld', mods=('global','nc','v4','f32'), operands=(Vec(...), Addr(Reg('%rd1'), 16))).

    `call` has operands (ParamList(rets), target, ParamList(args)) and, for an indirect call,
    a fourth operand Sym(prototype); a call without returns has ParamList(()) first.
    """
    opcode: str
    mods: tuple
    operands: tuple
    loc: Loc
    guard: Optional[Guard] = None
    debug: Optional[DebugLoc] = None
    text: str = ""          # the source text of the statement, for error messages

    def has(self, mod: str) -> bool:
        return mod in self.mods


@dataclass(frozen=True)
class Label:
    name: str
    loc: Loc


@dataclass(frozen=True)
class VarDecl:
    """A variable or register declaration.

    `.reg .f32 %f<3>;` is expanded into three VarDecls %f0, %f1, %f2.
    `.shared .align 4 .b8 tile[1024];` -> space='shared', type='b8', count=1024, align=4.
    `.extern .shared .align 16 .b8 dyn[];` -> count=0 (unsized), linkage='extern'.
    `.reg .v4 .f32 %v;` -> vector=4.
    `init` is a tuple of ints/floats/Syms, flattened in element order; a Sym element may be
    written `generic(name)` in PTX, kept as Sym('name') with generic=True via GenericSym.
    Trailing elements not given in the initialiser are zero.
    """
    space: str                      # reg, global, const, shared, local, param
    type: str                       # b8, u32, f32, pred, ...
    name: str
    loc: Loc
    count: Optional[int] = None     # None: scalar; 0: unsized []; n: array of n
    dims: tuple = ()                # all array dimensions, e.g. (4, 8) for [4][8]; count is their product
    align: Optional[int] = None
    vector: Optional[int] = None
    init: Optional[tuple] = None
    linkage: str = ""               # '', 'extern', 'visible', 'weak', 'common'
    attrs: tuple = ()               # e.g. ('ptr', 'global', 'align 16') from `.ptr .global .align 16`


@dataclass(frozen=True)
class GenericSym:
    """`generic(sym)` in an initialiser: the generic address of a variable."""
    name: str


@dataclass(frozen=True)
class Prototype:
    """`proto: .callprototype (.param .b32 _) _ (.param .b64 _);` inside a function body."""
    name: str
    rets: tuple        # of VarDecl (space='param')
    params: tuple      # of VarDecl (space='param')
    loc: Loc


@dataclass(frozen=True)
class BranchTargets:
    """`ts: .branchtargets L1, L2;` used by `brx.idx`."""
    name: str
    targets: tuple     # of label names
    loc: Loc


@dataclass(frozen=True)
class Pragma:
    text: str
    loc: Loc


Statement = Union[Instruction, Label, VarDecl, Prototype, BranchTargets, Pragma]


@dataclass
class Function:
    """A `.entry` (kernel) or `.func` (device function).

    `body` is None for a declaration without a body (`.extern .func vprintf(...)`).
    `directives` holds performance directives: {'maxntid': (256, 1, 1), 'reqntid': (...),
    'minnctapersm': (2,), 'maxnreg': (32,), 'noreturn': ()}.
    """
    name: str
    kind: str                       # 'entry' or 'func'
    params: list
    rets: list
    body: Optional[list]
    loc: Loc
    linkage: str = ""               # '', 'visible', 'extern', 'weak'
    directives: dict = field(default_factory=dict)

    @property
    def is_kernel(self) -> bool:
        return self.kind == "entry"


@dataclass
class Module:
    version: tuple                  # (major, minor), e.g. (9, 0)
    target: tuple                   # e.g. ('sm_75',) or ('sm_90a', 'texmode_independent')
    address_size: int
    variables: list                 # module-scope VarDecls (global, const, shared, ...)
    functions: list
    files: dict = field(default_factory=dict)   # .file index -> path
    source_name: str = "<ptx>"

    def function(self, name: str) -> Function:
        for f in self.functions:
            if f.name == name and f.body is not None:
                return f
        for f in self.functions:
            if f.name == name:
                return f
        raise KeyError(name)

    @property
    def kernels(self) -> list:
        return [f for f in self.functions if f.is_kernel and f.body is not None]
