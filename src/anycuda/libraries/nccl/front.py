"""The Python half of libnccl's C front (front.c beside it), which answers small collectives in
C on the caller's thread while no stream has work queued: what it needs from here.

- `attach(ffi, lib)`: the library's C functions, given by the shim when the library's Python
  starts (this package never imports the shim).
- When the first communicator whose ranks are processes is made: the addresses of MPI's
  Isend, Irecv and Test in the MPI library this process loaded (mpi4py's), MPI_BYTE's handle,
  the address of runtime/stream.busy, the driver's table of live stream handles (the C answers
  only on a stream it knows is live) and small.py's limits, given to the C once.
- Each such communicator's `small.Shared` registered with the C while it exists.
- `anycuda_python_nccl_adopt`: an operation the C started whose peers had not all come within
  SPIN_SECONDS (ANYCUDA_NCCL_SPIN seconds where set) and a nanosecond per byte it moves, queued
  on its stream, where the stream's worker finishes it in C.
- For large.c (large collectives queued to a C thread, run by MPI's own collectives): the
  addresses of those collectives, the MPI datatypes mpi4py gives each NCCL type, MPI's
  operations and MPI_IN_PLACE, and the runtime's `foreign` counter; `LargeWork`, through
  which the runtime hands that work over to its stream before it queues or waits for any;
  the errors of that thread reported as their communicators' asynchronous errors.

The front stays off where MPI may not be called from any thread (the stream's workers call it
too), under ANYCUDA_PROFILE and ANYCUDA_TRACE (every call is then seen by the Python), and
with ANYCUDA_NCCL_FRONT=0."""
from __future__ import annotations

import ctypes
import os
import sys

import numpy as np

from . import small, types
from .status import NcclError, Result

SPIN_SECONDS = 50e-6          # how long the caller waits for its peers before the stream's worker does,
SPIN_SECONDS_PER_BYTE = 1e-9  # and for each byte the operation moves (its own transfer's time at 1 GB/s)
_front = {}                   # "ffi", "lib", "enabled", "ready"
_registered = {}              # handle -> (small.Shared given to the C, kept alive while it is there; its Communicator)


def attach(ffi, lib, enabled: bool = True) -> None:
    _front.update(ffi=ffi, lib=lib, enabled=enabled and os.environ.get("ANYCUDA_NCCL_FRONT", "1") != "0")
    ffi.def_extern(name="anycuda_python_nccl_adopt", onerror=_adopt_failed)(_adopt)


_MPI_FUNCTIONS = ("MPI_Isend", "MPI_Irecv", "MPI_Test")
_MPI_COLLECTIVES = ("MPI_Allreduce", "MPI_Allgather", "MPI_Reduce_scatter_block", "MPI_Bcast", "MPI_Reduce")


def _mpi_functions(names: tuple = _MPI_FUNCTIONS) -> dict:
    """name -> address of each of `names` in the MPI library loaded here ({}: none found)."""
    with open("/proc/self/maps") as maps:
        paths = sorted({line.split(None, 5)[5].strip() for line in maps if "libmpi" in line and "/" in line})
    for path in paths:
        try:
            library = ctypes.CDLL(path)
            return {name: ctypes.cast(getattr(library, name), ctypes.c_void_p).value for name in names}
        except (OSError, AttributeError):
            continue
    return {}


def spin_seconds() -> float:
    """How long the caller waits for its peers: ANYCUDA_NCCL_SPIN, else SPIN_SECONDS."""
    from ...runtime.watchdog import env_seconds
    text, seconds = env_seconds("ANYCUDA_NCCL_SPIN")
    if not text:
        return SPIN_SECONDS
    if seconds is None or not 0 <= seconds < 1e6:
        print(f"anycuda: ANYCUDA_NCCL_SPIN={text!r} is not a number of seconds; {SPIN_SECONDS:g} it is",
              file=sys.stderr)
        return SPIN_SECONDS
    return seconds


