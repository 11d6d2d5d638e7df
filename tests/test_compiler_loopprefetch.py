"""Prefetches ahead of vectorised loops' vector loads, masked or plain (compiler/cpu/loopprefetch.py):
which loads get one, that the rewritten module is valid, and that kernels whose threads
read under a condition (a stencil's boundary, a guard at an array's end) compute what numpy
does with them, their outputs poisoned first."""
import platform

import llvmlite.binding as llvm
import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler.cpu import loopprefetch
from conformance import poison
from test_compiler_streamstores import _blocks_code, _functions, _optimised_ir

x86_only = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                              reason="the prefetches are added on x86-64 hosts only")

# One loop of one block with a wide and a narrow masked load, and a wide masked load in a
# block that is no loop.
LOOPS = r"""
define void @f(ptr %p, ptr %q, i64 %n, <16 x i1> %m, <2 x i1> %m2) {
entry:
  %once = call <16 x float> @llvm.masked.load.v16f32.p0(ptr align 4 %q, <16 x i1> %m, <16 x float> poison)
  br label %vector.body

vector.body:                                      ; preds = %vector.body, %entry
  %i = phi i64 [ 0, %entry ], [ %i.next, %vector.body ]
  %a = getelementptr float, ptr %p, i64 %i
  %wide = tail call <16 x float> @llvm.masked.load.v16f32.p0(ptr align 4 %a, <16 x i1> %m, <16 x float> poison), !noalias !0
  %narrow = call <2 x float> @llvm.masked.load.v2f32.p0(ptr align 4 %a, <2 x i1> %m2, <2 x float> poison)
  %i.next = add i64 %i, 16
  %done = icmp uge i64 %i.next, %n
  br i1 %done, label %exit, label %vector.body

exit:                                             ; preds = %vector.body
  ret void
}

declare <16 x float> @llvm.masked.load.v16f32.p0(ptr, <16 x i1>, <16 x float>)
declare <2 x float> @llvm.masked.load.v2f32.p0(ptr, <2 x i1>, <2 x float>)

!0 = !{!1}
!1 = distinct !{!1, !2}
!2 = distinct !{!2}
"""


def test_rewrite_prefetches_wide_masked_loads_in_loops_only():
    out = loopprefetch.rewrite(LOOPS)
    loop = out.split("vector.body:", 1)[1].split("exit:", 1)[0]
    ahead = f"%anycuda.ahead.1 = getelementptr i8, ptr %a, i64 {loopprefetch.DISTANCE}"
    assert ahead in loop
    prefetch = loop.index("call void @llvm.prefetch.p0(ptr %anycuda.ahead.1")
    assert loop.index(ahead) < prefetch < loop.index("%wide = ")
    assert out.count("call void @llvm.prefetch.p0") == 1           # not the narrow one, not %once
    mod = llvm.parse_assembly(out)
    mod.verify()


PLAIN = r"""
define void @h(ptr %p, ptr %q, i64 %n) {
entry:
  %once = load <16 x float>, ptr %q, align 4
  br label %vector.body

vector.body:                                      ; preds = %vector.body, %entry
  %i = phi i64 [ 0, %entry ], [ %i.next, %vector.body ]
  %a = getelementptr float, ptr %p, i64 %i
  %wide = load <16 x float>, ptr %a, align 4, !noalias !0
  %narrow = load <2 x float>, ptr %a, align 4
  %one = load float, ptr %a, align 4
  %i.next = add i64 %i, 16
  %done = icmp uge i64 %i.next, %n
  br i1 %done, label %exit, label %vector.body

exit:                                             ; preds = %vector.body
  ret void
}

!0 = !{!1}
!1 = distinct !{!1, !2}
!2 = distinct !{!2}
"""


def test_rewrite_prefetches_wide_plain_loads_in_loops_only():
    out = loopprefetch.rewrite(PLAIN)
    loop = out.split("vector.body:", 1)[1].split("exit:", 1)[0]
    ahead = f"%anycuda.ahead.1 = getelementptr i8, ptr %a, i64 {loopprefetch.DISTANCE}"
    assert loop.index(ahead) < loop.index("call void @llvm.prefetch.p0(ptr %anycuda.ahead.1") < loop.index("%wide = ")
    assert out.count("call void @llvm.prefetch.p0") == 1        # not the narrow or scalar ones, not %once
    llvm.parse_assembly(out).verify()


