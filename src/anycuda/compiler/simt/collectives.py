"""Warp collectives (shfl, vote, match, redux, activemask, bar.warp.sync) in the block function.

A warp whose lanes all wait is resolved (`emit_resolve_warp`): the lanes waiting at the same
collective run it together (when every non-exited lane of its member mask is there, or when
nothing else can progress) and continue; operands and results go through the workspace's
collective arrays. A collective that every lane of every full warp reaches in a uniform round
(`uniform_collective`) is resolved for each warp at once as vector code
(`emit_uniform_collective`: a shuffle a shufflevector, a vote a mask of 32 bits, a reduction a
vector reduction). `shfl_source` is shfl.sync's rule for a source lane, which the vector
paths use too.

Warp matrix instructions (mma, wmma.mma, ldmatrix, stmatrix, movmatrix) are collectives of
kind "matrix": their operands and results are too many for the collective arrays, so each lane
keeps them in a matrix area of its frame, and resolving the warp calls the resolver function
its site names (op_a; MATRIX_RESOLVER, made by compiler/ops/matrix.py), which reads and
writes every lane's area. They are always resolved here, never by a uniform round.
"""
from __future__ import annotations

from llvmlite import ir

from .. import abi
from ..irutil import declare, for_range, i32, i64, load_field
from ..types import I1, I32, I64, PTR
from .synccheck import check_collective
from .workspace import C, collective_at, frame_at, thread_state

# void (i8* ws, i64 fsize, i32 lo, i32 group, i64 area): a warp matrix instruction's resolver
# (compiler/ops/matrix.py), which a "matrix" site names in its op_a
MATRIX_RESOLVER = ir.FunctionType(ir.VoidType(), [PTR, I64, I32, I32, I64])


