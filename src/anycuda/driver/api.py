"""The driver API calls anycuda implements so far, with CUDA's semantics.

Each function mirrors one C entry point; pointer arguments arrive as ints, handles are
ints from one table, and failures raise CudaError (the shim returns its code).
"""
from __future__ import annotations

import ctypes
import re
import struct
import threading
from dataclasses import dataclass, field

from .. import fatbin
from ..ptx.errors import UnsupportedVersion
from ..runtime import device as device_info
from ..runtime import memory, profile, sanitizer
from ..runtime.errors import CudaError, CUresult
from ..runtime.program import load_program, loading_mode
from ..runtime.stream import (Event, Stream, default_stream, discard_errors, get_elapsed_time, per_thread_stream,
                              synchronize_all, wait_idle)

# The CUDA version the driver reports: the newest whose runtime, NVRTC and Python stacks anycuda
# is tested with (the test extra's wheels). A real driver also says by it which PTX ISA it
# loads; anycuda compiles PTX of any ISA version (an instruction it lacks fails at launch,
# naming it), so reporting less only makes NVRTC's users warn that their PTX will not load.
DRIVER_VERSION = 13050

_lock = threading.Lock()
_state = {"initialized": False}
_handles = {}                   # handle -> object
_next = [0x1000]
_current = threading.local()


def flush_device_output() -> None:
    """Write what kernels printed so far (CUDA flushes at launches, blocking copies,
    synchronisation, module unloading and context teardown)."""
    from ..runtime.program import flush_device_output as flush
    flush()


def _new_handle(obj) -> int:
    with _lock:
        h = _next[0]
        _next[0] += 16
        _handles[h] = obj
        return h


def _get(handle: int, kind):
    obj = _handles.get(handle)
    if not isinstance(obj, kind):
        raise CudaError(CUresult.CUDA_ERROR_INVALID_HANDLE, f"0x{handle:x} is not a live {kind.__name__}")
    return obj


def _require_init():
    if not _state["initialized"]:
        raise CudaError(CUresult.CUDA_ERROR_NOT_INITIALIZED, "cuInit has not been called")


class Context:
    def __init__(self, device: int, primary: bool):
        self.device = device
        self.primary = primary
        self.sticky = None          # the fault that made this context unusable, as on a GPU
        self.peers = set()          # contexts whose memory this one was given access to (cuCtxEnablePeerAccess)


def _current_context():
    """The calling thread's current Context, or None."""
    ctx = _handles.get(getattr(_current, "ctx", None))
    return ctx if isinstance(ctx, Context) else None


def _context_device():
    """The device of the calling thread's current context, or None without one."""
    ctx = _current_context()
    return None if ctx is None else ctx.device


def _current_device() -> int:
    """The device of the calling thread's current context (0 without one)."""
    dev = _context_device()
    return 0 if dev is None else dev


device_info.context_device = _context_device


# Faults in a kernel poison its context: every later call in it fails with the same code
# until the context is destroyed (or the primary context reset).
STICKY = {CUresult.CUDA_ERROR_ILLEGAL_ADDRESS, CUresult.CUDA_ERROR_ASSERT, CUresult.CUDA_ERROR_LAUNCH_FAILED,
          CUresult.CUDA_ERROR_ILLEGAL_INSTRUCTION, CUresult.CUDA_ERROR_MISALIGNED_ADDRESS}


def _faults_are_sticky(fn):
    def wrapper(*args):
        try:
            return fn(*args)
        except CudaError as e:
            if e.code in STICKY:
                ctx = _current_context()
                if ctx is not None and ctx.sticky is None:
                    ctx.sticky = e
            raise
    wrapper.__name__ = fn.__name__
    wrapper.__doc__ = fn.__doc__
    return wrapper


class Module:
    def __init__(self, program, ptx_arch: int = 0):
        self.program = program
        self.ptx_arch = ptx_arch      # NN of the PTX's `.target sm_NN` (the function's PTX version)
        self.has_managed_variables = False
        self.functions = {}           # kernel name -> its Function handle (one per name, dropped at unload)


# A __managed__ variable is one allocation that every device and the host share, and kernels
# address their module's variables directly: a module with one keeps a single copy of all
# its variables for every device.
_MANAGED_VARIABLE = re.compile(rb"\.attribute\s*\(\s*\.managed\b")


class Function:
    def __init__(self, module: Module, image):
        self.module = module
        self.image = image


class StreamHandle:
    def __init__(self, stream):
        self.stream = stream
        self.capture = None          # the Graph this stream's work is recorded into, while capturing
        self.device = _current_device()   # a stream belongs to its context's device
        self.context = getattr(_current, "ctx", None) or 0


# ---------------------------------------------------------------- initialisation and devices

def cuInit(flags: int) -> None:
    if flags != 0:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "cuInit flags must be 0")
    _state["initialized"] = True


def cuDriverGetVersion() -> int:
    return DRIVER_VERSION


def cuDeviceGetCount() -> int:
    _require_init()
    return device_info.device_count()


def cuDeviceGet(ordinal: int) -> int:
    _check_device(ordinal)
    return ordinal


def _check_device(dev: int):
    _require_init()
    n = device_info.device_count()
    if not 0 <= dev < n:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_DEVICE,
                        f"no device {dev}: there {'is' if n == 1 else 'are'} {n} (ANYCUDA_DEVICES sets how many)")


def cuDeviceGetName(dev: int) -> str:
    _check_device(dev)
    return device_info.properties(dev).name


def cuDeviceTotalMem(dev: int) -> int:
    _check_device(dev)
    return device_info.properties(dev).total_memory


def cuDeviceComputeCapability(dev: int) -> tuple:
    _check_device(dev)
    return device_info.properties(dev).compute_capability


# CU_DEVICE_ATTRIBUTE_* numbers from cuda.h, with what the CPU device reports
def _attributes(p):
    return {
        1: p.max_threads_per_block, 2: p.max_block_dims[0], 3: p.max_block_dims[1], 4: p.max_block_dims[2],
        5: p.max_grid_dims[0], 6: p.max_grid_dims[1], 7: p.max_grid_dims[2],
        8: p.shared_memory_per_block, 9: 64 * 1024, 10: p.warp_size, 11: 2 ** 31 - 1, 12: p.registers_per_block,
        13: 3_000_000, 14: 256, 15: 1, 16: p.multiprocessor_count, 17: 0, 18: 1, 19: 1, 20: 0,
        31: 1, 33: p.ordinal, 36: 3_000_000, 37: 64, 38: 32 * 1024 * 1024, 39: p.max_threads_per_multiprocessor,
        40: 1, 41: 1, 75: p.compute_capability[0], 76: p.compute_capability[1],
        81: p.shared_memory_per_multiprocessor, 82: p.registers_per_multiprocessor, 83: 1, 84: 0, 86: 1, 88: 1,
        89: 1, 95: 1, 97: p.shared_memory_per_block_optin, 106: p.max_blocks_per_multiprocessor,
        111: p.reserved_shared_memory_per_block,
        **device_info.TEXTURE_LIMITS,
    }


def cuDeviceGetAttribute(attrib: int, dev: int) -> int:
    _check_device(dev)
    return _attributes(device_info.properties(dev)).get(attrib, 0)


# ---------------------------------------------------------------- contexts

def _primary(dev: int = 0):
    """The primary context of device `dev` (one per device, made on first use)."""
    primaries = _state.setdefault("primaries", {})
    if dev not in primaries:
        primaries[dev] = _new_handle(Context(dev, True))
    return primaries[dev]


def cuDevicePrimaryCtxRetain(dev: int) -> int:
    _check_device(dev)
    return _primary(dev)


def cuDevicePrimaryCtxRelease(dev: int) -> None:
    """Waits for the device's work (and shows what it printed), as a context's teardown does."""
    _check_device(dev)
    wait_idle(dev)


def cuDevicePrimaryCtxReset(dev: int) -> None:
    """Clears a fault on the primary context (and waits for its work)."""
    _check_device(dev)
    ctx = _handles.get(_primary(dev))
    discard_errors(dev)              # the faults of its work go with it
    flush_device_output()
    ctx.sticky = None
    ctx.peers.clear()
    for other in _handles.values():       # and peers' access to it ends with it
        if isinstance(other, Context):
            other.peers.discard(_primary(dev))
    _tear_down(_primary(dev))


