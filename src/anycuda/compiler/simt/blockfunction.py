"""The work-group function: how one block's threads run on one CPU thread.

Each thread runs through its step function until it reaches a site (a barrier or a warp
collective), exits or traps. A warp whose lanes all wait is resolved: the lanes waiting at
the same collective run it together (when every non-exited lane of its member mask is
there, or when nothing else can progress) and continue. When the block's threads all wait
at barriers or have exited, each warp whose non-exited lanes all wait at one of the 16
named barriers arrives there as a whole warp (the PTX ISA counts arrivals per warp; the
thread count `b` of `bar.sync a, b` is a multiple of the warp size); a barrier completes
when the warps it expects have arrived (without `b`: every warp that has a non-exited
thread, so exited threads do not hold it up, as on a GPU). No schedule can hang: every
round either runs a thread or releases a barrier or a collective; a round that can do
neither is a barrier deadlock, and the launch fails with LAUNCH_ERR_BARRIER_DEADLOCK.

A kernel without sites needs none of this: its block is a plain loop over threads that
reuses one frame, and the worker runs a chunk of its blocks in one call (emit_run_blocks).

`emit_launch` adds, per kernel, the block function, the worker that takes blocks from a
shared counter (so load balances across cores; where the launch record says `backwards`, the
counter's chunks count from the grid's end), and `launch` that runs the workers with
libgomp's GOMP_parallel.
"""
from __future__ import annotations

from contextlib import contextmanager

from llvmlite import ir

from .. import abi, guards
from ..cpu import faults, placement, streamstores
from ..irutil import (at_function_start, collection_paused, declare, field_ptr, for_range, for_range_counting, i32,
                      i64, in_thread_group, load_field, load_invariant, load_invariant_field, set_loop_hints,
                      split_index, store_field, thread_parallel_group)
from ..types import I1, I32, I64, PTR

C = abi.CTX


def _frame(b, ws, fsize, t):
    return b.gep(ws, [b.mul(b.sext(t, I64), fsize)])


# A warp collective's value operand and results, one array each with an element per thread,
# after the spill arrays (instructions._coll_slot): name -> (byte offset, element type)
COLL_ARRAYS = {"a": (0, I64), "res": (8 * abi.MAX_BLOCK_THREADS, I64),
               "pred": (16 * abi.MAX_BLOCK_THREADS, I32), "res_pred": (20 * abi.MAX_BLOCK_THREADS, I32)}
COLL_BYTES = 24 * abi.MAX_BLOCK_THREADS