def _ready(MPI) -> bool:
    """Give the C what it needs, once; whether the front may answer calls."""
    if "ready" not in _front:
        from ...driver import handles
        from ...runtime import profile, stream
        from . import mpi
        functions = _mpi_functions()
        ok = bool(_front.get("enabled")) and bool(functions) and not mpi.serialised() and not profile.ENABLED
        if ok:
            def pointer(address):
                return _front["ffi"].cast("void *", address)
            _front["lib"].anycuda_nccl_front_setup(
                pointer(ctypes.addressof(stream.busy)), *(pointer(functions[name]) for name in _MPI_FUNCTIONS),
                MPI._handleof(MPI.BYTE), small.SMALL_BYTES, int(spin_seconds() * 1e9), SPIN_SECONDS_PER_BYTE * 1e9,
                small.TAG_BASE, small.TAG_SPAN, pointer(ctypes.addressof(handles.live_streams)),
                len(handles.live_streams), handles.FIRST_HANDLE, handles.HANDLE_STRIDE)
            _set_up_large(MPI)
        _front["ready"] = ok
    return _front["ready"]


def _set_up_large(MPI) -> None:
    """Give large.c MPI's collectives and handles, and the runtime the way to hand its work over."""
    import atexit
    from ...runtime import stream
    from . import mpi
    functions = _mpi_functions(_MPI_COLLECTIVES)
    if not functions:
        return
    ffi, lib = _front["ffi"], _front["lib"]
    kinds = np.zeros(LARGE_TYPES, np.intp)         # the MPI datatype mpi4py uses for each NCCL type it passes as is
    for nccl_type in types.STORAGE:
        if nccl_type not in types.WIDENED:
            kinds[int(nccl_type)] = MPI._handleof(MPI._typedict[types.storage(nccl_type).char])
    operations = np.array([MPI._handleof(getattr(MPI, mpi.MPI_OPS[op])) for op in sorted(mpi.MPI_OPS)], np.intp)
    stream.set_outside(LargeWork())
    lib.anycuda_nccl_large_setup(
        ffi.cast("void *", ctypes.addressof(stream.foreign)),
        *(ffi.cast("void *", functions[name]) for name in _MPI_COLLECTIVES),
        ffi.cast("intptr_t *", kinds.ctypes.data), ffi.cast("intptr_t *", operations.ctypes.data),
        ffi.cast("void *", int(MPI.IN_PLACE)), mpi.CHUNK_BYTES)
    # at exit, before MPI is finalized (mpi4py registered its handler first, so it runs after)
    atexit.register(wait_for_large_work)


def register(handle: int, comm, MPI) -> None:
    """A processes' communicator (communicator.Communicator on an MpiGroup), answered by the front
    from now on."""
    if "lib" not in _front or not _ready(MPI):
        return
    shared = comm.transport.shared
    shared.handle, shared.enabled, shared.device = handle, 1, comm.device
    if _front["lib"].anycuda_nccl_front_register(_pointer(shared)) == 0:
        _registered[handle] = shared, comm


def unregister(handle: int) -> None:
    if handle in _registered:
        wait_for_large_work()          # large.c's queued operations may still use its MPI communicator
    shared, _ = _registered.pop(handle, (None, None))
    if shared is not None:
        _front["lib"].anycuda_nccl_front_unregister(_pointer(shared))


def _pointer(shared: small.Shared):
    return _front["ffi"].cast("void *", ctypes.addressof(shared))


def _adopt(comm, stream, op) -> int:
    """The C's operation `op`, started, now the stream's: ncclSuccess once queued, else a status
    (then the C finishes it itself)."""
    from ...driver import api
    from ...runtime.errors import CudaError
    from .group import fail, submit
    ffi, lib = _front["ffi"], _front["lib"]
    handle, stream = int(ffi.cast("uintptr_t", comm)), int(ffi.cast("uintptr_t", stream))

    def finish():
        error = lib.anycuda_nccl_front_finish(op)       # without the GIL: waits for the peers
        lib.anycuda_nccl_front_free(op)
        if error:
            fail(communicator, "Collective", NcclError(Result.RemoteError, f"MPI error {error}"))

    try:
        if handle not in _registered:
            raise NcclError(Result.InvalidArgument, f"0x{handle:x} is no communicator")
        communicator = _registered[handle][1]
        if api.cuStreamIsCapturing(stream):      # a capture began meanwhile: a graph cannot hold this
            finish()
        else:
            submit(communicator, stream, finish, on_skip=finish)
    except NcclError as e:
        return int(e.status)
    except CudaError:
        return int(Result.UnhandledCudaError)
    return int(Result.Success)


