"""A warp's volatile accesses in step: the warp-synchronous idiom in the rounds.

    if (tid < 32) { volatile float* v = sdata; v[tid] += v[tid + 16]; v[tid] += v[tid + 8]; ... }

Code written for warps that run in lockstep (NVIDIA's reduction and scan samples, countless
tutorials) sums a warp's values through volatile shared memory without a barrier: every lane
reads before any lane writes, instruction by instruction. CUDA calls this a race since Volta,
but GPUs still give the lockstep answer, and programs count on it. The rounds run a block's
threads one after another between their suspensions, so thread 0 ran its whole tail before
thread 16 added its part: another sum than a GPU's (block programs keep the lanes in step, but
the rounds run a kernel's first launches while its block program compiles, and every kernel
that no block program takes).

So a volatile access of shared or generic memory gets a step before it where another volatile
access may have come since the thread's last suspension: the thread waits there for the lanes
of its warp that come to the same place (the group an activemask would name: `op_mask` 0), and
they go on together, each to its next stop. A load needs a step after a store; a store after
any access: two loads in a row cannot see each other. Volatile global memory, which no
warp-synchronous idiom shares between lanes, keeps none (a spin on it has its own wait,
ops/spinwaits.py).
"""
from __future__ import annotations

from ...ptx import ir as pir
from ..analysis.suspensions import WARP_STEP, is_suspension
from ..irutil import i32
from ..types import space_of

_ACCESSES = ("ld", "st")
_SPACES = ("shared", "")            # shared, or generic (which may be shared)


def _volatile_access(st) -> str | None:
    """'ld' or 'st' for a volatile load or store of shared or generic memory, else None."""
    if isinstance(st, pir.Instruction) and st.opcode in _ACCESSES and "volatile" in st.mods \
            and space_of(st) in _SPACES:
        return st.opcode
    return None


def makes_volatile_access(body: list) -> bool:
    """Whether a function makes such an access (lowering/inline.py inlines it into its
    kernels: a step can only be taken in a kernel's own body)."""
    return any(_volatile_access(st) for st in body)


def with_steps(body: list) -> list:
    """`body` with a step before each volatile access that needs one (the module docstring).
    What the thread may have done since its last suspension is followed along the text: a
    label may be reached from anywhere (a load and a store may have come), a call may make
    either. O(n)."""
    if not makes_volatile_access(body):
        return body
    out, loaded, stored = [], False, False
    for st in body:
        kind = _volatile_access(st)
        if kind is not None and (stored or (kind == "st" and loaded)):
            out.append(pir.Instruction(WARP_STEP, (), (), st.loc, text=st.text))
            loaded = stored = False
        out.append(st)
        if isinstance(st, pir.Label):
            loaded = stored = True
        elif kind == "ld":
            loaded = True
        elif kind == "st":
            stored = True
        elif isinstance(st, pir.Instruction) and is_suspension(st):
            loaded = stored = False
        elif isinstance(st, pir.Instruction) and st.opcode == "call":
            loaded = stored = True
    return out


def step(f, inst):
    """The step: the thread waits with the lanes of its warp that come here (activemask's
    group: no member mask), and nothing comes back."""
    f.suspend("warp_step", {"op_mask": i32(0)}, None)
