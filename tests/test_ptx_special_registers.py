"""Every predefined identifier of PTX ISA 9.x (chapter 10's special registers and WARP_SZ),
read by hand-written PTX and checked against what the launch implies on anycuda's device
model: lane, warp and lane masks from each thread's linear index, shared-memory sizes from
the kernel's static and the launch's dynamic bytes, the multiprocessor count the device
reports, a CTA as its own cluster, zero for the performance counters, the environment
registers, the reserved shared memory and the device graph. Output buffers are poisoned.
"""
import time

import numpy as np
import pytest

import anycuda as ac
from anycuda.driver import api
from anycuda.ptx import PtxError
from anycuda.runtime import device as device_info
from conformance import poison

HEADER = ".version 9.0\n.target sm_90\n.address_size 64\n"

# 32-bit registers, one output column each; %is_explicit_cluster is a predicate (selp to 0/1)
U32 = (["laneid", "warpid", "nwarpid", "smid", "nsmid", "clock", "clock_hi", "globaltimer_lo", "globaltimer_hi"]
       + [f"lanemask_{k}" for k in ("eq", "le", "lt", "ge", "gt")]
       + ["dynamic_smem_size", "total_smem_size", "aggr_smem_size"]
       + [f"reserved_smem_offset_{k}" for k in ("begin", "end", "cap", "0", "1")]
       + ["cluster_ctarank", "cluster_nctarank", "is_explicit_cluster", "WARP_SZ"]
       + [f"{r}.{c}" for r in ("clusterid", "nclusterid", "cluster_ctaid", "cluster_nctaid") for c in "xyz"]
       + [f"pm{i}" for i in range(8)] + [f"envreg{i}" for i in range(32)])
U64 = ["gridid", "clock64", "globaltimer", "current_graph_exec"] + [f"pm{i}_64" for i in range(8)]
STATIC_SHARED = 200          # bytes of the kernel's own .shared array


def _read(name):
    """PTX that leaves the value of `name` in %r1 (%rd1 for the 64-bit ones)."""
    if name == "WARP_SZ":
        return "mov.u32 %r1, WARP_SZ;"
    if name == "is_explicit_cluster":
        return "mov.pred %p1, %is_explicit_cluster; selp.u32 %r1, 1, 0, %p1;"
    return f"mov.u64 %rd1, %{name};" if name in U64 else f"mov.u32 %r1, %{name};"


def _stores():
    lines = [_read(n) + f" st.global.u32 [%rd10+{4 * k}], %r1;" for k, n in enumerate(U32)]
    lines += [_read(n) + f" st.global.u64 [%rd11+{8 * k}], %rd1;" for k, n in enumerate(U64)]
    return "\n  ".join(lines)


# Each thread writes row (linear block) * threads per block + (linear thread) of both outputs.
ALL_REGISTERS = HEADER + f"""
.visible .entry all_registers(.param .u64 p32, .param .u64 p64)
{{
  .reg .b32 %r<12>; .reg .b64 %rd<14>; .reg .pred %p<2>;
  .shared .align 16 .b8 own[{STATIC_SHARED}];
  mov.u32 %r2, %tid.x; mov.u32 %r3, %tid.y; mov.u32 %r4, %tid.z;
  mov.u32 %r5, %ntid.x; mov.u32 %r6, %ntid.y; mov.u32 %r7, %ntid.z;
  mad.lo.u32 %r8, %r4, %r6, %r3; mad.lo.u32 %r8, %r8, %r5, %r2;
  mul.lo.u32 %r9, %r5, %r6; mul.lo.u32 %r9, %r9, %r7;
  mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ctaid.y; mov.u32 %r4, %ctaid.z;
  mov.u32 %r5, %nctaid.x; mov.u32 %r6, %nctaid.y;
  mad.lo.u32 %r10, %r4, %r6, %r3; mad.lo.u32 %r10, %r10, %r5, %r2;
  mad.lo.u32 %r11, %r10, %r9, %r8;
  st.shared.u8 [own+{STATIC_SHARED - 1}], %r11;
  ld.param.u64 %rd12, [p32]; ld.param.u64 %rd13, [p64];
  mul.wide.u32 %rd2, %r11, {4 * len(U32)}; add.s64 %rd10, %rd12, %rd2;
  mul.wide.u32 %rd3, %r11, {8 * len(U64)}; add.s64 %rd11, %rd13, %rd3;
  {_stores()}
  ret;
}}
"""