def cuCtxCreate(flags: int, dev: int) -> int:
    _check_device(dev)
    h = _new_handle(Context(dev, False))
    _current.ctx = h
    return h


def cuCtxDestroy(ctx: int) -> None:
    context = _get(ctx, Context)
    if context.primary:             # it lives as long as the device (cuDevicePrimaryCtxReset clears it)
        raise CudaError(CUresult.CUDA_ERROR_INVALID_CONTEXT, "cuCtxDestroy of a primary context "
                                                             "(release it with cuDevicePrimaryCtxRelease)")
    discard_errors(context.device)      # destroyed whatever its work did, as CUDA does
    flush_device_output()
    _tear_down(ctx)
    with _lock:
        del _handles[ctx]
    if getattr(_current, "ctx", None) == ctx:
        _current.ctx = None


# called with a context handle when that context is destroyed or reset (the runtime's
# context-local storage registers destructors that must run then)
context_teardown_hooks = []


def _tear_down(ctx: int) -> None:
    for hook in list(context_teardown_hooks):
        hook(ctx)


def cuCtxSetCurrent(ctx: int) -> None:
    _require_init()
    if ctx:
        _get(ctx, Context)
    _current.ctx = ctx or None


def cuCtxGetCurrent() -> int:
    _require_init()
    return getattr(_current, "ctx", None) or 0


def context_id(ctx: int) -> int:
    """A context's unique id (cuCtxGetId's answer): its handle, which is never reused."""
    _require_init()
    _get(ctx, Context)
    return ctx


def _require_context():
    _require_init()
    ctx = getattr(_current, "ctx", None)
    if not ctx:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_CONTEXT, "no current context (cuCtxCreate or cuCtxSetCurrent)")
    sticky = getattr(_handles.get(ctx), "sticky", None)
    if sticky is not None:
        raise CudaError(sticky.code, f"the context is unusable after an earlier fault: {sticky.message}")


@_faults_are_sticky
def cuCtxSynchronize(ctx: int = 0) -> None:
    """Wait for the device of context `ctx`, or of the current one (0; cuCtxSynchronize_v2 names one)."""
    if ctx:
        synchronize_all(_get(ctx, Context).device)
        return
    _require_context()
    synchronize_all(_current_device())


# ---------------------------------------------------------------- memory

def _owned(allocation, counted: bool = True):
    """Mark an allocation as made in the current context, on its device; device memory
    counts against that device's share (CUDA_ERROR_OUT_OF_MEMORY past it)."""
    allocation.context = getattr(_current, "ctx", None) or 0
    allocation.device = _current_device()
    return allocation


def _allocate(size: int, kind: str = "device"):
    # what a device has left is counted over the allocation table, so only for allocations
    # large enough to matter (1/64 of the device's share and up); smaller ones cannot go past
    # the share by much before the host itself runs out
    dev = _current_device()
    share = device_info.device_total_memory(dev)
    if kind in ("device", "managed") and size >= share // 64:
        left = share - device_info.used_memory(dev)
        if size > left:
            raise CudaError(CUresult.CUDA_ERROR_OUT_OF_MEMORY,
                            f"{size} bytes asked of device {dev}, which has {max(left, 0)} left")
    return _owned(memory.allocate(size, kind=kind)).ptr


def cuMemAlloc(size: int) -> int:
    _require_context()
    if size == 0:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "cuMemAlloc of 0 bytes")
    return _allocate(size)


def cuMemFree(ptr: int) -> None:
    """Synchronises the device first, as a GPU's does: queued work may still use the memory."""
    _require_context()
    if ptr:                        # cuMemFree(0) succeeds, as free(NULL) (the runtime inside NVIDIA's
        try:                       # CUDA 13 libraries passes cudaFree(0) on to the driver)
            _check_live(ptr)
        except CudaError as e:
            sanitizer.report_api_error("cuMemFree", e)
            raise
        wait_idle(_current_device())
        memory.free(ptr)


def _check_live(ptr: int) -> None:
    """CUDA_ERROR_INVALID_VALUE unless `ptr` starts a live allocation (checked before waiting
    for the device: a bad free fails at once)."""
    a = memory.lookup(ptr)
    if a is None or a.ptr != ptr:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"0x{ptr:x} is not the start of a live allocation "
                                                          "(double free?)")


@_faults_are_sticky
def cuMemcpy(dst: int, src: int, n: int) -> None:
    """A blocking copy: returns when it is done (device printf is flushed then, as CUDA does)."""
    _require_context()
    _null_stream().call(memory.memcpy, dst, src, n)


@_faults_are_sticky
def cuMemsetD8(dst: int, value: int, n: int) -> None:
    _require_context()
    _null_stream().call(memory.memset, dst, value, n)


@_faults_are_sticky
def cuMemsetD32(dst: int, value: int, n: int) -> None:
    _require_context()
    _null_stream().call(memory.fill, dst, value, n, 4)


def cuMemGetInfo() -> tuple:
    """(free, total) of the current context's device: its share of host memory, less the
    device memory allocated on it (and no more than the host has available)."""
    _require_context()
    dev = _current_device()
    return device_info.device_free_memory(dev), device_info.device_total_memory(dev)


# ---------------------------------------------------------------- several devices: peers
# All devices share one address space, so any device reaches any other's memory and a peer
# copy is a copy; the API keeps CUDA's rules and error codes all the same.

def cuDeviceCanAccessPeer(dev: int, peer: int) -> int:
    """1 between two different devices (a device is not its own peer)."""
    _check_device(dev)
    _check_device(peer)
    return int(dev != peer)


_P2P_ATTRIBUTES = {1: 0, 2: 1, 3: 1, 4: 0, 5: 0}     # performance rank, access, native atomics, arrays, partial atomics


def cuDeviceGetP2PAttribute(attrib: int, src: int, dst: int) -> int:
    _check_device(src)
    _check_device(dst)
    if src == dst:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_DEVICE, "a device has no link to itself")
    if attrib not in _P2P_ATTRIBUTES:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"peer-to-peer attribute {attrib}")
    return _P2P_ATTRIBUTES[attrib]


def _peer_contexts(peer_ctx: int):
    """(current context, peer context), or CUDA_ERROR_INVALID_CONTEXT."""
    _require_init()
    ctx = _current_context()
    if ctx is None:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_CONTEXT, "no current context")
    peer = _handles.get(peer_ctx)
    if not isinstance(peer, Context):
        raise CudaError(CUresult.CUDA_ERROR_INVALID_CONTEXT, f"0x{peer_ctx:x} is not a live context")
    return ctx, peer


def cuCtxEnablePeerAccess(peer_ctx: int, flags: int) -> None:
    ctx, peer = _peer_contexts(peer_ctx)
    if peer is ctx:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_CONTEXT, "a context cannot be its own peer")
    if flags != 0:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "cuCtxEnablePeerAccess flags must be 0")
    if not cuDeviceCanAccessPeer(ctx.device, peer.device):
        raise CudaError(CUresult.CUDA_ERROR_PEER_ACCESS_UNSUPPORTED,
                        f"both contexts are on device {ctx.device}: a device is not its own peer")
    if peer_ctx in ctx.peers:
        raise CudaError(CUresult.CUDA_ERROR_PEER_ACCESS_ALREADY_ENABLED,
                        f"device {ctx.device} has access to device {peer.device}'s memory already")
    ctx.peers.add(peer_ctx)


def cuCtxDisablePeerAccess(peer_ctx: int) -> None:
    ctx, peer = _peer_contexts(peer_ctx)
    if peer_ctx not in ctx.peers:
        raise CudaError(CUresult.CUDA_ERROR_PEER_ACCESS_NOT_ENABLED,
                        f"device {ctx.device} was not given access to device {peer.device}'s memory")
    ctx.peers.discard(peer_ctx)


def _check_copy_contexts(*contexts) -> None:
    for c in contexts:
        if not isinstance(_handles.get(c), Context):
            raise CudaError(CUresult.CUDA_ERROR_INVALID_CONTEXT, f"0x{c:x} is not a live context")


