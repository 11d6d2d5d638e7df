"""Instruction names of the PTX ISA (up to 9.x), to tell an unknown opcode from a valid one.

An instruction is written `name.mod1.mod2...`. For most instructions the name is one word
(`ld`, `setp`, `bar`, `fence`); the compiler reads everything after it as modifiers. Some
families are only meaningful with a dotted name (`cp.async.bulk`, `mbarrier.try_wait`,
`wgmma.mma_async`, `tcgen05.mma`): for them the longest known dotted name is the opcode and
the rest are modifiers. A family root on its own (`mbarrier`, `tcgen05`, ...) is accepted as
a fallback so that a variant newer than this table still parses (the compiler rejects what
it does not implement).
"""
from __future__ import annotations

# One-word instructions, grouped as in the ISA's instruction-set chapter.
SIMPLE = frozenset("""
    add sub mul mad mul24 mad24 sad div rem abs neg min max popc clz bfind fns brev bfe bfi
    szext bmsk dp4a dp2a addc subc madc
    testp copysign fma rcp sqrt rsqrt sin cos lg2 ex2 tanh
    set setp selp slct
    and or xor not cnot lop3 shf shl shr
    mov shfl prmt ld ldu st prefetch prefetchu applypriority discard createpolicy isspacep
    cvta cvt mapa getctarank alloca stacksave stackrestore
    tex tld4 txq istypep suld sust sured suq
    bra brx call ret exit
    bar barrier membar fence atom red vote match activemask redux griddepcontrol elect
    nanosleep setmaxnreg
    mma ldmatrix stmatrix movmatrix
    vadd vsub vabsdiff vmin vmax vshl vshr vmad vset
    vadd2 vsub2 vavrg2 vabsdiff2 vmin2 vmax2 vset2
    vadd4 vsub4 vavrg4 vabsdiff4 vmin4 vmax4 vset4
    brkpt pmevent trap
""".split())

# Roots of dotted families: accepted alone only as a fallback for variants not listed below.
FAMILY_ROOTS = frozenset("cp mbarrier wgmma wmma tcgen05 tensormap clusterlaunchcontrol multimem".split())

# Dotted instruction names (the longest one that prefixes a written name wins).
DOTTED = frozenset("""
    cp.async cp.async.commit_group cp.async.wait_group cp.async.wait_all
    cp.async.mbarrier.arrive
    cp.async.bulk cp.async.bulk.tensor cp.async.bulk.prefetch cp.async.bulk.prefetch.tensor
    cp.async.bulk.commit_group cp.async.bulk.wait_group
    cp.reduce.async.bulk cp.reduce.async.bulk.tensor
    multimem.ld_reduce multimem.st multimem.red multimem.cp.async.bulk
    multimem.cp.reduce.async.bulk
    st.async red.async st.bulk
    fence.proxy
    mbarrier.init mbarrier.inval mbarrier.expect_tx mbarrier.complete_tx mbarrier.arrive
    mbarrier.arrive_drop mbarrier.test_wait mbarrier.try_wait mbarrier.pending_count
    tensormap.replace tensormap.cp_fenceproxy
    wmma.load wmma.store wmma.mma
    mma.sp
    wgmma.mma_async wgmma.mma_async.sp wgmma.fence wgmma.commit_group wgmma.wait_group
    tcgen05.alloc tcgen05.dealloc tcgen05.relinquish_alloc_permit tcgen05.ld tcgen05.st
    tcgen05.wait tcgen05.cp tcgen05.shift tcgen05.mma tcgen05.mma.sp tcgen05.mma.ws
    tcgen05.mma.ws.sp tcgen05.commit tcgen05.fence
    clusterlaunchcontrol.try_cancel clusterlaunchcontrol.query_cancel
""".split())

ALL = SIMPLE | DOTTED

_DOTTED_PARTS = {tuple(d.split(".")) for d in DOTTED}
_MAX_PARTS = max(len(d) for d in _DOTTED_PARTS)
_cache: dict = {}


def split_opcode(name: str):
    """`ld.global.nc.f32` -> ('ld', ('global', 'nc', 'f32')); `cp.async.ca.shared.global`
    -> ('cp.async', ('ca', 'shared', 'global')); None for a name that is no PTX instruction."""
    hit = _cache.get(name)
    if hit is not None or name in _cache:
        return hit
    parts = name.split(".")
    result = None
    if all(parts):
        for k in range(min(_MAX_PARTS, len(parts)), 1, -1):
            if tuple(parts[:k]) in _DOTTED_PARTS:
                result = (".".join(parts[:k]), tuple(parts[k:]))
                break
        else:
            if parts[0] in SIMPLE or (parts[0] in FAMILY_ROOTS and len(parts) > 1):
                result = (parts[0], tuple(parts[1:]))
    if len(_cache) < 100000:
        _cache[name] = result
    return result
