"""Blocks run in bands (blockfunction._BandFunction): a kernel without sites, shared memory or
a visible block order (BlockPlan.bands), launched with blocks of more than one row of threads,
runs the rest of each chunk's row of the grid as one band, a row of threads of each block in
turn. Checked here: which kernels get bands (the
lowered module's functions), and that every thread of every block runs once with its own
block index, against numpy with poisoned outputs: 2-D and 3-D grids whose chunks start and end
inside rows, partial blocks at the edges, a stencil whose border blocks take a branch the
others do not (runs of blocks that pass the probe alike), and a fault that names its block."""
import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler.lowering.module import ModuleLowering
from anycuda.cudac import compile_to_ptx
from anycuda.ptx.parser import parse
from conformance import poison

SOURCE = r"""
// each thread writes who it is where it is: block and thread indices, so that a thread run
// with another block's index, twice or never shows
extern "C" __global__ void who(int* out, int w, int h, int d) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    int z = blockIdx.z * blockDim.z + threadIdx.z;
    if (x >= w || y >= h || z >= d) return;
    out[(z * h + y) * w + x] = ((blockIdx.z * 64 + blockIdx.y) * 64 + blockIdx.x) * 4096
                               + (threadIdx.z * 16 + threadIdx.y) * 16 + threadIdx.x;
}

// the 5-point step of the suite's stencil: the border copied, a guard at the partial blocks
extern "C" __global__ void stencil5(const float* in, float* out, int nx, int ny) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= nx || y >= ny) return;
    int i = y * nx + x;
    if (x == 0 || y == 0 || x == nx - 1 || y == ny - 1) out[i] = in[i];
    else out[i] = 0.5f * in[i] + 0.125f * ((in[i - 1] + in[i + 1]) + (in[i - nx] + in[i + nx]));
}

// the threads of column `mark` leave at once, as those past the edges do: a run of blocks that
// pass the bounds alike ends at the block holding it, wherever in the row that is
extern "C" __global__ void marked(int* out, int w, int h, int mark) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h || x == mark) return;
    out[y * w + x] = y * w + x;
}

// the threads of every other stripe of columns leave at once: with stripes a block wide, runs
// of one block alike, more of them in a band than are taken row by row together
extern "C" __global__ void striped(int* out, int w, int h, int stripe) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    if (x >= w || y >= h || (x / stripe) % 2 == 1) return;
    out[y * w + x] = y * w + x;
}

// one thread of block (5, 2) reads through the pointer it is given: a fault in a band's middle
extern "C" __global__ void faulting(const int* bad, int* out, int w) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    int v = 1;
    if (blockIdx.x == 5 && blockIdx.y == 2 && threadIdx.x == 3 && threadIdx.y == 1) v = *bad;
    out[y * w + x] = v;
}

// shared memory (each thread its own slot, read back at an index from memory): no bands
extern "C" __global__ void through_shared(const float* in, const int* own, float* out, int n) {
    __shared__ float slot[256];
    int t = threadIdx.y * blockDim.x + threadIdx.x;
    int i = (blockIdx.y * gridDim.x + blockIdx.x) * blockDim.x * blockDim.y + t;
    if (i < n) { slot[t] = 2.0f * in[i]; out[i] = slot[own[i]] + 1.0f; }
}

// an atomic: the blocks' order could show, no bands
extern "C" __global__ void counting(int* counter, int* out, int w) {
    int x = blockIdx.x * blockDim.x + threadIdx.x, y = blockIdx.y * blockDim.y + threadIdx.y;
    out[y * w + x] = atomicAdd(counter, 1);
}
"""


@pytest.fixture(scope="module")
def mod():
    return ac.RawModule(code=SOURCE, name="bands.cu")


def test_which_kernels_run_in_bands():
    lowered = ModuleLowering(parse(compile_to_ptx(SOURCE, name="bands.cu"), "bands.ptx"), "bands.ptx").lower()
    names = {fn.name for fn in lowered.mod.functions}
    assert len(lowered.kernels) == 7
    banded = {name for k, name in enumerate(lowered.kernels) if f"ptx.k{k}.band" in names}
    assert banded == {"who", "stencil5", "marked", "striped", "faulting"}


