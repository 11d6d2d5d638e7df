"""Streaming stores (compiler/cpu/streamstores.py): which stores are candidates, how the
optimised code makes them non-temporal, and that kernels whose launches use them compute
what numpy does, on aligned and misaligned outputs (poisoned first)."""
import platform
import re

import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler.analysis import memory
from anycuda.compiler.cpu import streamstores
from anycuda.compiler.lowering.module import ModuleLowering
from anycuda.cudac import compile_to_ptx
from anycuda.ptx.parser import parse
from anycuda.runtime import program
from conformance import KERNELS, load_cuda, poison

x86_only = pytest.mark.skipif(platform.machine() not in ("x86_64", "AMD64"),
                              reason="streaming stores are made on x86-64 hosts only")

SOURCE = r"""
extern "C" __global__ void add(const float* a, const float* b, float* c, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) c[i] = a[i] + b[i];
}
// reads the line it writes: not a candidate
extern "C" __global__ void axpy(int n, float s, const float* x, float* y) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) y[i] = s * x[i] + y[i];
}
// writes its output, then reads it back through other registers (softmax's normalisation)
extern "C" __global__ void scale_rows(const float* x, float* y, int c) {
    float* row = y + blockIdx.x * c;
    float s = 0.0f;
    for (int i = threadIdx.x; i < c; i += blockDim.x) { row[i] = x[blockIdx.x * c + i]; s += row[i]; }
    for (int i = threadIdx.x; i < c; i += blockDim.x) row[i] *= 0.5f;
}
// a block program's interleaved stores (scan's `out[4 * t + k]`)
extern "C" __global__ void spread4(const int* in, int* out) {
    __shared__ int s[256];
    int t = threadIdx.x, base = blockIdx.x * 1024;
    s[t] = in[blockIdx.x * 256 + t];
    __syncthreads();
    int v = s[255 - t];
    for (int k = 0; k < 4; ++k) out[base + 4 * t + k] = v + k;
}
"""

RELEASE_SOURCE = r"""
extern "C" __global__ void publish(float* data, unsigned* flag, unsigned* count, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i < n) data[i] = 2.0f * i;
    if (threadIdx.x == 0) {
        asm volatile("atom.release.gpu.global.add.u32 _, [%0], 1;" :: "l"(count) : "memory");
        asm volatile("st.release.gpu.global.u32 [%0], %1;" :: "l"(flag), "r"(1u) : "memory");
    }
}
"""


def _kernel(source, name):
    return next(f for f in parse(compile_to_ptx(source), "s.ptx").functions if f.name == name)


# (tests/kernels/programs.cu has transpose's shape: four stores per thread after a tile in
# shared memory)
PROGRAMS = (KERNELS / "programs.cu").read_text()


@pytest.mark.parametrize("source, name, nbytes", [(SOURCE, "add", 4), (SOURCE, "axpy", 0), (SOURCE, "scale_rows", 0),
                                                  (SOURCE, "spread4", 16), (PROGRAMS, "transpose", 16)])
def test_streaming_store_bytes(source, name, nbytes):
    """What a thread stores into buffers the kernel does not read: the launch's choice.
    axpy reads the address it writes; scale_rows reads its output buffer back elsewhere."""
    fn = _kernel(source, name)
    assert memory.streaming_store_bytes(fn.body, [p.name for p in fn.params]) == nbytes


def test_launch_choice(monkeypatch):
    big = program.last_level_cache_bytes() + 4
    monkeypatch.delenv("ANYCUDA_STREAM_STORES", raising=False)
    assert program.streams_output(big) and not program.streams_output(big - 8)
    monkeypatch.setenv("ANYCUDA_STREAM_STORES", "0")
    assert not program.streams_output(big)
    monkeypatch.setenv("ANYCUDA_STREAM_STORES", "1")
    assert program.streams_output(0)
    monkeypatch.delenv("ANYCUDA_STREAM_STORES")
    assert program.streams_output(0, big) and not program.streams_output(0, big - 8)