@_faults_are_sticky
def cuMemcpyPeer(dst: int, dst_ctx: int, src: int, src_ctx: int, n: int) -> None:
    """A copy between memory of two contexts (devices); synchronous like cuMemcpy."""
    _require_context()
    _check_copy_contexts(dst_ctx, src_ctx)
    cuMemcpy(dst, src, n)


@_faults_are_sticky
def cuMemcpyPeerAsync(dst: int, dst_ctx: int, src: int, src_ctx: int, n: int, stream: int) -> None:
    """In stream order; the stream may belong to any device (copies, unlike launches, may)."""
    _require_context()
    _check_copy_contexts(dst_ctx, src_ctx)
    cuMemcpyAsync(dst, src, n, stream)


@_faults_are_sticky
def cuMemcpy3DPeer(src: int, src_pitch: int, src_slice: int, dst: int, dst_pitch: int, dst_slice: int,
                   width: int, height: int, depth: int, src_ctx: int, dst_ctx: int, stream=None) -> None:
    """cuMemcpy3D between the memory of two contexts (a NULL context: the current one)."""
    _require_context()
    _check_copy_contexts(*(c for c in (src_ctx, dst_ctx) if c))
    cuMemcpy3D(src, src_pitch, src_slice, dst, dst_pitch, dst_slice, width, height, depth, stream)


# ---------------------------------------------------------------- modules and launches

def ptx_from_image(address: int) -> bytes:
    """The PTX in a module image at `address`: PTX text itself, a fatbinary container, or a
    fatbinary wrapper (what the CUDA runtime registers)."""
    magic = struct.unpack("<I", ctypes.string_at(address, 4))[0]
    if magic == 0x464C457F:                # an ELF image: a cubin, or an object carrying fatbinaries
        return _ptx_from_elf_image(address)
    if magic not in (fatbin.CONTAINER_MAGIC, fatbin.WRAPPER_MAGIC):
        return ctypes.string_at(address)
    try:
        if magic == fatbin.WRAPPER_MAGIC:
            modules = fatbin.ptx_modules(fatbin.read_wrapper_containers(ctypes.string_at, address))
            from .linker import link
            return link([m.ptx_text() for m in modules]).encode()
        entries = fatbin.read_container_at(ctypes.string_at, address)
        return fatbin.require_ptx(entries).ptx_text().encode()
    except fatbin.FatbinError as e:
        raise CudaError(CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU if "no PTX" in str(e)
                        else CUresult.CUDA_ERROR_INVALID_IMAGE, str(e)) from None


@dataclass
class ModuleImage:
    """What a module image holds for anycuda: its PTX, and the kernels it holds as machine code
    only (name -> why it cannot run), which a load under CUDA_MODULE_LOADING=LAZY accepts as
    CUDA's lazy loading does: such a kernel fails when it is launched, not its module when
    loaded (cuBLAS registers a few SASS-only containers beside 189 with PTX)."""
    ptx: bytes
    machine_code_only: dict = field(default_factory=dict)


def image_at(address: int) -> ModuleImage:
    """The module image at `address` (ptx_from_image). Under lazy loading, a container with
    SASS alone gives its variables (as PTX) and its kernels' names."""
    try:
        return ModuleImage(ptx_from_image(address) + b"\0")
    except CudaError as e:
        if e.code != CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU or loading_mode() == "EAGER":
            raise
        try:
            ptx, names = fatbin.machine_code_module(_main_container(address))
        except fatbin.FatbinError:
            raise e from None
        return ModuleImage(ptx.encode() + b"\0", dict.fromkeys(names, e.message))


def _main_container(address: int) -> list:
    """The entries of the container at `address`, or of a wrapper's main container (one with
    relocatable PTX would have given its PTX)."""
    magic = struct.unpack("<I", ctypes.string_at(address, 4))[0]
    if magic == fatbin.CONTAINER_MAGIC:
        return fatbin.read_container_at(ctypes.string_at, address)
    if magic == fatbin.WRAPPER_MAGIC:
        containers = fatbin.read_wrapper_containers(ctypes.string_at, address)
        if containers:
            return containers[0]
    raise fatbin.FatbinError("no fatbinary container at the image")


def cuModuleGetLoadingMode() -> int:
    """CU_MODULE_LAZY_LOADING (2), or CU_MODULE_EAGER_LOADING (1) under CUDA_MODULE_LOADING=EAGER."""
    return 1 if loading_mode() == "EAGER" else 2


def cuModuleLoadData(image: bytes) -> int:
    _require_context()
    return _load_module(image)


def _load_module(image) -> int:
    """A module from PTX bytes or a ModuleImage."""
    if not isinstance(image, ModuleImage):
        image = ModuleImage(image)
    text = image.ptx.split(b"\0", 1)[0]
    try:
        program = load_program(text.decode("utf-8"), "module.ptx", unavailable=image.machine_code_only)
    except UnicodeDecodeError:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_IMAGE, "the image is neither PTX text nor a fatbinary") from None
    except CudaError:
        raise
    except UnsupportedVersion as e:
        raise CudaError(CUresult.CUDA_ERROR_UNSUPPORTED_PTX_VERSION, str(e)) from None
    except Exception as e:       # PtxError and friends
        raise CudaError(CUresult.CUDA_ERROR_INVALID_PTX, str(e)) from None
    m = re.search(rb"^\s*\.target\s+sm_(\d+)", text, re.M)
    module = Module(program, int(m.group(1)) if m else 0)
    module.has_managed_variables = bool(_MANAGED_VARIABLE.search(text))
    return _new_handle(module)


def cuModuleUnload(mod: int) -> None:
    """Waits for the device's work (its kernels may be queued), then lets the module's code
    go: its handle and its functions' handles are dropped, and with the last reference the
    compiled code is freed."""
    m = _get(mod, Module)
    wait_idle(_current_device())
    with _lock:
        del _handles[mod]
        for h in m.functions.values():
            _handles.pop(h, None)


def cuModuleGetFunction(mod: int, name: str) -> int:
    m = _get(mod, Module)
    h = m.functions.get(name)
    if h is None:
        try:
            image = m.program.kernel(name)
        except KeyError:
            raise CudaError(CUresult.CUDA_ERROR_NOT_FOUND, f"no kernel named {name}") from None
        new = _new_handle(Function(m, image))
        h = m.functions.setdefault(name, new)      # another thread may have made it meanwhile
        if h != new:
            _handles.pop(new, None)
    return h


def cuModuleGetGlobal(mod: int, name: str) -> tuple:
    m = _get(mod, Module)
    try:
        return m.program.global_address(name)
    except KeyError:
        raise CudaError(CUresult.CUDA_ERROR_NOT_FOUND, f"no global variable named {name}") from None


def kernel_param_layout(func: int):
    """[(offset, size)] of a kernel's parameters, for marshalling kernelParams."""
    return [(p.offset, p.size) for p in _function(func).image.params]


@_faults_are_sticky
def cuLaunchKernel(func: int, grid: tuple, block: tuple, shared: int, stream: int, params: bytes,
                   cooperative: bool = False, cluster: bool = False) -> None:
    """A launch in stream order; a cooperative one (cuLaunchCooperativeKernel) runs all its
    blocks at once, so that they may wait for each other (cooperative groups' grid.sync()),
    and may not be larger than what the device holds at once. `cluster`: given a cluster
    shape (cuLaunchKernelEx), which can only be 1x1x1."""
    _require_context()
    f = _function(func)
    dev = _check_stream_device(stream)
    workers = device_info.multiprocessor_count(dev)
    record = f.image.prepare(grid, block, shared, workers, cluster)
    if cooperative:
        check_cooperative_grid(f.image, grid, block, shared, dev)
    submit(stream, f.image.launch, grid, block, params, shared, workers, cooperative, cluster, record)


def cuLaunchCooperativeKernel(func: int, grid: tuple, block: tuple, shared: int, stream: int, params: bytes) -> None:
    cuLaunchKernel(func, grid, block, shared, stream, params, True)


