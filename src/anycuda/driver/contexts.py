"""Initialisation, devices and contexts: cuInit, the devices and their attributes, primary and
created contexts, the current-context stack, limits, error names, and peers between devices.

All devices share one address space, so any device reaches any other's memory and a peer
copy is a copy; the API keeps CUDA's rules and error codes all the same.
"""
from __future__ import annotations

import re

from ..runtime import device as device_info
from ..runtime import memory
from ..runtime.errors import CudaError, CUresult
from ..runtime.stream import discard_errors, synchronize_all, wait_idle
from ..runtime.watchdog import launch_timeout
from .handles import (_check_usable, Context, _current, _current_context, _current_device, _current_handle,
                      _drop_handle, _drop_module, _faults_are_sticky, flush_device_output, _get, _handles, _lock,
                      Module, _new_handle, _require_context, _require_init, _state)


# The CUDA version the driver reports: the newest whose runtime, NVRTC and Python stacks anycuda
# is tested with (the test extra's wheels). A real driver also says by it which PTX ISA it
# loads; anycuda compiles PTX of any ISA version (an instruction it lacks fails at launch,
# naming it), so reporting less only makes NVRTC's users warn that their PTX will not load.
DRIVER_VERSION = 13050


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
        13: 3_000_000, 14: 256, 15: 1, 16: p.multiprocessor_count, 17: int(bool(launch_timeout())), 18: 1, 19: 1,
        20: 0,
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
    handle = _primary(dev)
    ctx = _handles.get(handle)
    discard_errors(dev)              # the faults of its work go with it
    flush_device_output()
    ctx.sticky = None
    ctx.peers.clear()
    for other in _handles.values():       # and peers' access to it ends with it
        if isinstance(other, Context):
            other.peers.discard(handle)
    _tear_down(handle)


def cuCtxCreate(flags: int, dev: int) -> int:
    _check_device(dev)
    h = _new_handle(Context(dev, False))
    # pushed onto the thread's stack, as CUDA's is: destroying it makes the one before current
    _current.__dict__.setdefault("stack", []).append(getattr(_current, "ctx", None))
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
    if getattr(_current, "ctx", None) == ctx:       # popped, as by cuCtxPopCurrent
        stack = _current.__dict__.setdefault("stack", [])
        _current.ctx = stack.pop() if stack else None


# called with a context handle when that context is destroyed or reset (the runtime's
# context-local storage registers destructors that must run then)
context_teardown_hooks = []


def _tear_down(ctx: int) -> None:
    for hook in list(context_teardown_hooks):
        hook(ctx)
    _release_objects(ctx)
    _free_memory(ctx)


def _release_objects(ctx: int) -> None:
    """A context's modules, streams, events, arrays and graph execs go with it, as on a GPU:
    their handles name nothing from then on (queued launches keep the code they run; the
    device is idle by now). Modules were the first: a program that reset the primary context
    after each fault and loaded its module again kept every earlier module's code mapped, six
    mappings a reset, until mmap ran out after some ten thousand resets (fuzz_shared_window)."""
    with _lock:
        for h in [h for h, obj in _handles.items() if getattr(obj, "context", None) == ctx]:
            if isinstance(_handles[h], Module):
                _drop_module(h)
            else:
                _drop_handle(h)


def _free_memory(ctx: int) -> None:
    """The allocations made in the context are freed (device, pinned host, managed, pitched,
    stream-ordered, arrays) and its host registrations undone: a program that allocates again
    after each reset no longer grows."""
    for a in memory.table.allocations():
        if getattr(a, "context", None) == ctx:
            memory.release(a)


def cuCtxSetCurrent(ctx: int) -> None:
    _require_init()
    if ctx:
        _get(ctx, Context)
    _current.ctx = ctx or None


def cuCtxGetCurrent() -> int:
    _require_init()
    return _current_handle()


def context_id(ctx: int) -> int:
    """A context's unique id (cuCtxGetId's answer): its handle, which is never reused."""
    _require_init()
    _get(ctx, Context)
    return ctx


@_faults_are_sticky
def cuCtxSynchronize(ctx: int = 0) -> None:
    """Wait for the device of context `ctx`, or of the current one (0; cuCtxSynchronize_v2 names one)."""
    if ctx:
        context = _get(ctx, Context)
        _check_usable(context)        # as the current context's: a fault is sticky however it is named
        synchronize_all(context.device)
        return
    _require_context()
    synchronize_all(_current_device())


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
    CUresult.CUDA_ERROR_CONTEXT_IS_DESTROYED: "context is destroyed",
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


def cuCtxGetDevice(ctx: int = 0) -> int:
    """The device of context `ctx`, or of the current one (0; CUDA 13's cuCtxGetDevice_v2 names one)."""
    if ctx:
        return _get(ctx, Context).device
    _require_context()
    return _get(_current.ctx, Context).device


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
