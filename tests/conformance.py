"""Shared helpers for the conformance tests: compile our CUDA C++ kernels once per session
(skipping with the reason when no CUDA C++ compiler exists), fresh random inputs with the
seed in failure messages, and poisoned output buffers."""
from __future__ import annotations

import importlib.util
import os
import struct
from pathlib import Path

import numpy as np
import pytest

import anycuda as ac

KERNELS = Path(__file__).parent / "kernels"
_modules = {}


def load_cuda(name: str, options=()) -> ac.RawModule:
    """The RawModule for tests/kernels/<name>.cu (compiled once per session)."""
    key = (name, tuple(options))
    if key not in _modules:
        source = (KERNELS / f"{name}.cu").read_text()
        try:
            _modules[key] = ac.RawModule(code=source, options=tuple(options), name=f"{name}.cu")
        except ac.CompileError as e:
            if "no CUDA C++ compiler" in str(e):
                pytest.skip(str(e))
            raise
    return _modules[key]


def ptx_launcher(header: str, source_name: str):
    """launch(ptx, name, grid, block, *args, shared=0): kernel `name` of `header + ptx` run
    through the runtime's program API; arrays are passed by address, floats as f32, other
    values as integers of the parameter's size. Returns the loaded program."""
    import struct
    from anycuda.runtime.program import load_program

    def launch(ptx, name, grid, block, *args, shared=0):
        prog = load_program(header + ptx, source_name)
        k = prog.kernel(name)
        params = b""
        for p, a in zip(k.params, args):
            params = params.ljust(p.offset, b"\0")
            if isinstance(a, np.ndarray):
                params += struct.pack("<Q", a.ctypes.data)
            elif isinstance(a, float):
                params += struct.pack("<f", a)
            else:
                params += int(a).to_bytes(p.size, "little", signed=a < 0)
        k.launch(grid, block, params, shared)
        return prog
    return launch


_NVCC_MODULES = {}


def nvcc_module(source: str, name: str) -> ac.RawModule:
    """`source` compiled by nvcc for sm_80 (<mma.h> needs the toolkit's headers, which NVRTC's
    wheel lacks), once per session; skipped without nvcc on PATH."""
    if name not in _NVCC_MODULES:
        from anycuda import cudac
        if not cudac.find_nvcc():
            pytest.skip("nvcc is not on PATH")
        _NVCC_MODULES[name] = ac.RawModule(code=source, options=("-arch=sm_80",), name=name, backend="nvcc")
    return _NVCC_MODULES[name]


def poison(shape, dtype) -> ac.ndarray:
    """A device array full of a recognisable garbage pattern (NaN for floats)."""
    dtype = np.dtype(dtype)
    a = ac.empty(shape, dtype)
    if dtype.kind == "f":
        a.set(np.full(shape, np.nan, dtype))
    else:
        a.set(np.frombuffer(b"\xcd" * (int(np.prod(shape)) * dtype.itemsize), dtype=dtype).reshape(shape))
    return a


def made_regions(source: str):
    """({kernel: the warp region functions made for it}, the lowered LLVM module) of CUDA C++
    `source` (compiler/vector/warpregions.py: a region function is named after its kernel's index
    and its site, 0 for an entry region; one not made keeps a single block, "unused")."""
    from anycuda.compiler.lowering.module import ModuleLowering
    from anycuda.cudac import compile_to_ptx
    from anycuda.ptx.parser import parse
    ptx = compile_to_ptx(source)
    kernels = [k.name for k in parse(ptx, "regions.ptx").functions if k.is_kernel]
    mod = ModuleLowering(parse(ptx, "regions.ptx"), "regions.ptx").lower().mod
    made = {}
    for fn in mod.functions:
        if ".region" in fn.name and [blk.name for blk in fn.blocks] != ["unused"]:
            made.setdefault(kernels[int(fn.name.split(".")[1][1:])], []).append(fn)
    return made, mod


def region_site(fn) -> int:
    """The site a region function of made_regions starts at (0: the kernel's start)."""
    return int(fn.name.rsplit("region", 1)[1])