def check_cooperative_grid(image, grid: tuple, block: tuple, shared: int, dev: int) -> None:
    """CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE unless every block of the grid can be resident
    on device `dev` at once (occupancy times multiprocessors)."""
    p = device_info.properties(dev)
    nthreads = block[0] * block[1] * block[2]
    per_sm = _active_blocks(image, p, nthreads, shared)
    nblocks = grid[0] * grid[1] * grid[2]
    if nblocks > per_sm * p.multiprocessor_count:
        raise CudaError(CUresult.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
                        f"a cooperative launch of {nblocks} blocks of {nthreads} threads: kernel {image.name} can "
                        f"have at most {per_sm} such blocks on each of the device's {p.multiprocessor_count} "
                        f"multiprocessors, {per_sm * p.multiprocessor_count} in all")


# CU_LAUNCH_ATTRIBUTE_* that cuLaunchKernelEx accepts as hints: nothing to do on the CPU
# (access policy window, synchronisation policy, cluster scheduling policy, programmatic
# stream serialisation, whose overlap stream order already rules out, priority, memory
# synchronisation domains, preferred cluster dimension, shared memory carveout, NVLink-centric
# scheduling); COOPERATIVE and a 1x1x1 CLUSTER_DIMENSION are honoured; anything else is refused.
_HINT_ATTRIBUTES = {1, 3, 5, 6, 8, 9, 10, 11, 14, 16}
CU_LAUNCH_ATTRIBUTE_IGNORE, CU_LAUNCH_ATTRIBUTE_COOPERATIVE, CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION = 0, 2, 4
_UNSUPPORTED_ATTRIBUTES = {7: "PROGRAMMATIC_EVENT", 12: "LAUNCH_COMPLETION_EVENT",
                           13: "DEVICE_UPDATABLE_KERNEL_NODE (graph kernel nodes only)"}


def cuLaunchKernelEx(func: int, grid: tuple, block: tuple, shared: int, stream: int, params: bytes,
                     attributes=()) -> None:
    """cuLaunchKernel with launch attributes: [(CU_LAUNCH_ATTRIBUTE_*, value)], the value an
    int, or the (x, y, z) of a cluster dimension."""
    cooperative = cluster = False
    for attr, value in attributes:
        if attr == CU_LAUNCH_ATTRIBUTE_COOPERATIVE:
            cooperative = bool(value)
        elif attr == CU_LAUNCH_ATTRIBUTE_CLUSTER_DIMENSION:
            if tuple(value) not in ((1, 1, 1), (0, 0, 0)):
                raise CudaError(CUresult.CUDA_ERROR_NOT_SUPPORTED,
                                f"thread block clusters (cluster dimension {tuple(value)}) are not supported yet")
            cluster = tuple(value) == (1, 1, 1)
        elif attr in _UNSUPPORTED_ATTRIBUTES:
            raise CudaError(CUresult.CUDA_ERROR_NOT_SUPPORTED,
                            f"launch attribute CU_LAUNCH_ATTRIBUTE_{_UNSUPPORTED_ATTRIBUTES[attr]} is not supported yet")
        elif attr != CU_LAUNCH_ATTRIBUTE_IGNORE and attr not in _HINT_ATTRIBUTES:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"unknown launch attribute {attr}")
    cuLaunchKernel(func, grid, block, shared, stream, params, cooperative, cluster)


def _check_stream_device(stream: int) -> int:
    """The current device, after checking that `stream` belongs to it (a kernel cannot be
    launched into another device's stream: CUDA_ERROR_INVALID_HANDLE, as CUDA answers)."""
    dev = _current_device()
    if stream not in (0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD):
        s = _get(stream, StreamHandle)
        if s.device != dev:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_HANDLE,
                            f"the stream belongs to device {s.device}, the current context to device {dev}")
    return dev


def cuStreamCreate(flags: int) -> int:
    _require_context()
    return _new_handle(StreamHandle(Stream(non_blocking=bool(flags & 1), device=_current_device())))


def cuStreamGetCtx(stream: int) -> int:
    """The context a stream was created in; the NULL, legacy and per-thread streams are the
    current context's."""
    if stream in (0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD):
        _require_context()
        return _current.ctx
    return _get(stream, StreamHandle).context


def cuStreamDestroy(stream: int) -> None:
    s = _get(stream, StreamHandle)
    s.stream.synchronize()
    with _lock:
        del _handles[stream]


@_faults_are_sticky
def cuStreamSynchronize(stream: int) -> None:
    _require_context()
    _stream(stream).synchronize()


def error_name(code: int) -> str:
    try:
        return CUresult(code).name
    except ValueError:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"unknown CUresult {code}") from None


_DESCRIPTIONS = {
    CUresult.CUDA_SUCCESS: "no error",
    CUresult.CUDA_ERROR_INVALID_VALUE: "invalid argument",
    CUresult.CUDA_ERROR_OUT_OF_MEMORY: "out of memory",
    CUresult.CUDA_ERROR_NOT_INITIALIZED: "initialization error",
    CUresult.CUDA_ERROR_INVALID_DEVICE: "invalid device ordinal",
    CUresult.CUDA_ERROR_INVALID_CONTEXT: "invalid device context",
    CUresult.CUDA_ERROR_INVALID_PTX: "a PTX JIT compilation failed",
    CUresult.CUDA_ERROR_UNSUPPORTED_PTX_VERSION: "the provided PTX was compiled with an unsupported toolchain.",
    CUresult.CUDA_ERROR_INVALID_HANDLE: "invalid resource handle",
    CUresult.CUDA_ERROR_NOT_FOUND: "named symbol not found",
    CUresult.CUDA_ERROR_ILLEGAL_ADDRESS: "an illegal memory access was encountered",
    CUresult.CUDA_ERROR_ASSERT: "device-side assert triggered",
    CUresult.CUDA_ERROR_LAUNCH_FAILED: "unspecified launch failure",
    CUresult.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE: "too many blocks in cooperative launch",
    CUresult.CUDA_ERROR_NOT_SUPPORTED: "operation not supported",
}


def error_string(code: int) -> str:
    name = error_name(code)
    return _DESCRIPTIONS.get(CUresult(code), name.replace("CUDA_ERROR_", "").replace("_", " ").lower())


# ---------------------------------------------------------------- more of the driver API

class EventHandle:
    def __init__(self, event):
        self.event = event
        self.device = _current_device()    # an event belongs to its context's device


CU_STREAM_LEGACY, CU_STREAM_PER_THREAD = 1, 2


# .per_thread: the call came in through a per-thread entry point (cuLaunchKernel_ptsz,
# cuMemcpyHtoD_v2_ptds...: what `nvcc --default-stream per-thread` makes the CUDA runtime call)
_calling = threading.local()


def call_with_per_thread_default(fn, *args):
    """fn(*args) with stream 0 and the blocking copies and memsets meaning the calling
    thread's per-thread default stream instead of the legacy one."""
    before = getattr(_calling, "per_thread", False)
    _calling.per_thread = True
    try:
        return fn(*args)
    finally:
        _calling.per_thread = before


def _null_stream():
    """What stream 0 means for this call: the legacy default stream, or the calling thread's
    per-thread default stream on the current device (see call_with_per_thread_default)."""
    if getattr(_calling, "per_thread", False):
        return per_thread_stream(_current_device())
    return default_stream


def _stream(stream: int):
    """The stream a handle names: CU_STREAM_LEGACY is the legacy default stream;
    CU_STREAM_PER_THREAD the calling thread's per-thread default stream on the current device;
    0 either of them (_null_stream)."""
    if stream == 0:
        return _null_stream()
    if stream == CU_STREAM_LEGACY:
        return default_stream
    if stream == CU_STREAM_PER_THREAD:
        return per_thread_stream(_current_device())
    return _get(stream, StreamHandle).stream


def wait_for_stream(stream: int) -> None:
    """Wait for a stream's work, as a library's synchronous call does: no context needed, since
    a program may call a library before anything that makes one current."""
    _stream(stream).synchronize()


def cuCtxGetDevice(ctx: int = 0) -> int:
    """The device of context `ctx`, or of the current one (0; CUDA 13's cuCtxGetDevice_v2 names one)."""
    if ctx:
        return _get(ctx, Context).device
    _require_context()
    return _get(_current.ctx, Context).device


@_faults_are_sticky
def cuMemcpyAsync(dst: int, src: int, n: int, stream: int) -> None:
    _require_context()
    submit(stream, memory.memcpy, dst, src, n)


def cuMemAllocHost(size: int) -> int:
    _require_context()
    return _allocate(size, kind="host")


