"""`atom` and `red`: read-modify-write on global, shared or generic memory.

Integer add/and/or/xor/exch/min/max map to LLVM's atomicrmw; float add too. inc/dec, cas
and the 16-bit float pairs are compare-and-swap loops.

`add.f32` in global memory flushes subnormal inputs and results to sign-preserving zero, as
the PTX ISA says and an H200 does (ATOMG/REDG.ADD.F32.FTZ.RN; the old value comes back
unflushed); in shared memory it keeps them (there the GPU runs a compare-and-swap loop
around an IEEE add). A generic address decides by where it points.

A block runs on one CPU thread from start to end, so the block's own shared memory
(`.shared` / `.shared::cta`) is never touched by two threads at once: atomics there are
plain load-modify-store sequences (no locked instruction, which costs a histogram kernel
most of its time). Generic addresses may point anywhere and stay atomic.
"""
from __future__ import annotations

from llvmlite import ir

from ...ptx.errors import UnsupportedPtx
from ..cpu import streamstores
from ..irutil import convert_bits, intrinsic
from ..types import llvm_type, space_of, type_mods, vector_count, width
from . import floatops, memcheck
from .table import inst_type

RMW = {"add": "add", "exch": "xchg", "and": "and", "or": "or", "xor": "xor"}

# atomicrmw operation -> the plain computation of the new value from (builder, old, operand)
PLAIN_RMW = {
    "add": lambda b, old, v: b.add(old, v),
    "xchg": lambda b, old, v: v,
    "and": lambda b, old, v: b.and_(old, v),
    "or": lambda b, old, v: b.or_(old, v),
    "xor": lambda b, old, v: b.xor(old, v),
    "max": lambda b, old, v: b.select(b.icmp_signed(">", old, v), old, v),
    "min": lambda b, old, v: b.select(b.icmp_signed("<", old, v), old, v),
    "umax": lambda b, old, v: b.select(b.icmp_unsigned(">", old, v), old, v),
    "umin": lambda b, old, v: b.select(b.icmp_unsigned("<", old, v), old, v),
    "fadd": lambda b, old, v: b.fadd(old, v),
    # LLVM's atomicrmw fmin/fmax are minnum/maxnum
    "fmin": lambda b, old, v: _float_intrinsic(b, "minnum", old, v),
    "fmax": lambda b, old, v: _float_intrinsic(b, "maxnum", old, v),
}


def _float_intrinsic(b, name, x, y):
    suffix = {"float": "f32", "double": "f64"}[str(x.type)]
    return intrinsic(b, f"llvm.{name}.{suffix}", x.type, [x, y])


def operation(inst):
    """The operation of an atom or red: add, exch, cas, ...; None where it names none."""
    return next((m for m in inst.mods if m in ("add", "exch", "and", "or", "xor", "min", "max", "inc", "dec", "cas")),
                None)


def block_private(inst) -> bool:
    """Is the address in the running block's own shared memory (see the module docstring)?"""
    return any(m in ("shared", "shared::cta") for m in inst.mods)


def fence_before_release(b, inst):
    """An atom or red with release semantics publishes the stores before it: those that
    bypassed the caches must be visible first (compiler/cpu/streamstores.py)."""
    if not block_private(inst) and ("release" in inst.mods or "acq_rel" in inst.mods):
        streamstores.fence_if_streaming(b)


def rmw_kind(op, t):
    """The atomicrmw operation of `atom.<op>.<t>` (float exch as an integer xchg), or None
    where it takes a compare-and-swap loop or is not supported."""
    if t in ("f32", "f64"):
        return {"add": "fadd", "exch": "xchg", "min": "fmin", "max": "fmax"}.get(op)
    if op in RMW:
        return RMW[op]
    if op in ("min", "max"):
        return ("" if t.startswith("s") else "u") + op
    return None