def force_affine_check(monkeypatch):
    """Make the scheduler's check of rebuilt registers (rounds.affine_spills) answer yes
    whatever it finds, with a fresh compile: a test then sees whether a register is rebuilt
    from one value after a site at all (a register that is not alike in every thread comes
    out wrong), and that the check is what keeps such a register right. Block programs are
    switched off: they take most such kernels, and the rounds' check would go unseen."""
    from llvmlite import ir
    monkeypatch.setenv("ANYCUDA_BLOCK_PROGRAMS", "0")
    from anycuda.compiler.simt import rounds
    original = rounds.affine_spills

    def forced(b, spill, header, n, slots, holds):
        original(b, spill, header, n, slots, holds)
        return ir.Constant(ir.IntType(1), 1)
    monkeypatch.setattr(rounds, "affine_spills", forced)
    monkeypatch.setenv("ANYCUDA_CACHE", "0")


def make_rng():
    seed = int(os.environ.get("ANYCUDA_TEST_SEED") or int.from_bytes(os.urandom(4), "little"))
    return np.random.default_rng(seed), seed


def round_directed(exact, mode: str, dtype=np.float32):
    """The `dtype` value nearest to the rational `exact` in direction `mode`: 'rn' (to
    nearest, ties to even), 'rz' (toward zero), 'rd' (toward -inf), 'ru' (toward +inf).
    Overflow gives infinity only when rounding away from zero, as IEEE 754 says. (An exact
    zero comes back as +0: the caller decides the sign of zero results.)"""
    from fractions import Fraction
    exact = Fraction(exact)
    dtype = np.dtype(dtype).type
    with np.errstate(over="ignore"):
        try:
            cand = dtype(float(exact))
        except OverflowError:          # beyond float64: infinite in every smaller type too
            cand = dtype(np.inf if exact > 0 else -np.inf)
    biggest = dtype(np.finfo(dtype).max)
    if mode == "rn":
        lo, hi = round_directed(exact, "rd", dtype), round_directed(exact, "ru", dtype)
        if lo == hi:
            return lo
        ulp_max = Fraction(float(biggest)) - Fraction(float(np.nextafter(biggest, dtype(0))))
        val = lambda v: Fraction(float(v)) if np.isfinite(v) else (1 if v > 0 else -1) * (Fraction(float(biggest)) + ulp_max)
        dl, dh = exact - val(lo), val(hi) - exact
        if dl != dh:
            return lo if dl < dh else hi
        if not np.isfinite(lo) or not np.isfinite(hi):        # a tie at the overflow threshold goes to infinity
            return lo if not np.isfinite(lo) else hi
        bits = {2: np.uint16, 4: np.uint32, 8: np.uint64}[np.dtype(dtype).itemsize]
        return lo if int(np.array(lo).view(bits)) % 2 == 0 else hi
    if mode == "rz":
        mode = "rd" if exact >= 0 else "ru"
    if np.isinf(cand):
        if mode == "rd" and exact > 0:
            return biggest
        if mode == "ru" and exact < 0:
            return -biggest
        return cand
    with np.errstate(over="ignore"):
        while mode == "rd" and np.isfinite(cand) and Fraction(float(cand)) > exact:
            cand = np.nextafter(cand, dtype(-np.inf))
        while mode == "ru" and np.isfinite(cand) and Fraction(float(cand)) < exact:
            cand = np.nextafter(cand, dtype(np.inf))
    return cand


def random_bits(rng, n, dtype):
    """Floats from uniformly random bit patterns: every exponent, subnormals, infinities and NaNs."""
    dtype = np.dtype(dtype)
    u = {4: np.uint32, 8: np.uint64}[dtype.itemsize]
    return rng.integers(0, np.iinfo(u).max, n, dtype=u, endpoint=True).view(dtype)