def cuMemAllocManaged(size: int, flags: int) -> int:
    _require_context()
    if size == 0:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "cuMemAllocManaged of 0 bytes")
    return _allocate(size, kind="managed")


# CU_POINTER_ATTRIBUTE_* -> value for an address inside an allocation
_MEMORY_TYPE = {"host": 1, "device": 2, "managed": 2}


def cuPointerGetAttribute(attribute: int, ptr: int) -> int:
    _require_context()
    a = memory.lookup(ptr)
    if a is None:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"0x{ptr:x} is not in any allocation")
    # the context and device an allocation was made in (memory anycuda made for itself, such
    # as module globals: the caller's)
    values = {1: getattr(a, "context", 0) or _current.ctx, 2: _MEMORY_TYPE.get(a.kind, 2), 3: ptr, 4: ptr,
              8: int(a.kind == "managed"), 9: getattr(a, "device", _current_device()), 11: a.ptr, 12: a.size}
    if attribute not in values:
        raise CudaError(CUresult.CUDA_ERROR_NOT_SUPPORTED, f"pointer attribute {attribute} is not supported yet")
    return values[attribute]


def cuFuncGetAttribute(attrib: int, func: int) -> int:
    f = _function(func)
    image = f.image
    major, minor = device_info.properties(0).compute_capability
    # PTX version: the architecture the PTX was written for (libraries such as CUB choose
    # their code paths by it); binary version: the device's, which the PTX is compiled for
    values = {0: image.max_threads_per_block, 1: image.static_shared, 2: 0, 3: image.info.frame_size, 4: 32,
              5: f.module.ptx_arch or 10 * major + minor, 6: 10 * major + minor, 7: 0, 8: image.max_dynamic_shared_size, 9: -1,
              10: 0, 11: 0, 12: 0, 13: 0, 14: 0, 15: 0,
              # 16 and 17 are newer than CUDA 13.0's headers (its CU_FUNC_ATTRIBUTE_MAX is 16): the
              # runtime linked into NVIDIA's later CUDA 13 libraries (cuSPARSE 12.9, ...) reads
              # 0..17 in cudaFuncGetAttributes and fails without an answer; 0, as for 10-15
              16: 0, 17: 0}
    if attrib not in values:
        raise CudaError(CUresult.CUDA_ERROR_NOT_SUPPORTED, f"function attribute {attrib} is not supported yet")
    return values[attrib]


# ---------------------------------------------------------------- occupancy
# Computed as CUDA's occupancy calculator does, from what the device reports about one
# multiprocessor (one worker thread: CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_MULTIPROCESSOR, ..._MAX_BLOCKS_
# PER_MULTIPROCESSOR, ..._MAX_SHARED_MEMORY_PER_MULTIPROCESSOR, ..._MAX_REGISTERS_PER_MULTIPROCESSOR)
# and what the kernel uses (its static shared memory, the registers cuFuncGetAttribute
# reports, its thread limit and its dynamic shared memory limit), for the current context's device.

_FUNC_REGISTERS = 32                 # CU_FUNC_ATTRIBUTE_NUM_REGS as cuFuncGetAttribute reports it

CU_OCCUPANCY_DEFAULT, CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE = 0, 1


def _occupancy_args(func: int, flags: int):
    if flags not in (CU_OCCUPANCY_DEFAULT, CU_OCCUPANCY_DISABLE_CACHING_OVERRIDE):
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"occupancy flags {flags}")
    image = _function(func).image
    return image, device_info.properties(_current_device())


def _active_blocks(image, p, block_size: int, dynamic_shared: int) -> int:
    if dynamic_shared > image.max_dynamic_shared_size:
        return 0                     # a launch with this much dynamic shared memory would fail
    return device_info.max_active_blocks(p, block_size, image.static_shared + dynamic_shared, _FUNC_REGISTERS,
                                         image.max_threads_per_block, p.shared_memory_per_block_optin)


def cuOccupancyMaxActiveBlocksPerMultiprocessor(func: int, block_size: int, dynamic_shared: int,
                                                flags: int = 0) -> int:
    """Blocks of `block_size` threads with `dynamic_shared` bytes of dynamic shared memory
    that one multiprocessor (worker) holds at once; 0 when such a block cannot be launched."""
    image, p = _occupancy_args(func, flags)
    if block_size <= 0 or dynamic_shared < 0:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "block size must be positive")
    return _active_blocks(image, p, block_size, dynamic_shared)


def cuOccupancyMaxPotentialBlockSize(func: int, block_to_dynamic, dynamic_shared: int, block_size_limit: int,
                                     flags: int = 0) -> tuple:
    """(min grid size, block size): the largest block size reaching the highest occupancy,
    and the grid that fills every multiprocessor with it. `block_to_dynamic(block size)`
    gives the dynamic shared memory per block when it depends on the block size (None: the
    constant `dynamic_shared`)."""
    image, p = _occupancy_args(func, flags)
    if block_size_limit < 0:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"block size limit {block_size_limit}")
    dynamic = block_to_dynamic if block_to_dynamic is not None else (lambda block: dynamic_shared)
    return device_info.max_potential_block_size(
        p, lambda block, smem: _active_blocks(image, p, block, smem), dynamic, block_size_limit,
        image.max_threads_per_block)


def cuOccupancyAvailableDynamicSMemPerBlock(func: int, num_blocks: int, block_size: int) -> int:
    """The most dynamic shared memory per block that lets `num_blocks` blocks of
    `block_size` threads share one multiprocessor (within what a launch of the kernel takes)."""
    image, p = _occupancy_args(func, 0)
    if num_blocks <= 0 or block_size <= 0:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "block count and size must be positive")
    return device_info.available_dynamic_shared_memory(p, num_blocks, block_size, image.static_shared,
                                                       _FUNC_REGISTERS, image.max_threads_per_block,
                                                       image.max_dynamic_shared_size)


def cuEventCreate(flags: int) -> int:
    _require_context()
    return _new_handle(EventHandle(Event()))


def cuEventRecord(event: int, stream: int) -> None:
    _require_context()
    ev = _get(event, EventHandle)
    default = stream in (0, CU_STREAM_LEGACY, CU_STREAM_PER_THREAD)
    dev = _current_device() if default else _get(stream, StreamHandle).device
    if dev != ev.device:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_HANDLE,
                        f"the event belongs to device {ev.device}, the stream to device {dev}")
    graph = _capturing(stream)
    if graph is not None:
        ev.captured_by = graph           # a point in the graph: streams that wait on it join the capture
        return
    ev.captured_by = None
    ev.event.record(_stream(stream))


def cuEventQuery(event: int) -> None:
    if not _get(event, EventHandle).event.query():
        raise CudaError(CUresult.CUDA_ERROR_NOT_READY)


@_faults_are_sticky
def cuEventSynchronize(event: int) -> None:
    _get(event, EventHandle).event.synchronize()


def cuEventElapsedTime(start: int, end: int) -> float:
    first, second = _get(start, EventHandle), _get(end, EventHandle)
    if first.device != second.device:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_HANDLE, "the events belong to different devices")
    return get_elapsed_time(first.event, second.event)


def cuEventDestroy(event: int) -> None:
    _get(event, EventHandle)
    with _lock:
        del _handles[event]


def cuStreamWaitEvent(stream: int, event: int) -> None:
    _require_context()
    _wait_event(stream, event)


def cuStreamQuery(stream: int) -> None:
    _require_context()
    if not _stream(stream).query():
        raise CudaError(CUresult.CUDA_ERROR_NOT_READY)


def cuLaunchHostFunc(stream: int, fn: int, user_data: int) -> None:
    _require_context()
    call = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(fn)
    submit(stream, call, user_data)


def cuCtxPushCurrent(ctx: int) -> None:
    _require_init()
    _get(ctx, Context)
    stack = _current.__dict__.setdefault("stack", [])
    stack.append(getattr(_current, "ctx", None))
    _current.ctx = ctx


def cuCtxPopCurrent() -> int:
    _require_init()
    ctx = getattr(_current, "ctx", None)
    if not ctx:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_CONTEXT, "no current context to pop")
    stack = _current.__dict__.setdefault("stack", [])
    _current.ctx = stack.pop() if stack else None
    return ctx


