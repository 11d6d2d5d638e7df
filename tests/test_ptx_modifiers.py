"""Modifiers as allow-lists (ptx/modifiers.py, compiler/ops/table.py, compiler/vector/).

An instruction with a modifier that no form of its instruction takes is refused by the
parser, naming instruction, modifier and line; one the ISA allows that anycuda does not
implement is refused as not supported when its kernel is compiled; no modifier is lowered as
if it were absent. Each vector path (warp runs, warp regions, block programs) takes an
instruction only when its list has every modifier, and hands any other one to the next path,
whose answers numpy checks. The cases are made from the tables, so that a new opcode or
modifier is covered by itself."""
import dataclasses

import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler import pipeline
from anycuda.compiler.analysis import uniformity
from anycuda.compiler.lowering.module import ModuleLowering
from anycuda.compiler.ops import instructions, table
from anycuda.compiler.vector import blockops, blockprograms, warpregions, warpruns
from anycuda.ptx import PtxError, UnsupportedPtx, ir, opcodes, parse
from anycuda.ptx.modifiers import MODIFIERS
from conformance import made_regions, poison

HEADER = ".version 8.0\n.target sm_90\n.address_size 64\n"
LINE = 9        # the line of the first instruction of _kernel's body


def _kernel(body: str) -> str:
    return (HEADER + ".visible .entry k(.param .u64 p)\n{\n  .reg .b32 %r<4>;\n  .reg .b64 %rd<3>;\n"
            "  .reg .pred %p<2>;\n" + body + "  ret;\n}\n")


def _lowering_error(text):
    """The error that lowering kernel k of `text` ends with (None if it lowers)."""
    return _lower(parse(text, "mods.ptx"))


def _lower(module):
    return ModuleLowering(module, "mods.ptx").lower().kernels["k"].error


def _bare(opcode: str, modifier: str):
    """A module whose kernel holds `opcode.modifier %r1, %r2, %r3` (the rest of the kernel
    valid), and that instruction. The front end refuses such a statement (a type missing, the
    operand count of another opcode): built here past it, the compiler's own refusals are what
    the tests see."""
    module = parse(_kernel("  mov.u32 %r1, %r2;\n"), "mods.ptx")
    body = module.kernels[0].body
    at = len(body) - 2
    body[at] = dataclasses.replace(body[at], opcode=opcode, mods=(modifier,),
                                   operands=(ir.Reg("%r1"), ir.Reg("%r2"), ir.Reg("%r3")))
    return module, body[at]


# ---------------------------------------------------------------- the front end: unknown modifiers

def test_every_opcode_has_its_modifiers():
    assert set(MODIFIERS) == opcodes.ALL


@pytest.mark.parametrize("opcode", sorted(opcodes.ALL))
def test_an_unknown_modifier_is_refused_naming_instruction_modifier_and_line(opcode):
    with pytest.raises(PtxError) as e:
        parse(_kernel(f"  {opcode}.frobnicate %r1, %r2;\n"), "mods.ptx")
    assert e.value.message == f"{opcode}: unknown modifier .frobnicate"
    assert (e.value.line, e.value.col) == (LINE, 3 + len(opcode)), str(e.value)
    assert "mods.ptx:9:" in str(e.value) and "frobnicate" in e.value.source_line


@pytest.mark.parametrize("written, modifier", [
    ("st.global.nc.u32 [%rd1], %r1", "nc"),            # a load's, not a store's
    ("add.wide.s32 %rd1, %r1, %r2", "wide"),           # mul's and mad's
    ("shfl.sync.any.b32 %r1, %r2, 1, 31, -1", "any"),  # vote's
    ("ld.global.wt.u32 %r1, [%rd1]", "wt"),            # a store's cache operator
    ("mov.rn.b32 %r1, %r2", "rn"),
    ("bar.sync.frobnicate 0", "frobnicate"),
])
def test_a_modifier_of_another_instruction_is_unknown(written, modifier):
    with pytest.raises(PtxError) as e:
        parse(_kernel(f"  {written};\n"), "mods.ptx")
    opcode = written.split(".")[0]
    assert e.value.message == f"{opcode}: unknown modifier .{modifier}" and e.value.line == LINE