def emit_resolve_warp(module: ir.Module, synccheck: bool = False, syncs_meet: bool = False) -> ir.Function:
    """i32 anycuda.resolve_warp(i8* ws, i64 fsize, i32 lo, i32 hi, i32* kinds, i8* coll):
    run one ready collective of the warp [lo, hi); returns the number of lanes released
    (at least one when a lane waits: the chosen lane takes part even when its member mask
    leaves it out, which the ISA leaves undefined, so that no lane is left waiting forever).
    Operands and results other than the frame's op_b, op_c and op_mask are in the
    collective arrays at `coll` (COLL_ARRAYS). With `synccheck`, the group is checked
    first (synccheck.check_collective). With `syncs_meet` (a synccheck kernel with more than
    one bar.warp.sync), lanes at different bar.warp.sync instructions with one mask meet there
    as one group (since sm_70 the lanes of one __syncwarp may reach it at different
    instructions); other kernels do without the look-ups that costs."""
    name = "anycuda.resolve_warp" + (".syncs" if syncs_meet else "") + (".synccheck" if synccheck else "")
    fn = module.globals.get(name)
    if fn is not None:
        return fn
    fn = ir.Function(module, ir.FunctionType(I32, [PTR, I64, I32, I32, I32.as_pointer(), PTR]), name=name)
    fn.linkage = "internal"
    ws, fsize, lo, hi, kinds, coll = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    chosen = b.alloca(I32, name="chosen")
    first = b.alloca(I32, name="first")
    b.store(i32(-1), chosen)
    b.store(i32(-1), first)

    def frame(t):
        return frame_at(b, ws, fsize, t)

    def is_warp_sync(site):
        kind = b.load(b.gep(kinds, [b.sub(b.select(b.icmp_signed(">", site, i32(0)), site, i32(1)), i32(1))]))
        return b.icmp_signed("==", kind, i32(abi.SITE["warp_sync"]))

    def waiting_at(t, site, mask=None):
        """i1: lane t waits at `site`, or, at a bar.warp.sync, at any bar.warp.sync with the
        same member `mask` (`syncs_meet`)."""
        fr = frame(t)
        st = b.load(thread_state(b, fr))
        resume = load_field(b, fr, C["resume"], I32)
        at = b.icmp_signed("==", resume, site)
        if mask is not None and syncs_meet:
            same = b.icmp_unsigned("==", load_field(b, fr, C["op_mask"], I32), mask)
            at = b.or_(at, b.and_(b.and_(is_warp_sync(site), is_warp_sync(resume)), same))
        return b.and_(b.icmp_signed("==", st, i32(abi.THREAD_WAIT_WARP)), at)

    # 1. find a lane whose collective has every live member of its mask waiting with it
    with for_range(b, lo, hi, "t") as t:
        fr = frame(t)
        is_waiting = b.icmp_signed("==", b.load(thread_state(b, fr)), i32(abi.THREAD_WAIT_WARP))
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
                ustate = b.load(thread_state(b, frame(u)))
                alive = b.icmp_signed("!=", ustate, i32(abi.THREAD_EXITED))
                missing = b.and_(b.and_(bit, alive), b.not_(waiting_at(u, site, mask)))
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
    given_mask = load_field(b, frame(c), C["op_mask"], I32)
    if synccheck:
        check_collective(b, ws, fsize, lo, hi, kinds, c, site, given_mask)
    group_mask = b.select(b.icmp_unsigned("==", given_mask, i32(0)), i32(-1), given_mask)
    # the chosen lane takes part even where its mask leaves it out
    group_mask = b.or_(group_mask, b.shl(i32(1), b.sub(c, lo)))

    def in_group(u, site):
        member = b.trunc(b.lshr(group_mask, b.sub(u, lo)), I1)
        return b.and_(waiting_at(u, site, group_mask), member)
    # 2. the group: lanes waiting at this site; aggregates over it
    group = b.alloca(I32, name="group")
    agg = {k: b.alloca(I64 if k.startswith("r") else I32, name=k) for k in
           ("all", "any", "ballot", "radd", "rminu", "rmins", "rmaxu", "rmaxs", "rand", "ror", "rxor", "same")}
    init = {"all": 1, "any": 0, "ballot": 0, "radd": 0, "rminu": 0xFFFFFFFF, "rmins": 0x7FFFFFFF,
            "rmaxu": 0, "rmaxs": -0x80000000, "rand": 0xFFFFFFFF, "ror": 0, "rxor": 0, "same": 1}
    for k, v in init.items():
        b.store(ir.Constant(agg[k].type.pointee, v), agg[k])
    b.store(i32(0), group)
    a_first = b.load(collective_at(b, coll, "a", c))
    with for_range(b, lo, hi, "g") as g:
        with b.if_then(in_group(g, site)):
            fr = frame(g)
            lane_bit = b.shl(i32(1), b.sub(g, lo))
            b.store(b.or_(b.load(group), lane_bit), group)
            p = b.load(collective_at(b, coll, "pred", g))
            p1 = b.icmp_signed("!=", p, i32(0))
            b.store(b.and_(b.load(agg["all"]), b.zext(p1, I32)), agg["all"])
            b.store(b.or_(b.load(agg["any"]), b.zext(p1, I32)), agg["any"])
            b.store(b.or_(b.load(agg["ballot"]), b.select(p1, lane_bit, i32(0))), agg["ballot"])
            a64 = b.load(collective_at(b, coll, "a", g))
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
                "!=", b.load(collective_at(b, coll, "pred", c)), i32(0)), I32))
            is64 = b.or_(b.icmp_signed("==", kind, i32(abi.SITE["match_all_b64"])),
                         b.icmp_signed("==", kind, i32(abi.SITE["match_any_b64"])))
            av = b.select(is64, a64, a)
            af = b.select(is64, a_first, b.and_(a_first, i64(0xFFFFFFFF)))
            is_match = b.icmp_signed("==", kind, i32(abi.SITE["match_all_b32"]))
            is_match = b.or_(is_match, b.icmp_signed("==", kind, i32(abi.SITE["match_all_b64"])))
            agree = b.select(is_match, b.icmp_unsigned("==", av, af), same_pred)
            b.store(b.and_(b.load(agg["same"]), b.zext(agree, I32)), agg["same"])
    grp = b.load(group)
    with b.if_then(b.icmp_signed("==", kind, i32(abi.SITE["matrix"]))):
        # a warp matrix instruction: its resolver writes every lane's result in its frame
        resolver = b.inttoptr(load_field(b, frame(c), C["op_a"], I64), MATRIX_RESOLVER.as_pointer())
        b.call(resolver, [ws, fsize, lo, grp, b.zext(load_field(b, frame(c), C["op_b"], I32), I64)])
    # 3. each lane's result
    with for_range(b, lo, hi, "l") as l:
        with b.if_then(in_group(l, site)):
            fr = frame(l)
            res, rpred = _lane_result(b, fn, kind, fr, l, lo, grp, agg, frame, in_group, site, hi, coll)
            b.store(res, collective_at(b, coll, "res", l))
            b.store(rpred, collective_at(b, coll, "res_pred", l))
    with for_range(b, lo, hi, "r") as r:
        with b.if_then(in_group(r, site)):
            b.store(i32(abi.THREAD_RUN), thread_state(b, frame(r)))
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
    shfl_val = b.select(j_ok, b.load(collective_at(b, coll, "a", src)), i64(0))
    # match.any: lanes of the group holding the same value
    matches = b.alloca(I32)
    b.store(i32(0), matches)
    is_any32, is_any64 = is_k("match_any_b32"), is_k("match_any_b64")
    with b.if_then(b.or_(is_any32, is_any64)):
        mine = b.load(collective_at(b, coll, "a", l))
        with for_range(b, lo, hi, "m") as m:
            with b.if_then(waiting_at(m, site)):
                other = b.load(collective_at(b, coll, "a", m))
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
        # (a partial mask reached by every lane leaves lanes out of their own mask: the
        # general rounds resolve it, as they do a bar.warp.sync whose lanes part)
        return const("op_mask") == 0xFFFFFFFF
    if kind in (abi.SITE["activemask"], abi.SITE["warp_step"]):
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