def cuDevicePrimaryCtxGetState(dev: int) -> tuple:
    _check_device(dev)
    return 0, int(dev in _state.get("primaries", {}))


def cuDeviceGetUuid(dev: int) -> bytes:
    """A stable identifier for each CPU device (a name-based UUID of its model and ordinal)."""
    import uuid
    _check_device(dev)
    return uuid.uuid5(uuid.NAMESPACE_DNS, "anycuda-cpu-" + device_info.cpu_model() + (f"-{dev}" if dev else "")).bytes


# ---------------------------------------------------------------- libraries and kernels (CUDA 12+)
# A library is a context-independent module; with one device and one address space it is a
# module loaded once, and a kernel is that module's function.

class Library:
    """Compiled once; each device that uses it gets the module linked once more, so that
    `__device__` and `__constant__` variables are per device as on several GPUs."""

    def __init__(self, module: int):
        self.first = module          # the module as loaded, given to the first device that asks
        self.modules = {}            # device -> Module handle
        self.kernels = {}            # name -> Kernel handle, so a kernel has one handle
        self.lock = threading.RLock()
        self.one_copy = False        # every device uses the first module (see _MANAGED_VARIABLE)

    def module_for(self, device: int) -> int:
        with self.lock:
            if device not in self.modules:
                if self.modules and not self.one_copy:
                    m = _get(self.first, Module)
                    self.modules[device] = _new_handle(Module(m.program.instance(), m.ptx_arch))
                else:
                    self.modules[device] = self.first
            return self.modules[device]


class Kernel:
    """A library's kernel (CUkernel): launched or queried in a context, it is the function of
    the library's module on that context's device."""

    def __init__(self, library: Library, name: str):
        self.library = library
        self.name = name
        self.functions = {}          # device -> Function handle
        self.settings = {}           # attribute -> value set through the kernel, for every device

    def function_for(self, device: int) -> int:
        with self.library.lock:
            if device not in self.functions:
                h = cuModuleGetFunction(self.library.module_for(device), self.name)
                for attrib, value in self.settings.items():
                    _set_function_attribute(_handles[h].image, attrib, value)
                self.functions[device] = h
            return self.functions[device]


def _function(func: int) -> Function:
    """The Function a CUfunction or CUkernel handle stands for in the current context."""
    obj = _handles.get(func)
    if isinstance(obj, Kernel):
        return _get(obj.function_for(_current_device()), Function)
    return _get(func, Function)


def cuLibraryLoadData(image: bytes) -> int:
    _require_init()                    # a library belongs to no context
    library = Library(_load_module(image))
    library.one_copy = _get(library.first, Module).has_managed_variables
    return _new_handle(library)


def cuLibraryUnload(lib: int) -> None:
    library = _get(lib, Library)
    modules = set(library.modules.values()) | {library.first}
    for m in modules:
        cuModuleUnload(m)
    with _lock:
        for h in library.kernels.values():
            for f in _handles[h].functions.values():
                _handles.pop(f, None)
            _handles.pop(h, None)
        del _handles[lib]


def cuLibraryGetModule(lib: int) -> int:
    return _get(lib, Library).module_for(_current_device())


def cuLibraryGetKernel(lib: int, name: str) -> int:
    library = _get(lib, Library)
    if name not in library.kernels:
        first = _get(library.first, Module)
        if not first.program.has_kernel(name):
            raise CudaError(CUresult.CUDA_ERROR_NOT_FOUND, f"no kernel named {name}")
        library.kernels[name] = _new_handle(Kernel(library, name))
    return library.kernels[name]


def cuLibraryGetGlobal(lib: int, name: str) -> tuple:
    return cuModuleGetGlobal(cuLibraryGetModule(lib), name)


def cuLibraryGetManaged(lib: int, name: str) -> tuple:
    """A __managed__ variable: with one address space, its storage is the module's global."""
    return cuLibraryGetGlobal(lib, name)


def cuKernelGetFunction(kernel: int) -> int:
    return _get(kernel, Kernel).function_for(_current_device())


def cuKernelGetLibrary(kernel: int) -> int:
    library = _get(kernel, Kernel).library
    for h, obj in list(_handles.items()):
        if obj is library:
            return h
    raise CudaError(CUresult.CUDA_ERROR_INVALID_HANDLE, f"the library of kernel 0x{kernel:x} is unloaded")


def function_name(func: int) -> str:
    return _function(func).image.name


def cuFuncSetAttribute(func: int, attrib: int, value: int) -> None:
    """Accepts what a CPU block can honour: the dynamic shared memory limit (8) and the
    preferred shared-memory carveout (9); other attributes are read-only or not supported.
    Set through a kernel (CUkernel), it holds for that kernel on every device."""
    kernel = _handles.get(func)
    if isinstance(kernel, Kernel):
        _set_function_attribute(_function(func).image, attrib, value)      # rejects what cannot be set
        for h in kernel.functions.values():
            _set_function_attribute(_handles[h].image, attrib, value)
        kernel.settings[attrib] = value
        return
    _set_function_attribute(_get(func, Function).image, attrib, value)


def _set_function_attribute(image, attrib: int, value: int) -> None:
    if attrib == 8:
        if value < 0:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "negative shared memory size")
        image.max_dynamic_shared_size = value
    elif attrib in (9, 10, 11, 12, 13, 14, 15):
        pass                          # carveout / cluster hints: nothing to do on the CPU
    else:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"function attribute {attrib} cannot be set")


# ---------------------------------------------------------------- what the CUDA runtime asks for besides

@_faults_are_sticky
def cuMemcpy2D(src: int, src_pitch: int, dst: int, dst_pitch: int, width: int, height: int, stream=None) -> None:
    """Copy `height` rows of `width` bytes between pitched memory (addresses of the first
    byte of the region); synchronous on the default stream unless a stream is given."""
    cuMemcpy3D(src, src_pitch, src_pitch * height, dst, dst_pitch, dst_pitch * height, width, height, 1, stream)


def memcpy_3d_work(src: int, src_pitch: int, src_slice: int, dst: int, dst_pitch: int, dst_slice: int,
                   width: int, height: int, depth: int):
    """The copy of a width x height x depth box between pitched memory, as stream work."""
    if (height > 1 or depth > 1) and (width > src_pitch or width > dst_pitch):
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"width {width} exceeds the pitch")
    if depth > 1 and (src_slice < src_pitch * height or dst_slice < dst_pitch * height):
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "the height exceeds a slice")

    def copy():
        for z in range(depth):
            for row in range(height):
                memory.memcpy(dst + z * dst_slice + row * dst_pitch, src + z * src_slice + row * src_pitch, width)
    return copy


@_faults_are_sticky
def cuMemcpy3D(src: int, src_pitch: int, src_slice: int, dst: int, dst_pitch: int, dst_slice: int,
               width: int, height: int, depth: int, stream=None) -> None:
    _require_context()
    submit(stream, memcpy_3d_work(src, src_pitch, src_slice, dst, dst_pitch, dst_slice, width, height, depth))


def cuMemAllocPitch(width: int, height: int, element_size: int) -> tuple:
    """Rows padded to 512 bytes, as NVIDIA GPUs' texture pitch alignment."""
    _require_context()
    if element_size not in (4, 8, 16) or width == 0 or height == 0:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "cuMemAllocPitch: bad width, height or element size")
    pitch = (width + 511) // 512 * 512
    return _allocate(pitch * height), pitch


@_faults_are_sticky
def cuMemsetAsync(dst: int, value: int, count: int, element: int, stream) -> None:
    """Fill `count` elements of `element` bytes (1, 2 or 4) with `value`, in stream order
    (stream None: a blocking memset on the default stream)."""
    _require_context()
    a = memory.lookup(dst)
    if a is None and count == 0:
        a = memory.lookup(dst - 1)       # an empty range at an allocation's end is still inside it
    if a is None or dst + count * element > a.end:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"memset of {count * element} bytes at 0x{dst:x} "
                                                          "is not inside one allocation")
    submit(stream, lambda: memory.fill(dst, value, count, element))