ROWS = r"""
define void @r(ptr %p, i64 %n) {
entry:
  br label %vector.body

vector.body:                                      ; preds = %vector.body, %entry
  %i = phi i64 [ 0, %entry ], [ %i.next, %vector.body ]
  %a = getelementptr i8, ptr %p, i64 %i
  %left = getelementptr i8, ptr %a, i64 -4
  %right = getelementptr i8, ptr %a, i64 4
  %next = getelementptr i8, ptr %a, i64 64
  %far = getelementptr i8, ptr %right, i64 60
  %l = load <16 x float>, ptr %left, align 4
  %c = load <16 x float>, ptr %a, align 4
  %r = load <16 x float>, ptr %right, align 4
  %x = load <16 x float>, ptr %next, align 4
  %y = load <16 x float>, ptr %far, align 4
  %i.next = add i64 %i, 128
  %done = icmp uge i64 %i.next, %n
  br i1 %done, label %exit, label %vector.body

exit:                                             ; preds = %vector.body
  ret void
}
"""


def test_loads_of_one_line_share_a_prefetch():
    """Loads of one base register within a line of each other (a stencil's in[i - 1], in[i],
    in[i + 1]) take one prefetch; a load a line further on (the loop's second vector) its own,
    and one through a chain of offsets (4 + 60) is seen where it lands."""
    out = loopprefetch.rewrite(ROWS)
    assert out.count("call void @llvm.prefetch.p0") == 2, out
    assert "getelementptr i8, ptr %left, i64 1024" in out and "getelementptr i8, ptr %next, i64 1024" in out
    llvm.parse_assembly(out).verify()


# A block program's loop over warps reading its shared-memory window (through integer
# arithmetic on the window's address, as the optimiser leaves it) and global memory.
SHARED = r"""
define internal fastcc void @ptx.blockprogram.block(ptr %launch, ptr %shared, ptr %g) {
entry:
  %base = ptrtoint ptr %shared to i64
  br label %warp.body

warp.body:                                        ; preds = %warp.body, %entry
  %w = phi i64 [ 0, %entry ], [ %w.next, %warp.body ]
  %off = shl nuw nsw i64 %w, 7
  %at = or disjoint i64 %off, 2048
  %addr = add i64 %at, %base
  %p = inttoptr i64 %addr to ptr
  %window = load <32 x i32>, ptr %p, align 4
  %q = getelementptr i8, ptr %g, i64 %off
  %global = load <32 x i32>, ptr %q, align 4
  %sum = add <32 x i32> %window, %global
  store <32 x i32> %sum, ptr %p, align 4
  %w.next = add nuw nsw i64 %w, 1
  %done = icmp eq i64 %w.next, 16
  br i1 %done, label %exit, label %warp.body

exit:                                             ; preds = %warp.body
  ret void
}
"""


def test_no_prefetch_ahead_of_shared_memory():
    """A block program's loads of its shared-memory window (the argument named
    loopprefetch.SHARED_ARGUMENT, and what is computed from it) take no prefetch: past the
    window lies the workspace's inaccessible guard, where a Zen 1 in a virtual machine walked
    the page tables at each prefetch (scan_hillis_steele's loops over warps: 65-69 -> 36 ms).
    The global load beside it keeps its own; so does the same loop where the window is an
    argument of another name. And the block programs name their window so."""
    out = loopprefetch.rewrite(SHARED)
    assert out.count("call void @llvm.prefetch.p0") == 1
    assert f"getelementptr i8, ptr %q, i64 {loopprefetch.DISTANCE}" in out
    llvm.parse_assembly(out).verify()
    renamed = loopprefetch.rewrite(SHARED.replace("%shared", "%window"))
    assert renamed.count("call void @llvm.prefetch.p0") == 2
    from anycuda.compiler import pipeline
    from anycuda.cudac import compile_to_ptx
    src = r"""extern "C" __global__ void rotate(int* out) {
        __shared__ int s[256];
        s[threadIdx.x] = threadIdx.x;
        __syncthreads();
        out[blockIdx.x * 256 + threadIdx.x] = s[(threadIdx.x + 1) % 256];
    }"""
    ir_text = pipeline.block_program_ir(compile_to_ptx(src, name="rotate.cu"), "rotate.ptx", "rotate", 256)
    block_fn = next(line for line in ir_text.split("\n") if line.startswith('define internal i32 @"ptx.blockprogram.block"'))
    assert f'%"{loopprefetch.SHARED_ARGUMENT[1:]}"' in block_fn