def test_pointed_bytes_counts_each_buffer_once():
    a, b = ac.zeros(1000, np.float32), ac.zeros(24, np.uint8)
    params = b"".join(int(v).to_bytes(8, "little") for v in (a.data, b.data + 8, a.data + 40, 12345))
    assert program.pointed_bytes(params, [0, 8, 16, 24]) == 4000 + 24
    assert program.pointed_bytes(params, [24]) == 0          # no device address


# a store loop: one store per thread as the kernel is written, c / blockDim.x as it runs
ROWS = r"""
extern "C" __global__ void double_rows(const float* x, float* y, int c) {
    for (int i = threadIdx.x; i < c; i += blockDim.x) y[blockIdx.x * c + i] = 2.0f * x[blockIdx.x * c + i];
}
"""


@pytest.mark.parametrize("rows,streams", [(4, 0), (64, 1)])
def test_launch_choice_by_buffers(monkeypatch, rng, rows, streams):
    """A launch whose threads store less than the last-level cache holds, as counted, still
    streams where the buffers it points into are larger (here a cache of 64 KB)."""
    monkeypatch.delenv("ANYCUDA_STREAM_STORES", raising=False)
    monkeypatch.setattr(program, "last_level_cache_bytes", lambda: 1 << 16)
    choices = []
    decide = program.KernelImage._choices_by_buffers
    monkeypatch.setattr(program.KernelImage, "_choices_by_buffers",
                        lambda self, params: choices.append(decide(self, params)[0]) or decide(self, params))
    fn = _kernel(ROWS, "double_rows")
    assert memory.streaming_store_bytes(fn.body, [p.name for p in fn.params]) == 4
    c = 1000
    x = rng.standard_normal((rows, c)).astype(np.float32)
    y = poison(rows * c, np.float32)
    ac.RawModule(code=ROWS).get_function("double_rows")((rows,), (64,), (ac.asarray(x), y, np.int32(c)))
    np.testing.assert_array_equal(y.get().reshape(rows, c), 2 * x)
    assert choices == [streams]         # 64 threads x 4 bytes each time; 2 x 16 or 256 KB of buffers


MARKED = """
@"anycuda.stream_stores" = internal global i32 0, align 4
define void @f(ptr %p, ptr %q, <16 x float> %v, <2 x float> %w) {
  store <16 x float> %v, ptr %p, align 4, !alias.scope !3, !llvm.access.group !9
  store <16 x float> %v, ptr %q, align 4, !alias.scope !5
  store <16 x float> %v, ptr %q, align 4
  store <2 x float> %w, ptr %p, align 4, !alias.scope !3
  ret void
}
!0 = !{!"anycuda streaming store domain"}
!1 = !{!"anycuda streaming store", !0}
!2 = distinct !{!2, !"inlined"}
!3 = !{!1, !2}
!4 = distinct !{!4, !"other"}
!5 = !{!4}
!9 = distinct !{}
"""


def test_rewrite_takes_marked_vector_stores_only():
    """A marked store (here in a list the inliner extended) of 16 bytes or more becomes a
    call of the streaming helper; other scopes, unmarked and narrow stores stay."""
    out = streamstores.rewrite(MARKED)
    body = out.split("define void @f", 1)[1].split("}", 1)[0]
    assert body.count("call void @\"anycuda.stream.") == 1
    assert "call void @\"anycuda.stream.16xfloat.a4\"(<16 x float> %v, ptr %p)" in body
    assert body.count("store <16 x float>") == 2 and "store <2 x float> %w" in body
    assert "!nontemporal" in out and "align 64" in out
    assert streamstores.rewrite(MARKED.replace("anycuda streaming store", "x")) == MARKED.replace(
        "anycuda streaming store", "x")


def _optimised_ir(monkeypatch, tmp_path, source):
    from anycuda.compiler.build import jit
    from anycuda.compiler.lowering.module import ModuleLowering
    dump = tmp_path / "opt.ll"
    dump.unlink(missing_ok=True)
    monkeypatch.setenv("ANYCUDA_DUMP_OPT_IR", str(dump))
    ptx = compile_to_ptx(source)
    jit.compile_to_object(str(ModuleLowering(parse(ptx, "s.ptx"), "s.ptx").lower().mod), "s")
    return dump.read_text()