def ulp_error(got, ref, dtype=np.float32):
    """|got - ref| in units in the last place of `dtype` at the (higher precision) reference;
    0 where both are the same NaN/infinity, inf where one is NaN or infinite and the other not."""
    got = np.asarray(got, dtype=np.float64 if np.dtype(dtype).itemsize <= 4 else np.longdouble)
    ref = np.asarray(ref, dtype=got.dtype)
    fi = np.finfo(dtype)
    with np.errstate(all="ignore"):
        _, e = np.frexp(np.abs(ref).astype(np.longdouble))
        ulp = np.ldexp(np.ones_like(ref), np.maximum(e - 1, fi.minexp) - fi.nmant)
        err = np.abs(got - ref) / ulp
    special = ~np.isfinite(got) | ~np.isfinite(ref)
    same = (np.isnan(got) & np.isnan(ref)) | (got == ref)
    return np.where(special, np.where(same, 0.0, np.inf), err).astype(np.float64)


def normalised_jacobi(x, steps):
    """What tests/programs/cooperative.cu and test_cooperative's kernel compute with
    grid.sync() between phases: `x` normalised by its sum, then `steps` Jacobi smoothing
    steps with fixed ends (in float64)."""
    u = x.astype(np.float64) / x.astype(np.float64).sum()
    for _ in range(steps):
        w = u.copy()
        w[1:-1] = 0.5 * (u[:-2] + u[2:])
        u = w
    return u


def benchmark_module(name: str):
    """benchmarks/<name>.py, loaded from its path (benchmarks/ is a folder of scripts, not a
    package): the suite's kernels, run.py's measuring, modules.py's generated modules."""
    path = Path(__file__).resolve().parent.parent / "benchmarks" / f"{name}.py"
    spec = importlib.util.spec_from_file_location(f"anycuda_bench_{name}", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


# A block's elements reversed through shared memory across a barrier (one block: %tid.x
# alone indexes it): a kernel a block program takes, at any block shape it supports.
REVERSE_PTX = ".version 8.0\n.target sm_80\n.address_size 64\n" + """
.visible .entry reverse(.param .u64 pin, .param .u64 pout)
{
  .reg .b32 %r<6>; .reg .b64 %rd<9>;
  .shared .align 4 .b32 tile[1024];
  ld.param.u64 %rd1, [pin]; ld.param.u64 %rd2, [pout];
  mov.u32 %r1, %tid.x; mul.wide.u32 %rd3, %r1, 4; add.s64 %rd4, %rd1, %rd3;
  ld.global.u32 %r2, [%rd4];
  mov.u64 %rd5, tile; add.s64 %rd6, %rd5, %rd3; st.shared.u32 [%rd6], %r2;
  bar.sync 0;
  mov.u32 %r3, %ntid.x; sub.s32 %r4, %r3, %r1; sub.s32 %r4, %r4, 1;
  mul.wide.u32 %rd7, %r4, 4; add.s64 %rd7, %rd5, %rd7; ld.shared.u32 %r5, [%rd7];
  add.s64 %rd8, %rd2, %rd3; st.global.u32 [%rd8], %r5;
  ret;
}
"""


def launch_reverse(kernel, threads: int, rng=None):
    """One block of `threads` elements reversed by REVERSE_PTX's kernel, output poisoned,
    checked against numpy."""
    rng = np.random.default_rng() if rng is None else rng
    src = rng.integers(0, 1 << 32, threads, dtype=np.uint32)
    dst = np.full(threads, 0xCDCDCDCD, np.uint32)
    kernel.launch((1, 1, 1), (threads, 1, 1), struct.pack("<QQ", src.ctypes.data, dst.ctypes.data))
    np.testing.assert_array_equal(dst, src[::-1])


# The classic shared-memory tree reduction (one partial sum per block, dynamic shared memory
# of 4 bytes a thread), as courses teach it: kernel `tree(in, out)`.
TREE_REDUCTION = r"""
extern "C" __global__ void tree(const float* in, float* out) {
    extern __shared__ float sdata[];
    unsigned int tid = threadIdx.x;
    sdata[tid] = in[blockIdx.x * blockDim.x + tid];
    __syncthreads();
    for (unsigned int s = blockDim.x / 2; s > 0; s >>= 1) {
        if (tid < s) sdata[tid] += sdata[tid + s];
        __syncthreads();
    }
    if (tid == 0) out[blockIdx.x] = sdata[0];
}
"""