def _column(g, name):
    return g[:, U32.index(name)] if name in U32 else g[:, U64.index(name)]


def _launch(grid, block, dyn):
    nt, nb = int(np.prod(block)), int(np.prod(grid))
    out32, out64 = poison((nb * nt, len(U32)), np.uint32), poison((nb * nt, len(U64)), np.uint64)
    before = time.time_ns()
    ac.RawModule(ptx=ALL_REGISTERS, name="all_registers.ptx").get_function("all_registers")(
        grid, block, (out32, out64), shared_mem=dyn)
    ac.synchronize()
    return out32.get().astype(np.int64), out64.get(), before, time.time_ns()


@pytest.mark.parametrize("grid, block, dyn", [((3, 2, 2), (5, 3, 4), 300),     # a partial last warp, 3-D
                                              ((4, 1, 1), (96, 1, 1), 0),
                                              ((1, 2, 1), (32, 2, 1), 1000)])
def test_every_special_register_in_a_plain_launch(grid, block, dyn):
    g, w, before, after = _launch(grid, block, dyn)
    nt = int(np.prod(block))
    # each row's launch coordinates, in the order the kernel numbers its rows
    bz, by, bx, tz, ty, tx = (a.ravel() for a in np.meshgrid(
        *(np.arange(d) for d in (grid[2], grid[1], grid[0], block[2], block[1], block[0])), indexing="ij"))
    linear = tx + block[0] * (ty + block[1] * tz)
    lane = linear % 32
    bit = np.int64(1) << lane
    want = {
        "laneid": lane, "warpid": linear // 32, "nwarpid": -(-nt // 32), "WARP_SZ": 32,
        "lanemask_eq": bit, "lanemask_lt": bit - 1, "lanemask_le": 2 * bit - 1,
        "lanemask_ge": ~(bit - 1) & 0xFFFFFFFF, "lanemask_gt": ~(2 * bit - 1) & 0xFFFFFFFF,
        "nsmid": ac.Device(0).attributes["MultiProcessorCount"],
        "dynamic_smem_size": dyn,
        # static and dynamic bytes, in the 128-byte allocation units of sm_8x and later
        "total_smem_size": -(-(STATIC_SHARED + dyn) // 128) * 128,
        "aggr_smem_size": -(-(STATIC_SHARED + dyn) // 128) * 128,       # no reserved shared memory
        # no cluster launch: each CTA is a cluster of one
        "clusterid.x": bx, "clusterid.y": by, "clusterid.z": bz,
        "nclusterid.x": grid[0], "nclusterid.y": grid[1], "nclusterid.z": grid[2],
        "cluster_ctarank": 0, "cluster_nctarank": 1, "is_explicit_cluster": 0,
        **{f"cluster_ctaid.{c}": 0 for c in "xyz"}, **{f"cluster_nctaid.{c}": 1 for c in "xyz"},
        **{f"reserved_smem_offset_{k}": 0 for k in ("begin", "end", "cap", "0", "1")},
        **{f"pm{i}": 0 for i in range(8)}, **{f"envreg{i}": 0 for i in range(32)},
        **{f"pm{i}_64": 0 for i in range(8)}, "current_graph_exec": 0,
    }
    for name, value in want.items():
        got = _column(g if name in U32 else w.astype(np.int64), name)
        assert np.array_equal(got, np.broadcast_to(value, got.shape)), f"%{name}: {got[:8]} ..."
    smid = _column(g, "smid")
    assert ((0 <= smid) & (smid < want["nsmid"])).all(), "%smid < %nsmid"
    grid_id = _column(w, "gridid")
    assert (grid_id == grid_id[0]).all() and grid_id[0] > 0, "%gridid: one number for the whole launch"
    # the clocks: %clock_hi read before %clock64 holds its high half or the one before
    clock64 = _column(w, "clock64")
    assert ((clock64 >> 32) - _column(g, "clock_hi").astype(np.uint64) <= 1).all()
    # %globaltimer: nanoseconds of the wall clock, between the host's readings around the launch
    timer = _column(w, "globaltimer").astype(np.int64)
    assert ((before - 10 ** 9 <= timer) & (timer <= after + 10 ** 9)).all()
    hi = _column(g, "globaltimer_hi")
    assert (((timer >> 32) - hi >= 0) & ((timer >> 32) - hi <= 1)).all()


def test_each_launch_gets_a_grid_id_of_its_own():
    ids = [int(_launch((2, 1, 1), (32, 1, 1), 0)[1][0, U64.index("gridid")]) for _ in range(3)]
    assert ids[0] < ids[1] < ids[2], ids


# WARP_SZ wherever an immediate may stand: an operand of arithmetic, a comparison, a
# constant expression and an address offset.
WARP_SIZE_OPERANDS = HEADER + """
.visible .entry warp_size(.param .u64 pin, .param .u64 pout)
{
  .reg .b32 %r<10>; .reg .b64 %rd<6>; .reg .pred %p<2>;
  ld.param.u64 %rd1, [pin]; ld.param.u64 %rd2, [pout];
  mov.u32 %r1, %tid.x;
  rem.u32 %r2, %r1, WARP_SZ;
  div.u32 %r3, %r1, WARP_SZ;
  mad.lo.u32 %r4, %r3, WARP_SZ, %r2;
  setp.lt.u32 %p1, %r2, (WARP_SZ / 2);
  selp.u32 %r5, 1, 0, %p1;
  ld.global.u32 %r6, [%rd1+WARP_SZ];
  mul.wide.u32 %rd3, %r1, 16; add.s64 %rd4, %rd2, %rd3;
  st.global.v4.u32 [%rd4], {%r2, %r4, %r5, %r6};
  ret;
}
"""


def test_warp_size_as_an_immediate():
    data = np.arange(64, dtype=np.uint32) * 3 + 7
    out = poison((80, 4), np.uint32)
    ac.RawModule(ptx=WARP_SIZE_OPERANDS, name="warp_size.ptx").get_function("warp_size")(
        (1,), (80,), (ac.asarray(data), out))
    t = np.arange(80)
    got = out.get()
    assert np.array_equal(got[:, 0], t % 32) and np.array_equal(got[:, 1], t)
    assert np.array_equal(got[:, 2], (t % 32 < 16).astype(np.uint32))
    assert (got[:, 3] == data[32 // 4]).all()          # [in + WARP_SZ] is byte offset 32


# A device function sees the same registers as its kernel (they are read from the thread's frame).
IN_A_FUNCTION = HEADER + """
.func (.param .b32 r) lane_and_cluster()
{
  .reg .b32 %t<4>;
  mov.u32 %t1, %laneid; mov.u32 %t2, %clusterid.x; mov.u32 %t3, %cluster_nctarank;
  mad.lo.u32 %t1, %t2, 1000, %t1; mad.lo.u32 %t1, %t3, 100000, %t1;
  st.param.b32 [r], %t1;
  ret;
}
.visible .entry from_a_function(.param .u64 pout)
{
  .reg .b32 %r<6>; .reg .b64 %rd<5>;
  ld.param.u64 %rd1, [pout];
  {
    .param .b32 got;
    call (got), lane_and_cluster, ();
    ld.param.b32 %r1, [got];
  }
  mov.u32 %r2, %tid.x; mov.u32 %r3, %ctaid.x; mov.u32 %r4, %ntid.x;
  mad.lo.u32 %r5, %r3, %r4, %r2;
  mul.wide.u32 %rd2, %r5, 4; add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r1;
  ret;
}
"""


def test_special_registers_in_a_device_function():
    out = poison(3 * 40, np.uint32)
    ac.RawModule(ptx=IN_A_FUNCTION, name="function.ptx").get_function("from_a_function")((3,), (40,), (out,))
    t, b = np.arange(40), np.arange(3)
    assert np.array_equal(out.get(), (100000 + 1000 * b[:, None] + t[None, :] % 32).ravel())


def _one_register_kernel(name, directives=""):
    """A kernel `k` whose every thread writes %<name> (a 32-bit register or a predicate) to out[thread]."""
    read = _read(name).replace("%p1", "%q")
    return HEADER + f""".visible .entry k(.param .u64 pout) {directives}
{{
  .reg .b32 %r<4>; .reg .b64 %rd<4>; .reg .pred %q;
  ld.param.u64 %rd1, [pout];
  {read}
  mov.u32 %r2, %ctaid.x; mov.u32 %r3, %ntid.x; mul.lo.u32 %r2, %r2, %r3; mov.u32 %r3, %tid.x; add.u32 %r2, %r2, %r3;
  mul.wide.u32 %rd2, %r2, 4; add.s64 %rd3, %rd1, %rd2;
  st.global.u32 [%rd3], %r1;
  ret;
}}
"""


@pytest.mark.parametrize("directives", [".explicitcluster", ".reqnctapercluster 1, 1, 1"])
def test_a_kernel_declared_with_clusters_of_one_is_an_explicit_cluster(directives):
    out = poison(64, np.uint32)
    ac.RawModule(ptx=_one_register_kernel("is_explicit_cluster", directives)).get_function("k")((2,), (32,), (out,))
    assert (out.get() == 1).all()


@pytest.fixture
def driver_module():
    """load(ptx) -> the handle of its kernel `k`, in device 0's primary context."""
    api.cuInit(0)
    api.cuCtxSetCurrent(api.cuDevicePrimaryCtxRetain(0))
    loaded = []

    def load(ptx):
        loaded.append(api.cuModuleLoadData(ptx.encode()))
        return api.cuModuleGetFunction(loaded[-1], "k")
    yield load
    for mod in loaded:
        api.cuModuleUnload(mod)
    api.cuDevicePrimaryCtxRelease(0)


def _driver_launch(fn, out, grid, attributes=None, cooperative=False):
    params = np.array([out.data.ptr], np.uint64).tobytes()
    if attributes is not None:
        api.cuLaunchKernelEx(fn, (grid, 1, 1), (32, 1, 1), 0, 0, params, attributes)
    elif cooperative:
        api.cuLaunchCooperativeKernel(fn, (grid, 1, 1), (32, 1, 1), 0, 0, params)
    else:
        api.cuLaunchKernel(fn, (grid, 1, 1), (32, 1, 1), 0, 0, params)
    api.cuCtxSynchronize()
    return out.get()


def test_a_launch_with_a_cluster_shape_is_an_explicit_cluster(driver_module):
    fn = driver_module(_one_register_kernel("is_explicit_cluster"))
    out = poison(64, np.uint32)
    assert (_driver_launch(fn, out, 2, [(4, (1, 1, 1))]) == 1).all()       # CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION
    assert (_driver_launch(fn, out, 2, []) == 0).all()
    assert (_driver_launch(fn, out, 2) == 0).all()


def test_smid_stays_below_nsmid_when_blocks_outnumber_the_multiprocessors(driver_module):
    """A cooperative launch runs each block on a thread of its own; %smid still names one of
    the device's multiprocessors, and %nsmid is the count the device reports."""
    processors = api.cuDeviceGetAttribute(16, 0)         # CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT
    assert processors == device_info.multiprocessor_count(0)
    grid = 3 * processors
    smid, nsmid = (driver_module(_one_register_kernel(r)) for r in ("smid", "nsmid"))
    for cooperative in (False, True):
        out = poison(grid * 32, np.uint32)
        assert (_driver_launch(nsmid, out, grid, cooperative=cooperative) == processors).all()
        assert (_driver_launch(smid, out, grid, cooperative=cooperative) < processors).all()


@pytest.mark.parametrize("text, fragment", [
    ("mov.u32 %r1, %foo;", "%foo"),                          # no such register
    ("mov.u32 %r1, %envreg32;", "%envreg32"),                # there are 32: %envreg0 .. %envreg31
    ("mov.u32 %r1, %reserved_smem_offset_2;", "%reserved_smem_offset_2"),    # _<2> is _0 and _1
    ("mov.u32 %r1, %laneid.x;", "%laneid has no components"),
    ("mov.u32 %r1, %clusterid.w;", "%clusterid has components .x, .y and .z"),
])
def test_unknown_special_registers_are_refused(text, fragment):
    ptx = _one_register_kernel("laneid").replace("mov.u32 %r1, %laneid;", text)
    with pytest.raises((PtxError, ac.CudaError)) as e:
        ac.RawModule(ptx=ptx, name="unknown.ptx").get_function("k")((1,), (1,), (ac.zeros(1, np.uint32),))
        ac.synchronize()
    if isinstance(e.value, ac.CudaError):
        assert e.value.code == ac.CUresult.CUDA_ERROR_INVALID_PTX
    assert fragment in str(e.value) and "unknown.ptx:" in str(e.value), str(e.value)