def _functions(text):
    """{name: text} of the functions of an LLVM module's text."""
    return {chunk.split("@", 1)[1].split("(", 1)[0]: chunk for chunk in text.split("\ndefine ")[1:]}


def _blocks_code(functions, k):
    """The optimised code of kernel k's blocks: its block function and its uniform rounds'
    functions (simt/rounds.py), or for a kernel without sites the loop over a chunk's blocks
    that the block function is inlined in."""
    if f"ptx.k{k}.block" not in functions:
        return functions[f"ptx.k{k}.blocks"]
    return "\n".join(code for name, code in functions.items()
                     if name == f"ptx.k{k}.block" or re.fullmatch(rf"ptx\.k{k}\.(round|run)\d+", name))


@x86_only
def test_optimised_code_has_streaming_stores(monkeypatch, tmp_path):
    """add's and transpose's vector stores have a non-temporal form in the optimised code;
    axpy's and scale_rows's none; every worker ends with an SFENCE."""
    functions = _functions(_optimised_ir(monkeypatch, tmp_path, SOURCE))
    k = {name: i for i, name in enumerate(("add", "axpy", "scale_rows", "spread4"))}
    nontemporal = lambda name: "!nontemporal" in _blocks_code(functions, k[name])
    assert nontemporal("add") and not nontemporal("axpy") and not nontemporal("scale_rows")
    for name in k:
        assert "llvm.x86.sse.sfence" in functions[f"ptx.k{k[name]}.worker"]
    kernels = [f.name for f in parse(compile_to_ptx(PROGRAMS), "p.ptx").functions if f.is_kernel]
    functions = _functions(_optimised_ir(monkeypatch, tmp_path, PROGRAMS))
    assert "!nontemporal" in _blocks_code(functions, kernels.index('transpose'))


@x86_only
def test_release_is_fenced(monkeypatch, tmp_path):
    """st.release and atom.release wait for streaming stores (an SFENCE under the flag)."""
    block = _blocks_code(_functions(_optimised_ir(monkeypatch, tmp_path, RELEASE_SOURCE)), 0)
    assert block.count("call void @llvm.x86.sse.sfence()") >= 2
    assert "load atomic i32, ptr @anycuda.stream_stores" in block


@pytest.fixture(params=["1", "0", ""], ids=["streaming", "cached", "auto"])
def stream_choice(request, monkeypatch):
    monkeypatch.setenv("ANYCUDA_STREAM_STORES", request.param)
    monkeypatch.setenv("ANYCUDA_JIT", "optimised")
    return request.param