def _coll(b, coll, name, t):
    """Pointer to thread t's element of the collective array `name` (coll: the arrays' base)."""
    off, ty = COLL_ARRAYS[name]
    return b.bitcast(b.gep(coll, [b.add(i64(off), b.mul(b.sext(t, I64), i64(ty.width // 8)))]), ty.as_pointer())


def emit_record_error(module: ir.Module) -> ir.Function:
    """void anycuda.record_error(i8* ctx, i32 code): the first error of a launch wins."""
    fn = module.globals.get("anycuda.record_error")
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR, I32]), name="anycuda.record_error")
    fn.linkage = "internal"
    ctx, code = fn.args
    b = ir.IRBuilder(fn.append_basic_block())
    launch = b.inttoptr(load_field(b, ctx, C["launch"], I64), PTR)
    res = b.cmpxchg(field_ptr(b, launch, abi.LAUNCH["error"], I32), i32(0), code, "seq_cst", "seq_cst")
    with b.if_then(b.extract_value(res, 1)):
        gx = load_field(b, ctx, C["nctaid_x"], I32)
        gy = load_field(b, ctx, C["nctaid_y"], I32)
        cx, cy, cz = (b.zext(load_field(b, ctx, C[k], I32), I64) for k in ("ctaid_x", "ctaid_y", "ctaid_z"))
        gx64, gy64 = b.zext(gx, I64), b.zext(gy, I64)
        blk = b.add(cx, b.mul(gx64, b.add(cy, b.mul(gy64, cz))))
        store_field(b, launch, abi.LAUNCH["err_block"], blk)
        store_field(b, launch, abi.LAUNCH["err_thread"], b.sext(load_field(b, ctx, C["linear"], I32), I64))
    b.ret_void()
    return fn


def _state(b, frame):
    return field_ptr(b, frame, C["state"], I32)


def emit_resolve_warp(module: ir.Module) -> ir.Function:
    """i32 anycuda.resolve_warp(i8* ws, i64 fsize, i32 lo, i32 hi, i32* kinds, i8* coll):
    run one ready collective of the warp [lo, hi); returns the number of lanes released.
    Operands and results other than the frame's op_b, op_c and op_mask are in the
    collective arrays at `coll` (COLL_ARRAYS)."""
    fn = module.globals.get("anycuda.resolve_warp")
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(I32, [PTR, I64, I32, I32, I32.as_pointer(), PTR]),
                     name="anycuda.resolve_warp")
    fn.linkage = "internal"
    ws, fsize, lo, hi, kinds, coll = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    chosen = b.alloca(I32, name="chosen")
    first = b.alloca(I32, name="first")
    b.store(i32(-1), chosen)
    b.store(i32(-1), first)

    def frame(t):
        return _frame(b, ws, fsize, t)

    def waiting_at(t, site):
        fr = frame(t)
        st = b.load(_state(b, fr))
        at = b.icmp_signed("==", load_field(b, fr, C["resume"], I32), site)
        return b.and_(b.icmp_signed("==", st, i32(abi.THREAD_WAIT_WARP)), at)

    # 1. find a lane whose collective has every live member of its mask waiting with it
    with for_range(b, lo, hi, "t") as t:
        fr = frame(t)
        is_waiting = b.icmp_signed("==", b.load(_state(b, fr)), i32(abi.THREAD_WAIT_WARP))
        none_chosen = b.icmp_signed("<", b.load(chosen), i32(0))
        with b.if_then(b.and_(is_waiting, none_chosen)):
            with b.if_then(b.icmp_signed("<", b.load(first), i32(0))):
                b.store(t, first)
            site = load_field(b, fr, C["resume"], I32)
            mask = load_field(b, fr, C["op_mask"], I32)
            complete = b.alloca(I1)
            b.store(ir.Constant(I1, 1), complete)
            with for_range(b, lo, hi, "u") as u:
                bit = b.trunc(b.lshr(mask, b.sub(u, lo)), I1)
                ustate = b.load(_state(b, frame(u)))
                alive = b.icmp_signed("!=", ustate, i32(abi.THREAD_EXITED))
                missing = b.and_(b.and_(bit, alive), b.not_(waiting_at(u, site)))
                with b.if_then(missing):
                    b.store(ir.Constant(I1, 0), complete)
            with b.if_then(b.load(complete)):
                b.store(t, chosen)
    c = b.load(chosen)
    c = b.select(b.icmp_signed("<", c, i32(0)), b.load(first), c)
    nothing = fn.append_basic_block("nothing")
    work = fn.append_basic_block("work")
    b.cbranch(b.icmp_signed("<", c, i32(0)), nothing, work)
    b.position_at_end(nothing)
    b.ret(i32(0))
    b.position_at_end(work)
    site = load_field(b, frame(c), C["resume"], I32)
    kind = b.load(b.gep(kinds, [b.sub(site, i32(1))]))
    # the group: lanes waiting at this site that are in the chosen lane's member mask (two
    # half-warps may meet one instruction with disjoint masks; activemask passes mask 0)
    group_mask = load_field(b, frame(c), C["op_mask"], I32)
    group_mask = b.select(b.icmp_unsigned("==", group_mask, i32(0)), i32(-1), group_mask)

    def in_group(u, site):
        member = b.trunc(b.lshr(group_mask, b.sub(u, lo)), I1)
        return b.and_(waiting_at(u, site), member)
    # 2. the group: lanes waiting at this site; aggregates over it
    group = b.alloca(I32, name="group")
    agg = {k: b.alloca(I64 if k.startswith("r") else I32, name=k) for k in
           ("all", "any", "ballot", "radd", "rminu", "rmins", "rmaxu", "rmaxs", "rand", "ror", "rxor", "same")}
    init = {"all": 1, "any": 0, "ballot": 0, "radd": 0, "rminu": 0xFFFFFFFF, "rmins": 0x7FFFFFFF,
            "rmaxu": 0, "rmaxs": -0x80000000, "rand": 0xFFFFFFFF, "ror": 0, "rxor": 0, "same": 1}
    for k, v in init.items():
        b.store(ir.Constant(agg[k].type.pointee, v), agg[k])
    b.store(i32(0), group)
    a_first = b.load(_coll(b, coll, "a", c))
    with for_range(b, lo, hi, "g") as g:
        with b.if_then(in_group(g, site)):
            fr = frame(g)
            lane_bit = b.shl(i32(1), b.sub(g, lo))
            b.store(b.or_(b.load(group), lane_bit), group)
            p = b.load(_coll(b, coll, "pred", g))
            p1 = b.icmp_signed("!=", p, i32(0))
            b.store(b.and_(b.load(agg["all"]), b.zext(p1, I32)), agg["all"])
            b.store(b.or_(b.load(agg["any"]), b.zext(p1, I32)), agg["any"])
            b.store(b.or_(b.load(agg["ballot"]), b.select(p1, lane_bit, i32(0))), agg["ballot"])
            a64 = b.load(_coll(b, coll, "a", g))
            a = b.and_(a64, i64(0xFFFFFFFF))
            sa = b.sext(b.trunc(a64, I32), I64)

            def upd(name, fnv):
                b.store(fnv(b.load(agg[name])), agg[name])
            upd("radd", lambda x: b.and_(b.add(x, a), i64(0xFFFFFFFF)))
            upd("rminu", lambda x: b.select(b.icmp_unsigned("<", a, x), a, x))
            upd("rmaxu", lambda x: b.select(b.icmp_unsigned(">", a, x), a, x))
            upd("rmins", lambda x: b.select(b.icmp_signed("<", sa, x), sa, x))
            upd("rmaxs", lambda x: b.select(b.icmp_signed(">", sa, x), sa, x))
            upd("rand", lambda x: b.and_(x, a))
            upd("ror", lambda x: b.or_(x, a))
            upd("rxor", lambda x: b.xor(x, a))
            # "same" tracks whether every lane's predicate (vote.uni) / value (match.all) agree
            same_pred = b.icmp_signed("==", b.zext(p1, I32), b.zext(b.icmp_signed(
                "!=", b.load(_coll(b, coll, "pred", c)), i32(0)), I32))
            is64 = b.or_(b.icmp_signed("==", kind, i32(abi.SITE["match_all_b64"])),
                         b.icmp_signed("==", kind, i32(abi.SITE["match_any_b64"])))
            av = b.select(is64, a64, a)
            af = b.select(is64, a_first, b.and_(a_first, i64(0xFFFFFFFF)))
            is_match = b.icmp_signed("==", kind, i32(abi.SITE["match_all_b32"]))
            is_match = b.or_(is_match, b.icmp_signed("==", kind, i32(abi.SITE["match_all_b64"])))
            agree = b.select(is_match, b.icmp_unsigned("==", av, af), same_pred)
            b.store(b.and_(b.load(agg["same"]), b.zext(agree, I32)), agg["same"])
    grp = b.load(group)
    # 3. each lane's result
    with for_range(b, lo, hi, "l") as l:
        with b.if_then(in_group(l, site)):
            fr = frame(l)
            res, rpred = _lane_result(b, fn, kind, fr, l, lo, grp, agg, frame, in_group, site, hi, coll)
            b.store(res, _coll(b, coll, "res", l))
            b.store(rpred, _coll(b, coll, "res_pred", l))
    with for_range(b, lo, hi, "r") as r:
        with b.if_then(in_group(r, site)):
            b.store(i32(abi.THREAD_RUN), _state(b, frame(r)))
    b.ret(_popc(b, grp))
    return fn


def _popc(b, v):
    fn = declare(b.module, "llvm.ctpop.i32", I32, [I32])
    return b.call(fn, [v])


def _lane_result(b, fn, kind, fr, l, lo, grp, agg, frame, waiting_at, site, hi, coll):
    """(i64 result, i32 predicate result) of one lane of a resolved collective."""
    S = abi.SITE
    lane = b.sub(l, lo)
    # shuffles, per the PTX ISA pseudo-code for shfl.sync
    bval = b.and_(load_field(b, fr, C["op_b"], I32), i32(31))
    cval = load_field(b, fr, C["op_c"], I32)
    clampv = b.and_(cval, i32(31))
    seg = b.and_(b.lshr(cval, i32(8)), i32(31))
    max_lane = b.or_(b.and_(lane, seg), b.and_(clampv, b.not_(seg)))
    min_lane = b.and_(lane, seg)
    j_up = b.sub(lane, bval)
    j_down = b.add(lane, bval)
    j_bfly = b.xor(lane, bval)
    j_idx = b.or_(min_lane, b.and_(bval, b.not_(seg)))
    is_k = lambda name: b.icmp_signed("==", kind, i32(S[name]))
    j = b.select(is_k("shfl_up"), j_up, b.select(is_k("shfl_down"), j_down,
                 b.select(is_k("shfl_bfly"), j_bfly, j_idx)))
    pval = b.select(is_k("shfl_up"), b.icmp_signed(">=", j, max_lane), b.icmp_signed("<=", j, max_lane))
    j = b.select(pval, j, lane)
    j_ok = b.and_(b.icmp_unsigned("<", j, i32(32)),
                  b.trunc(b.lshr(grp, b.and_(j, i32(31))), I1))
    # a source lane that is not taking part (inactive, exited or beyond the block) is
    # undefined in PTX; anycuda reads it as 0 rather than as stale data
    src = b.select(j_ok, b.add(lo, j), l)
    shfl_val = b.select(j_ok, b.load(_coll(b, coll, "a", src)), i64(0))
    # match.any: lanes of the group holding the same value
    matches = b.alloca(I32)
    b.store(i32(0), matches)
    is_any32, is_any64 = is_k("match_any_b32"), is_k("match_any_b64")
    with b.if_then(b.or_(is_any32, is_any64)):
        mine = b.load(_coll(b, coll, "a", l))
        with for_range(b, lo, hi, "m") as m:
            with b.if_then(waiting_at(m, site)):
                other = b.load(_coll(b, coll, "a", m))
                eq = b.select(is_any64, b.icmp_unsigned("==", other, mine),
                              b.icmp_unsigned("==", b.trunc(other, I32), b.trunc(mine, I32)))
                bit = b.shl(i32(1), b.sub(m, lo))
                b.store(b.or_(b.load(matches), b.select(eq, bit, i32(0))), matches)
    same = b.load(agg["same"])
    z64 = lambda v: b.zext(v, I64)
    table = [
        (("shfl_up", "shfl_down", "shfl_bfly", "shfl_idx"), shfl_val, b.zext(pval, I32)),
        (("vote_all",), z64(b.load(agg["all"])), i32(0)),
        (("vote_any",), z64(b.load(agg["any"])), i32(0)),
        (("vote_uni",), z64(same), i32(0)),
        (("vote_ballot", ), z64(b.load(agg["ballot"])), i32(0)),
        (("match_any_b32", "match_any_b64"), z64(b.load(matches)), i32(0)),
        (("match_all_b32", "match_all_b64"), b.select(b.icmp_signed("!=", same, i32(0)), z64(grp), i64(0)), same),
        (("redux_add",), b.load(agg["radd"]), i32(0)),
        (("redux_min_u32",), b.load(agg["rminu"]), i32(0)),
        (("redux_max_u32",), b.load(agg["rmaxu"]), i32(0)),
        (("redux_min_s32",), b.and_(b.load(agg["rmins"]), i64(0xFFFFFFFF)), i32(0)),
        (("redux_max_s32",), b.and_(b.load(agg["rmaxs"]), i64(0xFFFFFFFF)), i32(0)),
        (("redux_and",), b.load(agg["rand"]), i32(0)),
        (("redux_or",), b.load(agg["ror"]), i32(0)),
        (("redux_xor",), b.load(agg["rxor"]), i32(0)),
        (("activemask",), z64(grp), i32(0)),
    ]
    res, rpred = i64(0), i32(0)
    for names, value, pred in table:
        hit = ir.Constant(I1, 0)
        for n in names:
            hit = b.or_(hit, is_k(n))
        res = b.select(hit, value, res)
        rpred = b.select(hit, pred, rpred)
    return res, rpred


# ---------------------------------------------------------------------- collectives in uniform rounds

NO_VECTORIZE = {"llvm.loop.unroll.disable": None, "llvm.loop.vectorize.enable": False}
_SHFL_MODES = {abi.SITE["shfl_" + m]: m for m in ("up", "down", "bfly", "idx")}
_VOTES = {abi.SITE["vote_" + m]: m for m in ("all", "any", "uni", "ballot")}
_REDUX = {abi.SITE[k]: k for k in abi.SITE_KINDS if k.startswith("redux_")}


def shfl_source(mode, lane, bval, cval):
    """(source lane, in range) of `lane` in shfl.sync.mode with lane operand bval and clamp
    operand cval, per the PTX ISA's pseudo-code (a source out of range reads the lane itself)."""
    bval &= 31
    clamp, seg = cval & 31, (cval >> 8) & 31
    max_lane = (lane & seg) | (clamp & ~seg)
    j = {"up": lane - bval, "down": lane + bval, "bfly": lane ^ bval,
         "idx": (lane & seg) | (bval & ~seg & 0xFFFFFFFF)}[mode]
    ok = j >= max_lane if mode == "up" else j <= max_lane
    return (j if ok else lane), ok


def uniform_collective(kind, consts):
    """Whether a collective site can be resolved for the whole block at once when every
    thread of the block stops there in a uniform round and every warp is full: then each
    warp's group is all of its 32 lanes (the member mask is the full warp, a constant) and
    its results follow from the collective arrays alone. A shuffle with constant lane and
    clamp operands (nvcc's unrolled shuffle loops have them) is a fixed permutation of the
    lanes; with operands known only at run time, each lane's source follows from its own.
    match and partial member masks stay with the general rounds, as does a block with a
    partial warp."""
    const = lambda name: consts.get(C[name], (None,))[0]
    if kind == abi.SITE["warp_sync"]:
        return const("op_mask") is not None
    if kind == abi.SITE["activemask"]:
        return True
    if kind in _SHFL_MODES:
        return const("op_mask") == 0xFFFFFFFF
    return (kind in _VOTES or kind in _REDUX) and const("op_mask") == 0xFFFFFFFF


def _shfl_source_ir(b, mode, lane, bval, cval):
    """shfl_source on i32 values."""
    bval = b.and_(bval, i32(31))
    clamp = b.and_(cval, i32(31))
    seg = b.and_(b.lshr(cval, i32(8)), i32(31))
    max_lane = b.or_(b.and_(lane, seg), b.and_(clamp, b.not_(seg)))
    j = {"up": lambda: b.sub(lane, bval), "down": lambda: b.add(lane, bval), "bfly": lambda: b.xor(lane, bval),
         "idx": lambda: b.or_(b.and_(lane, seg), b.and_(bval, b.not_(seg)))}[mode]()
    ok = b.icmp_signed(">=" if mode == "up" else "<=", j, max_lane)
    return b.select(ok, j, lane), ok


def _emit_uniform_collective(b, kind, consts, lo, coll, ws, fsize):
    """Resolve collective site `kind` (uniform_collective) for the full warp starting at
    thread `lo`, all of whose lanes wait there: results into the collective arrays, the 32
    lanes as one vector (a shuffle is a shufflevector, a vote a mask of 32 bits, a
    reduction a vector reduction)."""
    if kind == abi.SITE["warp_sync"]:
        return
    v64, v32 = ir.VectorType(I64, 32), ir.VectorType(I32, 32)
    vec = lambda name, lo, ty: b.bitcast(_coll(b, coll, name, lo), ty.as_pointer())
    const = lambda name: consts.get(C[name], (None,))[0]
    if kind in _SHFL_MODES and (const("op_b") is None or const("op_c") is None):
        # lane and clamp operands from each lane's frame; every lane of the warp takes part,
        # so every source lane the ISA's rule gives (0..31) is there
        with for_range(b, i32(0), i32(32), "cl") as lane:
            fr = _frame(b, ws, fsize, b.add(lo, lane))
            bval = i32(const("op_b")) if const("op_b") is not None else load_field(b, fr, C["op_b"], I32)
            cval = i32(const("op_c")) if const("op_c") is not None else load_field(b, fr, C["op_c"], I32)
            j, ok = _shfl_source_ir(b, _SHFL_MODES[kind], lane, bval, cval)
            t = b.add(lo, lane)
            b.store(b.load(_coll(b, coll, "a", b.add(lo, j))), _coll(b, coll, "res", t))
            b.store(b.zext(ok, I32), _coll(b, coll, "res_pred", t))
    elif kind in _SHFL_MODES:
        srcs = [shfl_source(_SHFL_MODES[kind], lane, const("op_b"), const("op_c")) for lane in range(32)]
        a = b.load(vec("a", lo, v64), align=8)
        perm = ir.Constant(v32, [j for j, _ in srcs])
        b.store(b.shuffle_vector(a, ir.Constant(v64, None), perm), vec("res", lo, v64), align=8)
        b.store(ir.Constant(v32, [int(ok) for _, ok in srcs]), vec("res_pred", lo, v32), align=4)
    else:
        _emit_warp_aggregate(b, kind, lo, vec, v64, v32)


def _emit_warp_aggregate(b, kind, lo, vec, v64, v32):
    """A vote, activemask or redux of the full warp starting at thread `lo`: one value for
    every lane."""
    if kind in _VOTES:
        p = b.load(vec("pred", lo, v32), align=4)
        ballot = b.bitcast(b.icmp_unsigned("!=", p, ir.Constant(v32, None)), I32)
        all_ = b.icmp_unsigned("==", ballot, i32(-1))
        any_ = b.icmp_unsigned("!=", ballot, i32(0))
        value = {"all": lambda: b.zext(all_, I32), "any": lambda: b.zext(any_, I32),
                 "uni": lambda: b.zext(b.or_(all_, b.not_(any_)), I32),
                 "ballot": lambda: ballot}[_VOTES[kind]]()
    elif kind == abi.SITE["activemask"]:
        value = i32(-1)
    else:
        name = _REDUX[kind]
        op = name.split("_")[1]
        if op in ("min", "max"):
            op = ("u" if name.endswith("u32") else "s") + op
        a = b.trunc(b.load(vec("a", lo, v64), align=8), v32)
        value = b.call(declare(b.module, f"llvm.vector.reduce.{op}.v32i32", I32, [v32]), [a])
    splat = b.insert_element(ir.Constant(v64, None), b.zext(value, I64), i32(0))
    splat = b.shuffle_vector(splat, ir.Constant(v64, None), ir.Constant(v32, [0] * 32))
    b.store(splat, vec("res", lo, v64), align=8)
    b.store(ir.Constant(v32, None), vec("res_pred", lo, v32), align=4)


def _record_stop(b, fn, fr, code, kinds, site_consts, site_kinds=()):
    """Record in a thread's frame where step stopped (`code`, not a trap): its state, resume
    point, and the operands of its site that are constants (lower.suspend leaves them out)."""
    exited = b.icmp_signed("==", code, i32(abi.STEP_EXIT))
    kind = b.load(b.gep(kinds, [b.sub(b.select(exited, i32(1), code), i32(1))]))
    is_block = ir.Constant(I1, 0)
    for k in sorted(abi.BLOCK_SITE_KINDS):
        is_block = b.or_(is_block, b.icmp_signed("==", kind, i32(k)))
    waits = b.select(is_block, i32(abi.THREAD_WAIT_BAR), i32(abi.THREAD_WAIT_WARP))
    if abi.SITE["yield"] in site_kinds:
        # a thread at a yield waits for nothing
        waits = b.select(b.icmp_signed("==", kind, i32(abi.SITE["yield"])), i32(abi.THREAD_RUN), waits)
    st = b.select(exited, i32(abi.THREAD_EXITED), waits)
    b.store(st, _state(b, fr))
    store_field(b, fr, C["resume"], code)
    with_consts = [(i + 1, c) for i, c in enumerate(site_consts) if c]
    if not with_consts:
        return
    after = fn.append_basic_block("consts.done")
    sw = b.switch(code, after)
    for site, consts in with_consts:
        blk = fn.append_basic_block(f"consts{site}")
        sw.add_case(i32(site), blk)
        b.position_at_end(blk)
        for off, (value, bits) in sorted(consts.items()):
            store_field(b, fr, off, ir.Constant(ir.IntType(bits), value))
        b.branch(after)
    b.position_at_end(after)


def _bar_slot(b, bars, bar_id, field):
    return b.gep(bars, [b.add(b.mul(bar_id, i32(abi.BAR_FIELDS)), i32(field))])


def emit_release_barrier(module: ir.Module) -> ir.Function:
    """i32 anycuda.release_barrier(i8* ws, i64 fsize, i32 n, i32* kinds, i32* bars, i32 id):
    complete barrier `id`: the threads counted there get their bar.red result and run again,
    and the barrier is reset for its next use. Returns the number of threads released."""
    fn = module.globals.get("anycuda.release_barrier")
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(I32, [PTR, I64, I32, I32.as_pointer(), I32.as_pointer(), I32]),
                     name="anycuda.release_barrier")
    fn.linkage = "internal"
    ws, fsize, n, kinds, bars, bar_id = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    released = b.alloca(I32, name="released")
    b.store(i32(0), released)
    threads = b.load(_bar_slot(b, bars, bar_id, abi.BAR_THREADS))
    popc = b.load(_bar_slot(b, bars, bar_id, abi.BAR_POPC))
    all_ = b.zext(b.icmp_unsigned("==", popc, threads), I32)
    any_ = b.zext(b.icmp_unsigned("!=", popc, i32(0)), I32)
    with for_range(b, i32(0), n, "t") as t:
        fr = _frame(b, ws, fsize, t)
        counted = b.icmp_signed("==", b.load(_state(b, fr)), i32(abi.THREAD_BAR_ARRIVED))
        here = b.icmp_signed("==", load_field(b, fr, C["op_b"], I32), bar_id)
        with b.if_then(b.and_(counted, here)):
            kind = b.load(b.gep(kinds, [b.sub(load_field(b, fr, C["resume"], I32), i32(1))]))
            res = b.select(b.icmp_signed("==", kind, i32(abi.SITE["bar_red_popc"])), popc,
                           b.select(b.icmp_signed("==", kind, i32(abi.SITE["bar_red_and"])), all_, any_))
            store_field(b, fr, C["res"], b.zext(res, I64))
            b.store(i32(abi.THREAD_RUN), _state(b, fr))
            b.store(b.add(b.load(released), i32(1)), released)
    for field in (abi.BAR_ARRIVED, abi.BAR_THREADS, abi.BAR_POPC):
        b.store(i32(0), _bar_slot(b, bars, bar_id, field))
    b.ret(b.load(released))
    return fn


def emit_resolve_barrier(module: ir.Module) -> ir.Function:
    """i32 anycuda.resolve_barrier(i8* ws, i64 fsize, i32 n, i32* kinds, i32* bars, i8* header):
    count each warp whose non-exited threads all wait at one barrier as arrived there (the PTX
    ISA counts arrivals per warp: a warp with exited threads still counts as a whole warp), and
    complete every barrier that has the warps it expects. Returns the number of threads that
    may run again; -1 when threads wait but no barrier can ever complete (the error is
    recorded, naming the block from `header`)."""
    fn = module.globals.get("anycuda.resolve_barrier")
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(I32, [PTR, I64, I32, I32.as_pointer(), I32.as_pointer(), PTR]),
                     name="anycuda.resolve_barrier")
    fn.linkage = "internal"
    ws, fsize, n, kinds, bars, header = fn.args
    release = emit_release_barrier(module)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    names = ("released", "live_warps", "stuck", "live", "ready", "bar_id", "expect", "threads", "popc")
    v = {k: b.alloca(I32, name=k) for k in names}
    for k, init in (("released", 0), ("live_warps", 0)):
        b.store(i32(init), v[k])
    nwarps = b.udiv(b.add(n, i32(31)), i32(32))
    with for_range(b, i32(0), nwarps, "w") as w:
        lo = b.mul(w, i32(32))
        hi = b.add(lo, i32(32))
        hi = b.select(b.icmp_signed("<", n, hi), n, hi)
        for k, init in (("live", 0), ("ready", 1), ("bar_id", -1), ("expect", 0), ("threads", 0), ("popc", 0)):
            b.store(i32(init), v[k])
        with for_range(b, lo, hi, "t") as t:
            fr = _frame(b, ws, fsize, t)
            st = b.load(_state(b, fr))
            with b.if_then(b.icmp_signed("!=", st, i32(abi.THREAD_EXITED))):
                b.store(i32(1), v["live"])
                waiting = b.icmp_signed("==", st, i32(abi.THREAD_WAIT_BAR))
                with b.if_else(waiting) as (then, otherwise):
                    with then:
                        tid = load_field(b, fr, C["op_b"], I32)
                        with b.if_then(b.icmp_signed("<", b.load(v["bar_id"]), i32(0))):
                            b.store(tid, v["bar_id"])
                            b.store(load_field(b, fr, C["op_c"], I32), v["expect"])
                        # lanes of one warp at different barriers: the warp arrives at none
                        same = b.icmp_signed("==", tid, b.load(v["bar_id"]))
                        b.store(b.and_(b.load(v["ready"]), b.zext(same, I32)), v["ready"])
                        p = b.zext(b.icmp_signed("!=", load_field(b, fr, C["op_pred"], I32), i32(0)), I32)
                        b.store(b.add(b.load(v["threads"]), i32(1)), v["threads"])
                        b.store(b.add(b.load(v["popc"]), p), v["popc"])
                    with otherwise:
                        b.store(i32(0), v["ready"])
        b.store(b.add(b.load(v["live_warps"]), b.load(v["live"])), v["live_warps"])
        bar_id = b.load(v["bar_id"])
        arrives = b.and_(b.icmp_signed("!=", b.load(v["ready"]), i32(0)), b.icmp_signed(">=", bar_id, i32(0)))
        with b.if_then(arrives):
            arrived_p = _bar_slot(b, bars, bar_id, abi.BAR_ARRIVED)
            expected_p = _bar_slot(b, bars, bar_id, abi.BAR_EXPECTED)
            arrived = b.load(arrived_p)
            # the first warp to arrive sets what this use of the barrier expects
            with b.if_then(b.icmp_signed("==", arrived, i32(0))):
                b.store(b.load(v["expect"]), expected_p)
            arrived = b.add(arrived, i32(1))
            b.store(arrived, arrived_p)
            for field, k in ((abi.BAR_THREADS, "threads"), (abi.BAR_POPC, "popc")):
                slot = _bar_slot(b, bars, bar_id, field)
                b.store(b.add(b.load(slot), b.load(v[k])), slot)
            with for_range(b, lo, hi, "a") as a:
                fr = _frame(b, ws, fsize, a)
                with b.if_then(b.icmp_signed("==", b.load(_state(b, fr)), i32(abi.THREAD_WAIT_BAR))):
                    kind = b.load(b.gep(kinds, [b.sub(load_field(b, fr, C["resume"], I32), i32(1))]))
                    goes_on = b.icmp_signed("==", kind, i32(abi.SITE["bar_arrive"]))
                    b.store(b.select(goes_on, i32(abi.THREAD_RUN), i32(abi.THREAD_BAR_ARRIVED)), _state(b, fr))
                    b.store(b.add(b.load(v["released"]), b.zext(goes_on, I32)), v["released"])
            # a barrier with a thread count completes on the arrival that reaches it, so the
            # warps that arrive later start its next use
            expected = b.load(expected_p)
            full = b.and_(b.icmp_signed("!=", expected, i32(0)), b.icmp_signed(">=", arrived, expected))
            with b.if_then(full):
                freed = b.call(release, [ws, fsize, n, kinds, bars, bar_id])
                b.store(b.add(b.load(v["released"]), freed), v["released"])
    # a barrier without a thread count waits for every warp that still has a non-exited thread
    live_warps = b.load(v["live_warps"])
    with for_range(b, i32(0), i32(abi.NUM_BARRIERS), "id") as bar_id:
        arrived = b.load(_bar_slot(b, bars, bar_id, abi.BAR_ARRIVED))
        whole = b.icmp_signed("==", b.load(_bar_slot(b, bars, bar_id, abi.BAR_EXPECTED)), i32(0))
        done = b.and_(b.and_(whole, b.icmp_signed(">", arrived, i32(0))), b.icmp_signed(">=", arrived, live_warps))
        with b.if_then(done):
            freed = b.call(release, [ws, fsize, n, kinds, bars, bar_id])
            b.store(b.add(b.load(v["released"]), freed), v["released"])
    released = b.load(v["released"])
    deadlock = b.and_(b.icmp_signed("==", released, i32(0)), b.icmp_signed(">", live_warps, i32(0)))
    with b.if_then(deadlock):
        # the error names the first thread left waiting
        b.store(n, v["stuck"])
        with for_range(b, i32(0), n, "s") as t:
            exited = b.icmp_signed("==", b.load(_state(b, _frame(b, ws, fsize, t))), i32(abi.THREAD_EXITED))
            first = b.icmp_signed("<", t, b.load(v["stuck"]))
            b.store(b.select(b.and_(b.not_(exited), first), t, b.load(v["stuck"])), v["stuck"])
        stuck = _frame(b, ws, fsize, b.load(v["stuck"]))
        for k in ("ctaid_x", "ctaid_y", "ctaid_z"):
            store_field(b, stuck, C[k], load_field(b, header, C[k], I32))
        b.call(emit_record_error(module), [stuck, i32(abi.LAUNCH_ERR_BARRIER_DEADLOCK)])
        b.ret(i32(-1))
    b.ret(released)
    return fn