def lane_form(inst):
    """(operands with a destination first, None for a red; the atomicrmw operation or "cas",
    None where there is neither; the type the lanes' values take: the bits for an exchange
    or a compare-and-swap, as lower_atomic exchanges them) of an atom or red, as the vector
    paths run it lane after lane (vector/regionops.py, vector/blockops.py)."""
    ops = inst.operands if inst.opcode == "atom" else (None,) + tuple(inst.operands)
    op, ts = operation(inst), type_mods(inst.mods)
    t = ts[-1] if ts else None
    if t is None:
        return ops, None, None
    kind = rmw_kind(op, t) if op != "cas" else "cas"
    if kind in ("xchg", "cas"):
        t = f"b{width(t)}"
    return ops, kind, t


def flushes_subnormals(inst):
    """Does `atom/red.add.f32` flush subnormals (see the module docstring)? An i1 constant,
    true in global memory and false in shared; None for a generic address (known only where
    it points)."""
    space = space_of(inst)
    return None if space == "" else ir.Constant(ir.IntType(1), int(space != "shared"))


def rmw(b, private, kind, p, v, flush=None):
    """atomicrmw `kind` on *p, or its plain form for block-private memory; the old value.
    `flush` (i1, for an f32 fadd outside block-private memory): flush subnormal inputs and
    results to sign-preserving zero where it holds."""
    if kind == "fadd" and flush is not None and not private and v.type == ir.FloatType():
        return _flushing_fadd(b, p, v, flush)
    if not private:
        return b.atomic_rmw(kind, p, v, "seq_cst")
    return _update_in_place(b, p, lambda old: PLAIN_RMW[kind](b, old, v))


def _flushing_fadd(b, p, v, flush):
    """*p += v for f32 as a compare-and-swap loop on the bits (atomicrmw cannot flush)."""
    f32, i32 = ir.FloatType(), ir.IntType(32)
    ip = b.bitcast(p, i32.as_pointer())
    pre = b.block
    first = b.load_atomic(ip, "monotonic", 4)
    loop = b.append_basic_block("fadd.loop")
    done = b.append_basic_block("fadd.done")
    b.branch(loop)
    b.position_at_end(loop)
    cur = b.phi(i32)
    cur.add_incoming(first, pre)
    old = b.bitcast(cur, f32)
    ftz = floatops.flush_denormal
    new = b.select(flush, ftz(b, b.fadd(ftz(b, old), ftz(b, v))), b.fadd(old, v))
    res = b.cmpxchg(ip, cur, b.bitcast(new, i32), "seq_cst", "seq_cst")
    cur.add_incoming(b.extract_value(res, 0), b.block)
    b.cbranch(b.extract_value(res, 1), done, loop)
    b.position_at_end(done)
    return old


def compare_and_swap(b, private, p, expected, new):
    """*p = new where *p == expected (integers), atomically unless block-private; the old value."""
    if private:
        return _update_in_place(b, p, lambda cur: b.select(b.icmp_unsigned("==", cur, expected), new, cur))
    return b.extract_value(b.cmpxchg(p, expected, new, "seq_cst", "seq_cst"), 0)


def _update_in_place(b, p, update):
    """*p = update(*p) without atomicity (block-private memory); returns the old value."""
    old = b.load(p)
    b.store(update(old), p)
    return old


