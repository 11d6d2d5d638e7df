"""PTX instruction names (PTX ISA 9.x), to tell an unknown opcode from a known one.

An opcode written with dots (`cp.async.bulk`) is matched by its longest known prefix; the
rest of the dotted name becomes modifiers.
"""
from __future__ import annotations

SIMPLE = """
abs activemask add addc alloca and applypriority atom bar barrier bfe bfi bfind bmsk bra brev
brkpt brx call clz cnot copysign cos cvt cvta discard div dp2a dp4a elect ex2 exit fence fma
fns getctarank griddepcontrol isspacep istypep ld ldmatrix ldu lg2 lop3 mad mad24 madc mapa
match max membar min mma mov movmatrix mul mul24 multimem nanosleep neg not or pmevent popc
prefetch prefetchu prmt rcp red redux rem ret rsqrt sad selp set setmaxnreg setp shf shfl shl
shr sin slct sqrt st stackrestore stacksave stmatrix sub subc suld suq sured sust szext tanh
testp tex tld4 trap txq vabsdiff vabsdiff2 vabsdiff4 vadd vadd2 vadd4 vavrg2 vavrg4 vmad vmax
vmax2 vmax4 vmin vmin2 vmin4 vote vset vset2 vset4 vshl vshr vsub vsub2 vsub4 wgmma wmma xor
cp mbarrier tensormap tcgen05 clusterlaunchcontrol st.async red.async
""".split()

DOTTED = """
cp.async cp.async.bulk cp.async.bulk.tensor cp.reduce.async.bulk cp.reduce.async.bulk.tensor
cp.async.bulk.prefetch cp.async.bulk.prefetch.tensor cp.async.commit_group cp.async.wait_group
cp.async.wait_all cp.async.bulk.commit_group cp.async.bulk.wait_group cp.async.mbarrier.arrive
mbarrier.init mbarrier.inval mbarrier.arrive mbarrier.arrive_drop mbarrier.test_wait
mbarrier.try_wait mbarrier.pending_count mbarrier.expect_tx mbarrier.complete_tx
wgmma.mma_async wgmma.fence wgmma.commit_group wgmma.wait_group tensormap.replace
tensormap.cp_fenceproxy multimem.ld_reduce multimem.st multimem.red st.async red.async
fence.proxy tcgen05.alloc tcgen05.dealloc tcgen05.ld tcgen05.st tcgen05.mma tcgen05.cp
tcgen05.shift tcgen05.commit tcgen05.wait tcgen05.fence tcgen05.relinquish_alloc_permit
clusterlaunchcontrol.try_cancel clusterlaunchcontrol.query_cancel createpolicy
""".split()

_SIMPLE = set(SIMPLE)
_DOTTED = {tuple(d.split(".")) for d in DOTTED}
_MAX_PARTS = max(len(d) for d in _DOTTED)


def split_opcode(name: str):
    """`ld.global.nc.f32` -> ('ld', ['global', 'nc', 'f32']); None for an unknown opcode."""
    parts = name.split(".")
    for k in range(min(_MAX_PARTS, len(parts)), 1, -1):
        if tuple(parts[:k]) in _DOTTED:
            return ".".join(parts[:k]), parts[k:]
    if parts[0] in _SIMPLE or parts[0] == "createpolicy":
        return parts[0], parts[1:]
    return None