def _init_block_fields(b, fr, L, cta, shared, worker):
    """The parts of a frame header that are the same for every thread of the block."""
    for k, v in (("exit_flag", i32(0)), ("resume", i32(0)), ("state", i32(abi.THREAD_RUN)), ("worker", worker),
                 ("op_mask", i32(-1)), ("op_pred", i32(0))):
        store_field(b, fr, C[k], v)
    for k in ("ntid_x", "ntid_y", "ntid_z"):
        store_field(b, fr, C[k], load_invariant_field(b, L, abi.LAUNCH["block_" + k[-1]], I32))
    for k in ("nctaid_x", "nctaid_y", "nctaid_z"):
        store_field(b, fr, C[k], load_invariant_field(b, L, abi.LAUNCH["grid_" + k[-1]], I32))
    for k, v in zip(("ctaid_x", "ctaid_y", "ctaid_z"), cta):
        store_field(b, fr, C[k], v)
    store_field(b, fr, C["shared_base"], b.ptrtoint(shared, I64))
    store_field(b, fr, C["launch"], b.ptrtoint(L, I64))


def _set_thread_index(b, fr, x, y, z, linear):
    for k, v in (("tid_x", x), ("tid_y", y), ("tid_z", z), ("linear", linear)):
        store_field(b, fr, C[k], v)


@contextmanager
def _each_thread(b, nx, ny, nz, tag="", counted_from=None):
    """Loops over a block's threads in x-fastest order, giving (x, y, z, linear index, counter).
    Nested loops keep the thread index free of divisions, so the optimiser sees the innermost
    loop as a simple counted loop over threadIdx.x. With `counted_from` (i64), the counter is
    counted_from + linear index, a second induction variable of the innermost loop; else None."""
    with for_range(b, i32(0), nz, tag + "z") as z:
        with for_range(b, i32(0), ny, tag + "y") as y:
            row = b.mul(b.add(b.mul(z, ny), y), nx)
            if counted_from is None:
                with for_range(b, i32(0), nx, tag + "x") as x:
                    yield x, y, z, b.add(row, x), None
                    latch = b.block
            else:
                with for_range_counting(b, i32(0), nx, b.add(counted_from, b.zext(row, I64)), tag + "x") as (x, count):
                    yield x, y, z, b.add(row, x), count
                    latch = b.block
            # the threads' own accesses carry nothing from one thread to the next; a loop with
            # any other memory access stays a plain loop to the vectoriser
            set_loop_hints(b.module, latch.terminator, {"llvm.loop.parallel_accesses": thread_parallel_group(b.module)})


def _reentry(b, fn, name, first):
    """A new block that the code may branch back to with another resume value: (the i32
    phi, holding `first` when coming from here, and the block)."""
    entry = b.block
    blk = fn.append_basic_block(name)
    b.branch(blk)
    b.position_at_end(blk)
    phi = b.phi(I32, name=name + ".resume")
    phi.add_incoming(first, entry)
    return phi, blk


