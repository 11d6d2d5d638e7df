"""Guarded accesses at the edges of memory: a load or store that a thread's own condition
keeps it from making must not be made, by any way anycuda runs a block.

Every buffer here lies between two pages that cannot be read or written (`fenced`), its first
element at the start of a page and its last at the end of one, so that touching the element
just before or just after it faults, and the launch fails with CUDA_ERROR_ILLEGAL_ADDRESS.
Each kernel guards accesses whose index runs one past both ends (`k >= 0 && k < n`), in
straight code and in loops, beside barriers and warp shuffles; each runs under every execution
strategy: block programs, the scheduler's rounds (block programs off), quick code, one and two
workers, and blocks that are not one row of threads.

It also holds the case that made this family: a 32-bit shared-memory address that nvcc keeps
below the window (`tile - 8` in a register, read as `[r+8]`), which must wrap at 2^32 as on a
GPU (irutil.register_address).
"""
from __future__ import annotations

import ctypes
import mmap

import numpy as np
import pytest

import anycuda as ac
from anycuda.runtime import device
from anycuda.runtime.errors import CudaError, CUresult
from conformance import made_regions, poison

PAGE = mmap.PAGESIZE

SOURCE = r"""
__constant__ float mask[16];

// a thread's index in a grid of blocks along x, whatever the block's shape
#define THREAD_INDEX ((blockIdx.x * blockDim.y + threadIdx.y) * blockDim.x + threadIdx.x)

// straight code without sites: thread i moves element i - shift, which lies one past either end
// for the first and the last threads
extern "C" __global__ void shifted_copy(const float* in, float* out, int n, int shift) {
    int k = THREAD_INDEX - shift;
    if (k >= 0 && k < n) out[k] = 2.0f * in[k];
}

// a loop whose guarded loads run one past both ends
extern "C" __global__ void window_sums(const float* in, float* out, int n, int half) {
    int i = THREAD_INDEX;
    float s = 0.0f;
    for (int j = -half; j <= half; j++) {
        int k = i + j;
        if (k >= 0 && k < n) s += in[k];
    }
    if (i < n) out[i] = s;
}

// a loop whose guarded stores run one past both ends: thread i writes 2i - 1 and 2i
extern "C" __global__ void pair_stores(const float* in, float* out, int n) {
    int i = THREAD_INDEX;
    for (int j = 0; j < 2; j++) {
        int k = 2 * i - 1 + j;
        if (k >= 0 && k < n) out[k] = in[k] + (float)j;
    }
}

// a barrier, a shared tile, and guarded reads of the tile or of global memory around each
// thread; unrolled by nvcc into a shared address that starts below the tile
extern "C" __global__ void conv(const float* __restrict__ in, float* __restrict__ out, int w, int mw) {
    extern __shared__ float tile[];
    int i = threadIdx.x + blockIdx.x * blockDim.x;
    tile[threadIdx.x] = i < w ? in[i] : 0.0f;
    __syncthreads();
    int t0 = blockIdx.x * blockDim.x, t1 = (blockIdx.x + 1) * blockDim.x, start = i - mw / 2;
    float s = 0;
    for (int j = 0; j < mw; j++) {
        int k = start + j;
        if (k >= 0 && k < w) {
            if (k >= t0 && k < t1) s += tile[threadIdx.x + j - mw / 2] * mask[j];
            else s += in[k] * mask[j];
        }
    }
    if (i < w) out[i] = s;
}

// a warp's shuffles, then a loop of guarded loads (a warp region)
extern "C" __global__ void warp_window(const float* in, float* out, int n, int half) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    float v = i < n ? in[i] : 0.0f;
    for (int o = 16; o > 0; o >>= 1) v += __shfl_xor_sync(0xffffffff, v, o);
    for (int j = -half; j <= half; j++) {
        int k = i + j;
        if (k >= 0 && k < n) v += in[k];
    }
    if (i < n) out[i] = v;
}

// acyclic with a barrier (a block program): guarded at both ends before and after it
extern "C" __global__ void staged_shift(const float* in, float* out, int n, int shift) {
    __shared__ float tile[1024];
    int t = threadIdx.x, k = blockIdx.x * blockDim.x + t - shift;
    tile[t] = (k >= 0 && k < n) ? in[k] : 0.0f;
    __syncthreads();
    if (k >= 0 && k < n) out[k] = 2.0f * tile[t];
}

// acyclic with a shuffle (a block program): guarded at both ends around it
extern "C" __global__ void warp_shifted(const float* in, float* out, int n, int shift) {
    int k = blockIdx.x * blockDim.x + threadIdx.x - shift;
    float v = (k >= 0 && k < n) ? in[k] : 0.0f;
    v += __shfl_xor_sync(0xffffffff, v, 1);
    if (k >= 0 && k < n) out[k] = v;
}

// a block's threads write outside the buffer unless told not to (the fence's own check)
extern "C" __global__ void unguarded(const float* in, float* out, int n, int reach) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) out[i] = in[i];
    if (i == 0 && reach) out[n] = in[n - 1];
}
"""