def _grid(shape, block):
    return tuple((n + b - 1) // b for n, b in zip(shape, block))


def _who(w, h, d, block):
    x, y, z = np.meshgrid(np.arange(w), np.arange(h), np.arange(d), indexing="ij")
    bx, by, bz = x // block[0], y // block[1], z // block[2]
    tx, ty, tz = x % block[0], y % block[1], z % block[2]
    v = ((bz * 64 + by) * 64 + bx) * 4096 + (tz * 16 + ty) * 16 + tx
    return v.transpose(2, 1, 0).astype(np.int32)


@pytest.mark.parametrize("size, block", [
    ((200, 120, 1), (8, 4, 1)),       # 25 x 30 blocks: chunks of several blocks start mid-row
    ((203, 61, 1), (16, 8, 1)),       # partial blocks at both edges
    ((64, 40, 12), (8, 4, 2)),        # a 3-D grid: rows of blocks in several planes
    ((97, 33, 5), (4, 4, 4)),         # 3-D blocks, partial in every direction
    ((30, 500, 1), (16, 2, 1)),       # a grid two blocks wide: short bands
    ((1000, 1, 1), (32, 1, 1)),       # blocks of one row keep to the block function
    ((100, 60, 1), (16, 1, 1)),
])
def test_every_thread_once_with_its_own_index(mod, size, block):
    w, h, d = size
    out = poison(w * h * d, np.int32)
    mod.get_function("who")(_grid(size, block), block, (out, np.int32(w), np.int32(h), np.int32(d)))
    np.testing.assert_array_equal(out.get().reshape(d, h, w), _who(w, h, d, block))


@pytest.mark.parametrize("shape, block", [((256, 96), (16, 16)), ((203, 77), (16, 8)), ((64, 300), (32, 4)),
                                          ((40, 40), (8, 8))])
def test_stencil_with_border_blocks(mod, rng, shape, block):
    """Each row of blocks starts and ends with blocks that take the border test: the band runs
    them apart from the blocks between, which run without it."""
    nx, ny = shape
    a = rng.standard_normal((ny, nx)).astype(np.float32)
    out = poison(nx * ny, np.float32)
    mod.get_function("stencil5")(_grid(shape, block), block, (ac.asarray(a), out, np.int32(nx), np.int32(ny)))
    want = a.copy()
    want[1:-1, 1:-1] = np.float32(0.5) * a[1:-1, 1:-1] + np.float32(0.125) * (
        (a[1:-1, :-2] + a[1:-1, 2:]) + (a[:-2, 1:-1] + a[2:, 1:-1]))
    np.testing.assert_allclose(out.get().reshape(ny, nx), want, rtol=1e-6, atol=1e-6)


MARKED_WIDTH = 8192         # 512 blocks of 16 x 8 in a row: bands of many blocks, whatever the workers' chunks


@pytest.mark.parametrize("mark", [0, 15, 16, 17, 100, 500, 591, 592, 1009, 4095, 4096, 6007, 8190, 8191, -1])
def test_runs_end_at_the_block_that_takes_a_branch(mod, mark):
    """A band's blocks that the bounds pass are taken in spans of 1, 2, 4, ... blocks, then of
    halving length (bands._lengthen_by_spans): the block holding column `mark` (or none, -1)
    must still run with its exit guard, wherever the spans meet it: at a row's first or last
    block, after a span that grew, inside one that halves. The marked column stays poisoned."""
    w, h, block = MARKED_WIDTH, 16, (16, 8)
    out = poison(w * h, np.int32)
    mod.get_function("marked")(_grid((w, h), block), block, (out, np.int32(w), np.int32(h), np.int32(mark)))
    want = np.arange(w * h, dtype=np.int32).reshape(h, w)
    if mark >= 0:
        want[:, mark] = poison(1, np.int32).get()[0]
    np.testing.assert_array_equal(out.get().reshape(h, w), want)


@pytest.mark.parametrize("stripe, block", [(16, (16, 8)), (32, (16, 8)), (8, (8, 4)), (48, (16, 4))])
def test_runs_taken_together_row_by_row(mod, stripe, block):
    """A band's runs of blocks alike are taken RUNS_TOGETHER at a time, row by row: stripes
    of columns whose threads leave make runs of one or a few blocks, three times as many in a
    row of the grid as are taken together. Each thread that stays writes its own index once,
    the others' places stay poisoned."""
    from anycuda.compiler.simt import bands
    w, h = 3 * bands.RUNS_TOGETHER * 2 * stripe + 5, 3 * block[1] + 1
    out = poison(w * h, np.int32)
    mod.get_function("striped")(_grid((w, h), block), block, (out, np.int32(w), np.int32(h), np.int32(stripe)))
    want = np.arange(w * h, dtype=np.int32).reshape(h, w)
    want[:, (np.arange(w) // stripe) % 2 == 1] = poison(1, np.int32).get()[0]
    np.testing.assert_array_equal(out.get().reshape(h, w), want)


def test_spans_are_what_the_runs_take(monkeypatch):
    """With bounds that pass every span of more than one block (and a fresh compile), a span
    that covers the marked column runs it without its guard, which then writes it: the
    spans' answer is what a run's blocks skip their own tests on. (A marked block that
    starts a run, or that the spans reach alone, keeps its guard: some of the marks do.)"""
    from llvmlite import ir
    from anycuda.compiler.simt import probebounds
    monkeypatch.setenv("ANYCUDA_CACHE", "0")
    real = probebounds._Evaluator.run

    def spans_pass(self):
        b, proven = self.b, real(self)
        return b.or_(proven, b.icmp_unsigned(">", self.more_x, ir.Constant(ir.IntType(32), 0)))
    monkeypatch.setattr(probebounds._Evaluator, "run", spans_pass)
    marked = ac.RawModule(code="// spans always pass\n" + SOURCE, name="bands_spans.cu").get_function("marked")
    w, h, block = MARKED_WIDTH, 8, (16, 8)
    written = []
    for mark in range(40, w, 397):
        out = poison(w * h, np.int32)
        marked(_grid((w, h), block), block, (out, np.int32(w), np.int32(h), np.int32(mark)))
        written.append((out.get().reshape(h, w)[:, mark] == np.arange(h) * w + mark).all())
    assert sum(written) >= len(written) // 2, written


def test_a_fault_names_its_block(mod):
    """A fault in the middle of a band is reported in the block where it happened, not the
    band's first."""
    w, h, block = 1024, 128, (16, 8)      # 64 x 16 blocks: chunks of several blocks, bands of as many
    grid = _grid((w, h), block)
    out = ac.zeros(w * h, np.int32)
    with pytest.raises(ac.CudaError) as e:
        mod.get_function("faulting")(grid, block, (np.uint64(16), out, np.int32(w)))
        ac.synchronize()
    assert f"block {2 * grid[0] + 5}" in str(e.value), str(e.value)


def test_kernels_without_bands_still_right(mod, rng):
    n, block = 64 * 40, (16, 16)
    x = rng.standard_normal(n).astype(np.float32)
    out = poison(n, np.float32)
    own = ac.asarray(np.tile(np.arange(256, dtype=np.int32), n // 256))
    mod.get_function("through_shared")((5, 2), block, (ac.asarray(x), own, out, np.int32(n)))
    np.testing.assert_array_equal(out.get(), np.float32(2) * x + np.float32(1))
    counter, tickets = ac.zeros(1, np.int32), poison(64 * 32, np.int32)
    mod.get_function("counting")((4, 4), (16, 8), (counter, tickets, np.int32(64)))
    np.testing.assert_array_equal(np.sort(tickets.get()), np.arange(64 * 32))