def _adopt_failed(exception, value, traceback) -> int:
    return int(Result.InternalError)


# ---- large.c's work, handed over to the streams

LARGE_TYPES = 12               # large.c's table of MPI datatypes, one per ncclDataType_t
CU_STREAM_LEGACY = 1


class LargeWork:
    """large.c's queue as the runtime sees it (runtime/stream.Outside)."""

    def hand_over(self) -> None:
        """The operations large.c has queued and nobody has handed over: a piece of work on their
        stream (with their communicator's device current: the legacy stream is the device's)
        waits for them, then reports their failures."""
        from ...driver import api
        from ...runtime.errors import CudaError
        from .group import submit
        ffi, lib = _front["ffi"], _front["lib"]
        handle, stream, device = ffi.new("uint64_t *"), ffi.new("uintptr_t *"), ffi.new("int *")
        ticket = lib.anycuda_nccl_large_claim(handle, stream, device)
        if not ticket:
            return
        communicator = _registered.get(handle[0], (None, None))[1]

        def wait():
            lib.anycuda_nccl_large_wait(ticket)      # without the GIL
            report_errors()

        on = int(stream[0]) or CU_STREAM_LEGACY
        if lib.anycuda_nccl_large_done() >= ticket or communicator is None:
            wait()                                  # done already (a destroyed communicator's: unregister waited)
            return
        try:
            if api.cuStreamIsCapturing(on):         # a capture cannot hold work queued before it
                wait()
            else:
                submit(communicator, on, wait, on_skip=wait)
        except CudaError:                           # its stream destroyed since: nothing can come after it there
            wait()

    def issued(self) -> int:
        return int(_front["lib"].anycuda_nccl_large_issued())

    def wait_here(self, state, device) -> bool:
        ffi, lib = _front["ffi"], _front["lib"]
        handle, stream, on_device = ffi.new("uint64_t *"), ffi.new("uintptr_t *"), ffi.new("int *")
        ticket = lib.anycuda_nccl_large_pending(handle, stream, on_device)
        if ticket and device is not None and on_device[0] != device:
            return False
        if ticket and state is not None and _stream_state(int(stream[0]), on_device[0]) is not state:
            return False
        lib.anycuda_nccl_large_wait(ticket)          # without the GIL
        report_errors()
        return True

    def done(self) -> int:
        return int(_front["lib"].anycuda_nccl_large_done())


def _stream_state(stream: int, device: int):
    """The runtime's state of the stream a handle large.c keeps names (CU_STREAM_LEGACY: the
    device's legacy default stream), or None where the handle names none now."""
    from ...driver import api
    from ...runtime.stream import default_stream
    if stream == CU_STREAM_LEGACY:
        return default_stream.state_of(device)
    try:
        return api._get(stream, api.StreamHandle).stream._state
    except Exception:                 # noqa: BLE001 -- a destroyed stream: the work is handed over
        return None


def wait_for_large_work() -> None:
    """Wait until every operation large.c has queued has finished."""
    if "lib" in _front and _front.get("ready"):
        lib = _front["lib"]
        lib.anycuda_nccl_large_wait(lib.anycuda_nccl_large_issued())
        report_errors()


def report_errors() -> None:
    """MPI's failures in large.c's thread, as their communicators' asynchronous errors (once)."""
    from .group import fail
    for shared, communicator in list(_registered.values()):
        if shared.error and communicator.async_error == Result.Success:
            fail(communicator, "Collective", NcclError(Result.RemoteError, f"MPI error {shared.error}"))