# Each thread stores its index in a shared tile, keeps the address of its element minus
# `below` bytes in a 32-bit register (below the window: it wraps) and reads [r+4096], which
# brings it back to its element when below is 4096.
_WRAP_STAGE = r"""
    .reg .pred %p<2>;
    .reg .b32 %r<12>;
    .reg .b64 %rd<4>;
    .reg .f32 %f<4>;
    .shared .align 4 .b8 tile[1024];

    mov.u32 %r1, %tid.x;
    shl.b32 %r2, %r1, 2;
    mov.u32 %r3, tile;
    add.u32 %r4, %r3, %r2;
    cvt.rn.f32.u32 %f1, %r1;
    st.shared.f32 [%r4], %f1;
    bar.sync 0;
    ld.param.u32 %r5, [below];
    sub.u32 %r6, %r4, %r5;
"""
_WRAP_STORE = r"""
    ld.param.u64 %rd1, [out];
    mul.wide.u32 %rd2, %r1, 4;
    add.s64 %rd3, %rd1, %rd2;
    st.global.f32 [%rd3], %f2;
    ret;
"""
WRAP_PTX = r"""
.version 7.0
.target sm_70
.address_size 64

// the wrapped read `rounds` times in a loop, summed
.visible .entry wrap(.param .u64 out, .param .u32 below, .param .u32 rounds)
{""" + _WRAP_STAGE + r"""
    ld.param.u32 %r9, [rounds];
    mov.f32 %f2, 0f00000000;
    mov.u32 %r10, 0;
LOOP:
    ld.shared.f32 %f3, [%r6+4096];
    add.f32 %f2, %f2, %f3;
    add.u32 %r10, %r10, 1;
    setp.lt.u32 %p1, %r10, %r9;
    @%p1 bra LOOP;""" + _WRAP_STORE + r"""}

// once, without the loop: acyclic, so a block program takes it
.visible .entry wrap_once(.param .u64 out, .param .u32 below)
{""" + _WRAP_STAGE + r"""
    ld.shared.f32 %f2, [%r6+4096];""" + _WRAP_STORE + r"""}
"""


class Fenced:
    """`n` elements of `dtype` filling whole pages, between two pages that fault when touched.
    `ptr` is its address (anycuda's device pointers are host addresses); `host` a numpy view."""

    def __init__(self, n: int, dtype):
        dtype = np.dtype(dtype)
        nbytes = n * dtype.itemsize
        assert nbytes % PAGE == 0, "a fenced buffer fills whole pages"
        self._map = mmap.mmap(-1, nbytes + 2 * PAGE)
        base = ctypes.addressof(ctypes.c_char.from_buffer(self._map))
        libc = ctypes.CDLL(None, use_errno=True)
        libc.mprotect.argtypes = (ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int)
        for page in (base, base + PAGE + nbytes):
            if libc.mprotect(page, PAGE, 0) != 0:
                raise OSError(ctypes.get_errno(), "mprotect")
        self.ptr = base + PAGE
        self.host = np.frombuffer(self._map, dtype=dtype, count=n, offset=PAGE)

    @property
    def arg(self):
        return np.uint64(self.ptr)


def fenced(values: np.ndarray) -> Fenced:
    f = Fenced(values.size, values.dtype)
    f.host[:] = values
    return f