def test_rewrite_leaves_modules_without_looped_vector_loads():
    assert loopprefetch.rewrite("define void @g() {\n  ret void\n}\n") == "define void @g() {\n  ret void\n}\n"
    no_loop = LOOPS.replace("%vector.body, %entry", "%entry").replace(
        "br i1 %done, label %exit, label %vector.body", "br label %exit")
    assert loopprefetch.rewrite(no_loop) == no_loop


STENCIL = r"""
// a thread per point, its boundary copied: LLVM's vectoriser reads the neighbours with
// masked loads
extern "C" __global__ void stencil3(const float* in, float* out, int nx, int ny, int nz) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y,
        z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x >= nx || y >= ny || z >= nz) return;
    size_t sy = nx, sz = (size_t)nx * ny, i = z * sz + y * sy + x;
    if (x == 0 || y == 0 || z == 0 || x == nx - 1 || y == ny - 1 || z == nz - 1) out[i] = in[i];
    else out[i] = in[i] - (in[i - 1] + in[i + 1] + in[i - sy] + in[i + sy] + in[i - sz] + in[i + sz]) / 6.0f;
}
// a neighbour read where there is one: the last thread reads none
extern "C" __global__ void forward_difference(const double* in, double* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = i + 1 < n ? in[i + 1] - in[i] : 0.0;
}
"""


@x86_only
def test_stencil_loop_has_prefetches(monkeypatch, tmp_path):
    code = _blocks_code(_functions(_optimised_ir(monkeypatch, tmp_path, STENCIL)), 0)
    assert "@llvm.masked.load." in code
    assert "call void @llvm.prefetch.p0(ptr %anycuda.ahead." in code


def _stencil3(u):
    out = u.copy()
    i = slice(1, -1)
    neighbours = ((u[i, i, :-2] + u[i, i, 2:]) + (u[i, :-2, i] + u[i, 2:, i])) + (u[:-2, i, i] + u[2:, i, i])
    out[i, i, i] = u[i, i, i] - neighbours / np.float32(6)
    return out


def checked_stencil3(rng, shape, block, source=STENCIL):
    """stencil3 (in `source`) on random points of `shape`, its output poisoned first, against
    numpy."""
    nz, ny, nx = shape
    u = rng.standard_normal(shape).astype(np.float32)
    out = poison(u.size, np.float32)
    grid = tuple(-(-n // b) for n, b in zip((nx, ny, nz), block))
    ac.RawModule(code=source).get_function("stencil3")(grid, block, (ac.asarray(u), out, np.int32(nx), np.int32(ny), np.int32(nz)))
    np.testing.assert_allclose(out.get().reshape(shape), _stencil3(u), rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("shape,block", [((24, 20, 40), (32, 2, 2)), ((5, 9, 67), (16, 4, 1)), ((3, 3, 300), (256, 1, 1))])
def test_stencil_with_boundaries(monkeypatch, rng, shape, block):
    monkeypatch.setenv("ANYCUDA_JIT", "optimised")
    checked_stencil3(rng, shape, block)


@pytest.mark.parametrize("n", [1, 255, 4096 + 7, 100_003])
def test_neighbour_reads_at_an_arrays_end(monkeypatch, rng, n):
    """The input ends where the array does: its loop's prefetches look past the end,
    which a prefetch may (it never faults)."""
    monkeypatch.setenv("ANYCUDA_JIT", "optimised")
    x = rng.standard_normal(n)
    out = poison(n, np.float64)
    ac.RawModule(code=STENCIL).get_function("forward_difference")(((n + 127) // 128,), (128,), (ac.asarray(x), out, np.int32(n)))
    want = np.append(np.diff(x), 0.0)
    np.testing.assert_array_equal(out.get(), want)
