"""Warp-aggregated atomics: a warp region's atomic whose active lanes all target one address
becomes one atomic for the warp (as NVIDIA's compiler does on a GPU).

A warp region runs an atomic lane after lane (regionops._atom). Where the lanes' addresses
are the same (`atomicAdd(&total, x)`; checked at run time: every active lane's address equals
the first one's), the warp combines its lanes' operands, an inclusive scan in lane order over
the active lanes (inactive ones hold the operation's identity), performs one atomic with the
last lane's total, and gives lane l the old value combined with the lanes before it
(exclusive prefix): the results of serialising the lanes in lane order, as a GPU may. Float
adds reassociate (CUDA gives atomics no order); an `add.f32` in global memory flushes each
lane's subnormal operand, and the one atomic flushes the total and the result
(ops/atomics.py). Otherwise (lanes' addresses differ: a histogram) the lane loop runs as
before. The check costs the lanes' address vector, which a histogram's lane loop otherwise
computes lane by lane from the data it loaded (lanereloads.py): 8% of histogram's time with
one worker. Addresses computed from memory the kernel loaded (not a parameter) are such
data-dependent bins, which rarely agree across a warp: those keep the lane loop unchecked.

Only operations that are associative and commutative are combined (ops/aggregation.IDENTITY:
add, and, or, xor, min, max; not exch, cas, inc, dec).
"""
from __future__ import annotations

from llvmlite import ir

from ...ptx import ir as pir
from ..analysis.dataflow import loaded_from_memory
from ..irutil import declare, i32, intrinsic_suffix
from ..ops import aggregation, atomics
from ..types import I1, I32, I64
from .warpruns import LANES


def combinable(w, kind, op) -> bool:
    """Does an atomic of `kind` at memory operand `op` take the one-address check?"""
    return (kind in aggregation.IDENTITY and w.lanes == LANES and isinstance(op, pir.Addr)
            and not (isinstance(op.base, pir.Reg) and loaded_from_memory(op.base.name, w.f.pfn.body, w._definitions())))


def result_read(w, dest) -> bool:
    """Does any instruction of the kernel read an atom's destination `dest`?"""
    return not isinstance(dest, pir.Reg) or dest.name in aggregation.read_registers(w.f)


def one_address(w, addrs):
    """i1: at least one lane runs the access and every one that does has lane first's address
    (<32 x i64> `addrs`); and the first active lane's address (i64)."""
    b = w.b
    here = w._lanes()
    bits = b.bitcast(here, I32)
    first = b.call(declare(b.module, "llvm.cttz.i32", I32, [I32, I1]), [bits, ir.Constant(I1, 1)])
    first_addr = b.extract_element(addrs, first)
    same = b.icmp_unsigned("==", addrs, w.splat(first_addr))
    agree = b.or_(same, b.not_(here))
    all_agree = b.icmp_unsigned("==", b.bitcast(agree, I32), ir.Constant(I32, 0xFFFFFFFF))
    return b.and_(all_agree, b.icmp_unsigned("!=", bits, ir.Constant(I32, 0))), first_addr


def _vector_op(b, kind, x, y):
    """x (op) y on vectors of lanes, as atomics.PLAIN_RMW does on scalars."""
    if kind in ("fmin", "fmax"):
        suffix = f"v{x.type.count}" + {"float": "f32", "double": "f64"}[str(x.type.element)]
        name = {"fmin": "minnum", "fmax": "maxnum"}[kind]
        return b.call(declare(b.module, f"llvm.{name}.{suffix}", x.type, [x.type, x.type]), [x, y])
    got = atomics.PLAIN_RMW[kind](b, x, y)
    if kind == "fadd":
        got.flags.append("reassoc")
    return got


def _flush_lanes(b, v):
    """Each lane's f32 subnormal to a zero of its sign (an add.f32 in global memory)."""
    suffix = f"v{v.type.count}f32"
    fabs = b.call(declare(b.module, f"llvm.fabs.{suffix}", v.type, [v.type]), [v])
    tiny = ir.Constant(v.type, [2.0 ** -126] * v.type.count)
    zero = b.call(declare(b.module, f"llvm.copysign.{suffix}", v.type, [v.type, v.type]),
                  [ir.Constant(v.type, [0.0] * v.type.count), v])
    return b.select(b.fcmp_ordered("<", fabs, tiny), zero, v)


# atomicrmw kind -> llvm.vector.reduce.<name>, for a total whose prefixes nobody reads
_REDUCE = {"add": "add", "and": "and", "or": "or", "xor": "xor", "max": "smax", "min": "smin", "umax": "umax",
           "umin": "umin", "fadd": "fadd", "fmin": "fmin", "fmax": "fmax"}


def combined(w, kind, elem, private, flush, first_addr, values, olds=True):
    """One atomic for the warp's active lanes at `first_addr` (one_address held): the old
    values each lane gets, a <32 x elem> vector (None where `olds` is false: then the total
    is a plain reduction, cheaper than the scan). `values`: the lanes' operands (<32 x elem>)."""
    b = w.b
    vec = values.type
    identity = ir.Constant(vec, [aggregation.identity(kind, elem)] * LANES)
    flush_lanes = kind == "fadd" and isinstance(flush, ir.Constant) and flush.constant and not private
    p = b.inttoptr(first_addr, elem.as_pointer())
    if not olds:
        atomics.rmw(b, private, kind, p, warp_total(w, kind, elem, values, flush_lanes), flush)
        return None
    if flush_lanes:
        values = _flush_lanes(b, values)
    x = b.select(w._lanes(), values, identity)
    # inclusive scan in lane order: x[l] = x[0] op ... op x[l]
    step = 1
    while step < LANES:
        shifted = b.shuffle_vector(x, identity, ir.Constant(ir.VectorType(I32, LANES),
                                                            [l - step if l >= step else LANES + l for l in range(LANES)]))
        x = _vector_op(b, kind, shifted, x)
        step *= 2
    total = b.extract_element(x, i32(LANES - 1))
    old = atomics.rmw(b, private, kind, p, total, flush)
    before = b.shuffle_vector(x, identity, ir.Constant(ir.VectorType(I32, LANES),
                                                       [l - 1 if l >= 1 else LANES for l in range(LANES)]))
    return _vector_op(b, kind, w.splat(old), before)


def warp_total(w, kind, elem, values, flush_lanes=False):
    """The active lanes' `values` (<32 x elem>) combined by `kind`, a reduction in no
    particular order; each lane's f32 subnormal flushed first where `flush_lanes`."""
    b = w.b
    vec = values.type
    identity = ir.Constant(vec, [aggregation.identity(kind, elem)] * LANES)
    if flush_lanes:
        values = _flush_lanes(b, values)
    x = b.select(w._lanes(), values, identity)
    name = f"llvm.vector.reduce.{_REDUCE[kind]}.v{LANES}{intrinsic_suffix(elem)}"
    if kind == "fadd":          # (start, vector), unordered with reassoc
        return b.call(declare(b.module, name, elem, [elem, vec]), [identity.constant[0], x], fastmath=("reassoc",))
    return b.call(declare(b.module, name, elem, [vec]), [x])


def address_vector(w, op, space):
    """<32 x i64> of the lanes' addresses (regionmemory.addresses), as i64."""
    addrs = w.addresses(op, space)
    if addrs.type.element != I64:
        addrs = w.b.zext(addrs, ir.VectorType(I64, LANES))
    return addrs