def fenced_poison(n: int, dtype=np.float32) -> Fenced:
    f = Fenced(n, dtype)
    f.host[:] = np.nan
    return f


# (name, environment): the ways anycuda runs a block
STRATEGIES = [
    ("block-programs", {"ANYCUDA_JIT": "optimised", "ANYCUDA_BLOCK_PROGRAMS": "1"}),
    ("rounds", {"ANYCUDA_JIT": "optimised", "ANYCUDA_BLOCK_PROGRAMS": "0"}),
    ("quick", {"ANYCUDA_JIT": "quick", "ANYCUDA_CACHE": "0"}),
]


@pytest.fixture(scope="module")
def ptx():
    from anycuda.cudac import compile_to_ptx
    try:
        return compile_to_ptx(SOURCE, name="guarded.cu")
    except ac.CompileError as e:
        if "no CUDA C++ compiler" in str(e):
            pytest.skip(str(e))
        raise


@pytest.fixture(params=[s[0] for s in STRATEGIES])
def strategy(request, monkeypatch):
    for key, value in dict(STRATEGIES)[request.param].items():
        monkeypatch.setenv(key, value)
    return request.param


@pytest.fixture(params=[1, 2], ids=["1-worker", "2-workers"])
def workers(request, monkeypatch):
    monkeypatch.setenv("ANYCUDA_NUM_THREADS", str(request.param))
    device.worker_count.cache_clear()
    yield request.param
    device.worker_count.cache_clear()


@pytest.fixture
def module(ptx, strategy, workers):
    return ac.RawModule(ptx=ptx)


def launch(module, name, threads, block, args, shared_mem=0):
    """Enough blocks of shape `block` for `threads` threads along x."""
    per_block = block[0] * block[1] * block[2]
    grid = (-(-threads // per_block),)
    module.get_function(name)(grid, block, args, shared_mem=shared_mem)
    ac.synchronize()


N = 4 * PAGE // 4          # floats in four pages
BLOCKS = [(64, 1, 1), (96, 1, 1), (32, 4, 1)]


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: "x".join(map(str, b)))
def test_straight_code_guarded_at_both_ends(module, rng, block):
    x = rng.random(N, dtype=np.float32)
    src, dst = fenced(x), fenced_poison(N)
    launch(module, "shifted_copy", N + 2, block, (src.arg, dst.arg, np.int32(N), np.int32(1)))
    np.testing.assert_array_equal(dst.host, 2.0 * x)


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: "x".join(map(str, b)))
@pytest.mark.parametrize("half", [1, 4])
def test_loop_loads_guarded_at_both_ends(module, rng, block, half):
    x = rng.random(N, dtype=np.float32)
    src, dst = fenced(x), fenced_poison(N)
    launch(module, "window_sums", N, block, (src.arg, dst.arg, np.int32(N), np.int32(half)))
    padded = np.pad(x.astype(np.float64), half)
    expected = sum(padded[j:j + N] for j in range(2 * half + 1))
    np.testing.assert_allclose(dst.host, expected, rtol=1e-5)