@_faults_are_sticky
def cuMemsetD2D(dst: int, pitch: int, value: int, element: int, width: int, height: int, stream) -> None:
    """A pitched memset in stream order (stream None: blocking, on the default stream)."""
    _require_context()
    submit(stream, memset_2d_work(dst, pitch, value, element, width, height))


def memset_2d_work(dst: int, pitch: int, value: int, element: int, width: int, height: int):
    if element not in (1, 2, 4):
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"element size {element} (1, 2 or 4)")
    def fill():
        for row in range(height):
            memory.fill(dst + row * pitch, value, width, element)
    return fill


def cuMemHostRegister(ptr: int, size: int) -> None:
    """Host memory the caller owns becomes known to anycuda (it is usable by kernels as it is)."""
    _require_context()
    if size == 0 or not ptr:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "cuMemHostRegister of nothing")
    if memory.lookup(ptr) is not None:
        raise CudaError(CUresult.CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED, f"0x{ptr:x} is registered already")
    memory.table.add(_owned(memory.Allocation(ptr, size, None, "registered")))


def cuMemHostUnregister(ptr: int) -> None:
    _require_context()
    a = memory.lookup(ptr)
    if a is None or a.kind != "registered" or a.ptr != ptr:
        raise CudaError(CUresult.CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, f"0x{ptr:x} was not registered")
    memory.table.remove(ptr, expected=a)


def cuMemFreeHost(ptr: int) -> None:
    _require_context()
    if not ptr:                    # as the driver: free(NULL) semantics
        return
    a = memory.lookup(ptr)
    if a is None or a.ptr != ptr or a.kind != "host":
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"0x{ptr:x} is not host memory from cuMemAllocHost")
    wait_idle(_current_device())   # as cuMemFree: queued work may still use it
    memory.free(ptr)


def cuMemGetAddressRange(ptr: int) -> tuple:
    _require_context()
    a = memory.lookup(ptr)
    if a is None:
        raise CudaError(CUresult.CUDA_ERROR_NOT_FOUND, f"0x{ptr:x} is not in any allocation")
    return a.ptr, a.size


def pointer_attribute_or_default(attribute: int, ptr: int):
    """cuPointerGetAttributes' answer: the attribute's value, or 0 for memory anycuda does
    not know (which that call reports without an error)."""
    a = memory.lookup(ptr)
    if a is None:
        return 0
    return cuPointerGetAttribute(attribute, ptr)


_limits = {0: 1024, 1: 1 << 20, 2: 8 << 20, 3: 2, 4: 2048, 5: 64, 6: 0, 7: 0, 8: 0, 9: 0}


def cuCtxSetLimit(limit: int, value: int) -> None:
    _require_context()
    if limit not in _limits or limit >= 7:
        raise CudaError(CUresult.CUDA_ERROR_UNSUPPORTED_LIMIT, f"limit {limit} cannot be set")
    _limits[limit] = value


def cuCtxGetLimit(limit: int) -> int:
    _require_context()
    if limit not in _limits:
        raise CudaError(CUresult.CUDA_ERROR_UNSUPPORTED_LIMIT, f"unknown limit {limit}")
    return _limits[limit]


def cuStreamCreateWithPriority(flags: int, priority: int) -> int:
    _require_context()
    return _new_handle(StreamHandle(Stream(non_blocking=bool(flags & 1), priority=priority,
                                           device=_current_device())))


def stream_flags(stream: int) -> int:
    return int(bool(_stream(stream).non_blocking))


def stream_priority(stream: int) -> int:
    return getattr(_stream(stream), "priority", 0)


def cuMemAllocAsync(size: int, stream: int) -> int:
    """Stream-ordered allocation: with one address space the memory is ready at once."""
    _stream(stream)
    return cuMemAlloc(size)


def cuMemFreeAsync(ptr: int, stream: int) -> None:
    _require_context()
    if memory.lookup(ptr) is None:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"0x{ptr:x} is not a live allocation")
    submit(stream, memory.free, ptr)


def cuStreamAddCallback(stream: int, fn: int, user_data: int) -> None:
    """CUstreamCallback(stream, status, userData), run in stream order."""
    _require_context()
    call = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int, ctypes.c_void_p)(fn)
    submit(stream, call, stream or None, 0, user_data)


def cuDeviceGetPCIBusId(dev: int) -> str:
    """Devices are told apart by bus number (CU_DEVICE_ATTRIBUTE_PCI_BUS_ID is the ordinal)."""
    _check_device(dev)
    return f"0000:{dev:02x}:00.0"


def cuDeviceGetByPCIBusId(bus_id: str) -> int:
    """The device with PCI bus id `bus_id` ("[domain:]bus:device.function", hex), as
    cuDeviceGetPCIBusId writes it."""
    _require_init()
    m = re.fullmatch(r"\s*(?:([0-9a-fA-F]{1,8}):)?([0-9a-fA-F]{1,2}):([0-9a-fA-F]{1,2})\.([0-7])\s*", bus_id)
    if m is not None and int(m.group(1) or "0", 16) == 0 and int(m.group(3), 16) == 0 and m.group(4) == "0":
        dev = int(m.group(2), 16)
        if dev < cuDeviceGetCount():
            return dev
    raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"no device has PCI bus id {bus_id!r}")


CU_DEVICE_CPU = -1
# CUmemLocationType: device, host, host NUMA node, the calling thread's host NUMA node
LOCATION_DEVICE, LOCATION_HOST, LOCATION_HOST_NUMA, LOCATION_HOST_NUMA_CURRENT = 1, 2, 3, 4
MEM_ADVICE = range(1, 7)      # CU_MEM_ADVISE_SET_READ_MOSTLY .. CU_MEM_ADVISE_UNSET_ACCESSED_BY


def managed_hint(ptr: int, count: int, location: tuple, advice: int = None) -> None:
    """A prefetch (`advice` None) or an advice about managed memory at `location`, a
    CUmemLocation's (type, id): nothing to move on the CPU, so it is checked as CUDA checks it
    and then done."""
    kind, ident = location
    if advice is not None and advice not in MEM_ADVICE:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"memory advice {advice} is not a CUmem_advise value")
    if kind == LOCATION_DEVICE:
        if not 0 <= ident < cuDeviceGetCount():
            raise CudaError(CUresult.CUDA_ERROR_INVALID_DEVICE, f"device {ident} does not exist")
    elif kind not in (LOCATION_HOST, LOCATION_HOST_NUMA, LOCATION_HOST_NUMA_CURRENT) \
            or kind == LOCATION_HOST_NUMA and ident < 0:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"memory location type {kind} (id {ident}) is not valid")
    _require_context()
    a = memory.lookup(ptr)
    if a is None or ptr + count > a.end:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, f"0x{ptr:x}+{count} is not inside one allocation")


def location_of_device(dev: int) -> tuple:
    """The (type, id) location a CUdevice names in the older calls: CU_DEVICE_CPU is the host."""
    return (LOCATION_HOST, 0) if dev == CU_DEVICE_CPU else (LOCATION_DEVICE, dev)


class MemPool:
    def __init__(self):
        self.attributes = {}


def cuDeviceGetDefaultMemPool(dev: int) -> int:
    """One memory pool per device; stream-ordered allocations come from the ordinary heap."""
    _check_device(dev)
    pools = _state.setdefault("pools", {})
    if dev not in pools:
        pools[dev] = _new_handle(MemPool())
    return pools[dev]


def cuMemPoolSetAttribute(pool: int, attribute: int, value: int) -> None:
    _get(pool, MemPool).attributes[attribute] = value


def cuMemPoolGetAttribute(pool: int, attribute: int) -> int:
    return _get(pool, MemPool).attributes.get(attribute, 0)


def cuMemAllocFromPoolAsync(size: int, pool: int, stream: int) -> int:
    _get(pool, MemPool)
    return cuMemAllocAsync(size, stream)


# ---------------------------------------------------------------- stream capture and graphs
# A captured graph is the work its streams were given, in the order it was given: a valid
# order for the graph's dependencies (work joins a capture only through event waits on work
# already captured). Launching the graph issues that work again on the launch stream, with
# the parameters captured (kernel arguments are copied when captured, as CUDA does).

class Graph:
    def __init__(self):
        self.work = []               # (function, args) in capture (or node creation) order
        self.streams = set()         # the capture states (_capture_holder) of the streams capturing into it
        self.id = 0