@pytest.mark.parametrize("offset", [0, 1, 3])
def test_add(stream_choice, rng, offset):
    """c = a + b into an output that starts `offset` floats past an allocation: aligned
    vectors stream, misaligned ones take the plain store."""
    m = ac.RawModule(code=SOURCE)
    n = 3 * 4096 + 37
    a, b = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    whole = poison(n + 16, np.float32)
    m.get_function("add")(((n + 255) // 256,), (256,), (ac.asarray(a), ac.asarray(b), whole.data + 4 * offset, np.int32(n)))
    got = whole.get()
    np.testing.assert_array_equal(got[offset:offset + n], a + b)
    assert np.isnan(got[:offset]).all() and np.isnan(got[offset + n:]).all()


def test_axpy_and_transpose(stream_choice, rng):
    m = ac.RawModule(code=SOURCE)
    n = 5000
    x, y = (rng.standard_normal(n).astype(np.float32) for _ in range(2))
    dy = ac.asarray(y)
    m.get_function("axpy")(((n + 127) // 128,), (128,), (np.int32(n), np.float32(1.5), ac.asarray(x), dy))
    np.testing.assert_allclose(dy.get(), 1.5 * x.astype(np.float64) + y, rtol=1e-6, atol=1e-7)   # (contracted)
    rows, cols = 200, 131
    t = rng.standard_normal((rows, cols)).astype(np.float32)
    out = poison(rows * cols, np.float32)
    load_cuda("programs").get_function("transpose")(((cols + 31) // 32, (rows + 31) // 32), (32, 8),
                                (ac.asarray(t), out, np.int32(rows), np.int32(cols)))
    np.testing.assert_array_equal(out.get().reshape(cols, rows), t.T)


def test_block_program_stores(stream_choice, rng):
    m = ac.RawModule(code=SOURCE)
    blocks = 40
    x = rng.integers(-1000, 1000, blocks * 256).astype(np.int32)
    out = poison(blocks * 1024, np.int32)
    m.get_function("spread4")((blocks,), (256,), (ac.asarray(x), out))
    v = x.reshape(blocks, 256)[:, ::-1]
    np.testing.assert_array_equal(out.get().reshape(blocks, 256, 4), v[:, :, None] + np.arange(4))


def test_release_publishes(stream_choice):
    m = ac.RawModule(code=RELEASE_SOURCE)
    n = 10_000
    data = poison(n, np.float32)
    flag, count = ac.zeros(1, np.uint32), ac.zeros(1, np.uint32)
    m.get_function("publish")(((n + 255) // 256,), (256,), (data, flag, count, np.int32(n)))
    np.testing.assert_array_equal(data.get(), 2.0 * np.arange(n, dtype=np.float32))
    assert flag.get()[0] == 1 and count.get()[0] == (n + 255) // 256


# a row per warp, as layernorm's: a sum through shuffles, then a store loop into a buffer the
# kernel does not read, which a warp region runs in lockstep with prefetches ahead
CENTER_ROWS = r"""
extern "C" __global__ void center_rows(const float* x, float* y, int c) {
    int lane = threadIdx.x & 31, row = blockIdx.x * (blockDim.x >> 5) + (threadIdx.x >> 5);
    const float* r = x + (size_t)row * c;
    float s = 0.0f;
    for (int i = lane; i < c; i += 32) s += r[i];
    for (int o = 16; o > 0; o >>= 1) s += __shfl_xor_sync(0xffffffff, s, o);
    float m = s / c;
    float* out = y + (size_t)row * c;
    for (int i = lane; i < c; i += 32) out[i] = r[i] - m;
}
"""


def _blocks(function_text):
    """{label: its instructions' text} of one LLVM function's text."""
    parts = re.split(r'\n"?([\w.]+)"?:', "\n" + function_text.split("{", 1)[1])
    return dict(zip(parts[1::2], parts[2::2]))


@x86_only
def test_write_prefetches_wait_for_no_streaming():
    """A prefetch for writing ahead of a candidate store runs only in launches that do not
    stream (it would read for ownership the line that a streaming store writes whole)."""
    text = str(ModuleLowering(parse(compile_to_ptx(CENTER_ROWS), "c.ptx"), "c").lower().mod)
    write_prefetch = re.compile(r'@"llvm\.prefetch\.p0"\([^,]+, i32 1,')
    checked = 0
    for function in text.split("\ndefine ")[1:]:
        blocks = _blocks(function)
        for label, body in blocks.items():
            if not write_prefetch.search(body):
                continue
            entered_from = [b for b in blocks.values() if re.search(rf'br i1 [^,]+, label %"?{re.escape(label)}"?,', b)]
            assert len(entered_from) == 1 and "load atomic i32, i32* @\"anycuda.stream_stores\"" in entered_from[0]
            checked += 1
    assert checked >= 2          # the store loop and its unrolled copy


def test_center_rows(stream_choice, rng):
    rows, c = 24, 777
    x = rng.standard_normal((rows, c)).astype(np.float32)
    y = poison(rows * c, np.float32)
    ac.RawModule(code=CENTER_ROWS).get_function("center_rows")((rows // 4,), (128,), (ac.asarray(x), y, np.int32(c)))
    want = x - x.astype(np.float64).mean(axis=1, keepdims=True)
    np.testing.assert_allclose(y.get().reshape(rows, c), want, rtol=1e-5, atol=1e-5)
