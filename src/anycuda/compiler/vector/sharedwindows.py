"""A warp's window of shared memory kept in registers, from stretch to stretch of a block program.

The shared-memory tree reduction ends with steps in which only the first warp has lanes:
`if (tid < s) sdata[tid] += sdata[tid + s]; __syncthreads();` for s = 16, 8, 4, 2, 1, each a
stretch of its own (idlewarps.py). Each step loads what the step before stored under a
mask, and a CPU does not forward a masked store to a later load: the load waits until the
store has left for the cache. perf put ~9% of reduce_tree's block program on each of those
loads (45% in all) where the steps' adds take a few cycles.

So a block program keeps a *window*: the `lanes` consecutive elements of shared memory from
the address one register held at one of its writes (its root), plus a constant, as one vector
per warp in a stack array that LLVM keeps in registers where only one warp runs. A load of the
window's elements, through the root or a register the program knows is the root plus a number
(`add` of a value the block shape fixes: `sdata + 4 * (tid + s)`), is a permutation of it, and
one that reaches past it takes the lanes it has from it and loads only the others (a
warp-synchronous tail's `v[tid] += v[tid + 16]`); a store of exactly the window's elements
writes memory and the window alike. A window is made by
the first consecutive load from shared memory at a root in a stretch that runs the first warp
only (one plain load of all lanes' span, where it lies within the block's shared memory) and
holds while nothing else can write there:

- any other store, atomic or reduction (through any space: a generic address may be shared
  memory) drops every window;
- a stretch drops them unless it and the one before run only the first warp's lanes
  (idlewarps.Busy; in a block of one warp, every stretch past the first but those of a loop
  around barriers: the tree's sum of 4M floats in blocks of 32 took 2.5 ms without windows,
  0.7-1.0 with them, 0.4-0.6 in blocks of 128): other warps run nothing between two such
  stretches, and between two barriers one warp's window is its own;
- a loop's head drops them, and none is made inside a loop (each window is made once per warp
  and block: its flag, set where it is made, cannot be a round's before).

A flag per warp says the window was made (its load may lie on a path a warp skipped, or out of
the shared memory): where it is not set, or a lane of the mask reads outside the window, the
access is made in memory as before.
"""
from __future__ import annotations

from dataclasses import dataclass

from llvmlite import ir

from ...ptx import ir as pir
from ..analysis import shapevalues
from ..irutil import at_function_start, i32, masked_load
from ..types import I8, I32, width
from . import idlewarps

_ROOTS_THROUGH = frozenset(("add", "sub", "mov"))     # what keeps a register its root plus a number
_NEAR = 1 << 20             # a constant beyond this is not an offset within a window
MAX_WINDOWS = 8             # windows made per program (each a stack array of a vector per warp)


@dataclass
class Window:
    """`lanes` elements of `size` bytes from the root's value plus `offset`, in `image` (one
    vector per warp), valid for a warp where its `flag` is set."""
    offset: int
    size: int
    elem: ir.Type
    image: ir.Value
    flag: ir.Value