class GraphNode:
    def __init__(self, graph: Graph, index: int):
        self.graph = graph
        self.index = index           # position in graph.work: creation order respects dependencies


class GraphExec:
    def __init__(self, graph: Graph):
        self.work = list(graph.work)


def cuGraphCreate() -> int:
    _require_context()
    return _new_handle(Graph())


def graph_add_node(graph: int, dependencies, fn=None, *args) -> int:
    """A node of an explicitly built graph, doing fn(*args) (nothing for an empty node).
    Its dependencies exist already, so creation order is an order that respects them."""
    g = _get(graph, Graph)
    for d in dependencies:
        if _get(d, GraphNode).graph is not g:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "a dependency belongs to another graph")
    g.work.append((fn or (lambda: None), args))
    return _new_handle(GraphNode(g, len(g.work) - 1))


def graph_kernel_work(func: int, grid: tuple, block: tuple, shared: int, params: bytes):
    f = _function(func)
    f.image.check_config(grid, block, shared)
    return f.image.launch, (grid, block, params, shared, device_info.multiprocessor_count(_current_device()))


_capture_ids = [0]


class _PerThreadCapture:
    """The capture state of a host thread's per-thread default stream on one device."""
    capture = None


_per_thread_captures = threading.local()      # .holders: device -> _PerThreadCapture


def _capture_holder(stream: int, create: bool = False):
    """What keeps `stream`'s capture state (`.capture`, the graph or None): its StreamHandle, or
    the calling thread's per-thread stream's _PerThreadCapture (None until `create`d); None
    for the legacy default stream, which is never captured."""
    if stream == CU_STREAM_LEGACY or stream == 0 and not getattr(_calling, "per_thread", False):
        return None
    if stream not in (0, CU_STREAM_PER_THREAD):
        return _get(stream, StreamHandle)
    holders = _per_thread_captures.__dict__.setdefault("holders", {})
    if not holders and not create:    # this thread never captured: no device to look up
        return None
    device = _current_device()
    if create and device not in holders:
        holders[device] = _PerThreadCapture()
    return holders.get(device)


def _capturing(stream: int):
    """The graph a stream is capturing into, or None."""
    holder = _capture_holder(stream)
    return holder.capture if holder is not None else None


def submit(stream, fn, *args, on_skip=None) -> None:
    """Work for a stream: run in stream order, or recorded when the stream is capturing.
    `on_skip()` runs instead when the stream skips the work after an unreported error.
    Stream None: blocking work on the default stream (a cuMemcpy, cuMemsetD8; _null_stream), which
    returns when it is done and reports the error the stream kept."""
    if profile.ENABLED:                  # a library call's work, timed under its name
        fn = profile.timed(fn)
    if stream is None:
        _null_stream().call(fn, *args)
        return
    graph = _capturing(stream)
    if graph is not None:
        graph.work.append((fn, args))
        return
    _stream(stream).enqueue(fn, *args, on_skip=on_skip)


def _wait_event(stream: int, event: int) -> None:
    ev = _get(event, EventHandle)
    graph = getattr(ev, "captured_by", None)
    if graph is not None:
        mine = _capturing(stream)
        if mine is not None and mine is not graph:
            raise CudaError(CUresult.CUDA_ERROR_STREAM_CAPTURE_ISOLATION, "the event belongs to another capture")
        if mine is None:             # fork: this stream joins the capture
            s = _capture_holder(stream, create=True)
            if s is None:
                raise CudaError(CUresult.CUDA_ERROR_STREAM_CAPTURE_IMPLICIT,
                                "the legacy default stream cannot join a capture")
            s.capture = graph
            graph.streams.add(s)
        return
    if _capturing(stream) is not None:
        # waiting on work outside the capture: it has happened before the graph can run
        ev.event.synchronize()
        return
    _stream(stream).wait_event(ev.event)


def cuStreamBeginCapture(stream: int, mode: int = 0) -> None:
    _require_context()
    s = _capture_holder(stream, create=True)
    if s is None:
        raise CudaError(CUresult.CUDA_ERROR_STREAM_CAPTURE_UNSUPPORTED,
                        "the legacy default stream cannot be captured")
    if s.capture is not None:
        raise CudaError(CUresult.CUDA_ERROR_ILLEGAL_STATE, "the stream is capturing already")
    s.capture = Graph()
    s.capture.streams.add(s)
    _capture_ids[0] += 1
    s.capture.id = _capture_ids[0]


def cuStreamEndCapture(stream: int) -> int:
    _require_context()
    s = _capture_holder(stream)
    graph = s.capture if s is not None else None
    if graph is None:
        raise CudaError(CUresult.CUDA_ERROR_ILLEGAL_STATE, "the stream is not capturing")
    for joined in graph.streams:     # streams that joined the capture leave it too
        joined.capture = None
    return _new_handle(graph)


def cuStreamIsCapturing(stream: int) -> int:
    """CU_STREAM_CAPTURE_STATUS_NONE (0) or _ACTIVE (1)."""
    return int(_capturing(stream) is not None)


def capture_id(stream: int) -> int:
    graph = _capturing(stream)
    return graph.id if graph is not None else 0


def cuGraphInstantiate(graph: int) -> int:
    return _new_handle(GraphExec(_get(graph, Graph)))


def cuGraphLaunch(exec_: int, stream: int) -> None:
    _require_context()
    for fn, args in _get(exec_, GraphExec).work:
        submit(stream, fn, *args)


def cuGraphDestroy(graph: int) -> None:
    _get(graph, Graph)
    with _lock:
        del _handles[graph]


def cuGraphExecDestroy(exec_: int) -> None:
    _get(exec_, GraphExec)
    with _lock:
        del _handles[exec_]


def cuGraphUpload(exec_: int, stream: int) -> None:
    """Nothing to upload: the graph's work runs where it is."""
    _get(exec_, GraphExec)
    _stream(stream)


# ---------------------------------------------------------------- the driver's linker (cuLink*)
# The linked image is PTX text (all inputs' PTX linked into one module), which
# cuModuleLoadData and cuLibraryLoadData take like any other image.

class LinkState:
    def __init__(self):
        self.modules = []
        self.image = None            # the linked image, kept alive until cuLinkDestroy


def cuLinkCreate() -> int:
    _require_init()
    return _new_handle(LinkState())


def cuLinkAddData(state: int, kind: int, data: bytes, name: str = "") -> None:
    from .linker import ptx_of_input
    _get(state, LinkState).modules += ptx_of_input(kind, data, name)


def cuLinkAddFile(state: int, kind: int, path: str) -> None:
    try:
        with open(path, "rb") as fh:
            data = fh.read()
    except OSError as e:
        raise CudaError(CUresult.CUDA_ERROR_FILE_NOT_FOUND, f"{path}: {e.strerror}") from None
    cuLinkAddData(state, kind, data, path)


def cuLinkComplete(state: int) -> bytes:
    from .linker import link
    s = _get(state, LinkState)
    if not s.modules:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE, "nothing was added to link")
    s.image = link(s.modules).encode() + b"\0"
    return s.image


def cuLinkDestroy(state: int) -> None:
    _get(state, LinkState)
    with _lock:
        del _handles[state]


def _ptx_from_elf_image(address: int) -> bytes:
    """The PTX of an ELF module image (its size read from the ELF header: the section headers
    come last). A cubin, such as nvJitLink makes, holds machine code only."""
    header = ctypes.string_at(address, 64)
    if header[4] != 2:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_IMAGE, "the image is a 32-bit ELF file")
    shoff, = struct.unpack_from("<Q", header, 0x28)
    shentsize, shnum = struct.unpack_from("<HH", header, 0x3A)
    from .linker import _ptx_of_elf, link
    try:
        found = _ptx_of_elf(ctypes.string_at(address, shoff + shentsize * shnum))
    except (fatbin.FatbinError, ValueError, struct.error) as e:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_IMAGE, f"ELF image: {e}") from None
    if not found:
        raise CudaError(CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU,
                        "the image is a cubin holding machine code only (anycuda runs PTX); "
                        "load the PTX instead (a cubin made by nvJitLink: run the program "
                        "through `anycuda run`, which makes numba-cuda and cuda.core link PTX)")
    return link(found).encode()
