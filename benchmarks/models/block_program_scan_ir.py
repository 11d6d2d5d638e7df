"""scan_blocks (benchmarks/kernels/cuda/scan.cu) written by hand as one LLVM function whose
values are <256 x i32> vectors, a lane per thread of the block: the simplest block-wide
program a compiler could emit (every PTX register one wide SSA value, shuffles as
shufflevector with constant masks, the loads of a lane's 4 elements as one <1024 x i32> load
split by shufflevector, barriers as nothing), compiled by anycuda's JIT at its usual
optimisation level and timed: how LLVM lowers such code before anycuda emits it
(benchmarks/NOTES.md, "Block-wide programs: a C model of scan").

    python benchmarks/models/block_program_scan_ir.py
"""
import ctypes
import time

import numpy as np
from llvmlite import ir

from anycuda.compiler.build import jit

T, K, L = 256, 4, 32
i32, i64 = ir.IntType(32), ir.IntType(64)
V = lambda n: ir.VectorType(i32, n)
m = ir.Module("wide")
ptr = i32.as_pointer()
fn = ir.Function(m, ir.FunctionType(ir.VoidType(), [ptr, ptr, ptr, i32]), "scan_block")
src, dst, totals, block = fn.args
b = ir.IRBuilder(fn.append_basic_block())
base = b.mul(b.sext(block, i64), ir.Constant(i64, T * K))
def shuf(a, c, idx, n):
    return b.shuffle_vector(a, c, ir.Constant(V(len(idx)), idx))
allv = b.load(b.bitcast(b.gep(src, [base]), V(T * K).as_pointer()), align=4)
zero1024 = ir.Constant(V(T * K), None)
ks = [shuf(allv, zero1024, [K * t + k for t in range(T)], T) for k in range(K)]
e = [ks[0]]
for k in range(1, K):
    e.append(b.add(e[-1], ks[k]))
run = e[-1]
zero = ir.Constant(V(T), None)
def warp_scan(v, n):
    z = ir.Constant(V(n), None)
    o = 1
    while o < L:
        up = shuf(v, z, [t - o if t % L >= o else n + t for t in range(n)], n)
        v = b.add(v, up)
        o *= 2
    return v
incl = warp_scan(run, T)
wt = shuf(incl, zero, [L * w + L - 1 if w < T // L else T for w in range(L)], L)
wt = warp_scan(wt, L)
offs = shuf(wt, ir.Constant(V(L), None), [t // L - 1 if t // L > 0 else L for t in range(T)], T)
in_block = b.add(incl, offs)
before = b.sub(in_block, run)
outs = [b.add(x, before) for x in e]
p01 = b.shuffle_vector(outs[0], outs[1], ir.Constant(V(2 * T), list(range(2 * T))))
p23 = b.shuffle_vector(outs[2], outs[3], ir.Constant(V(2 * T), list(range(2 * T))))
idx = []
for t in range(T):
    idx += [t, T + t, 2 * T + t, 3 * T + t]
merged = b.shuffle_vector(p01, p23, ir.Constant(V(4 * T), idx))
b.store(merged, b.bitcast(b.gep(dst, [base]), V(T * K).as_pointer()), align=4)
b.store(b.extract_element(in_block, ir.Constant(i32, T - 1)), b.gep(totals, [b.sext(block, i64)]))
b.ret_void()
# a driver: blocks [lo, hi)
drv = ir.Function(m, ir.FunctionType(ir.VoidType(), [ptr, ptr, ptr, i32, i32]), "run_blocks")
s2, d2, t2, lo, hi = drv.args
bb = ir.IRBuilder(drv.append_basic_block())
head, body, done = drv.append_basic_block(), drv.append_basic_block(), drv.append_basic_block()
entry = bb.block
bb.branch(head); bb.position_at_end(head)
phi = bb.phi(i32); phi.add_incoming(lo, entry)
bb.cbranch(bb.icmp_signed("<", phi, hi), body, done)
bb.position_at_end(body); bb.call(fn, [s2, d2, t2, phi]); phi.add_incoming(bb.add(phi, ir.Constant(i32, 1)), body); bb.branch(head)
bb.position_at_end(done); bb.ret_void()
t0 = time.perf_counter()
obj = jit.compile_to_object(str(m), "wide")
print(f"compile {time.perf_counter()-t0:.2f} s")
lo_ = jit.LoadedObject(obj)
f = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int, ctypes.c_int)(lo_.address("run_blocks"))
n = 1 << 24; nb = n // (T * K)
x = np.random.default_rng(1).integers(0, 10, n, dtype=np.int32)
y = np.full(n, -7, np.int32); tot = np.zeros(nb, np.int32)
P = lambda a: a.ctypes.data
f(P(x), P(y), P(tot), 0, nb)
ref = np.cumsum(x.reshape(nb, -1), axis=1, dtype=np.int32)
assert (y.reshape(nb, -1) == ref).all() and (tot == ref[:, -1]).all(), "wrong"
def med(fn_, reps=15):
    ts = []
    for _ in range(reps):
        t = time.perf_counter(); fn_(); ts.append(time.perf_counter() - t)
    return sorted(ts)[reps // 2]
in_l2 = med(lambda: f(P(x), P(y), P(tot), 0, 64), 101) / 64      # 256 KiB in, 256 KiB out
from_memory = med(lambda: f(P(x), P(y), P(tot), 0, nb)) / nb
print(f"{in_l2 * 1e9:.0f} ns per block of 1024 ints with 64 blocks in L2, {from_memory * 1e9:.0f} ns from memory (one thread)")