def test_every_unknown_modifier_of_a_module_is_reported_at_once():
    text = _kernel("  st.global.frobnicate.u32 [%rd1], %r1;\n  add.blorp.s32 %r1, %r1, %r2;\n")
    with pytest.raises(PtxError) as e:
        parse(text, "mods.ptx")
    assert [(x.line, x.message) for x in e.value.errors] == [
        (LINE, "st: unknown modifier .frobnicate"), (LINE + 1, "add: unknown modifier .blorp")]


GOOD = _kernel("  ld.param.u64 %rd1, [p];\n  mov.u32 %r1, %tid.x;\n  st.global.u32 [%rd1], %r1;\n")


def test_an_unknown_modifier_fails_the_kernel_not_the_program():
    """issue 36: st.global.frobnicate.u32 ran as st.global.u32. Now the kernel's first use
    fails with CUDA_ERROR_INVALID_PTX naming the line (CUDA's lazy loading), and an eager
    load fails at once."""
    text = GOOD.replace("st.global.u32", "st.global.frobnicate.u32")
    mod = ac.RawModule(ptx=text, name="frob.ptx")
    out = ac.zeros(1, np.int32)
    with pytest.raises(ac.CudaError) as e:
        mod.get_function("k")((1,), (1,), (out,))
    assert e.value.code == ac.CUresult.CUDA_ERROR_INVALID_PTX
    assert "frob.ptx:11:" in str(e.value) and "st: unknown modifier .frobnicate" in str(e.value)
    ac.RawModule(ptx=GOOD, name="good.ptx").get_function("k")((1,), (1,), (out,))
    assert out.get()[0] == 0


def test_an_unknown_modifier_fails_an_eager_load(monkeypatch):
    monkeypatch.setenv("CUDA_MODULE_LOADING", "EAGER")
    with pytest.raises(PtxError, match="st: unknown modifier .frobnicate"):
        ac.RawModule(ptx=GOOD.replace("st.global.u32", "st.global.frobnicate.u32"), name="frob.ptx")


# ---------------------------------------------------------------- the scalar path: not supported

UNSUPPORTED = sorted((op, m) for op in table.HANDLERS for m in MODIFIERS[op] - table.HANDLED[op])


def test_the_handlers_lower_only_modifiers_of_their_instructions():
    for op, mods in table.HANDLED.items():
        assert mods <= MODIFIERS[op], op
    assert ("fma", "oob") in UNSUPPORTED and ("min", "xorsign") in UNSUPPORTED


@pytest.mark.parametrize("opcode, modifier", UNSUPPORTED, ids=lambda x: x)
def test_a_modifier_anycuda_lacks_is_refused_as_not_supported(opcode, modifier):
    """Every modifier the ISA gives an instruction that its handler does not lower."""
    err = _lower(_bare(opcode, modifier)[0])
    assert isinstance(err, UnsupportedPtx), err
    assert err.message == f"{opcode}: modifier .{modifier} is not supported by anycuda yet"
    assert err.line == LINE


@pytest.mark.parametrize("written, message", [
    ("add.rn.f32.f16 %r1, %r2, %r3", "add: the types .f32.f16 together are not supported"),   # mixed precision
    ("cvt.rn.satfinite.tf32.f32 %r1, %r2", "cvt.rn.satfinite.tf32.f32 is not supported"),
    ("fma.rn.oob.f16 %r1, %r2, %r3, %r1", "fma: modifier .oob is not supported"),
    ("min.xorsign.abs.f32 %r1, %r2, %r3", "min: modifier .xorsign is not supported"),
    ("mad24.hi.sat.s32 %r1, %r2, %r3, %r1", "mad24: modifier .sat is not supported"),
    ("atom.global.v2.f32.add %rd1, [%rd2], %rd1", "atom: modifier .v2 is not supported"),
    ("barrier.cluster.arrive", "barrier: modifier .cluster is not supported"),
    ("redux.sync.min.abs.f32 %r1, %r2, -1", "redux: modifier .abs is not supported"),
    ("tcgen05.fence::before_thread_sync", "instruction 'tcgen05.fence::before_thread_sync' is not supported"),
    ("wgmma.fence.sync.aligned", "instruction 'wgmma.fence' is not supported"),
])
def test_forms_anycuda_lacks_fail_their_kernel(written, message):
    """Through the API: the kernel's launch fails naming the line; the program goes on."""
    mod = ac.RawModule(ptx=_kernel(f"  {written};\n"), name="lacks.ptx")
    with pytest.raises(ac.CudaError) as e:
        mod.get_function("k")((1,), (1,), (ac.zeros(1, np.int32),))
    assert message in str(e.value) and f"lacks.ptx:{LINE}:" in str(e.value), str(e.value)