@contextmanager
def _each_lane(b, lo, nx, ny, index):
    """Loops over the 32 threads of the warp that starts at linear index `lo`, giving (x, y,
    z, linear index); `index`: three i32 stack slots. The warp's first thread's index costs
    divisions, the others carry from it."""
    for slot, v in zip(index, split_index(b, lo, nx, ny)):
        b.store(v, slot)
    with for_range(b, lo, b.add(lo, i32(32)), "lane") as t:
        x, y, z = (b.load(slot) for slot in index)
        yield x, y, z, t
        x1 = b.add(x, i32(1))
        wrap_x = b.icmp_unsigned("==", x1, nx)
        y1 = b.select(wrap_x, b.add(y, i32(1)), y)
        wrap_y = b.icmp_unsigned("==", y1, ny)
        b.store(b.select(wrap_x, i32(0), x1), index[0])
        b.store(b.select(wrap_y, i32(0), y1), index[1])
        b.store(b.select(wrap_y, b.add(z, i32(1)), z), index[2])


def _frame_only_args(ws):
    """step()'s last arguments (abi.STEP_TAIL) in a block without sites: the one frame stands
    for the header, and there are no spill arrays, thread count or induction value."""
    return [ws, ir.Constant(PTR, None), i64(0), i64(0)]


def _emit_thread_loops(b, fn, ws, step, nx, ny, nz, fail, params, frame_needs_index, scalars, mode=0):
    """A block without sites: one frame, reused by each thread in turn. `mode` is the step's
    resume argument (0, or guards.PASSED)."""
    with _each_thread(b, nx, ny, nz) as (x, y, z, linear, _):
        _emit_thread(b, fn, ws, step, (x, y, z, linear), fail, params, frame_needs_index, scalars, mode)


def _emit_thread(b, fn, ws, step, index, fail, params, frame_needs_index, scalars, mode=0):
    """One thread of a block without sites, `index` its (x, y, z, linear), in the one frame."""
    if frame_needs_index:        # device functions read the index from the frame
        _set_thread_index(b, ws, *index)
        store_field(b, ws, C["exit_flag"], i32(0))
    code = b.call(step, [ws, i32(mode), params, *index] + scalars + _frame_only_args(ws))
    ok = fn.append_basic_block("ok")
    b.cbranch(b.icmp_signed("==", code, i32(abi.STEP_TRAP)), fail, ok)
    b.position_at_end(ok)


def _emit_guard_probe(module, name, step, scalar_params, frame_size, frame_needs_index, sites, bounds=None):
    """i32 probe(i8* L, i8* ws, i8* header, i8* spill): bit i set when no thread of the block
    takes the kernel's known branch i (compiler/guards.py); each thread computes only their
    predicates. A function of its own: inline, its loop multiplied the paths through the
    block function (LLVM duplicated the code that computes the workspace's pointers, whose
    phis cost sgemm's tile round its vectorised loop). With `sites`, each thread has its
    frame in the workspace and the block's header; else the one frame `ws` stands for both.
    `bounds` (compiler/simt/probebounds.py), where the kernel has it, answers first for the whole
    block from its index ranges; the loop over the threads runs where it proves nothing."""
    fn = ir.Function(module, ir.FunctionType(I32, [PTR, PTR, PTR, PTR]), name=name + ".probe")
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    L, ws, header, spill = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    if bounds is not None:
        with b.if_then(b.call(bounds, [L, header]), likely=True):
            b.ret(i32(-1))
    nx, ny, nz = (load_field(b, L, abi.LAUNCH["block_" + k], I32) for k in "xyz")
    params = b.inttoptr(load_field(b, L, abi.LAUNCH["params"], I64), PTR)
    scalars = [b.load(b.bitcast(b.gep(params, [i64(info.offset)]), ty.as_pointer()), align=info.size)
               for info, ty in scalar_params]
    threads = b.zext(b.mul(b.mul(nx, ny), nz), I64)
    stays = b.alloca(I32, name="all.stay")
    b.store(i32(-1), stays)
    with _each_thread(b, nx, ny, nz, "probe.") as (x, y, z, linear, _):
        if sites:
            fr, tail = _frame(b, ws, i64(frame_size), linear), [header, spill, threads, i64(0)]
        else:
            if frame_needs_index:
                _set_thread_index(b, ws, x, y, z, linear)
            fr, tail = ws, _frame_only_args(ws)
        code = b.call(step, [fr, i32(guards.PROBE), params, x, y, z, linear] + scalars + tail,
                      attrs=("alwaysinline",))
        b.store(b.and_(b.load(stays), code), stays)
    b.ret(b.load(stays))
    return fn


def _block_stays(b, fn, probe, bounds, L, ws, bits):
    """i1: no thread of a kernel without sites takes its known branches `bits`: `bounds`
    (compiler/simt/probebounds.py, or None) first, the probe where they prove nothing. The bounds
    test here rather than in the probe: inlined with the block function into the loop over
    a chunk's blocks (emit_run_blocks), its parameter loads leave that loop."""
    probed = lambda: _all_stay(b, b.call(probe, [L, ws, ws, ir.Constant(PTR, None)]), bits)
    if bounds is None:
        return probed()
    before = b.block
    probing, known = fn.append_basic_block("probe"), fn.append_basic_block("known")
    b.cbranch(b.call(bounds, [L, ws]), known, probing)
    b.position_at_end(probing)
    answer = probed()
    answered = b.block
    b.branch(known)
    b.position_at_end(known)
    stays = b.phi(I1, name="stays")
    stays.add_incoming(ir.Constant(I1, 1), before)
    stays.add_incoming(answer, answered)
    return stays


def _all_stay(b, stays, bits):
    """i1: the probe's answer has every bit of `bits` (a round's known branches)."""
    return b.icmp_unsigned("==", b.and_(stays, i32(bits)), i32(bits))


class _RangeReduction:
    """The least and greatest of the values a loop over threads adds (signed), kept in stack
    slots that the optimiser turns into vectorisable min and max reductions."""

    def __init__(self, b, ty):
        self.b = b
        bits = ty.width
        here = b.block
        b.position_at_start(b.function.entry_basic_block)     # once per call, not per round
        self.lo = b.alloca(ty)
        self.hi = b.alloca(ty)
        b.position_at_end(here)
        b.store(ir.Constant(ty, (1 << (bits - 1)) - 1), self.lo)
        b.store(ir.Constant(ty, -(1 << (bits - 1))), self.hi)

    def add(self, v):
        b = self.b
        lo, hi = b.load(self.lo), b.load(self.hi)
        b.store(b.select(b.icmp_signed("<", v, lo), v, lo), self.lo)
        b.store(b.select(b.icmp_signed(">", v, hi), v, hi), self.hi)

    def low(self):
        return self.b.load(self.lo)

    def single(self):
        """i1: every value added was the same (and one was added)."""
        return self.b.icmp_signed("==", self.b.load(self.lo), self.b.load(self.hi))


def _spill_element(b, spill, off, size, t):
    """Pointer to thread t's element of the spill array at `off` (elements of `size` bytes)."""
    ty = ir.IntType(8 * size)
    base = b.bitcast(b.gep(spill, [i64(abi.MAX_BLOCK_THREADS * off)]), ty.as_pointer())
    return b.gep(base, [t])


def _widen(b, t, size):
    """The i32 thread index t in a spill element's integer type."""
    return b.sext(t, I64) if size == 8 else t


def _affine_spills(b, spill, header, n, slots, holds):
    """i1: each spill array of `slots` ([(header slot, spill offset, element size, stride,
    known)]) holds first + stride * t for thread t, `first` being thread 0's element, which
    goes to the header slot (FunctionLowering._reload: the resume that rebuilds those
    registers from it rather than reloading them). A `known` slot is not compared: the
    lowering proved its form (FunctionLowering._proven_affine). `holds`: an i1 stack slot."""
    ok = ir.Constant(I1, 1)
    for slot, off, size, stride, known in slots:
        first = b.load(_spill_element(b, spill, off, size, i32(0)))
        store_field(b, header, abi.FRAME_HEADER + 8 * slot, first)
        if known:
            continue
        b.store(ir.Constant(I1, 1), holds)
        with for_range(b, i32(0), n, "affine") as t:
            expect = b.add(first, _widen(b, t, size)) if stride else first
            value = b.load(_spill_element(b, spill, off, size, t))
            b.store(b.and_(b.load(holds), b.icmp_unsigned("==", value, expect)), holds)
        ok = b.and_(ok, b.load(holds))
    return ok


MOST_WARPS = abi.MAX_BLOCK_THREADS // 32
# a block's state between the worker's calls, in its workspace: the guard probe's answer
# (i32 at 0), the warps' last turn answers (i32 each, at TURN_ANSWERS) and their turn areas
# (at TURN_AREAS, one stride apart; 64-byte aligned, as the regions store their vectors)
TURN_ANSWERS = 64
TURN_AREAS = TURN_ANSWERS + (4 * MOST_WARPS + 63) // 64 * 64


