"""The driver API's handles and the calling thread's context: one table of handles (CUcontext,
CUmodule, CUfunction, CUstream, CUevent, ... are ints from it), the objects they stand for, the
current context of each host thread, and the faults that make a context unusable, as on a GPU.
Every other module of the driver API builds on these.
"""
from __future__ import annotations

import ctypes
import re
import threading

from ..runtime import device as device_info
from ..runtime.errors import CudaError, CUresult


_lock = threading.Lock()


_state = {"initialized": False}


_handles = {}                   # handle -> object


FIRST_HANDLE, HANDLE_STRIDE = 0x1000, 16
_next = [FIRST_HANDLE]

# A byte per handle number, 1 while it names a live created stream: libnccl's C front reads it
# (libraries/nccl/front.c answers a collective itself only on a stream it knows is live, and
# leaves every other handle to the Python, which checks it). Handles past its end read unknown.
live_streams = (ctypes.c_uint8 * (1 << 18))()


_current = threading.local()


def flush_device_output() -> None:
    """Write what kernels printed so far (CUDA flushes at launches, blocking copies,
    synchronisation, module unloading and context teardown)."""
    from ..runtime.program import flush_device_output as flush
    flush()


def _new_handle(obj) -> int:
    with _lock:
        h = _next[0]
        _next[0] += HANDLE_STRIDE
        _handles[h] = obj
        if isinstance(obj, StreamHandle):
            _mark_stream(h, 1)
        return h


def _drop_handle(h: int) -> None:
    """The handle names nothing from now on. Caller holds _lock."""
    if isinstance(_handles.pop(h), StreamHandle):
        _mark_stream(h, 0)


def _mark_stream(h: int, live: int) -> None:
    index = (h - FIRST_HANDLE) // HANDLE_STRIDE
    if 0 <= index < len(live_streams):
        live_streams[index] = live


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


def _current_handle() -> int:
    """The calling thread's current context handle, 0 without one: the context a resource made
    now belongs to, and goes with (contexts._release_objects)."""
    return getattr(_current, "ctx", None) or 0


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
          CUresult.CUDA_ERROR_ILLEGAL_INSTRUCTION, CUresult.CUDA_ERROR_MISALIGNED_ADDRESS,
          CUresult.CUDA_ERROR_LAUNCH_TIMEOUT}


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
        self.context = None           # the context it was loaded into, which it goes with (None: a library's)


def _drop_module(h: int) -> None:
    """Module handle `h` and its functions' handles name nothing from now on (with `_lock`
    held); its code goes with the last reference (a queued launch keeps what it runs)."""
    for f in _handles.pop(h).functions.values():
        _handles.pop(f, None)


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
        self.context = _current_handle()


def _require_context():
    _require_init()
    ctx = getattr(_current, "ctx", None)
    if not ctx:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_CONTEXT, "no current context (cuCtxCreate or cuCtxSetCurrent)")
    context = _handles.get(ctx)
    if context is None:
        # destroyed while current in another thread, or below this thread's top of stack:
        # what was made now would outlive its context (its streams' threads, fuzz_api_plain)
        raise CudaError(CUresult.CUDA_ERROR_CONTEXT_IS_DESTROYED, "the current context has been destroyed")
    _check_usable(context)


def _check_usable(context) -> None:
    """The sticky fault of a context that an earlier kernel fault made unusable, raised."""
    sticky = getattr(context, "sticky", None)
    if sticky is not None:
        raise CudaError(sticky.code, f"the context is unusable after an earlier fault: {sticky.message}")


class EventHandle:
    def __init__(self, event):
        self.event = event
        self.device = _current_device()    # an event belongs to its context's device
        self.context = _current_handle()     # and goes with that context


CU_STREAM_LEGACY, CU_STREAM_PER_THREAD = 1, 2