CVT_HALF = r"""
#include <cuda_fp16.h>
#include <cuda_bf16.h>
extern "C" __global__ void narrow(const float* x, unsigned short* relu_h, unsigned short* satf_h,
                                  unsigned short* relu_b, float* sat_i, const int* n, int count) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= count) return;
    unsigned short h;
    asm("cvt.rn.relu.f16.f32 %0, %1;" : "=h"(h) : "f"(x[i]));  relu_h[i] = h;
    asm("cvt.rn.satfinite.f16.f32 %0, %1;" : "=h"(h) : "f"(x[i]));  satf_h[i] = h;
    asm("cvt.rn.relu.bf16.f32 %0, %1;" : "=h"(h) : "f"(x[i]));  relu_b[i] = h;
    float f;
    asm("cvt.rn.sat.f32.s32 %0, %1;" : "=f"(f) : "r"(n[i]));  sat_i[i] = f;
}
"""


def _bf16_bits(x):
    """Round-to-nearest-even bf16 bits of float32 values (no NaN among them)."""
    u = x.astype(np.float32).view(np.uint32).astype(np.uint64)
    return ((u + 0x7FFF + ((u >> 16) & 1)) >> 16).astype(np.uint16)


def test_scalar_relu_satfinite_and_integer_sat_conversions(compile_cuda, rng):
    """cvt.relu and .satfinite to one f16 or bf16, and .sat of an integer to a float, were
    lowered as the plain conversions (the modifier dropped)."""
    n = 4096
    x = (rng.standard_normal(n) * np.float32(3e4)).astype(np.float32)
    x[:6] = [np.nan, -0.0, 0.0, 70000.0, -70000.0, 65504.0]
    ints = rng.integers(-3, 4, n).astype(np.int32)
    outs = [poison(n, np.uint16), poison(n, np.uint16), poison(n, np.uint16), poison(n, np.float32)]
    compile_cuda(CVT_HALF, ("-arch=sm_90",), name="narrow.cu").get_function("narrow")(
        (n // 128,), (128,), (ac.asarray(x), *outs, ac.asarray(ints), np.int32(n)))
    relu_h, satf_h, relu_b, sat_i = (o.get() for o in outs)
    with np.errstate(over="ignore", invalid="ignore"):
        want_relu = np.where(x > 0, x, 0).astype(np.float16).view(np.uint16)
        want_satf = np.clip(x, -65504, 65504).astype(np.float16).view(np.uint16)
    np.testing.assert_array_equal(relu_h[1:], want_relu[1:])
    assert relu_h[0] == 0x7FFF
    assert np.isnan(satf_h[:1].view(np.float16)).all()
    np.testing.assert_array_equal(satf_h[1:], want_satf[1:])
    want_b = _bf16_bits(np.where(x[1:] > 0, x[1:], 0))
    np.testing.assert_array_equal(relu_b[1:], want_b)
    assert relu_b[0] == 0x7FFF
    np.testing.assert_array_equal(sat_i, np.clip(ints, 0, 1).astype(np.float32))


PACKED_MIN_MAX = r"""
extern "C" __global__ void packed(const unsigned* a, const unsigned* b, const unsigned* c, unsigned* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    out[6 * i + 0] = __vmins2(a[i], b[i]);                  // min.s16x2
    out[6 * i + 1] = __vmaxs2(a[i], b[i]);                  // max.s16x2
    out[6 * i + 2] = __vminu2(a[i], b[i]);                  // min.u16x2
    out[6 * i + 3] = __vmaxu2(a[i], b[i]);                  // max.u16x2
    out[6 * i + 4] = __vimax_s16x2_relu(a[i], b[i]);        // max.s16x2.relu
    out[6 * i + 5] = __vimin3_s16x2(a[i], b[i], c[i]);      // two min.s16x2
}
"""


def test_min_max_of_packed_16_bit_integers(compile_cuda, rng):
    """min/max .s16x2 and .u16x2 (sm_90; CUB's reductions of 16-bit integers use them): each
    half on its own."""
    n = 4096
    a, b, c = (rng.integers(0, 2**32, n, dtype=np.uint64).astype(np.uint32) for _ in range(3))
    a[:4] = [0x80007FFF, 0xFFFF0000, 0x00018000, 0x7FFF7FFF]
    out = poison(6 * n, np.uint32)
    compile_cuda(PACKED_MIN_MAX, ("-arch=sm_90",), name="packed.cu").get_function("packed")(
        (n // 128,), (128,), (ac.asarray(a), ac.asarray(b), ac.asarray(c), out, np.int32(n)))
    got = out.get().reshape(n, 6)

    def halves(x, dtype):
        return x.view(dtype).reshape(n, 2)

    def pack(h):
        return np.ascontiguousarray(h).view(np.uint32).ravel()
    sa, sb, sc = (halves(x, np.int16) for x in (a, b, c))
    ua, ub = (halves(x, np.uint16) for x in (a, b))
    want = [np.minimum(sa, sb), np.maximum(sa, sb), np.minimum(ua, ub), np.maximum(ua, ub),
            np.maximum(np.maximum(sa, sb), 0).astype(np.int16), np.minimum(np.minimum(sa, sb), sc)]
    for k, w in enumerate(want):
        np.testing.assert_array_equal(got[:, k], pack(w), err_msg=str(k))


# ---------------------------------------------------------------- the vector paths: handed on

PATHS = {"warp runs": warpruns.VECTOR_MODS, "warp regions": warpregions.TAKES, "block programs": blockops.TAKES}


@pytest.mark.parametrize("path", PATHS)
def test_a_vector_path_takes_nothing_the_scalar_path_refuses(path):
    """What a vector path's list has of an instruction's ISA modifiers its handler lowers too:
    a modifier a vector path takes is never one the kernel is refused for."""
    for op, mods in PATHS[path].items():
        assert mods & MODIFIERS[op] <= table.HANDLED[op], (path, op, sorted(mods & MODIFIERS[op] - table.HANDLED[op]))


@pytest.mark.parametrize("path", PATHS)
def test_a_vector_path_hands_on_every_modifier_outside_its_list(path):
    """For each opcode a path has a form for, and each ISA modifier of it outside the path's
    list, the path does not take the instruction."""
    allowed = PATHS[path]
    for op, mods in allowed.items():
        for m in sorted(MODIFIERS[op] - mods):
            st = _bare(op, m)[1]
            assert not table.takes(allowed, st), (path, op, m)


HANDED_ON = r"""
#define FULL 0xffffffffu
__device__ int sat_add(int a, int b) { int s; asm("add.sat.s32 %0, %1, %2;" : "=r"(s) : "r"(a), "r"(b)); return s; }

// a warp's butterfly sum: plain (one run of shuffles) and saturating (add.sat between the
// shuffles, which a run does not take: the shuffles go one by one)
extern "C" __global__ void butterfly(const int* x, int* out) {
    int g = blockIdx.x * blockDim.x + threadIdx.x, s = x[g];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
    out[g] = s;
}
extern "C" __global__ void butterfly_sat(const int* x, int* out) {
    int g = blockIdx.x * blockDim.x + threadIdx.x, s = x[g];
    for (int o = 16; o > 0; o >>= 1) s = sat_add(s, __shfl_xor_sync(FULL, s, o));
    out[g] = s;
}

// a warp sum, then a warp-stride row loop (a warp region), plain and with mul.hi in the loop
extern "C" __global__ void rows(const int* x, int* out, int C) {
    int lane = threadIdx.x & 31, row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int* r = x + (size_t)row * C;
    int s = r[lane];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
    for (int i = lane; i < C; i += 32) out[(size_t)row * C + i] = r[i] * s;
}
extern "C" __global__ void rows_hi(const int* x, int* out, int C) {
    int lane = threadIdx.x & 31, row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const int* r = x + (size_t)row * C;
    int s = r[lane];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(FULL, s, o);
    for (int i = lane; i < C; i += 32) out[(size_t)row * C + i] = __mulhi(r[i], s);
}

// a block's reversal through shared memory (a block program), plain and saturating
extern "C" __global__ void reverse(const int* x, int* out) {
    __shared__ int sh[256];
    int t = threadIdx.x, g = blockIdx.x * blockDim.x + t;
    sh[t] = x[g];
    __syncthreads();
    out[g] = sh[t] + sh[blockDim.x - 1 - t];
}
extern "C" __global__ void reverse_sat(const int* x, int* out) {
    __shared__ int sh[256];
    int t = threadIdx.x, g = blockIdx.x * blockDim.x + t;
    sh[t] = x[g];
    __syncthreads();
    out[g] = sat_add(sh[t], sh[blockDim.x - 1 - t]);
}
"""


@pytest.fixture(scope="module")
def handed_on_ptx():
    return ac.compile(HANDED_ON)


def _sat(v):
    return np.clip(v, -2**31, 2**31 - 1)


def _extreme_ints(rng, n):
    """int32s near both ends, so that sums saturate."""
    return rng.choice(np.array([2**31 - 1, -2**31, 2**30, -2**30, 5, -7], np.int64), n).astype(np.int32)


def _runs(ptx, kernel):
    pfn = next(f for f in parse(ptx, "on.ptx").functions if f.name == kernel)
    return warpruns.find_runs(pfn.body, uniformity.constant_registers(pfn.body))


def test_a_warp_run_hands_a_saturating_add_to_the_rounds(handed_on_ptx, rng):
    assert len(_runs(handed_on_ptx, "butterfly")) == 1
    assert _runs(handed_on_ptx, "butterfly_sat") == []
    x = _extreme_ints(rng, 256)
    out = poison(256, np.int32)
    mod = ac.RawModule(ptx=handed_on_ptx, name="on.ptx")
    mod.get_function("butterfly_sat")((2,), (128,), (ac.asarray(x), out))
    s = x.reshape(-1, 32).astype(np.int64)
    for o in (16, 8, 4, 2, 1):
        s = _sat(s + s[:, np.arange(32) ^ o])
    np.testing.assert_array_equal(out.get(), s.ravel())


def test_a_warp_region_takes_mul_hi(rng, monkeypatch):
    """mul.hi is a form warp regions make (regionops._mul_hi): the high half, against numpy
    (the rounds run the kernel: a block program would take it)."""
    monkeypatch.setenv("ANYCUDA_BLOCK_PROGRAMS", "0")
    regions, _ = made_regions(HANDED_ON)
    assert "rows" in regions and "rows_hi" in regions
    rows, C = 8, 100
    x = rng.integers(-2**31, 2**31, rows * C, dtype=np.int64).astype(np.int32)
    out = poison(rows * C, np.int32)
    ac.RawModule(code=HANDED_ON).get_function("rows_hi")((rows // 4,), (128,), (ac.asarray(x), out, np.int32(C)))
    r = x.reshape(rows, C).astype(np.int64)
    s = r[:, :32].sum(axis=1).astype(np.int32).astype(np.int64)       # the warp sum, wrapped to 32 bits
    np.testing.assert_array_equal(out.get(), ((r * s[:, None]) >> 32).astype(np.int32).ravel())


def test_a_block_program_hands_a_saturating_add_to_the_rounds(handed_on_ptx, rng):
    assert pipeline.block_program_ir(handed_on_ptx, "on.ptx", "reverse", 64)
    with pytest.raises(blockprograms.NotVectorisable, match=r"'add' with \('sat', 's32'\)"):
        pipeline.block_program_ir(handed_on_ptx, "on.ptx", "reverse_sat", 64)
    x = _extreme_ints(rng, 256)
    out = poison(256, np.int32)
    k = ac.RawModule(ptx=handed_on_ptx, name="on.ptx").get_function("reverse_sat")
    k((4,), (64,), (ac.asarray(x), out))
    v = x.reshape(-1, 64).astype(np.int64)
    np.testing.assert_array_equal(out.get(), _sat(v + v[:, ::-1]).ravel())
    assert k.kernel._programs.get((64, 1, 1)) is None


def test_compare_and_compare_op_are_the_scalar_paths():
    """The vector forms compare with the scalar path's own helpers (one definition)."""
    assert warpruns.compare is instructions.compare and warpregions.compare_op is instructions.compare_op