class SharedWindows:
    """Windows of shared memory in registers (see the module docstring): a part of
    BlockProgram, whose registers, masks and memory accesses they read."""

    def _init_windows(self):
        self._versions = {}       # register -> how many times it has been written
        self._origins = {}        # register -> (root register, its version, constant)
        self._windows = {}        # (root, version) -> Window
        self._window_key = None   # (root, version, offset) of the shared access being made
        self._windows_open = False  # the stretch being made runs the first warp only
        self._windows_made = 0

    # -------------------------------------------------------------- roots
    def note_write(self, name):
        """Register `name` was written by the instruction at self.position: its new root."""
        self._versions[name] = self._versions.get(name, 0) + 1
        self._origins[name] = self._origin_of_write(name) or (name, self._versions[name], 0)

    def _origin_of_write(self, name):
        pos = self.position
        st = self.pfn.body[pos] if pos is not None else None
        if not isinstance(st, pir.Instruction) or st.opcode not in _ROOTS_THROUGH or st.guard is not None:
            return None
        t = shapevalues.int_type(st.mods)
        ops = st.operands
        if t is None or not ops or not isinstance(ops[0], pir.Reg) or ops[0].name != name:
            return None
        if st.opcode == "mov":
            return self._root_plus(name, ops[1], 0, t) if len(ops) == 2 else None
        if len(ops) != 3:
            return None
        sign = -1 if st.opcode == "sub" else 1
        known = self._known(pos, ops[2], t)
        if known is not None:
            return self._root_plus(name, ops[1], sign * known, t)
        known = self._known(pos, ops[1], t)
        if known is not None and sign == 1:
            return self._root_plus(name, ops[2], known, t)
        return None

    def _root_plus(self, name, op, number, t):
        """The root of register `op` plus `number`, for `name` written from it (not itself)."""
        if not isinstance(op, pir.Reg) or op.name == name or width(self.types.get(op.name, "b64")) != width(t):
            return None
        root = self.root_of(op.name)
        total = root[2] + number
        return (root[0], root[1], total) if abs(total) < _NEAR else None

    def root_of(self, name):
        """(root register, version, constant): `name` holds that root's value plus the constant."""
        if name in self._origins:
            return self._origins[name]
        return (name, self._versions.get(name, 0), 0)

    def _known(self, pos, op, t):
        """The value (signed, in t's width) the block shape fixes for operand `op` at `pos`."""
        if isinstance(op, pir.Imm) and not op.is_float:
            value = op.value
        elif isinstance(op, pir.Reg):
            value = self._known_values(pos).get(op.name)
            if value is None or value is shapevalues.VARYING:
                return None
        else:
            return None
        bits = width(t)
        value &= (1 << bits) - 1
        return value - (1 << bits) if value >> (bits - 1) else value

    def _known_values(self, pos) -> dict:
        return idlewarps.values_at(self.pfn.body, pos, self.shape_values()) or {}

    # -------------------------------------------------------------- holding and dropping
    def drop_windows(self):
        self._windows = {}

    def keep_windows_into_stretch(self, single: bool, single_before: bool):
        """At a stretch's start: windows hold where it and the one before run one warp only."""
        self._windows_open = single
        if not (single and single_before):
            self.drop_windows()

    def window_access(self, addr):
        """Note the root of a shared access's address register (BlockMemory.access)."""
        self._window_key = None
        if isinstance(addr.base, pir.Reg) and not self._in_loop(self.position):
            root, version, number = self.root_of(addr.base.name)
            self._window_key = (root, version, number + addr.offset)

    # -------------------------------------------------------------- loads and stores
    def window_load(self, shape, elem, size, normal):
        """The load's lanes from a window where one holds them, else normal(); where none
        is kept for this root yet, a window made from this load."""
        key = self._window_key
        if key is None or shape is None or shape.stride != size:
            return normal()
        window = self._windows.get(key[:2])
        if window is None:
            if not self._windows_open or self._windows_made >= MAX_WINDOWS:
                return normal()
            return self._make_window(key, shape, elem, size, normal)
        if window.size != size or (key[2] - window.offset) % size:
            return normal()
        lanes_on = (key[2] - window.offset) // size
        if abs(lanes_on) >= self.lanes:
            return normal()
        b = self.b
        outside = [t for t in range(self.lanes) if not 0 <= t + lanes_on < self.lanes]
        cond = self._window_flag(window)
        if shape.exact is not None:
            cond = b.and_(cond, shape.exact)

        def from_window():
            image = b.load(self._warp_slot(window.image))
            if window.elem != elem:
                image = b.bitcast(image, self._vec(elem))
            beyond = self._beyond_window(shape, elem, size, outside) if outside else ir.Constant(image.type, None)
            ends = iter(range(self.lanes, 2 * self.lanes))
            return b.shuffle_vector(image, beyond, ir.Constant(ir.VectorType(I32, self.lanes), [
                t + lanes_on if 0 <= t + lanes_on < self.lanes else next(ends) for t in range(self.lanes)]))
        return self._either(cond, from_window, normal)

    def _beyond_window(self, shape, elem, size, outside):
        """The elements of the lanes `outside` the window (a run at its start or its end), from
        memory, as the first of a vector's lanes. Loaded apart from the window's own, which the
        warp may just have stored: a load that spans a recent store and more waits until the
        store has reached the cache (a warp-synchronous tail's `s[tid] += s[tid + 16]`, each
        step reading the half its step before stored and the half beyond)."""
        b = self.b
        count = len(outside)
        vec = ir.VectorType(elem, count)
        start = b.add(shape.base, ir.Constant(shape.base.type, outside[0] * size))
        if self.mask is None:
            got = b.load(b.inttoptr(start, vec.as_pointer()), align=size)
        else:
            running = b.shuffle_vector(self.mask, ir.Constant(self.mask.type, None), ir.Constant(
                ir.VectorType(I32, count), outside))
            got = masked_load(b, start, vec, size, running)
        return b.shuffle_vector(got, ir.Constant(vec, None), ir.Constant(
            ir.VectorType(I32, self.lanes), list(range(count)) + [None] * (self.lanes - count)))

    def _make_window(self, key, shape, elem, size, normal):
        """A plain load of every lane's element where the span lies in the block's shared
        memory (its value kept as the window and returned), else normal()."""
        b = self.b
        inside = self._in_shared_memory(shape.base, size * self.lanes)
        if shape.exact is not None:
            inside = b.and_(inside, shape.exact)
        vec = self._vec(elem)
        image = self.scratch(ir.ArrayType(vec, self.warps), "window")
        with at_function_start(b):
            flag = b.alloca(ir.ArrayType(I8, self.warps), name="window.made")
            b.store(ir.Constant(flag.type.pointee, [0] * self.warps), flag)
        self._windows[key[:2]] = Window(key[2], size, elem, image, flag)
        self._windows_made += 1

        def made():
            got = b.load(b.inttoptr(shape.base, vec.as_pointer()), align=size)
            b.store(got, self._warp_slot(image))
            b.store(ir.Constant(I8, 1), self._warp_slot(flag))
            return got
        return self._either(inside, made, normal)

    def window_store_target(self, shape, size):
        """Before a store: the window it writes exactly (updated after it by window_stored), or
        None, having dropped every window (a store elsewhere may write any of them)."""
        key = self._window_key if self.in_shared else None
        window = None if key is None else self._windows.get(key[:2])
        if window is None or shape is None or shape.stride != size or window.size != size or key[2] != window.offset:
            self.drop_windows()
            return None
        return window

    def window_stored(self, window, shape, value):
        """The window after a store of `value` to its elements (under the mask)."""
        b = self.b
        slot = self._warp_slot(window.image)
        if value.type != slot.type.pointee:
            value = b.bitcast(value, slot.type.pointee)
        b.store(value if self.mask is None else b.select(self.mask, value, b.load(slot)), slot)
        if shape.exact is not None:       # (a store whose lanes were not where the shape says)
            flag = self._warp_slot(window.flag)
            b.store(b.select(shape.exact, b.load(flag), ir.Constant(I8, 0)), flag)

    def _window_flag(self, window):
        return self.b.icmp_unsigned("!=", self.b.load(self._warp_slot(window.flag)), ir.Constant(I8, 0))

    def _warp_slot(self, array):
        warp = self.warp if self.warp is not None else i32(0)
        return self.b.gep(array, [i32(0), warp])