def turn_stride(regions) -> int:
    """Bytes per warp of the block's turn areas: the largest state a region's warp leaves
    between turns (warpregions, "turns"), 0 when none gives way."""
    return max(((r.turn_bytes + 63) // 64 * 64 for r in (regions or {}).values()), default=0)


def _up64(b, v):
    """i64 v rounded up to a multiple of 64."""
    return b.and_(b.add(v, i64(63)), i64(~63))


def workspace_layout(b, n, frame_size, spill_bytes, stride=0):
    """Byte offsets (i64) in a block's workspace of the spill arrays, the collective arrays
    (COLL_ARRAYS), the per-thread stop codes of a uniform round, the block's state between
    calls (TURN_ANSWERS, TURN_AREAS; `stride`: turn_stride), and the end: frames first,
    shared memory after the end. The workspace starts 64-byte aligned."""
    n64 = b.zext(n, I64)
    spill = b.mul(n64, i64(frame_size))
    coll = b.add(spill, i64(abi.MAX_BLOCK_THREADS * spill_bytes))
    codes = b.add(coll, i64(COLL_BYTES))
    state = _up64(b, b.add(codes, b.mul(n64, i64(4))))
    return spill, coll, codes, state, b.add(state, i64(TURN_AREAS + stride * MOST_WARPS))


@collection_paused
def emit_block_function(module, name, step, nsites_kinds, frame_size, frame_needs_index=True, scalar_params=(),
                        site_consts=(), spill_bytes=0, affine_sites=None, self_checked_sites=(),
                        advances=None, regions=None, guarded_rounds=None, probe_bounds=None):
    """i32 run_block(i8* L, i8* ws, i8* shared, i32 cx, i32 cy, i32 cz, i32 worker, i32 start):
    abi.BLOCK_DONE, BLOCK_FAILED or BLOCK_GAVE_WAY; `start` is abi.BLOCK_FIRST for the first
    block in the workspace `ws`, BLOCK_LATER for a later one, BLOCK_RESUMED for the block that
    gave way in it. Only a block function whose kernel starts with a region that takes turns
    gives way (`fn.gives_way`): after each pass over its warps, so that the worker can run the
    turns of several blocks in an order closer to the memory's (emit_launch).

    With sites, a block runs in *uniform rounds* while it can: when every thread is runnable
    at the same resume point (all at the start, or all released from one barrier), one loop
    over the threads calls step with that resume point as a constant, so that after inlining
    the loop body is just that region's code and LLVM can vectorise it across threads. Such a
    loop has no early exit: the threads' stop codes go to an array that is scanned after it.
    When all threads stop at the same whole-block bar.sync (no thread count) or the same
    yield (the back edge or exit of a grid-stride loop, analysis.grid_stride_yields), the next
    uniform round starts at once (after a yield: one iteration of that loop for every
    thread); anything else (a trap, threads stopping at different places, a warp
    collective, a named barrier with a count, bar.red, bar.arrive) records the stops in the
    frames and continues with general rounds, thread by thread, where a yield waits for
    nothing: the thread runs on at once."""
    fn = ir.Function(module, ir.FunctionType(I32, [PTR, PTR, PTR, I32, I32, I32, I32, I32]), name=name + ".block")
    fn.linkage = "internal"
    guarded_rounds = guarded_rounds or {}
    L, ws, shared, cx, cy, cz, worker, start = fn.args
    fn.gives_way = bool(regions) and 0 in regions and bool(regions[0].turn_bytes) and bool(nsites_kinds)
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    # (invariant: a loop over a chunk's blocks loads them once, emit_run_blocks)
    nx, ny, nz = (load_invariant_field(b, L, abi.LAUNCH["block_" + k], I32) for k in "xyz")
    n = b.mul(b.mul(nx, ny), nz)
    fsize = i64(frame_size)
    params = b.inttoptr(load_invariant_field(b, L, abi.LAUNCH["params"], I64), PTR)
    scalars = [load_invariant(b, b.bitcast(b.gep(params, [i64(info.offset)]), ty.as_pointer()), align=info.size)
               for info, ty in scalar_params]
    fail = fn.append_basic_block("fail")
    if not nsites_kinds:
        # the frame is reached only through `ws` here (locals are stack slots), so it cannot
        # alias the kernel's memory: the optimiser may keep its fields in registers
        ws.add_attribute("noalias")
        _init_block_fields(b, ws, L, (cx, cy, cz), shared, worker)
        store_field(b, ws, C["linear"], i32(-1))    # unknown unless the loop keeps it up to date
        if regions:
            # a block of full warps runs the kernel a warp at a time as vector code
            # (warpregions.EntryRegion); it stores no stop codes here (all are exits), but a
            # region that did would find room for them at codes[lo ...]
            codes = b.bitcast(b.alloca(ir.ArrayType(I32, abi.MAX_BLOCK_THREADS), name="region.codes"),
                              I32.as_pointer())
            lane_index = [b.alloca(I32, name="lane." + k) for k in "xyz"]
            warps, threads = fn.append_basic_block("by.warp"), fn.append_basic_block("by.thread")
            b.cbranch(b.icmp_unsigned("==", b.and_(n, i32(31)), i32(0)), warps, threads)
            b.position_at_end(warps)
            region = lambda lo: b.icmp_unsigned("==", b.call(regions[0], [ir.Constant(PTR, None), ws, ws, i64(0), lo,
                                                                       params, codes, ir.Constant(PTR, None)]),
                                                i32(abi.REGION_RAN))
            # a region that did not run (warpregions.NOT_RUN): the warp's threads one by one,
            # and all of the block's when it is the first warp (the others would not either,
            # as a rule, and the loop over the block's threads vectorises)
            later = fn.append_basic_block("by.warp.later")
            b.cbranch(region(i32(0)), later, threads)
            b.position_at_end(later)
            with for_range(b, i32(1), b.lshr(n, i32(5)), "rg") as w:
                lo = b.mul(w, i32(32))
                with b.if_then(b.not_(region(lo)), likely=False):
                    with _each_lane(b, lo, nx, ny, lane_index) as index:
                        _emit_thread(b, fn, ws, step, index, fail, params, frame_needs_index, scalars)
            b.ret(i32(abi.BLOCK_DONE))
            b.position_at_end(threads)
        if 0 in guarded_rounds:
            # a block whose threads all pass the known branches (an exit guard, a border
            # test) runs the body without them: plain vector loads and stores instead of
            # masked ones (compiler/guards.py)
            probe = _emit_guard_probe(module, name, step, scalar_params, frame_size, frame_needs_index, False)
            with b.if_else(_block_stays(b, fn, probe, probe_bounds, L, ws, guarded_rounds[0])) as (unguarded, guarded):
                with unguarded:
                    _emit_thread_loops(b, fn, ws, step, nx, ny, nz, fail, params, frame_needs_index, scalars,
                                       guards.PASSED)
                with guarded:
                    _emit_thread_loops(b, fn, ws, step, nx, ny, nz, fail, params, frame_needs_index, scalars)
        else:
            _emit_thread_loops(b, fn, ws, step, nx, ny, nz, fail, params, frame_needs_index, scalars)
        b.ret(i32(abi.BLOCK_DONE))
        b.position_at_end(fail)
        b.ret(i32(abi.BLOCK_FAILED))
        return fn
    # the runtime refuses blocks of more than MAX_BLOCK_THREADS threads; saying so here lets
    # LLVM prove that the per-thread arrays of the workspace (spills, collective operands, stop
    # codes), MAX_BLOCK_THREADS elements apart, do not overlap in a loop over threads, instead
    # of guarding each vectorised loop with run-time overlap checks
    umin = lambda v: b.select(b.icmp_unsigned("<", v, i32(abi.MAX_BLOCK_THREADS)), v, i32(abi.MAX_BLOCK_THREADS))
    nx, ny, nz = umin(nx), umin(ny), umin(nz)
    n = b.mul(b.mul(nx, ny), nz)
    full_warps = b.icmp_unsigned("==", b.and_(n, i32(31)), i32(0))
    # which stop codes (0: exit, k: site k) are collectives resolved a warp at a time
    coll_sites = {i + 1 for i, k in enumerate(nsites_kinds) if uniform_collective(k, site_consts[i])}
    table_ty = ir.ArrayType(ir.IntType(8), len(nsites_kinds) + 1)
    table_g = ir.GlobalVariable(module, table_ty, name=name + ".collective_sites")
    table_g.initializer = ir.Constant(table_ty, [int(c in coll_sites) for c in range(len(nsites_kinds) + 1)])
    table_g.global_constant = True
    table_g.linkage = "internal"
    coll_table = b.bitcast(table_g, ir.IntType(8).as_pointer())

    def is_coll(code):
        """i1: stop code `code` (not a trap) is a collective in coll_sites."""
        if not coll_sites:
            return ir.Constant(I1, 0)
        return b.trunc(b.load(b.gep(coll_table, [b.sext(code, I64)])), I1)
    def lanes_differ_from(lo, code):
        """i1: some lane of the warp at thread `lo` stopped elsewhere than at `code` (a
        vectorised pass over the warp's stop codes)."""
        b.store(ir.Constant(I1, 0), lanes_differ)
        with for_range(b, lo, b.add(lo, i32(32)), "lane.cmp") as t:
            differs = b.icmp_signed("!=", b.load(b.gep(codes, [t])), code)
            b.store(b.or_(b.load(lanes_differ), differs), lanes_differ)
        return b.load(lanes_differ)

    advances = advances or {}
    regions = regions or {}
    # where a warp goes on as vector code after a collective (a barrier's region starts where
    # its uniform round would, below)
    run_sites = sorted(set(advances) | {s for s in regions if s and nsites_kinds[s - 1] != abi.SITE["bar_sync"]})

    def resolve_known_site(site, lo):
        """resolve_warp_at for a collective site known here; returns the site to resume from."""
        _emit_uniform_collective(b, nsites_kinds[site - 1], site_consts[site - 1], lo, coll, ws, fsize)
        if site not in advances:
            return i32(site)
        advance, last = advances[site]
        b.call(advance, [spill, header, ws, fsize, lo], attrs=("alwaysinline",))
        _emit_uniform_collective(b, nsites_kinds[last - 1], site_consts[last - 1], lo, coll, ws, fsize)
        return i32(last)

    def resolve_warp_at(code, lo):
        """Resolve for the full warp at thread `lo` the collective whose site is `code`
        (all its lanes wait there); nothing for another code. Returns the site the lanes
        resume from: `code`, or the last shuffle of a run of shuffles that starts at `code`
        (compiler/vector/warpruns.py), which the run's vector code has brought the warp to."""
        after = fn.append_basic_block("cw.resolved")
        wsw = b.switch(code, after)
        resumes = [(code, b.block)]
        for site in sorted(coll_sites):
            blk = fn.append_basic_block(f"cw.site{site}")
            wsw.add_case(i32(site), blk)
            b.position_at_end(blk)
            resumes.append((resolve_known_site(site, lo), b.block))
            b.branch(after)
        b.position_at_end(after)
        resume = b.phi(I32, name="cw.resume")
        for value, blk in resumes:
            resume.add_incoming(value, blk)
        return resume
    kinds_ty = ir.ArrayType(I32, len(nsites_kinds))
    kinds_g = ir.GlobalVariable(module, kinds_ty, name=name + ".sites")
    kinds_g.initializer = ir.Constant(kinds_ty, nsites_kinds)
    kinds_g.global_constant = True
    kinds_g.linkage = "internal"
    kinds = b.bitcast(kinds_g, I32.as_pointer())
    has_barriers = any(k in abi.BLOCK_SITE_KINDS for k in nsites_kinds)
    if has_barriers:
        bars_ty = ir.ArrayType(I32, abi.NUM_BARRIERS * abi.BAR_FIELDS)
        bars_arr = b.alloca(bars_ty, name="bars")
        b.store(ir.Constant(bars_ty, None), bars_arr)
        bars = b.bitcast(bars_arr, I32.as_pointer())
    cur = b.alloca(I32, name="uniform.site")
    lane_index = [b.alloca(I32, name="lane." + k) for k in "xyz"]
    affine_holds = b.alloca(I1, name="affine.holds")
    lanes_differ = b.alloca(I1, name="lanes.differ")
    same = b.alloca(I1, name="same")
    unready = b.alloca(I1, name="unready")
    affine_sites = affine_sites or {}
    nslots = sum(len(v) for v in affine_sites.values())
    header_arr = b.alloca(ir.ArrayType(ir.IntType(8), abi.FRAME_HEADER + 8 * nslots), name="header")
    header_arr.align = 16
    header = b.bitcast(header_arr, PTR)
    _init_block_fields(b, header, L, (cx, cy, cz), shared, worker)
    # each thread's frame header: a copy of the block's, then its own index, once per worker
    # and launch (the frames are reused by the worker's next blocks: only their block index
    # changes, and state, resume and a site's operands are written before they are read).
    # Setting every field of every frame for each block was a third of scan_blocks' time.
    memcpy = declare(module, "llvm.memcpy.p0i8.p0i8.i64", ir.VoidType(), [PTR, PTR, I64, I1])
    with b.if_else(b.icmp_signed("==", start, i32(abi.BLOCK_FIRST))) as (first_block, later_block):
        with first_block:
            with _each_thread(b, nx, ny, nz, "i") as (x, y, z, linear, _):
                fr = _frame(b, ws, fsize, linear)
                b.call(memcpy, [fr, header, i64(abi.FRAME_HEADER), ir.Constant(I1, 0)])
                _set_thread_index(b, fr, x, y, z, linear)
        with later_block:
            # device functions read the block index and their exit flag from the frame (the
            # step function's traps and a barrier deadlock copy the index there themselves:
            # writing four fields of every frame for each block was a tenth of scan_blocks'
            # time, as scatters)
            # (a resumed block has its frames as it left them)
            if frame_needs_index:
                with b.if_then(b.icmp_signed("==", start, i32(abi.BLOCK_LATER))):
                    with for_range(b, i32(0), n, "ib") as t:
                        fr = _frame(b, ws, fsize, t)
                        for k, v in zip(("ctaid_x", "ctaid_y", "ctaid_z"), (cx, cy, cz)):
                            store_field(b, fr, C[k], v)
                        store_field(b, fr, C["exit_flag"], i32(0))
    stride = fn.turn_stride = turn_stride(regions)
    spill_off, coll_off, codes_off, state_off, _ = workspace_layout(b, n, frame_size, spill_bytes, stride)
    spill = b.gep(ws, [spill_off])
    coll = b.gep(ws, [coll_off])
    codes = b.bitcast(b.gep(ws, [codes_off]), I32.as_pointer())
    state = b.gep(ws, [state_off])
    turns = _WarpTurns(b, fn, stride, state)
    resumed = fn.append_basic_block("resumed") if fn.gives_way else None

    def block_args(t, induction=None):
        return [header, spill, b.zext(n, I64), induction if induction is not None else i64(0)]
    # which of the kernel's known branches no thread of the block takes: a round that can
    # reach only such ones runs a copy without them (compiler/guards.py)
    # (asked once per block: a resumed block finds the answer in its state)
    stays = None
    if guarded_rounds:
        probe = _emit_guard_probe(module, name, step, scalar_params, frame_size, frame_needs_index, True,
                                  probe_bounds)
        stays_slot = b.bitcast(state, I32.as_pointer())
        with b.if_then(b.icmp_signed("!=", start, i32(abi.BLOCK_RESUMED))):
            b.store(b.call(probe, [L, ws, header, spill]), stays_slot)
        stays = b.load(stays_slot)

    def induction_first(site):
        """i64: the `first` of the site's induction register (stride 1), which
        _affine_spills put in the header; None when the site has none."""
        for slot, _, size, stride, _ in affine_sites[site]:
            if stride:
                first = load_field(b, header, abi.FRAME_HEADER + 8 * slot, ir.IntType(8 * size))
                return first if size == 8 else b.sext(first, I64)
        return None
    nwarps = b.udiv(b.add(n, i32(31)), i32(32))
    full_warp_count = b.lshr(n, i32(5))
    outer = fn.append_basic_block("round")
    done = fn.append_basic_block("done")
    dispatch = fn.append_basic_block("uniform")
    scan = fn.append_basic_block("uniform.scan")
    b.store(i32(0), cur)
    if resumed is None:
        b.branch(dispatch)
    else:
        b.cbranch(b.icmp_signed("==", start, i32(abi.BLOCK_RESUMED)), resumed, dispatch)

    # uniform rounds: resume 0, and after each whole-block bar.sync without a thread count
    # (a constant barrier id too: threads at one bar.sync with different ids deadlock)
    op_b, op_c = abi.CTX["op_b"], abi.CTX["op_c"]
    # and after a yield (all threads at one yield: the next iteration of a grid-stride loop)
    yields = [i + 1 for i, k in enumerate(nsites_kinds) if k == abi.SITE["yield"]]
    again = [i + 1 for i, k in enumerate(nsites_kinds)
             if k == abi.SITE["bar_sync"] and site_consts[i].get(op_c, (None,))[0] == 0
             and op_b in site_consts[i]] + yields
    # and after a warp collective that every thread reached (resolved for all warps at once)
    collectives = [i + 1 for i, k in enumerate(nsites_kinds) if uniform_collective(k, site_consts[i])]
    b.position_at_end(dispatch)
    sw = b.switch(b.load(cur), outer)
    # collective rounds: the threads whose warps were resolved at a collective go on from it
    # (each from its own site, so one loop and one more inlined copy of the step function
    # serve every collective site: softmax has 20 shuffle sites), the others stay where they
    # stopped; those rounds are usually a few instructions up to the next collective, and
    # vectorised per site they ran no faster
    coll_round = fn.append_basic_block("collective.round") if collectives else None
    affine_entry = {site: fn.append_basic_block(f"uniform{site}.affine") for site in again if site in affine_sites}

    def uniform_round(site, resume):
        """One loop over the threads, each calling step from `resume` (a constant), stop codes
        to `codes`. A round from a grid-stride loop's back-edge yield in `self_checked_sites`
        checks for itself whether every thread stopped at that yield again with the site's
        rebuilt registers in their form (min and max reductions over the threads: the stop
        codes, and each register's saved value less stride * t) and then runs the next
        round at once: one loop over the threads per iteration instead of three (the round,
        the scan of the stop codes, the form's check: a third of reduce's time went to the
        last two). Rounds from barriers were tried the same way, checking for the one site
        their threads could reach next: sgemm did not get faster."""
        checked = site in self_checked_sites         # a yield with rebuilt registers (affine_entry)
        slots = affine_sites[site] if checked else []
        if checked:
            code_range = _RangeReduction(b, I32)
            # (a slot of a proven form needs no reduction: thread 0's element is the value)
            slot_ranges = [None if known else _RangeReduction(b, ir.IntType(8 * size))
                           for _, _, size, _, known in slots]
        counted_from = induction_first(site) if resume != site else None

        def each_thread(resume):
            with _each_thread(b, nx, ny, nz, "u", counted_from) as (x, y, z, linear, induction):
                fr = _frame(b, ws, fsize, linear)
                code = b.call(step, [fr, i32(resume), params, x, y, z, linear] + scalars
                              + block_args(linear, induction), attrs=("alwaysinline",))
                in_thread_group(module, b.store(code, b.gep(codes, [linear])))
                if checked:
                    code_range.add(code)
                    for (_, off, size, stride, _), rng in zip(slots, slot_ranges):
                        if rng is None:
                            continue
                        value = in_thread_group(module, b.load(_spill_element(b, spill, off, size, linear)))
                        rng.add(b.sub(value, _widen(b, linear, size)) if stride else value)
        if site in guarded_rounds:
            with b.if_else(_all_stay(b, stays, guarded_rounds[site])) as (settled, as_written):
                with settled:
                    each_thread(resume | guards.PASSED)
                with as_written:
                    each_thread(resume)
        else:
            each_thread(resume)
        if not checked:
            return
        same = b.and_(code_range.single(), b.icmp_signed("==", code_range.low(), i32(site)))
        for rng in slot_ranges:
            if rng is not None:
                same = b.and_(same, rng.single())
        go_on = fn.append_basic_block(f"uniform{site}.again")
        leave = fn.append_basic_block(f"uniform{site}.scan")
        b.cbranch(same, go_on, leave)
        b.position_at_end(go_on)
        for (slot, off, size, _, _), rng in zip(slots, slot_ranges):
            first = b.load(_spill_element(b, spill, off, size, i32(0))) if rng is None else rng.low()
            store_field(b, header, abi.FRAME_HEADER + 8 * slot, first)
        b.branch(affine_entry[site])
        b.position_at_end(leave)

    def general_round(site):
        """The uniform round from `site`: from the rebuilt registers where they check out."""
        if site in affine_entry:
            holds = _affine_spills(b, spill, header, n, affine_sites[site], affine_holds)
            general = fn.append_basic_block(f"uniform{site}.general")
            b.cbranch(holds, affine_entry[site], general)
            b.position_at_end(affine_entry[site])
            uniform_round(site, site + abi.AFFINE_RESUME)
            b.branch(scan)
            b.position_at_end(general)
        uniform_round(site, site)

    for site in [0] + again + (["collective"] if collectives else []):
        if site == "collective":
            body = coll_round
        else:
            body = fn.append_basic_block(f"uniform{site}")
            sw.add_case(i32(site), body)
        b.position_at_end(body)
        if site == "collective":
            # only full warps get here, each with all its lanes at one site (collective.check):
            # a warp's first lane tells whether the warp goes on, and from where. While all of
            # a warp's lanes stop at one collective again (the next shuffle of a warp_sum), it
            # is resolved at once and the lanes run on: a warp's collectives concern only its
            # own lanes, so the block's scheduler need not see each one
            with for_range(b, i32(0), full_warp_count, "cr") as w:
                lo = b.mul(w, i32(32))
                first_code = b.load(b.gep(codes, [lo]))
                with b.if_then(is_coll(first_code)):
                    resume, again_blk = _reentry(b, fn, "cr.again", first_code)
                    with _each_lane(b, lo, nx, ny, lane_index) as (x, y, z, linear):
                        code = b.call(step, [_frame(b, ws, fsize, linear), resume, params, x, y, z, linear]
                                      + scalars + block_args(linear), attrs=("alwaysinline",))
                        b.store(code, b.gep(codes, [linear]))
                        latch = b.block
                    set_loop_hints(module, latch.terminator, NO_VECTORIZE)
                    c0 = b.load(b.gep(codes, [lo]))
                    differ = lanes_differ_from(lo, c0)
                    # a trap's code (negative) is not looked up
                    at_coll = is_coll(b.select(b.icmp_signed(">", c0, i32(0)), c0, i32(0)))
                    go_on = b.and_(at_coll, b.not_(differ))
                    resolved = fn.append_basic_block("cr.resolve")
                    stop = fn.append_basic_block("cr.stop")
                    b.cbranch(go_on, resolved, stop)
                    b.position_at_end(resolved)
                    resume.add_incoming(resolve_warp_at(c0, lo), b.block)
                    b.branch(again_blk)
                    b.position_at_end(stop)
        elif site in regions:
            # a block of full warps goes on a warp at a time as vector code until each lane
            # stops, from the start (warpregions.EntryRegion) or a barrier (BarrierRegion);
            # a partial warp in a round
            warps, threads = fn.append_basic_block(f"uniform{site}.warps"), fn.append_basic_block(f"uniform{site}.threads")
            b.cbranch(full_warps, warps, threads)
            b.position_at_end(warps)
            turns.each_warp(b, fn, full_warp_count, regions[site], f"rw{site}.",
                            lambda lo, turn, first: b.call(regions[site], [spill, header, ws, fsize, lo, params,
                                                                           codes, turn]),
                            resumed if site == 0 else None)
            b.branch(scan)
            b.position_at_end(threads)
            general_round(site)
        else:
            general_round(site)
        b.branch(scan)

    resume_at = {}
    for site in again:
        blk = fn.append_basic_block(f"uniform.again{site}")
        resume_at[site] = blk
        b.position_at_end(blk)
        b.store(i32(site), cur)
        b.branch(dispatch)

    b.position_at_end(scan)
    first = b.load(codes)
    # whether every thread stopped alike, and whether one trapped (STEP_TRAP is the least
    # code): the least and greatest code, two integer reductions; as and/or reductions of
    # compares, the vectorised loop kept its mask registers on the stack (9% of sgemm)
    codes_range = _RangeReduction(b, I32)
    with for_range(b, i32(0), n, "s") as t:
        codes_range.add(b.load(b.gep(codes, [t])))
    b.store(codes_range.single(), same)
    untrapped = fn.append_basic_block("uniform.ok")
    b.cbranch(b.icmp_signed("==", codes_range.low(), i32(abi.STEP_TRAP)), fail, untrapped)
    b.position_at_end(untrapped)
    agreed = fn.append_basic_block("uniform.agreed")
    record = fn.append_basic_block("uniform.record")
    if collectives:
        # a block of full warps where every warp has all its lanes at one collective that
        # uniform_collective accepts, or none at any (those wait at a barrier, a yield or
        # have exited: they stay there): each such warp is resolved at once, as a vector,
        # and a collective round runs its threads on; otherwise the general rounds
        warps_ready = fn.append_basic_block("collective.check")
        # every thread at the first shuffle of a run of shuffles, in full warps: each warp is
        # brought to the run's last shuffle, and a uniform round goes on from there
        at_run = ir.Constant(I1, 0)
        for site in run_sites:
            at_run = b.or_(at_run, b.icmp_signed("==", first, i32(site)))
        go_on = b.or_(b.not_(is_coll(first)), b.and_(at_run, full_warps))
        b.cbranch(b.and_(b.load(same), go_on), agreed, warps_ready)
        b.position_at_end(warps_ready)
        b.store(ir.Constant(I1, 0), same)           # reused: whether any warp is at a collective
        b.store(b.not_(full_warps), unready)        # whether the warps are not ready
        # a warp at a collective when all its lanes stopped there; lanes that stopped at
        # different places are fine unless one of them is at a collective. The lanes are
        # compared with their warp's first (a vectorised pass); the table of collective
        # sites is looked up once per warp, and per lane only in a warp whose lanes differ.
        with for_range(b, i32(0), full_warp_count, "cc") as w:
            lo = b.mul(w, i32(32))
            c0 = b.load(b.gep(codes, [lo]))
            differ = lanes_differ_from(lo, c0)
            at_coll = is_coll(c0)
            b.store(b.or_(b.load(same), b.and_(at_coll, b.not_(differ))), same)
            with b.if_then(differ):
                b.store(b.or_(b.load(unready), at_coll), unready)
                with for_range(b, lo, b.add(lo, i32(32)), "ccm") as t:
                    b.store(b.or_(b.load(unready), is_coll(b.load(b.gep(codes, [t])))), unready)
        resolve = fn.append_basic_block("collective.resolve")
        b.cbranch(b.and_(b.load(same), b.not_(b.load(unready))), resolve, record)
        b.position_at_end(resolve)
        with for_range(b, i32(0), full_warp_count, "cw") as w:
            lo = b.mul(w, i32(32))
            first_lane = b.gep(codes, [lo])
            # the collective round resumes a warp's lanes from its first lane's code
            b.store(resolve_warp_at(b.load(first_lane), lo), first_lane)
            latch = b.block
        set_loop_hints(module, latch.terminator, {"llvm.loop.unroll.disable": None})
        b.branch(coll_round)
    else:
        b.cbranch(b.load(same), agreed, record)
    b.position_at_end(agreed)
    sw = b.switch(first, record)
    sw.add_case(i32(abi.STEP_EXIT), done)
    for site, blk in resume_at.items():
        sw.add_case(i32(site), blk)
    for site in run_sites:
        blk = fn.append_basic_block(f"uniform.run{site}")
        sw.add_case(i32(site), blk)
        b.position_at_end(blk)
        if site in regions:
            # each warp resolves the shuffle and runs on as vector code (compiler/vector/warpregions.py)
            # until each of its lanes stops; their stop codes are scanned as after a round
            def run_region(lo, turn, first, site=site):
                if first:
                    _emit_uniform_collective(b, nsites_kinds[site - 1], site_consts[site - 1], lo, coll, ws, fsize)
                return b.call(regions[site], [spill, header, ws, fsize, lo, params, codes, turn])
            turns.each_warp(b, fn, full_warp_count, regions[site], f"rg{site}.", run_region)
            b.branch(scan)
            continue
        with for_range(b, i32(0), full_warp_count, "rw") as w:
            last = resolve_known_site(site, b.mul(w, i32(32)))
        uniform_round(last.constant, last.constant)
        b.branch(scan)
    b.position_at_end(record)
    with for_range(b, i32(0), n, "m") as t:
        _record_stop(b, fn, _frame(b, ws, fsize, t), b.load(b.gep(codes, [t])), kinds, site_consts, nsites_kinds)
    b.branch(outer)

    b.position_at_end(outer)
    with for_range(b, i32(0), nwarps, "w") as w:
        lo = b.mul(w, i32(32))
        hi = b.add(lo, i32(32))
        hi = b.select(b.icmp_signed("<", n, hi), n, hi)
        warp = fn.append_basic_block("warp")
        b.branch(warp)
        b.position_at_end(warp)
        with for_range(b, lo, hi, "t") as t:
            fr = _frame(b, ws, fsize, t)
            with b.if_then(b.icmp_signed("==", b.load(_state(b, fr)), i32(abi.THREAD_RUN))):
                index = [load_field(b, fr, C[k], I32) for k in ("tid_x", "tid_y", "tid_z", "linear")]
                resume = load_field(b, fr, C["resume"], I32)
                if yields:
                    # here a yield releases at once: the thread goes on until it waits or exits
                    resume, again_blk = _reentry(b, fn, "step", resume)
                code = b.call(step, [fr, resume, params] + index + scalars + block_args(t))
                ok = fn.append_basic_block("ok")
                b.cbranch(b.icmp_signed("==", code, i32(abi.STEP_TRAP)), fail, ok)
                b.position_at_end(ok)
                if yields:
                    at_yield = ir.Constant(I1, 0)
                    for site in yields:
                        at_yield = b.or_(at_yield, b.icmp_signed("==", code, i32(site)))
                    stop = fn.append_basic_block("stopped")
                    resume.add_incoming(code, b.block)
                    b.cbranch(at_yield, again_blk, stop)
                    b.position_at_end(stop)
                _record_stop(b, fn, fr, code, kinds, site_consts, nsites_kinds)
        if any(k not in abi.BLOCK_SITE_KINDS and k != abi.SITE["yield"] for k in nsites_kinds):
            released = b.call(emit_resolve_warp(module), [ws, fsize, lo, hi, kinds, coll])
            nxt = fn.append_basic_block("warp.next")
            b.cbranch(b.icmp_signed("!=", released, i32(0)), warp, nxt)
            b.position_at_end(nxt)
    if has_barriers:
        released = b.call(emit_resolve_barrier(module), [ws, fsize, n, kinds, bars, header])
        resolved = fn.append_basic_block("resolved")
        b.cbranch(b.icmp_signed("<", released, i32(0)), fail, resolved)
        b.position_at_end(resolved)
        recheck = fn.append_basic_block("recheck")
        b.cbranch(b.icmp_signed("!=", released, i32(0)), recheck, done)
        # back to uniform rounds when a release leaves every thread runnable at one site that
        # has a uniform round, and no barrier holds arrivals (uniform rounds never touch them)
        b.position_at_end(recheck)
        r = load_field(b, ws, C["resume"], I32)
        ok = ir.Constant(I1, 1)
        for bar_id in range(abi.NUM_BARRIERS):
            ok = b.and_(ok, b.icmp_signed("==", b.load(_bar_slot(b, bars, i32(bar_id), abi.BAR_ARRIVED)), i32(0)))
        b.store(ok, same)
        with for_range(b, i32(0), n, "rc") as t:
            fr = _frame(b, ws, fsize, t)
            here = b.and_(b.icmp_signed("==", b.load(_state(b, fr)), i32(abi.THREAD_RUN)),
                          b.icmp_signed("==", load_field(b, fr, C["resume"], I32), r))
            b.store(b.and_(b.load(same), here), same)
        uniform = fn.append_basic_block("recheck.uniform")
        b.cbranch(b.load(same), uniform, outer)
        b.position_at_end(uniform)
        sw = b.switch(r, outer)
        for site, blk in resume_at.items():
            sw.add_case(i32(site), blk)
    else:
        # warp collectives always make progress, so after a round every thread has exited
        b.branch(done)
    b.position_at_end(done)
    b.ret(i32(abi.BLOCK_DONE))
    b.position_at_end(fail)
    b.ret(i32(abi.BLOCK_FAILED))
    return fn


class _WarpTurns:
    """The block's turn areas (warpregions, "turns") in its workspace: one set for all its
    regions, which run one after the other and so never keep their warps' states at once;
    nothing for a kernel whose regions never give way (`stride` 0). `state`: the block's
    state area (workspace_layout)."""

    def __init__(self, b, fn, stride, state):
        self.stride = stride
        if not stride:
            return
        self.areas = b.gep(state, [i64(TURN_AREAS)])
        self.answers = b.bitcast(b.gep(state, [i64(TURN_ANSWERS)]), I32.as_pointer())
        with at_function_start(b):
            self.pending = b.alloca(I1, name="turn.pending")

    def each_warp(self, b, fn, nwarps, region, tag, run, resumed=None):
        """Each of the block's `nwarps` warps through `run(lo, turn, first)`, a call of
        `region` (its answer), then again, in turn, each warp that gave way
        (abi.REGION_TURNED) until none does. `turn` is the warp's turn area, 0 in its first
        i32 before its first call. A region that never gives way is called once per warp.
        With `resumed` (an empty block, where the block function goes on when the worker
        calls it again), the block function gives way itself after each pass over the warps
        that left one of them in the middle (abi.BLOCK_GAVE_WAY)."""
        if not region.turn_bytes:
            with for_range(b, i32(0), nwarps, tag) as w:
                run(b.mul(w, i32(32)), ir.Constant(PTR, None), True)
            return
        turn = lambda w: b.gep(self.areas, [b.mul(b.zext(w, I64), i64(self.stride))])
        answer = lambda w: b.gep(self.answers, [w])

        def record(w, got):
            b.store(got, answer(w))
            b.store(b.or_(b.load(self.pending), b.icmp_unsigned("==", got, i32(abi.REGION_TURNED))), self.pending)
        b.store(ir.Constant(I1, 0), self.pending)
        with for_range(b, i32(0), nwarps, tag) as w:
            b.store(i32(0), b.bitcast(turn(w), I32.as_pointer()))
            record(w, run(b.mul(w, i32(32)), turn(w), True))
        again = resumed or fn.append_basic_block(tag + "again")
        done = fn.append_basic_block(tag + "done")
        if resumed is None:
            more = again
        else:
            more = fn.append_basic_block(tag + "give.way")
            with b.goto_block(more):
                b.ret(i32(abi.BLOCK_GAVE_WAY))
        b.cbranch(b.load(self.pending), more, done)
        b.position_at_end(again)
        b.store(ir.Constant(I1, 0), self.pending)
        with for_range(b, i32(0), nwarps, tag + "t") as w:
            with b.if_then(b.icmp_unsigned("==", b.load(answer(w)), i32(abi.REGION_TURNED))):
                record(w, run(b.mul(w, i32(32)), turn(w), False))
        b.cbranch(b.load(self.pending), more, done)
        b.position_at_end(done)


# blocks a worker keeps in flight when their block function gives way (emit_launch): their
# grid-stride loops' turns interleaved, a worker reads the rows of several neighbouring blocks
# together (benchmarks/models/grid_stride_order.c: reduce 2.03 ms with a block's warps in
# turns, 1.49 with four blocks' warps, 1.45 with sixteen; NOTES "Blocks in flight")
BLOCKS_IN_FLIGHT = 4


@collection_paused
def emit_launch(module, name, block_fn, has_sites, frame_size, export_name, spill_bytes=0, chunk_calls=True):
    """The worker (one per core, takes blocks from a counter) and `void export_name(i8* L)`.
    With `chunk_calls`, a kernel without sites runs each chunk's blocks in one call
    (emit_run_blocks)."""
    aligned_alloc = declare(module, "aligned_alloc", PTR, [I64, I64])
    free = declare(module, "free", ir.VoidType(), [PTR])
    thread_num = declare(module, "omp_get_thread_num", I32, [])
    worker_ty = ir.FunctionType(ir.VoidType(), [PTR])
    worker = ir.Function(module, worker_ty, name=name + ".worker")
    worker.linkage = "internal"
    # quick code hands a launch over to the optimised code once that is linked (compiler/build/tiers.py)
    handoff = ir.GlobalVariable(module, worker_ty.as_pointer(), name=abi.handoff_symbol(name))
    handoff.initializer = ir.Constant(worker_ty.as_pointer(), None)
    handoff.align = 8
    (L,) = worker.args
    b = ir.IRBuilder(worker.append_basic_block("entry"))
    nx = load_field(b, L, abi.LAUNCH["block_x"], I32)
    ny = load_field(b, L, abi.LAUNCH["block_y"], I32)
    nz = load_field(b, L, abi.LAUNCH["block_z"], I32)
    n = b.zext(b.mul(b.mul(nx, ny), nz), I64)
    if has_sites:
        # (laid out as the block function lays it out, with its turn areas)
        frames_bytes = workspace_layout(b, b.trunc(n, I32), frame_size, spill_bytes,
                                        getattr(block_fn, "turn_stride", 0))[-1]
    else:
        frames_bytes = i64(frame_size)
    shared_bytes = b.zext(load_field(b, L, abi.LAUNCH["shared_total"], I32), I64)
    # a block's workspace: its frames, then its shared memory window (64 bytes apart from
    # the next block's)
    slot_bytes = b.add(b.add(_up64(b, frames_bytes), _up64(b, shared_bytes)), i64(64))
    most = BLOCKS_IN_FLIGHT if getattr(block_fn, "gives_way", False) else 1
    # inlined into the worker, whose sigsetjmp (returns_twice) holds LLVM back, the block
    # function ran slower: sgemm 61-68 ms inlined into the one-block loop, 205-217 into the
    # loop over slots, 49 on its own (NOTES "Blocks in flight"). A kernel without sites runs
    # a chunk's blocks in a function of their own, the block function inlined there
    # (emit_run_blocks)
    run_blocks = emit_run_blocks(module, name, block_fn) if chunk_calls and not has_sites else None
    if run_blocks is None:
        block_fn.attributes.add("noinline")
    ws = b.call(aligned_alloc, [i64(64), b.mul(slot_bytes, i64(most))])
    oom = b.icmp_unsigned("==", b.ptrtoint(ws, I64), i64(0))
    with b.if_then(oom):
        b.cmpxchg(field_ptr(b, L, abi.LAUNCH["error"], I32), i32(0), i32(abi.LAUNCH_ERR_OUT_OF_MEMORY),
                  "seq_cst", "seq_cst")
        b.ret_void()
    fault = worker.append_basic_block("fault")
    done = worker.append_basic_block("done")
    trap, key = faults.emit_trap_setup(b, L, fault)
    wid = b.call(thread_num, [])
    placement.leave_caller_cpu(b, L, wid)
    gx = b.zext(load_field(b, L, abi.LAUNCH["grid_x"], I32), I64)
    gy = b.zext(load_field(b, L, abi.LAUNCH["grid_y"], I32), I64)
    nblocks = load_field(b, L, abi.LAUNCH["nblocks"], I64)
    chunk = load_field(b, L, abi.LAUNCH["chunk"], I64)
    backwards = b.icmp_unsigned("!=", load_field(b, L, abi.LAUNCH["backwards"], I32), i32(0))
    if run_blocks is not None:
        # each chunk in one call, without a call, the slots' bookkeeping and a division per
        # block: stencil5 0.77-0.88x C -> 0.75-0.79x, saxpy and vector_add unchanged within
        # the noise (NOTES "One call per chunk")
        at_block = b.bitcast(b.gep(trap, [i64(abi.FAULT_BLOCK)]), I64.as_pointer())
        shared = b.gep(ws, [_up64(b, frames_bytes)])
        chunks = worker.append_basic_block("chunks")
        b.branch(chunks)
        b.position_at_end(chunks)
        err = b.load_atomic(field_ptr(b, L, abi.LAUNCH["error"], I32), "monotonic", 4)
        healthy = worker.append_basic_block("healthy")
        b.cbranch(b.icmp_signed("!=", err, i32(0)), done, healthy)
        b.position_at_end(healthy)
        first, last = _take_chunk(b, worker, L, handoff, nblocks, chunk, backwards, done)
        r = b.call(run_blocks, [L, ws, shared, first, last, gx, gy, wid, at_block])
        b.cbranch(b.icmp_signed("==", r, i32(abi.BLOCK_FAILED)), done, chunks)
    else:
        _emit_slot_rounds(b, worker, L, handoff, block_fn, ws, slot_bytes, frames_bytes, trap, wid, gx, gy,
                          nblocks, chunk, backwards, most, done)
    _emit_worker_end(b, worker, L, ws, trap, key, fault, done, has_sites, free)
    return _emit_launch_function(module, worker, export_name, handoff)


def _emit_slot_rounds(b, worker, L, handoff, block_fn, ws, slot_bytes, frames_bytes, trap, wid, gx, gy,
                      nblocks, chunk, backwards, most, done):
    """The worker's loop for a kernel with sites: rounds over its `most` slots, each a block
    in flight."""
    # a cooperative launch gives each block a worker of its own (blocks wait for each other)
    cooperative = b.icmp_unsigned("!=", load_field(b, L, abi.LAUNCH["grid_workspace"], I64), i64(0))
    slots = b.select(cooperative, i32(1), i32(most))
    with at_function_start(b):
        block_of = b.alloca(ir.ArrayType(I64, most), name="slot.block")
        in_flight = b.alloca(ir.ArrayType(I1, most), name="slot.in_flight")
        used = b.alloca(ir.ArrayType(I1, most), name="slot.used")      # its frames are set up
        window = [b.alloca(I64, name="window." + k) for k in ("next", "end")]
        taking = b.alloca(I1, name="taking")
        some_in_flight = b.alloca(I1, name="some.in.flight")
    for array in (in_flight, used):
        b.store(ir.Constant(array.type.pointee, None), array)
    for slot in window:
        b.store(i64(0), slot)
    b.store(ir.Constant(I1, 1), taking)
    rounds = worker.append_basic_block("rounds")
    b.branch(rounds)
    # each round calls the block of each slot: a new one (taken `chunk` at a time from the
    # shared counter) or the one that gave way there; the blocks of a worker's slots are
    # neighbours, so their turns read neighbouring memory. Once optimised code has taken
    # over, the worker takes no more blocks (the launch function runs the rest there).
    b.position_at_end(rounds)
    b.store(ir.Constant(I1, 0), some_in_flight)
    with for_range(b, i32(0), slots, "slot") as g:
        at = lambda array: b.gep(array, [i32(0), g])
        err = b.load_atomic(field_ptr(b, L, abi.LAUNCH["error"], I32), "monotonic", 4)
        healthy = worker.append_basic_block("healthy")
        b.cbranch(b.icmp_signed("!=", err, i32(0)), done, healthy)
        b.position_at_end(healthy)
        call, next_slot = worker.append_basic_block("call"), worker.append_basic_block("next.slot")
        resume_from = b.block
        take = worker.append_basic_block("take")
        b.cbranch(b.load(at(in_flight)), call, take)
        b.position_at_end(take)
        got = _take_block(b, worker, L, handoff, window, taking, nblocks, chunk, backwards, next_slot)
        b.store(got, at(block_of))
        start = b.select(b.load(at(used)), i32(abi.BLOCK_LATER), i32(abi.BLOCK_FIRST))
        b.store(ir.Constant(I1, 1), at(used))
        took = b.block
        b.branch(call)
        b.position_at_end(call)
        start_phi = b.phi(I32, name="start")
        start_phi.add_incoming(i32(abi.BLOCK_RESUMED), resume_from)
        start_phi.add_incoming(start, took)
        blk = b.load(at(block_of))
        cx, cy, cz = (b.trunc(v, I32) for v in split_index(b, blk, gx, gy))
        b.store(blk, b.bitcast(b.gep(trap, [i64(abi.FAULT_BLOCK)]), I64.as_pointer()))
        ws_g = b.gep(ws, [b.mul(b.zext(g, I64), slot_bytes)])
        shared = b.gep(ws_g, [_up64(b, frames_bytes)])
        r = b.call(block_fn, [L, ws_g, shared, cx, cy, cz, wid, start_phi])
        ran = worker.append_basic_block("ran")
        b.cbranch(b.icmp_signed("==", r, i32(abi.BLOCK_FAILED)), done, ran)
        b.position_at_end(ran)
        gave_way = b.icmp_signed("==", r, i32(abi.BLOCK_GAVE_WAY))
        b.store(gave_way, at(in_flight))
        b.store(b.or_(b.load(some_in_flight), gave_way), some_in_flight)
        b.branch(next_slot)
        b.position_at_end(next_slot)
    b.cbranch(b.or_(b.load(taking), b.load(some_in_flight)), rounds, done)


def _emit_worker_end(b, worker, L, ws, trap, key, fault, done, has_sites, free):
    """The worker's fault path and its end."""
    module = worker.module
    # a memory fault in this worker's block: the launch fails with an illegal address
    b.position_at_end(fault)
    won = b.cmpxchg(field_ptr(b, L, abi.LAUNCH["error"], I32), i32(0), i32(abi.LAUNCH_ERR_ILLEGAL_ADDRESS),
                    "seq_cst", "seq_cst")
    with b.if_then(b.extract_value(won, 1)):
        slot = lambda off: b.load(b.bitcast(b.gep(trap, [i64(off)]), I64.as_pointer()))
        store_field(b, L, abi.LAUNCH["err_block"], slot(abi.FAULT_BLOCK))
        store_field(b, L, abi.LAUNCH["err_info"], slot(abi.FAULT_ADDR))
        # (a kernel without sites runs its block in the first slot's one frame)
        thread = b.sext(load_field(b, ws, C["linear"], I32), I64) if not has_sites else i64(-1)
        store_field(b, L, abi.LAUNCH["err_thread"], thread)
    b.branch(done)
    b.position_at_end(done)
    streamstores.fence(b)           # the launch's streaming stores before its end
    release = declare(module, "pthread_setspecific", I32, [I32, PTR])
    b.call(release, [key, ir.Constant(PTR, None)])
    b.call(free, [ws])
    b.ret_void()


def _emit_launch_function(module, worker, export_name, handoff):
    """`void export_name(i8* L)`: the workers on libgomp's threads, then the optimised code
    for what is left where it took over meanwhile."""
    gomp = declare(module, "GOMP_parallel", ir.VoidType(),
                   [ir.FunctionType(ir.VoidType(), [PTR]).as_pointer(), PTR, I32, I32])
    launch = ir.Function(module, ir.FunctionType(ir.VoidType(), [PTR]), name=export_name)
    (L,) = launch.args
    b = ir.IRBuilder(launch.append_basic_block("entry"))
    streamstores.set_flag(b, load_field(b, L, abi.LAUNCH["stream_stores"], I32))
    nw = load_field(b, L, abi.LAUNCH["num_workers"], I32)
    placement.note_caller_cpu(b, L)
    b.call(gomp, [worker, L, nw, i32(0)])
    left = b.icmp_unsigned("<", load_field(b, L, abi.LAUNCH["next_block"], I64), load_field(b, L, abi.LAUNCH["nblocks"], I64))
    healthy = b.icmp_unsigned("==", load_field(b, L, abi.LAUNCH["error"], I32), i32(0))
    with b.if_then(b.and_(b.and_(_handing_over(b, L, handoff), left), healthy)):
        store_field(b, L, abi.LAUNCH["num_workers"], load_field(b, L, abi.LAUNCH["all_workers"], I32))
        b.call(b.load_atomic(handoff, "monotonic", 8), [L])
    b.ret_void()
    return launch


def _take_block(b, worker, L, handoff, window, taking, nblocks, chunk, backwards, none_left):
    """The next block of the worker's window [next, end) (i64), taking the next chunk
    (_take_chunk) when it is used up; where there are none (or optimised code has taken
    over), `taking` becomes false and control goes to `none_left`."""
    nxt, end = window
    grab, got, stop = (worker.append_basic_block(k) for k in ("grab", "got", "none.left"))
    b.cbranch(b.and_(b.load(taking), b.icmp_unsigned("<", b.load(nxt), b.load(end))), got, grab)
    b.position_at_end(grab)
    ask = worker.append_basic_block("ask")
    b.cbranch(b.load(taking), ask, stop)
    b.position_at_end(ask)
    first, last = _take_chunk(b, worker, L, handoff, nblocks, chunk, backwards, stop)
    b.store(first, nxt)
    b.store(last, end)
    b.branch(got)
    b.position_at_end(stop)
    b.store(ir.Constant(I1, 0), taking)
    b.branch(none_left)
    b.position_at_end(got)
    blk = b.load(nxt)
    b.store(b.add(blk, i64(1)), nxt)
    return blk


def _take_chunk(b, worker, L, handoff, nblocks, chunk, backwards, none_left):
    """The blocks [first, last) (i64) of the next `chunk` from the launch's counter, counted
    from the grid's end where `backwards` (i1); control goes to `none_left` where there are
    none left, or where optimised code has taken over."""
    ask, got = (worker.append_basic_block(k) for k in ("ask.counter", "got.chunk"))
    b.cbranch(_handing_over(b, L, handoff), none_left, ask)
    b.position_at_end(ask)
    taken = b.atomic_rmw("add", field_ptr(b, L, abi.LAUNCH["next_block"], I64), chunk, "monotonic")
    end = b.add(taken, chunk)
    end = b.select(b.icmp_unsigned("<", nblocks, end), nblocks, end)
    # backwards, the counter's k-th chunk is the k-th from the end, its blocks still in
    # index order (the hardware prefetchers follow each block's ascending addresses)
    first = b.select(backwards, b.sub(nblocks, end), taken)
    last = b.select(backwards, b.sub(nblocks, taken), end)
    b.cbranch(b.icmp_unsigned("<", taken, nblocks), got, none_left)
    b.position_at_end(got)
    return first, last


def emit_run_blocks(module, name, block_fn):
    """`i32 run_blocks(i8* L, i8* ws, i8* shared, i64 first, i64 last, i64 gx, i64 gy,
    i32 worker, i64* at_block)`: the blocks first..last-1 of a kernel without sites, in one
    loop with the block function inlined, each block's index in `*at_block` while it runs
    (a memory fault names it). abi.BLOCK_FAILED where a block failed; BLOCK_DONE after the
    last, or before it where the launch has failed (another worker's block)."""
    fn = ir.Function(module, ir.FunctionType(I32, [PTR, PTR, PTR, I64, I64, I64, I64, I32, I64.as_pointer()]),
                     name=name + ".blocks")
    fn.linkage = "internal"
    fn.attributes.add("noinline")
    block_fn.attributes.add("alwaysinline")
    L, ws, shared, first, last, gx, gy, worker, at_block = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    start = tuple(split_index(b, first, gx, gy))
    entry = b.block
    loop, next_block, failed, done = (fn.append_basic_block(k) for k in ("block", "next.block", "failed", "done"))
    b.branch(loop)
    b.position_at_end(loop)
    blk, cx, cy, cz = (b.phi(I64, name=k) for k in ("blk", "cx", "cy", "cz"))
    for phi, v in zip((blk, cx, cy, cz), (first, *start)):
        phi.add_incoming(v, entry)
    b.store(blk, at_block)
    r = b.call(block_fn, [L, ws, shared, *(b.trunc(v, I32) for v in (cx, cy, cz)), worker, i32(abi.BLOCK_LATER)])
    b.cbranch(b.icmp_signed("==", r, i32(abi.BLOCK_FAILED)), failed, next_block)
    b.position_at_end(next_block)
    # the next block's coordinates by counting, not dividing
    x1 = b.add(cx, i64(1))
    row_done = b.icmp_unsigned("==", x1, gx)
    y1 = b.add(cy, b.zext(row_done, I64))
    plane_done = b.icmp_unsigned("==", y1, gy)
    blk1 = b.add(blk, i64(1))
    err = b.load_atomic(field_ptr(b, L, abi.LAUNCH["error"], I32), "monotonic", 4)
    more = b.and_(b.icmp_unsigned("<", blk1, last), b.icmp_signed("==", err, i32(0)))
    for phi, v in ((blk, blk1), (cx, b.select(row_done, i64(0), x1)), (cy, b.select(plane_done, i64(0), y1)),
                   (cz, b.add(cz, b.zext(plane_done, I64)))):
        phi.add_incoming(v, next_block)
    b.cbranch(more, loop, done)
    b.position_at_end(failed)
    b.ret(i32(abi.BLOCK_FAILED))
    b.position_at_end(done)
    b.ret(i32(abi.BLOCK_DONE))
    return fn


def _handing_over(b, L, handoff):
    """i1: the optimised code has taken over this kernel, and the launch is not cooperative."""
    there = b.icmp_unsigned("!=", b.ptrtoint(b.load_atomic(handoff, "monotonic", 8), I64), i64(0))
    cooperative = b.icmp_unsigned("!=", load_field(b, L, abi.LAUNCH["grid_workspace"], I64), i64(0))
    return b.and_(there, b.not_(cooperative))
