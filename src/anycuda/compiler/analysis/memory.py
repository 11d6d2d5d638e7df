"""What a kernel's memory accesses tell: the kernel parameters a pointer may come from, which
stores may stream past the caches (streams, streaming_store_bytes; compiler/cpu/streamstores.py),
whether the kernel's blocks may run in any order (any_block_order), and whether its stores
run along threadIdx.y rather than x (stores_run_along_y).
"""
from __future__ import annotations

from ...ptx import ir
from ..types import ORDERED_MODS, type_mods, vector_count, width
from .dataflow import definitions_of, loads_kernel_param, readers_of
from .strides import ThreadStrides

# instructions per access of global memory of a loop that waits on memory (a tiled GEMM's
# loop over tiles has 36 for its 1 global load per thread, a 3-D stencil's march along z 8-13)
MEMORY_BOUND_INSTRUCTIONS = 24
_ROOT_OPS = frozenset(("mov", "cvta", "add", "sub", "selp"))     # what a pointer goes through


def _pointer_roots(body: list, kernel_params) -> dict:
    """{register: the kernel parameters whose pointer it may hold plus an offset}: from
    `ld.param` of a kernel parameter through mov, cvta, add, sub and selp; a register
    that no such chain reaches is absent. O(n * P) for P pointer parameters: a register's
    definitions are read again only when the set of one they read grows."""
    params = set(kernel_params)
    defs = definitions_of(body)
    roots = {}
    # sets only grow: a worklist looks again at the registers that read one whose set grew
    readers = readers_of(defs)
    todo, queued = list(defs)[::-1], set(defs)
    while todo:
        r = todo.pop()
        queued.discard(r)
        got = set(roots.get(r, ()))
        for st in defs[r]:
            if st.opcode == "ld" and loads_kernel_param(st, params):
                got.add(st.operands[1].base.name)
            elif st.opcode in _ROOT_OPS:
                for op in st.operands[1:]:
                    if isinstance(op, ir.Reg):
                        got |= roots.get(op.name, set())
        if got != roots.get(r, set()):
            roots[r] = got
            for x in readers.get(r, ()):
                if x not in queued:
                    queued.add(x)
                    todo.append(x)
    return roots


def memory_address(st):
    """The address operand of a load, store or atomic, else None."""
    if st.opcode in ("st", "red"):
        return st.operands[0] if st.operands else None
    if st.opcode in ("ld", "ldu", "atom"):
        return st.operands[1] if len(st.operands) > 1 else None
    return None


_NOT_GLOBAL = frozenset(("shared", "local", "param", "const"))


def global_access(st) -> bool:
    """Whether `st` is a load or store that may reach global memory (a generic address
    counts: nvcc's code for a pointer argument often keeps it generic). Atomics are not
    counted: the analyses that ask for this weigh streams of plain loads and stores."""
    return isinstance(st, ir.Instruction) and st.opcode in ("ld", "ldu", "st") and not _NOT_GLOBAL & set(st.mods)