@pytest.mark.parametrize("block", BLOCKS, ids=lambda b: "x".join(map(str, b)))
def test_loop_stores_guarded_at_both_ends(module, rng, block):
    x = rng.random(N, dtype=np.float32)
    src, dst = fenced(x), fenced_poison(N)
    launch(module, "pair_stores", N // 2 + 1, block, (src.arg, dst.arg, np.int32(N)))
    expected = x + (np.arange(N) % 2 == 0)       # k = 2i - 1 + j: even k from j = 1
    np.testing.assert_array_equal(dst.host, expected.astype(np.float32))


def _conv_reference(x, m, mw):
    padded = np.pad(x.astype(np.float64), (mw // 2, mw - 1 - mw // 2))
    return sum(padded[j:j + x.size] * m[j] for j in range(mw))


@pytest.mark.parametrize("threads", [32, 64, 128])
@pytest.mark.parametrize("mw", [5, 8, 9])
def test_conv_with_a_shared_window_below_the_tile(module, rng, threads, mw):
    x = rng.random(N, dtype=np.float32)
    m = rng.random(16, dtype=np.float32)
    mask = module.get_global("mask")
    ctypes.memmove(int(mask.ptr), m.ctypes.data, m.nbytes)
    src, dst = fenced(x), fenced_poison(N)
    launch(module, "conv", N, (threads, 1, 1), (src.arg, dst.arg, np.int32(N), np.int32(mw)), shared_mem=4 * threads)
    np.testing.assert_allclose(dst.host, _conv_reference(x, m, mw), rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("threads", [32, 64, 256])
@pytest.mark.parametrize("half", [1, 3])
def test_warp_shuffles_then_guarded_loads(module, rng, threads, half):
    x = rng.random(N, dtype=np.float32)
    src, dst = fenced(x), fenced_poison(N)
    launch(module, "warp_window", N, (threads, 1, 1), (src.arg, dst.arg, np.int32(N), np.int32(half)))
    warp_sums = np.repeat(x.astype(np.float64).reshape(-1, 32).sum(axis=1), 32)
    padded = np.pad(x.astype(np.float64), half)
    expected = warp_sums + sum(padded[j:j + N] for j in range(2 * half + 1))
    np.testing.assert_allclose(dst.host, expected, rtol=1e-5)


def test_the_warp_kernel_runs_in_a_region():
    """The warp_window kernel is lowered with a warp region, so its loads are tested there."""
    pytest.importorskip("anycuda.cudac")
    try:
        made, _ = made_regions(SOURCE)
    except ac.CompileError as e:
        pytest.skip(str(e))
    assert "warp_window" in made


def test_the_fence_faults_just_past_the_end(module, rng):
    """The negative control: an unguarded store one past the end fails the launch."""
    x = rng.random(N, dtype=np.float32)
    src, dst = fenced(x), fenced_poison(N)
    launch(module, "unguarded", N, (64, 1, 1), (src.arg, dst.arg, np.int32(N), np.int32(0)))
    np.testing.assert_array_equal(dst.host, x)
    with pytest.raises(CudaError) as e:
        launch(module, "unguarded", N, (64, 1, 1), (src.arg, dst.arg, np.int32(N), np.int32(1)))
    assert e.value.code == CUresult.CUDA_ERROR_ILLEGAL_ADDRESS


@pytest.mark.parametrize("threads", [32, 64, 128])
@pytest.mark.parametrize("shift", [1, 33])
def test_acyclic_barrier_kernel_guarded_at_both_ends(module, strategy, rng, threads, shift):
    x = rng.random(N, dtype=np.float32)
    src, dst = fenced(x), fenced_poison(N)
    launch(module, "staged_shift", N + 2 * shift, (threads, 1, 1), (src.arg, dst.arg, np.int32(N), np.int32(shift)))
    np.testing.assert_array_equal(dst.host, 2.0 * x)
    kernel = module.get_function("staged_shift").kernel
    assert (kernel._programs.get((threads, 1, 1)) is not None) == (strategy == "block-programs")


@pytest.mark.parametrize("threads", [32, 64, 128])
@pytest.mark.parametrize("shift", [1, 33])
def test_acyclic_shuffle_kernel_guarded_at_both_ends(module, strategy, rng, threads, shift):
    x = rng.random(N, dtype=np.float32)
    src, dst = fenced(x), fenced_poison(N)
    total = -(-(N + 2 * shift) // threads) * threads
    launch(module, "warp_shifted", total, (threads, 1, 1), (src.arg, dst.arg, np.int32(N), np.int32(shift)))
    k = np.arange(total) - shift
    inside = (k >= 0) & (k < N)
    v = np.where(inside, x[np.clip(k, 0, N - 1)], 0.0).astype(np.float32)
    summed = v + v[np.arange(total) ^ 1]
    np.testing.assert_array_equal(dst.host, summed[inside])
    kernel = module.get_function("warp_shifted").kernel
    assert (kernel._programs.get((threads, 1, 1)) is not None) == (strategy == "block-programs")


@pytest.mark.parametrize("strategy_name", [s[0] for s in STRATEGIES])
@pytest.mark.parametrize("threads", [32, 64, 256])
@pytest.mark.parametrize("rounds", [1, 3])
def test_a_32_bit_shared_address_wraps(monkeypatch, strategy_name, threads, rounds):
    for key, value in dict(STRATEGIES)[strategy_name].items():
        monkeypatch.setenv(key, value)
    mod = ac.RawModule(ptx=WRAP_PTX)
    out = poison(threads, np.float32)
    mod.get_function("wrap")((2,), (threads,), (out, np.uint32(4096), np.uint32(rounds)))
    np.testing.assert_array_equal(out.get(), rounds * np.arange(threads, dtype=np.float32))


@pytest.mark.parametrize("strategy_name", [s[0] for s in STRATEGIES])
@pytest.mark.parametrize("threads", [32, 64, 256])
def test_a_32_bit_shared_address_wraps_in_straight_code(monkeypatch, strategy_name, threads):
    for key, value in dict(STRATEGIES)[strategy_name].items():
        monkeypatch.setenv(key, value)
    mod = ac.RawModule(ptx=WRAP_PTX)
    out = poison(threads, np.float32)
    kernel = mod.get_function("wrap_once")
    kernel((2,), (threads,), (out, np.uint32(4096)))
    np.testing.assert_array_equal(out.get(), np.arange(threads, dtype=np.float32))
    assert (kernel.kernel._programs.get((threads, 1, 1)) is not None) == (strategy_name == "block-programs")


@pytest.mark.parametrize("access", ["load", "store"])
def test_a_masked_access_of_no_lane_is_not_made(access):
    """A masked load or store whose lanes are all off still looks at the pages of its span
    (a ~110 ns microcode assist where one is not present), so irutil's masked accesses run
    only where some lane is on; a constant mask needs no test. Run over a fenced page, both
    give the lanes' elements, and a mask of no lane leaves memory as it was."""
    from llvmlite import binding as llvm, ir
    from anycuda.compiler import irutil
    from anycuda.compiler.build import jit

    vec, i32 = ir.VectorType(ir.IntType(32), 8), ir.IntType(32)
    mod = ir.Module(name="masked")
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [ir.IntType(64), ir.IntType(64), i32]), name="masked")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    src, dst, bits = fn.args
    mask = b.bitcast(b.trunc(bits, ir.IntType(8)), ir.VectorType(ir.IntType(1), 8))
    if access == "load":
        got = irutil.masked_load(b, src, vec, 4, mask)
        b.store(got, b.inttoptr(dst, vec.as_pointer()), align=4)
    else:
        irutil.masked_store(b, b.load(b.inttoptr(src, vec.as_pointer()), align=4), dst, 4, mask)
    b.ret_void()
    text = str(mod)
    body = text[text.index("define"):]
    call = body.index(f"llvm.masked.{access}.v8i32")
    assert "icmp ne i8" in body[:call] and " br i1 " in body[:call], "the access runs without a test of its mask"

    jit._initialise()
    engine = llvm.create_mcjit_compiler(llvm.parse_assembly(text), llvm.Target.from_default_triple().create_target_machine())
    engine.finalize_object()
    run = ctypes.CFUNCTYPE(None, ctypes.c_uint64, ctypes.c_uint64, ctypes.c_int32)(engine.get_function_address("masked"))
    page = Fenced(PAGE // 4, np.int32)
    buf, base = page.host[-8:], page.ptr + PAGE - 32        # the page's last 8 elements, the fence after
    rng = np.random.default_rng()
    for bits in (0, 0b1, 0b10110101, 0xFF):
        values = rng.integers(1, 1 << 30, 8, dtype=np.int32)
        out = np.full(8, -7, np.int32)
        on = np.array([(bits >> k) & 1 for k in range(8)], bool)
        if access == "load":
            buf[:] = values
            run(base, out.ctypes.data, bits)
            np.testing.assert_array_equal(out[on], values[on])
        else:
            buf[:] = -7
            run(values.ctypes.data, base, bits)
            np.testing.assert_array_equal(buf[on], values[on])
            np.testing.assert_array_equal(buf[~on], -7)
    run(base + 32, out.ctypes.data, 0) if access == "load" else run(values.ctypes.data, base + 32, 0)
