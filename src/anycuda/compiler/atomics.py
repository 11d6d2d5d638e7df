"""`atom` and `red`: read-modify-write on global, shared or generic memory.

Integer add/and/or/xor/exch/min/max map to LLVM's atomicrmw; float add too. inc/dec, cas
and the 16-bit float pairs are compare-and-swap loops.
"""
from __future__ import annotations

from llvmlite import ir

from ..ptx.errors import UnsupportedPtx
from . import floatops
from .instructions import inst_type, space_of
from .types import llvm_type, width

RMW = {"add": "add", "exch": "xchg", "and": "and", "or": "or", "xor": "xor"}


def lower_atomic(f, inst):
    b = f.b
    is_red = inst.opcode == "red"
    ops = inst.operands if not is_red else (None,) + tuple(inst.operands)
    op = next((m for m in inst.mods if m in ("add", "exch", "and", "or", "xor", "min", "max", "inc", "dec", "cas")), None)
    if op is None:
        raise f.error(f"{inst.opcode} needs an operation", UnsupportedPtx)
    t = inst_type(f, inst)
    if any(m in ("v2", "v4", "v8") for m in inst.mods):
        raise f.error(f"vector {inst.opcode} is not supported", UnsupportedPtx)
    lt = llvm_type(t)
    ptr = f.address(ops[1], space_of(inst))
    if t in ("f16", "bf16", "f16x2", "bf16x2"):
        ilt = ir.IntType(width(t))
        p = b.bitcast(ptr, ilt.as_pointer())
        v = f.read(ops[2], t)
        if op not in ("add", "min", "max"):
            raise f.error(f"{inst.opcode}.{op}.{t} is not supported", UnsupportedPtx)
        old = _cas_loop(f, p, lambda cur: convert(b, floatops.half_arith(
            b, op, [convert(b, cur, lt), v], t, "rn", False, False, False), ilt), ilt)
        return _write(f, ops, old, t)
    p = b.bitcast(ptr, lt.as_pointer())
    if op == "cas":
        cmp_, new = f.read(ops[2], t), f.read(ops[3], t)
        ip = b.bitcast(ptr, ir.IntType(width(t)).as_pointer())
        c = convert(b, cmp_, ir.IntType(width(t)))
        n = convert(b, new, ir.IntType(width(t)))
        res = b.cmpxchg(ip, c, n, "seq_cst", "seq_cst")
        return _write(f, ops, b.extract_value(res, 0), t)
    v = f.read(ops[2], t)
    if t in ("f32", "f64"):
        if op == "add":
            old = b.atomic_rmw("fadd", p, v, "seq_cst")
        elif op == "exch":
            ip = b.bitcast(ptr, ir.IntType(width(t)).as_pointer())
            old = b.atomic_rmw("xchg", ip, convert(b, v, ir.IntType(width(t))), "seq_cst")
        elif op in ("min", "max"):
            old = b.atomic_rmw("fmin" if op == "min" else "fmax", p, v, "seq_cst")
        else:
            raise f.error(f"{inst.opcode}.{op}.{t} is not supported", UnsupportedPtx)
        return _write(f, ops, old, t)
    if op in RMW:
        old = b.atomic_rmw(RMW[op], p, v, "seq_cst")
    elif op in ("min", "max"):
        kind = ("" if t.startswith("s") else "u") + op
        old = b.atomic_rmw(kind, p, v, "seq_cst")
    elif op == "inc":
        # ((old >= v) ? 0 : old + 1), unsigned
        old = _cas_loop(f, p, lambda cur: b.select(b.icmp_unsigned(">=", cur, v), ir.Constant(lt, 0),
                                                   b.add(cur, ir.Constant(lt, 1))), lt)
    elif op == "dec":
        # (((old == 0) | (old > v)) ? v : old - 1), unsigned
        old = _cas_loop(f, p, lambda cur: b.select(
            b.or_(b.icmp_unsigned("==", cur, ir.Constant(lt, 0)), b.icmp_unsigned(">", cur, v)),
            v, b.sub(cur, ir.Constant(lt, 1))), lt)
    else:
        raise f.error(f"{inst.opcode}.{op}.{t} is not supported", UnsupportedPtx)
    _write(f, ops, old, t)


def convert(b, v, typ):
    from .lower import convert_bits
    return convert_bits(b, v, typ)


def _write(f, ops, old, t):
    if ops[0] is not None:
        f.write(ops[0], old, t)


def _cas_loop(f, p, update, lt):
    """Atomically replace *p by update(*p); returns the old value."""
    b = f.b
    if update is None:
        raise f.error("unsupported atomic operation on 16-bit floats", UnsupportedPtx)
    pre = b.block
    first = b.load_atomic(p, "monotonic", lt.width // 8)
    loop = f.fn.append_basic_block("cas.loop")
    done = f.fn.append_basic_block("cas.done")
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