def access_bytes(st) -> int:
    """The bytes a load, store or atomic moves: its type's width times its vector count (0
    where it names no type)."""
    types = type_mods(st.mods)
    return max(width(types[-1]) // 8, 1) * vector_count(st.mods) if types else 0


def read_memory(body: list, kernel_params=()) -> tuple:
    """What the body's loads and atomics read: the addresses `[%r + offset]` as (register,
    offset), and the kernel parameters whose buffers they point into (_pointer_roots). A
    store to either writes what the kernel reads too (saxpy's `y[i] = a * x[i] + y[i]`,
    softmax's `y[i] = e` and later `y[i] *= inv`): that line is in the cache or wanted
    there (compiler/cpu/streamstores.py)."""
    roots = _pointer_roots(body, kernel_params)
    addresses, buffers = set(), set()
    for st in body:
        if not isinstance(st, ir.Instruction) or st.opcode not in ("ld", "ldu", "atom", "red") or "param" in st.mods:
            continue
        addr = memory_address(st)
        if isinstance(addr, ir.Addr) and isinstance(addr.base, ir.Reg):
            addresses.add((addr.base.name, addr.offset))
            buffers |= roots.get(addr.base.name, set())
    return addresses, buffers, roots


def buffers_walked(body: list, lo: int, hi: int, roots: dict, walks=None) -> int:
    """How many buffers the loads and stores of global memory at body positions lo..hi-1 walk:
    the kernel parameters their addresses come from (`roots`, read_memory's), an address
    that comes from none counted as a buffer of its own; `walks(register)`, where given, says
    whether an address walks at all. A grid-stride loop's turn reads as many rows of each
    (warpregions.turn_iterations)."""
    buffers = set()
    for st in body[lo:hi]:
        addr = memory_address(st) if global_access(st) else None
        if isinstance(addr, ir.Addr) and isinstance(addr.base, ir.Reg) and (walks is None or walks(addr.base.name)):
            buffers |= roots.get(addr.base.name) or {addr.base.name}
    return len(buffers)


def streams(st, read) -> bool:
    """Whether `st` is a store that may bypass the caches (compiler/cpu/streamstores.py): to
    .global memory at `[%r + k]`, where neither that address nor the buffer of a kernel
    parameter that %r points into is read (`read`: read_memory of its function)."""
    if not isinstance(st, ir.Instruction) or st.opcode != "st" or "global" not in st.mods:
        return False
    addr = memory_address(st)
    if not isinstance(addr, ir.Addr) or not isinstance(addr.base, ir.Reg):
        return False
    addresses, buffers, roots = read
    return (addr.base.name, addr.offset) not in addresses and not roots.get(addr.base.name, set()) & buffers


def streaming_store_bytes(body: list, kernel_params=()) -> int:
    """Bytes that one pass through the body stores where `streams` holds, each store counted
    once: what a thread of the kernel writes at least, unless it branches around them."""
    read = read_memory(body, kernel_params)
    total = 0
    for st in body:
        types = type_mods(st.mods) if streams(st, read) else None
        if types:
            total += max(width(types[-1]) // 8, 1) * vector_count(st.mods)
    return total


# instructions through which a block can see how far other blocks have got (atomics, fences,
# the cluster's shared memory and barriers, a dependent launch's handshake), or that may show
# which block ran first (a call: printf's output, an assertion's, or any of these in a
# function that is not inlined; a trap); every multimem instruction is one too
_BLOCK_ORDER_SHOWN = frozenset(("atom", "red", "red.async", "st.async", "membar", "fence", "fence.proxy",
                                "call", "trap", "brkpt", "griddepcontrol", "mapa", "getctarank",
                                "clusterlaunchcontrol.try_cancel", "clusterlaunchcontrol.query_cancel"))


def any_block_order(body: list) -> bool:
    """Whether the kernel's blocks may run in any order without a difference anyone could see
    but in time: no block can wait for another (an atomic, an ordered or volatile access, a
    fence, a cluster's memory or barrier) and nothing it does shows which ran first (printf,
    a trap). Such a kernel's blocks may be handed out last first (runtime/program.py)."""
    for st in body:
        if not isinstance(st, ir.Instruction):
            continue
        if st.opcode in _BLOCK_ORDER_SHOWN or st.opcode.startswith("multimem") \
                or ORDERED_MODS.intersection(st.mods) or any("cluster" in m for m in st.mods):
            return False
    return True


def stores_run_along_y(body: list, kernel_params=()) -> bool:
    """Whether some store to global memory steps by one element from one threadIdx.y to the
    next and none does from one threadIdx.x to the next: a naive transpose's `out[x * rows +
    y]`. A loop over a block's threads then runs y innermost (simt/blockfunction.py), so that
    the vectoriser makes those stores contiguous, where x innermost made each row of threads
    a 16-lane scatter and each output line was written in pieces (4.4x the time); its loads
    become gathers instead, the cheaper of the two. The steps are the address's thread
    strides (strides.ThreadStrides: int indices by their thread-linear forms, size_t ones
    through nvcc's 64-bit arithmetic)."""
    strides = ThreadStrides(body, kernel_params)
    along = set()
    for st in body:
        if not isinstance(st, ir.Instruction) or st.opcode != "st" or "global" not in st.mods:
            continue
        addr, size = memory_address(st), access_bytes(st)
        if not size or not isinstance(addr, ir.Addr) or not isinstance(addr.base, ir.Reg):
            continue
        along |= {axis for axis in ("x", "y") if strides.of(addr.base, axis) == size}
    return "y" in along and "x" not in along