def lower_atomic(f, inst):
    b = f.b
    is_red = inst.opcode == "red"
    ops = inst.operands if not is_red else (None,) + tuple(inst.operands)
    op = operation(inst)
    if op is None:
        raise f.error(f"{inst.opcode} needs an operation", UnsupportedPtx)
    t = inst_type(f, inst)
    lt = llvm_type(t)
    private = block_private(inst)
    fence_before_release(b, inst)
    ptr = f.address(ops[1], space_of(inst))
    memcheck.check(f, ptr, max(width(t) // 8, 1) * vector_count(inst.mods), "atomic", space_of(inst))
    if t in ("f16", "bf16", "f16x2", "bf16x2"):
        ilt = ir.IntType(width(t))
        p = b.bitcast(ptr, ilt.as_pointer())
        v = f.read(ops[2], t)
        if op not in ("add", "min", "max"):
            raise f.error(f"{inst.opcode}.{op}.{t} is not supported", UnsupportedPtx)
        old = _cas_loop(b, p, lambda cur: convert(b, floatops.half_arith(
            b, op, [convert(b, cur, lt), v], t, "rn", False, False, False), ilt), ilt, private)
        return _write(f, ops, old, t)
    p = b.bitcast(ptr, lt.as_pointer())
    if op == "cas":
        cmp_, new = f.read(ops[2], t), f.read(ops[3], t)
        ip = b.bitcast(ptr, ir.IntType(width(t)).as_pointer())
        c = convert(b, cmp_, ir.IntType(width(t)))
        n = convert(b, new, ir.IntType(width(t)))
        return _write(f, ops, compare_and_swap(b, private, ip, c, n), t)
    kind = rmw_kind(op, t)
    if kind is not None:
        v = f.read(ops[2], t)
        if kind == "xchg" and t in ("f32", "f64"):
            p, v = b.bitcast(ptr, ir.IntType(width(t)).as_pointer()), convert(b, v, ir.IntType(width(t)))
        flush = None
        if kind == "fadd" and t == "f32":
            flush = flushes_subnormals(inst)
            if flush is None:                   # a generic address: by where it points
                a = b.ptrtoint(ptr, ir.IntType(64))
                (lo, hi), = f.space_windows("shared")
                flush = b.not_(b.and_(b.icmp_unsigned(">=", a, lo), b.icmp_unsigned("<", a, hi)))
        return _write(f, ops, rmw(b, private, kind, p, v, flush), t)
    if not wraps(op, t):
        raise f.error(f"{inst.opcode}.{op}.{t} is not supported", UnsupportedPtx)
    _write(f, ops, wrapping_step(b, op, private, p, f.read(ops[2], t)), t)


# inc and dec: the new value from (builder, old, the bound v), unsigned
WRAPPING = {
    "inc": lambda b, old, v: b.select(b.icmp_unsigned(">=", old, v), ir.Constant(old.type, 0),
                                      b.add(old, ir.Constant(old.type, 1))),
    "dec": lambda b, old, v: b.select(b.or_(b.icmp_unsigned("==", old, ir.Constant(old.type, 0)),
                                            b.icmp_unsigned(">", old, v)), v, b.sub(old, ir.Constant(old.type, 1))),
}


def wraps(op, t) -> bool:
    """Whether `atom.<op>.<t>` is an integer inc or dec (WRAPPING)."""
    return op in WRAPPING and t not in ("f32", "f64")


def wrapping_step(b, op, private, p, v):
    """atom.inc or atom.dec (WRAPPING) on the integer *p with bound v; the old value."""
    return _cas_loop(b, p, lambda cur: WRAPPING[op](b, cur, v), v.type, private)


def convert(b, v, typ):
    return convert_bits(b, v, typ)


def _write(f, ops, old, t):
    if ops[0] is not None:
        f.write(ops[0], old, t)


def _cas_loop(b, p, update, lt, private=False):
    """Atomically replace *p by update(*p); returns the old value."""
    if private:
        return _update_in_place(b, p, update)
    pre = b.block
    first = b.load_atomic(p, "monotonic", lt.width // 8)
    loop = b.append_basic_block("cas.loop")
    done = b.append_basic_block("cas.done")
    b.branch(loop)
    b.position_at_end(loop)
    cur = b.phi(lt)
    cur.add_incoming(first, pre)
    new = update(cur)
    res = b.cmpxchg(p, cur, new, "seq_cst", "seq_cst")
    seen = b.extract_value(res, 0)
    ok = b.extract_value(res, 1)
    cur.add_incoming(seen, b.block)
    b.cbranch(ok, done, loop)
    b.position_at_end(done)
    return cur
