#!/usr/bin/env python3
"""Record golden outputs of the conformance kernels on a real NVIDIA GPU.

Two steps, so that the GPU runs exactly the PTX that anycuda's tests compile:

    python scripts/record_golden.py prepare --ptx-dir DIR
        (where the tests compile CUDA C++, with the same NVRTC or nvcc: every module of the
        table below to PTX, with a manifest)
    python scripts/record_golden.py record --ptx-dir DIR --out tests/golden [--ptxas sm_90]
        (on a machine with an NVIDIA GPU and CuPy: loads that PTX, runs every case on
        fixed inputs and writes one tests/golden/<module>.npz per module)

`--ptxas ARCH` assembles the PTX with that machine's ptxas first, for a driver whose PTX JIT
is older than the compiler that made it (NVRTC 13.5 writes `.version 9.5`; the H200's
driver and ptxas of CUDA 13.0 take 9.0): the version line is lowered, the instructions are
the same.

`--backend anycuda` runs the second step through anycuda instead, to check the script on a
machine without a GPU (its files are not golden: their meta data names the backend).

Each .npz holds, per case, the inputs, the output buffers after the launch (they start as
0xCD bytes, so a slot the kernel does not write is compared too; counters that must start
from a value are inout), the text device printf wrote (printf.cu's cases) and, in "meta",
the launch shape, the argument list, the module's options, the PTX's SHA-256 and the device
and driver it ran on. tests/test_golden.py replays each case through anycuda and compares.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import re
import sys
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
KERNELS = ROOT / "tests" / "kernels"
sys.path.insert(0, str(ROOT / "tests"))
from golden_records import POISON_BYTE, UNSIGNED, array_key, kernel_fingerprint, text_key  # noqa: E402

SEED = 20261124
N = 500                        # threads of an elementwise case: 4 blocks of 128, the last partial
BLOCK = 128
SLOTS = 40                     # output elements per thread (the kernels write at most 34)
SPARE = 64                     # inputs run this far past n, for kernels that read neighbours
STACK_BYTES = 16384            # per GPU thread, for the recursion in functions.cu

# The conformance tests' own options (the default architecture), so that the PTX is theirs.
PLAIN = ()
FAST = ("-use_fast_math",)

# Modules: name -> (kernel file, nvcc options). In the files of elementwise kernels, each
# kernel of the form (const T* inputs..., T* outputs..., int n) is a case, made from its
# signature; the other files' cases are listed with their own launch and inputs.
MODULES = {
    "arith_float": ("arith_float", PLAIN),
    "arith_float.fast": ("arith_float", FAST),
    "arith_int": ("arith_int", PLAIN),
    "bits": ("bits", PLAIN),
    "convert": ("convert", PLAIN),
    "convert.fast": ("convert", FAST),
    "half": ("half", PLAIN),
    "half.fast": ("half", FAST),
    "warp": ("warp", PLAIN),
    "programs": ("programs", PLAIN),
    "programs.fast": ("programs", FAST),
    "sync": ("sync", PLAIN),
    "memory": ("memory", PLAIN),
    "special_regs": ("special_regs", PLAIN),
    "atomics": ("atomics", PLAIN),
    "functions": ("functions", PLAIN),
    "printf": ("printf", PLAIN),
}

C_TYPES = {
    "float": "f4", "double": "f8", "int": "i4", "unsigned": "u4", "unsigned int": "u4",
    "long long": "i8", "unsigned long long": "u8", "short": "i2", "unsigned short": "u2",
    "__half": "u2", "char": "i1", "unsigned char": "u1", "float4": "f4", "float3": "f4",
}


# ---------------------------------------------------------------------------------- inputs

def _float_specials(dtype):
    f = np.finfo(dtype)
    tiny = float(np.array(1, UNSIGNED[f.dtype.itemsize]).view(dtype))
    base = [0.0, 1.0, 0.5, 1.5, 2.0, 3.0, 2.5, 0.49999997, 0.50000006, np.pi, np.pi / 2, 1e-8,
            tiny, tiny * 1000, float(f.tiny), float(f.tiny) * 0.5, float(f.max), float(f.eps),
            np.inf, 65504.0, 65520.0, 2.0 ** 23, 2.0 ** 24 + 2, 2.0 ** 31, 2.0 ** 32, 2.0 ** 63,
            2.0 ** 64, 1e10, 88.7, 89.0, 709.0, 710.0, 1e30, 123456.789, 0.1, 100.0, 4.5, 7.0]
    values = [v for x in base for v in (x, -x)] + [np.nan]
    with np.errstate(over="ignore"):
        return np.array(values, dtype)


def _int_specials(dtype):
    info = np.iinfo(dtype)
    bits = info.bits
    vals = {0, 1, 2, 3, 7, 8, 15, 16, 17, 31, 32, 33, 63, 64, 65, 127, 128, 255, 256, 1000,
            info.max, info.max - 1, info.min, info.min + 1}
    vals |= {1 << k for k in range(bits - 1)} | {(1 << k) - 1 for k in range(1, bits)}
    if info.min < 0:
        vals |= {-v for v in list(vals) if -v >= info.min}
    return np.array(sorted(v for v in vals if info.min <= v <= info.max), dtype=dtype)


def random_input(rng, code: str, count: int) -> np.ndarray:
    """`count` values of numpy type `code`: a third special values (zeros, limits, infinities,
    NaN, powers of two), a third uniformly random bit patterns, a third ordinary magnitudes."""
    dtype = np.dtype(code)
    kind = rng.integers(0, 3, count)
    if code == "u2" or dtype.itemsize == 2 and dtype.kind == "f":      # __half as its bits
        halves = np.concatenate([_float_specials(np.float16).view(np.uint16),
                                 np.array([0x0001, 0x03FF, 0x0400, 0x7BFF, 0x7C01, 0xFE00], np.uint16)])
        ordinary = (rng.standard_normal(count) * 10 ** rng.uniform(-3, 4, count)).astype(np.float16).view(np.uint16)
        out = np.where(kind == 0, rng.choice(halves, count),
                       np.where(kind == 1, rng.integers(0, 1 << 16, count, dtype=np.uint32).astype(np.uint16), ordinary))
        return out.astype(np.uint16)
    bits = rng.integers(0, 2 ** 63, count, dtype=np.uint64) * 2 + rng.integers(0, 2, count, dtype=np.uint64)
    raw = bits.astype(UNSIGNED[dtype.itemsize]).view(dtype)
    if dtype.kind == "f":
        specials = _float_specials(dtype)
        with np.errstate(over="ignore"):
            ordinary = (rng.choice([-1.0, 1.0], count) * 10 ** rng.uniform(-6, 6, count)).astype(dtype)
            ordinary = np.where(rng.random(count) < 0.5, rng.uniform(-8, 8, count).astype(dtype), ordinary)
    else:
        specials = _int_specials(dtype)
        info = np.iinfo(dtype)
        ordinary = rng.integers(max(info.min, -70), min(info.max, 70), count, endpoint=True).astype(dtype)
    return np.where(kind == 0, rng.choice(specials, count), np.where(kind == 1, raw, ordinary)).astype(dtype)


# ---------------------------------------------------------------------------------- cases

def _parameters(source: str):
    """kernel name -> [(C type, name, is_pointer, is_const)] for every extern "C" kernel."""
    kernels = {}
    for m in re.finditer(r'extern "C" __global__ void (\w+)\(([^)]*)\)', source):
        params = []
        for p in m.group(2).split(","):
            p = " ".join(p.split())
            const = p.startswith("const ")
            p = p.removeprefix("const ")
            pointer = "*" in p
            ctype, name = p.replace("*", " ").rsplit(None, 1)
            params.append((" ".join(ctype.split()), name, pointer, const))
        kernels[m.group(1)] = params
    return kernels


def _output(code, count):
    return {"kind": "out", "dtype": code, "count": count}


def elementwise_case(rng, name, params):
    """(const T* ..., T* ..., int n) over N threads, or None when the kernel is not of that form."""
    if not params or params[-1][:3] != ("int", "n", False) or not all(p[2] for p in params[:-1]):
        return None
    args = []
    for ctype, _, _, const in params[:-1]:
        code = C_TYPES[ctype]
        if const:
            args.append({"kind": "in", "value": random_input(rng, code, N + SPARE)})
        else:
            args.append(_output(code, N * SLOTS))
    args.append({"kind": "scalar", "dtype": "i4", "value": N})
    return {"kernel": name, "grid": [(N + BLOCK - 1) // BLOCK], "block": [BLOCK], "shared_mem": 0, "args": args}


def _in(value, code=None):
    return {"kind": "in", "value": np.asarray(value, code) if code else np.asarray(value)}


def _scalar(code, value):
    return {"kind": "scalar", "dtype": code, "value": value}


def _case(kernel, grid, block, args, shared_mem=0):
    return {"kernel": kernel, "grid": list(grid), "block": list(block), "shared_mem": shared_mem, "args": args}


def warp_cases(rng):
    ints = lambda n, lo=-2 ** 31, hi=2 ** 31: rng.integers(lo, hi, n, dtype=np.int64).astype(np.int32)
    cases = []
    for width in (32, 16, 8, 4, 2):
        cases.append(_case("shuffles", (2,), (64,), [_in(ints(128)), _in(rng.integers(0, 64, 128), "u4"),
                                                     _output("i4", 128 * 4), _scalar("i4", width)]))
    cases.append(_case("shuffle_wide", (1,), (64,), [_in(random_input(rng, "f8", 64)), _output("f8", 64), _output("i8", 64)]))
    for block in (64, 48):
        pred = (rng.random(block) < 0.5).astype(np.int32)
        cases.append(_case("votes", (1,), (block,), [_in(pred), _output("u4", block * 6)]))
    key = rng.integers(0, 4, 64) * 1000 + rng.integers(0, 3, 64)
    key[32:] = 2000 + np.arange(32) % 2
    cases.append(_case("matches", (1,), (64,), [_in(key, "i4"), _output("u4", 64 * 2)]))
    v = rng.integers(0, 2 ** 32, 64, dtype=np.uint64).astype(np.uint32)
    v[32:40] = rng.integers(0, 16, 8)
    cases.append(_case("reductions", (1,), (64,), [_in(v), _output("u4", 64 * 8)]))
    cases.append(_case("partial_masks", (1,), (96,), [_in(ints(96, -1000, 1000)), _output("i4", 96)]))
    cases.append(_case("tiles", (2,), (64,), [_in(ints(128, -1000, 1000)), _output("i4", 256)]))
    for kind, code in (("f32", "f4"), ("f64", "f8"), ("i64", "i8"), ("u32", "u4")):
        for width in (32, 8):
            lanes = rng.integers(-64, 64, 96).astype(np.int32)
            lanes[:8] = [0, 1, 31, 32, -1, width - 1, width, 2 * width + 1]
            cases.append(_case(f"shuffles_{kind}", (3,), (32,), [_in(random_input(rng, code, 96)), _in(lanes),
                                                                _output(code, 96 * 4), _scalar("i4", width)]))
    for block in (40, 63, 100):
        cases.append(_case("partial_warp", (2,), (block,), [_in(ints(2 * block, -1000, 1000)), _output("u4", 2 * block * 5)]))
    cases.append(_case("divergent_votes", (1,), (64,), [_in(ints(64, -1000, 1000)), _output("u4", 64 * 4)]))
    key = rng.integers(0, 3, 64).astype(np.int64) << 40 | rng.integers(0, 3, 64).astype(np.int64) << 33
    key[32:] = (7 << 40) + rng.integers(0, 2, 32)
    cases.append(_case("matches64", (1,), (64,), [_in(key, "i8"), _output("u4", 64 * 2)]))
    cases.append(_case("tiles16", (2,), (96,), [_in(ints(192, -1000, 1000)), _output("i4", 192 * 5)]))
    cases.append(_case("tiles4", (2,), (32,), [_in(rng.standard_normal(64), "f4"), _output("f4", 128)]))
    cases.append(_case("syncwarp_exchange", (3,), (96,), [_in(ints(288, -1000, 1000)), _output("i4", 288), _scalar("i4", 4)]))
    v = ints(64, -1000, 1000)
    v[16:32] = np.abs(v[16:32]) | 0x100
    v[48:64] = np.abs(v[48:64]) & ~0x100
    cases.append(_case("split_mask_collectives", (1,), (64,), [_in(v), _output("u4", 64 * 8)]))
    return cases


def program_cases(rng):
    normal = lambda *shape: rng.standard_normal(shape).astype(np.float32)
    cases = []
    M, Nn, K = 50, 40, 36
    cases.append(_case("sgemm_tiled", ((Nn + 15) // 16, (M + 15) // 16), (16, 16),
                       [_in(normal(M, K)), _in(normal(K, Nn)), _output("f4", M * Nn),
                        _scalar("i4", M), _scalar("i4", Nn), _scalar("i4", K)]))
    n, block = 3000, 256
    grid = (n + block - 1) // block
    cases.append(_case("scan_blocks", (grid,), (block,), [_in(rng.integers(-100, 100, n), "i4"), _output("i4", n),
                                                         _output("i4", grid), _scalar("i4", n)], shared_mem=4 * block))
    cases.append(_case("bitonic_block", (2,), (1024,), [{"kind": "inout", "value": normal(2 * 1024)}], shared_mem=4 * 1024))
    rows, cols = 70, 101
    cases.append(_case("transpose", ((cols + 31) // 32, (rows + 31) // 32), (32, 8),
                       [_in(normal(rows, cols)), _output("f4", rows * cols), _scalar("i4", rows), _scalar("i4", cols)]))
    n, block = 300, 128
    pos = normal(n, 4)
    pos[:, 3] = rng.random(n)
    cases.append(_case("nbody_accel", ((n + block - 1) // block,), (block,),
                       [_in(pos), _output("f4", n * 3), _scalar("i4", n), _scalar("f4", 0.01)], shared_mem=16 * block))
    Nr, C = 40, 300
    cases.append(_case("layernorm_forward", ((Nr * 32 + 127) // 128,), (128,),
                       [_output("f4", Nr * C), _output("f4", Nr), _output("f4", Nr), _in(normal(Nr, C) * 3 + 1),
                        _in(normal(C)), _in(normal(C)), _scalar("i4", Nr), _scalar("i4", C)]))
    Nr, C = 30, 333
    cases.append(_case("softmax_forward", (Nr,), (256,), [_output("f4", Nr * C), _in(normal(Nr, C) * 5), _scalar("i4", C)]))
    Nr, C = 50, 129
    cases.append(_case("softmax_online_warp", ((Nr * 32 + 127) // 128,), (128,),
                       [_output("f4", Nr * C), _in(normal(Nr, C) * 4), _scalar("i4", Nr), _scalar("i4", C)]))
    return cases


def sync_cases(rng):
    """Barriers: in loops, after exits, in divergent and uniform branches, 3-D blocks, named."""
    ints = lambda n, lo=-1000, hi=1000: rng.integers(lo, hi, n).astype(np.int32)
    cases = []
    for block in (33, 256):
        cases.append(_case("loop_barriers", (3,), (block,), [_in(ints(3 * block)), _output("i4", 3 * block),
                                                            _scalar("i4", 4)], shared_mem=4 * block))
    for active in (5, 100):
        cases.append(_case("early_exit_reduce", (4,), (256,), [_in(rng.standard_normal(1024), "f4"), _output("f4", 4),
                                                              _scalar("i4", active)]))
    for block in ((64, 1, 1), (8, 4, 3)):
        n = int(np.prod(block))
        flags = (rng.random((5, n)) < rng.random((5, 1))).astype(np.int32)
        flags[0], flags[1] = 1, 0
        cases.append(_case("sync_reductions", (5,), block, [_in(flags.ravel()), _output("i4", 5 * n * 3)]))
    cases.append(_case("divergent_between_barriers", (6,), (96,), [_output("i4", 6 * 7), _scalar("i4", 7)]))
    for mode in range(4):
        cases.append(_case("uniform_branch_barriers", (5,), (33,), [_in(ints(5 * 33, -10 ** 6, 10 ** 6)), _output("i4", 5 * 33),
                                                                    _scalar("i4", mode)], shared_mem=4 * 33))
    cases.append(_case("multi_barrier_loop", (7,), (100,), [_in(ints(700)), _output("i4", 700), _scalar("i4", 5)]))
    cases.append(_case("converge_loop", (6,), (37,), [_in(ints(6 * 37, 0, 10 ** 6)), _output("i4", 6 * 37), _output("i4", 6)]))
    for block, keep in ((100, 37), (64, 63)):
        cases.append(_case("exit_between_barriers", (4,), (block,), [_in(ints(4 * block)), _output("i4", 4 * block),
                                                                    _scalar("i4", keep)]))
    cases.append(_case("barriers_3d", (2, 3, 2), (4, 4, 4), [_in(ints(12 * 64, -100, 100)), _output("i4", 12 * 64),
                                                            _scalar("i4", 3)], shared_mem=4 * 64))
    cases.append(_case("named_barriers", (3,), (128,), [_in(ints(384)), _output("i4", 384), _scalar("i4", 3), _scalar("i4", 6)]))
    cases.append(_case("named_barriers_reg", (4,), (128,), [_in(ints(512)), _output("i4", 512), _scalar("i4", 5), _scalar("i4", 2)]))
    cases.append(_case("reduce_in_function", (3,), (96,), [_in(rng.standard_normal(288), "f4"), _output("f4", 288), _scalar("i4", 3)]))
    for block in (33, 255):
        cases.append(_case("odd_exit_reduce", (5,), (block,), [_in(ints(5 * block)), _output("i4", 5)]))
    return cases


def memory_cases(rng):
    """State spaces, module variables, store widths and vector shapes, shared memory of several
    types, local arrays and generic pointers (isspacep)."""
    ints = lambda n, lo, hi: rng.integers(lo, hi, n).astype(np.int32)
    i64 = lambda shape: rng.integers(-2 ** 63, 2 ** 63, shape, dtype=np.int64)
    n = 300
    stores = [_output(code, n * k) for code, k in (("i1", 1), ("i2", 1), ("i8", 1), ("f4", 4), ("i4", 2), ("f8", 2),
                                                    ("i1", 4), ("i2", 4), ("u2", 2))]
    m = 256
    return [
        _case("spaces", (3,), (64,), [_in(ints(192, 0, 1000)), _output("f4", 192), _scalar("i4", 192)], shared_mem=4 * 64),
        _case("store_widths", (3,), (128,), [_in(i64(n))] + stores + [_scalar("i4", n)]),
        _case("load_shapes", (2,), (128,), [_in(rng.integers(-128, 128, (m, 4)), "i1"), _in(rng.integers(-2 ** 15, 2 ** 15, (m, 2)), "i2"),
                                            _in(i64((m, 2)).astype(np.int32)), _in(i64((m, 2))), _in(rng.standard_normal(m) * 100),
                                            _output("i4", m), _output("i8", m * 6), _scalar("i4", m)]),
        _case("shared_types", (3,), (128,), [_in(rng.standard_normal(384)), _output("f8", 384), _scalar("i4", 384)],
              shared_mem=12 * 128),
        _case("locals_and_generic", (2,), (64,), [_in(ints(128, 0, 1000)), _output("f8", 128 * 4), _output("i4", 128 * 3),
                                                  _scalar("i4", 128)]),
    ]


def special_register_cases(rng):
    """Thread, block and grid indices of a 3-D launch."""
    return [_case("indices", (3, 4, 5), (4, 3, 2), [_output("u4", 60 * 24 * 12)])]


def _inout(value, code):
    return {"kind": "inout", "value": np.asarray(value, code)}


def atomic_cases(rng):
    """Atomics under contention, on global and shared memory. Counters start from the values
    a case gives (inout): random where any start works, the identity or a fixed start where
    the kernel's own check needs one. Float sums of integers stay below 2^24 (2^53 for
    doubles), so that every order of the additions gives the same bits, except
    global_atomics' f32 sums, which start from fractions: their rounding depends on the
    order. tests/test_golden.py's ORDER says how each output that the threads' order decides
    is compared; NaN and float ties are kept out of the CAS-loop maximum and minimum, where
    the winner would depend on the order."""
    i32 = lambda n, lo=-2 ** 31, hi=2 ** 31: rng.integers(lo, hi, n, dtype=np.int64).astype(np.int32)
    u32 = lambda n: rng.integers(0, 2 ** 32, n, dtype=np.uint64).astype(np.uint32)
    u64 = lambda n: rng.integers(0, 2 ** 64, n, dtype=np.uint64)
    cases = []
    for grid, block, n, slots in ((9, 120, 1000, 1), (4, 256, 1000, 7), (3, 96, 250, 32)):
        f32 = rng.uniform(0, 1000, slots).astype(np.float32)
        f64 = rng.integers(-2 ** 40, 2 ** 40, slots) * 0.5
        vals = random_input(rng, "i4", n)
        if slots == 32:
            # three slots that only ever add zero to a subnormal start: atom.add.f32 in global
            # memory flushes subnormal inputs and results, which sums of integers never show
            vals[0::slots] &= ~0xff
            vals[1::slots] &= ~0xff
            vals[2::slots] = 0
            f32[:3] = [1e-40, -3e-39, 1.4e-45]
            f64[2] = 5e-324
        cases.append(_case("global_atomics", (grid,), (block,),
                           [_inout(i32(4 * slots), "i4"), _inout(u32(5 * slots), "u4"), _inout(u64(2 * slots), "u8"),
                            _inout(f32, "f4"), _inout(f64, "f8"), _in(vals),
                            _scalar("i4", n), _scalar("i4", slots)]))
    for grid, block, n, start in ((4, 256, 1000, 0), (7, 100, 650, 2 ** 32 - 300)):
        cases.append(_case("tickets", (grid,), (block,), [_inout([start], "u4"), _output("u4", grid * block), _scalar("i4", n)]))
    for grid, block, n, limit in ((8, 125, 1000, 17), (5, 96, 450, 0xFFFFFFFF), (3, 64, 190, 0)):
        cases.append(_case("inc_dec_exch_cas", (grid,), (block,),
                           [_inout(u32(1) % 40, "u4"), _inout(u32(1) % 40, "u4"), _inout([-1], "i4"),
                            _inout(i32(1, -10 ** 6, 10 ** 6), "i4"), _inout(u64(1), "u8"),
                            _scalar("u4", limit), _scalar("i4", n)]))
    x = (rng.standard_normal(5000) * 10 ** rng.uniform(-3, 3, 5000)).astype(np.float32)
    x[:4] = [0.0, -0.0, 1e-42, -1e-42]
    cases.append(_case("float_max", (20,), (256,), [_in(x), _inout([-np.inf], "f4"), _scalar("i4", 5000)]))
    x = rng.standard_normal(270).astype(np.float32)
    x[:5] = [-np.inf, -0.0, 3e38, 1e-40, 1.25]
    cases.append(_case("float_max", (3,), (100,), [_in(x), _inout([1.5], "f4"), _scalar("i4", 270)]))
    for grid, block, n in ((5, 96, 10000), (3, 256, 777), (2, 33, 500)):
        data = rng.integers(0, 256, n).astype(np.uint8)
        data[: n // 4] = 7                       # a hot bin: every thread on one counter
        cases.append(_case("shared_histogram", (grid,), (block,),
                           [_in(data), _inout(rng.integers(0, 1000, 256), "u4"), _scalar("i4", n)]))
    for grid, block, n, slots in ((7, 96, 600, 1), (4, 256, 1000, 16)):
        cases.append(_case("wide_atomics", (grid,), (block,),
                           [_inout(u32(3 * slots), "u4"), _inout(u64(2 * slots).view(np.int64), "i8"), _inout(u64(3 * slots), "u8"),
                            _inout([-1.0], "f4"), _in(u64(n).view(np.int64)), _scalar("i4", n), _scalar("i4", slots)]))
    for grid, block, n, limit, dec0 in ((8, 128, 1000, 37, 5), (5, 96, 450, 0, 3), (3, 64, 160, 0xFFFFFFFF, 2)):
        words = (n + 31) // 32
        # or/and start with every thread's bit clear/set (bits no thread owns are random):
        # a start bit that a thread also sets would make the old values' sizes depend on the order
        owned = np.array([(1 << min(32, n - 32 * w)) - 1 for w in range(words)], np.uint64).astype(np.uint32)
        total = grid * block
        cases.append(_case("returned_olds", (grid,), (block,),
                           [_inout([rng.integers(-500, 500)], "f4"), _inout([rng.integers(-500, 500)], "f8"),
                            _inout([2 ** 64 - n // 2], "u8"), _inout(i32(1), "i4"), _inout(u32(1) % 50, "u4"),
                            _inout([dec0], "u4"), _inout([-7], "i4"), _inout(u32(words) & ~owned, "u4"),
                            _inout(u32(words) | owned, "u4"), _inout(u32(words), "u4"), _inout(i32(1, -10 ** 6, 10 ** 6), "i4"),
                            _scalar("u4", limit)]
                           + [_output(code, total) for code in ("f4", "f8", "u8", "i4", "u4", "u4", "i4", "u4", "u4", "u4", "i4")]
                           + [_scalar("i4", n)]))
    for grid, block in ((6, 32), (6, 100), (4, 256), (2, 1024)):
        cases.append(_case("shared_atomics", (grid,), (block,),
                           [_in(random_input(rng, "i4", grid * block)), _output("i4", 4 * grid), _output("u4", 6 * grid),
                            _output("u8", 2 * grid), _output("f4", grid), _output("f8", grid), _output("i4", grid * block),
                            _scalar("u4", 9)]))
    for grid, block in ((1, 256), (7, 256), (20, 128)):
        cases.append(_case("last_block_sum", (grid,), (block,),
                           [_in(rng.standard_normal(5000), "f4"), _output("f4", grid), _inout([0], "u4"), _output("f4", 1),
                            _scalar("i4", 5000)]))
    for grid, block, n, limit in ((5, 200, 950, 1000), (3, 256, 768, 7), (1, 128, 100, 5)):
        vals = random_input(rng, "i4", n)
        fstart, dstart = [rng.integers(-1000, 1000)], [rng.integers(-2 ** 40, 2 ** 40)]
        if n == 100:            # zeros added to subnormal starts, as in global_atomics
            vals &= ~0xff
            fstart, dstart = [2e-39], [-5e-324]
        cases.append(_case("red_forms", (grid,), (block,),
                           [_in(vals), _inout(i32(3), "i4"), _inout(u32(9), "u4"), _inout(u64(1), "u8"),
                            _inout(fstart, "f4"), _inout(dstart, "f8"), _scalar("u4", limit), _scalar("i4", n)]))
    for grid, block, n in ((5, 200, 937), (2, 64, 100)):
        cases.append(_case("half2_add", (grid,), (block,), [_inout(rng.integers(-10, 10, 8), "f2"), _scalar("i4", n)]))
    x = rng.standard_normal(5000) * 1e10 + 3e10
    cases.append(_case("double_min", (40,), (128,), [_in(x), _inout([np.inf], "f8"), _inout([2 ** 64 - 1], "u8"), _scalar("i4", 5000)]))
    x = rng.standard_normal(250) * 10 ** rng.uniform(-300, 300, 250)
    x[:5] = [np.inf, 0.0, -0.0, 5e-324, -1e308]
    cases.append(_case("double_min", (3,), (100,), [_in(x), _inout([-2.0], "f8"), _inout(u64(1), "u8"), _scalar("i4", 250)]))
    for grid, block, n in ((64, 256, 16384), (5, 160, 777)):
        c = rng.integers(0, 2 ** 16, 6)
        c[4:] = 0xBEEF
        cases.append(_case("cas16_counters", (grid,), (block,), [_inout(c, "u2"), _scalar("i4", n)]))
    return cases


def function_cases(rng):
    """Calls that stay calls: recursion, function pointers, struct passing, virtual calls."""
    cases = []
    for grid, block, n in ((3, 96, 270), (2, 128, 256)):
        total = grid * block
        cases.append(_case("calls", (grid,), (block,), [_in(random_input(rng, "i4", 64)), _output("i8", 4 * total),
                                                        _output("f4", 2 * total), _output("f8", total), _scalar("i4", n)]))
    for grid, block, n, special in ((2, 48, 90, False), (3, 64, 170, True)):
        total = grid * block
        v = random_input(rng, "f8", n + 8) if special else rng.integers(-800, 800, n + 8) / 8.0
        cases.append(_case("calls2", (grid,), (block,), [_in(v, "f8"), _in(rng.integers(0, 32, n), "i4"),
                                                         _output("i8", 8 * total), _output("f8", 12 * total), _scalar("i4", n)]))
    return cases


def printf_cases(rng):
    """Device printf: the text each case prints is recorded (assert and trap are not: they
    end the launch with an error, which test_conf_printf checks)."""
    text = np.frombuffer(b"abcdefg\0", np.uint8)
    cases = [
        _case("say", (1,), (32,), [_scalar("i4", 20), _scalar("f4", 1.5), _scalar("u8", 0)]),
        _case("say", (1,), (32,), [_scalar("i4", 32), _scalar("f4", -0.1), _scalar("u8", 0)]),
        # t up to 69: 'a' + t runs past ASCII, and 1LL << (t + 32) shifts by 64 and more
        _case("say_all", (2,), (40,), [_in(rng.integers(-9, 9, 80), "i4"), _scalar("i4", 70)]),
        _case("say_more", (3,), (64,), [_scalar("f8", 3.14159), _scalar("u8", 2 ** 63 + 5)]),
        _case("say_more", (2,), (40,), [_scalar("f8", -1.5e-5), _scalar("u8", 2 ** 64 - 20)]),
        _case("say_seq", (2,), (40,), [_in(text), _scalar("i4", 3)]),
    ]
    for case in cases:
        case["prints"] = True
    return cases


def module_cases(module: str):
    """The list of cases of one module (fixed inputs: the seed depends on the module's name)."""
    file, _ = MODULES[module]
    rng = np.random.default_rng([SEED, int.from_bytes(hashlib.sha256(module.encode()).digest()[:4], "little")])
    listed = {"warp": warp_cases, "programs": program_cases, "sync": sync_cases, "memory": memory_cases,
              "special_regs": special_register_cases, "atomics": atomic_cases, "functions": function_cases,
              "printf": printf_cases}.get(file)
    if listed is not None:
        return listed(rng)
    params = _parameters((KERNELS / f"{file}.cu").read_text())
    cases = []
    for name, p in params.items():
        case = elementwise_case(rng, name, p)
        if case is not None:
            cases.append(case)
    if file == "half":
        cases.append(_case("widen_all", (256,), (256,), [_output("f4", 65536), _output("f4", 65536)]))
    return cases


def check_launch_signatures(module: str, cases):
    """Every case passes as many arguments as its kernel takes (caught before a GPU is used)."""
    file = MODULES[module][0]
    params = _parameters((KERNELS / f"{file}.cu").read_text())
    for case in cases:
        want = params.get(case["kernel"])
        if want is None or len(want) != len(case["args"]):
            raise SystemExit(f"{module}: {case['kernel']} takes {len(want or ())} arguments, the case gives {len(case['args'])}")


# ---------------------------------------------------------------------------------- steps

def compiler_of(ptx: str) -> str:
    """The release line nvcc or NVRTC writes at the top of its PTX."""
    return next((line[2:].strip() for line in ptx.splitlines()[:12] if "compilation tools" in line), "unknown")


def prepare(ptx_dir: Path):
    sys.path.insert(0, str(ROOT / "src"))
    from anycuda import cudac
    ptx_dir.mkdir(parents=True, exist_ok=True)
    manifest = {"modules": {}}
    for module, (file, options) in MODULES.items():
        check_launch_signatures(module, module_cases(module))
        ptx = cudac.compile_to_ptx((KERNELS / f"{file}.cu").read_text(), options, f"{file}.cu")
        (ptx_dir / f"{module}.ptx").write_text(ptx)
        manifest["modules"][module] = {"file": file, "options": list(options), "compiler": compiler_of(ptx),
                                       "ptx_sha256": hashlib.sha256(ptx.encode()).hexdigest()}
        print(f"{module}: {len(ptx)} bytes of PTX")
    (ptx_dir / "manifest.json").write_text(json.dumps(manifest, indent=1))


def _backend(name: str):
    if name == "cupy":
        import cupy as xp
        # ptxas cannot bound the stack of recursive functions (functions.cu recurses up to
        # 21 frames deep with local arrays) and the driver's default is 1 KiB per thread
        rt = xp.cuda.runtime
        rt.deviceSetLimit(getattr(rt, "cudaLimitStackSize", 0), STACK_BYTES)
        props = xp.cuda.runtime.getDeviceProperties(0)
        device = props["name"].decode() if isinstance(props["name"], bytes) else props["name"]
        where = {"backend": "cupy", "device": device, "compute_capability": f"{props['major']}.{props['minor']}",
                 "driver": xp.cuda.runtime.driverGetVersion(), "cupy": xp.__version__,
                 "stack_bytes": rt.deviceGetLimit(getattr(rt, "cudaLimitStackSize", 0))}
    else:
        sys.path.insert(0, str(ROOT / "src"))
        import anycuda as xp
        where = {"backend": "anycuda"}
    return xp, where


def _device_args(xp, case):
    dev, outs = [], []
    for i, a in enumerate(case["args"]):
        if a["kind"] == "scalar":
            dev.append(np.dtype(a["dtype"]).type(a["value"]))
        elif a["kind"] == "out":
            host = np.frombuffer(bytes([POISON_BYTE]) * (a["count"] * np.dtype(a["dtype"]).itemsize), a["dtype"])
            dev.append(xp.asarray(host.copy()))
            outs.append(i)
        else:
            dev.append(xp.asarray(np.ascontiguousarray(a["value"])))
            if a["kind"] == "inout":
                outs.append(i)
    return dev, outs


def assemble(ptx_dir: Path, module: str, arch: str) -> Path:
    """ptxas's cubin of the module's PTX, the PTX ISA version line lowered to 9.0."""
    import subprocess
    ptx = (ptx_dir / f"{module}.ptx").read_text()
    lowered = ptx_dir / f"{module}.v90.ptx"
    lowered.write_text(re.sub(r"^\.version 9\.\d+$", ".version 9.0", ptx, count=1, flags=re.M))
    cubin = ptx_dir / f"{module}.cubin"
    subprocess.run(["ptxas", f"-arch={arch}", str(lowered), "-o", str(cubin)], check=True)
    return cubin


def _printed(run) -> bytes:
    """What `run()` writes to the process's standard output: the GPU driver writes device
    printf's text through the C library's stdout at a synchronisation, anycuda through
    sys.stdout."""
    import ctypes
    import os
    import tempfile
    libc = ctypes.CDLL(None)
    sys.stdout.flush()
    libc.fflush(None)
    saved = os.dup(1)
    with tempfile.TemporaryFile() as f:
        os.dup2(f.fileno(), 1)
        try:
            run()
        finally:
            sys.stdout.flush()
            libc.fflush(None)
            os.dup2(saved, 1)
            os.close(saved)
        f.seek(0)
        return f.read()


def record(ptx_dir: Path, out_dir: Path, backend: str, ptxas: str = None, only=None):
    xp, where = _backend(backend)
    manifest = json.loads((ptx_dir / "manifest.json").read_text())
    out_dir.mkdir(parents=True, exist_ok=True)
    for module, info in manifest["modules"].items():
        if only and module not in only:
            continue
        ptx = (ptx_dir / f"{module}.ptx").read_text()
        assert hashlib.sha256(ptx.encode()).hexdigest() == info["ptx_sha256"]
        if backend == "cupy":
            image = assemble(ptx_dir, module, ptxas) if ptxas else ptx_dir / f"{module}.ptx"
            mod = xp.RawModule(path=str(image))
        else:
            mod = xp.RawModule(ptx=ptx)
        arrays, meta_cases = {}, []
        for c, case in enumerate(module_cases(module)):
            dev, outs = _device_args(xp, case)
            launch = lambda: mod.get_function(case["kernel"])(tuple(case["grid"]), tuple(case["block"]), tuple(dev),
                                                              shared_mem=case["shared_mem"])
            if case.get("prints"):
                sync = xp.cuda.Device().synchronize if backend == "cupy" else xp.synchronize
                arrays[text_key(c)] = np.frombuffer(_printed(lambda: (launch(), sync())), np.uint8)
            else:
                launch()
            args = []
            for i, a in enumerate(case["args"]):
                key = array_key(c, i)
                if a["kind"] == "scalar":
                    args.append({"kind": "scalar", "dtype": a["dtype"], "value": a["value"]})
                    continue
                if a["kind"] in ("in", "inout"):
                    arrays[key] = np.ascontiguousarray(a["value"])
                if i in outs:
                    arrays[array_key(c, i, after=True)] = xp.asnumpy(dev[i]) if backend == "cupy" else dev[i].get()
                args.append({"kind": a["kind"], "dtype": np.dtype(a.get("dtype") or a["value"].dtype).str,
                             "count": int(a.get("count") or np.asarray(a["value"]).size), "key": key})
            meta_cases.append({"kernel": case["kernel"], "fingerprint": kernel_fingerprint(ptx, case["kernel"]), "grid": case["grid"], "block": case["block"],
                               "shared_mem": case["shared_mem"], "args": args, "prints": bool(case.get("prints"))})
        if backend == "cupy":
            xp.cuda.Device().synchronize()
        meta = {"module": module, "file": info["file"], "options": info["options"], "ptx_sha256": info["ptx_sha256"],
                "compiler": info["compiler"], "poison_byte": POISON_BYTE, "recorded_on": where, "cases": meta_cases}
        np.savez_compressed(out_dir / f"{module}.npz", meta=np.array(json.dumps(meta)), **arrays)
        print(f"{module}: {len(meta_cases)} cases")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("step", choices=("prepare", "record"))
    ap.add_argument("--ptx-dir", type=Path, required=True)
    ap.add_argument("--out", type=Path, default=ROOT / "tests" / "golden")
    ap.add_argument("--backend", choices=("cupy", "anycuda"), default="cupy")
    ap.add_argument("--ptxas", metavar="ARCH", help="assemble the PTX with ptxas for ARCH (e.g. sm_90) first")
    ap.add_argument("--only", metavar="MODULE[,MODULE]", help="record these modules only")
    a = ap.parse_args()
    if a.step == "prepare":
        prepare(a.ptx_dir)
    else:
        record(a.ptx_dir, a.out, a.backend, a.ptxas, a.only.split(",") if a.only else None)


if __name__ == "__main__":
    main()