def emit_uniform_collective(b, kind, consts, lo, coll, ws, fsize):
    """Resolve collective site `kind` (uniform_collective) for the full warp starting at
    thread `lo`, all of whose lanes wait there: results into the collective arrays, the 32
    lanes as one vector (a shuffle is a shufflevector, a vote a mask of 32 bits, a
    reduction a vector reduction)."""
    if kind in (abi.SITE["warp_sync"], abi.SITE["warp_step"]):
        return
    v64, v32 = ir.VectorType(I64, 32), ir.VectorType(I32, 32)
    vec = lambda name, lo, ty: b.bitcast(collective_at(b, coll, name, lo), ty.as_pointer())
    const = lambda name: consts.get(C[name], (None,))[0]
    if kind in _SHFL_MODES and (const("op_b") is None or const("op_c") is None):
        # lane and clamp operands from each lane's frame; every lane of the warp takes part,
        # so every source lane the ISA's rule gives (0..31) is there
        with for_range(b, i32(0), i32(32), "cl") as lane:
            fr = frame_at(b, ws, fsize, b.add(lo, lane))
            bval = i32(const("op_b")) if const("op_b") is not None else load_field(b, fr, C["op_b"], I32)
            cval = i32(const("op_c")) if const("op_c") is not None else load_field(b, fr, C["op_c"], I32)
            j, ok = _shfl_source_ir(b, _SHFL_MODES[kind], lane, bval, cval)
            t = b.add(lo, lane)
            b.store(b.load(collective_at(b, coll, "a", b.add(lo, j))), collective_at(b, coll, "res", t))
            b.store(b.zext(ok, I32), collective_at(b, coll, "res_pred", t))
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
