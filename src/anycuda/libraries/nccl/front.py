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

The front stays off where MPI may not be called from any thread (the stream's workers call it
too), under ANYCUDA_PROFILE and ANYCUDA_TRACE (every call is then seen by the Python), and
with ANYCUDA_NCCL_FRONT=0."""
from __future__ import annotations

import ctypes
import os
import sys

from . import small
from .status import NcclError, Result

SPIN_SECONDS = 50e-6          # how long the caller waits for its peers before the stream's worker does,
SPIN_SECONDS_PER_BYTE = 1e-9  # and for each byte the operation moves (its own transfer's time at 1 GB/s)
_front = {}                   # "ffi", "lib", "enabled", "ready"
_registered = {}              # handle -> (small.Shared given to the C, kept alive while it is there; its Communicator)


def attach(ffi, lib, enabled: bool = True) -> None:
    _front.update(ffi=ffi, lib=lib, enabled=enabled and os.environ.get("ANYCUDA_NCCL_FRONT", "1") != "0")
    ffi.def_extern(name="anycuda_python_nccl_adopt", onerror=_adopt_failed)(_adopt)


_MPI_FUNCTIONS = ("MPI_Isend", "MPI_Irecv", "MPI_Test")


def _mpi_functions() -> dict:
    """name -> address of each of _MPI_FUNCTIONS in the MPI library loaded here ({}: none found)."""
    with open("/proc/self/maps") as maps:
        paths = sorted({line.split(None, 5)[5].strip() for line in maps if "libmpi" in line and "/" in line})
    for path in paths:
        try:
            library = ctypes.CDLL(path)
            return {name: ctypes.cast(getattr(library, name), ctypes.c_void_p).value
                    for name in _MPI_FUNCTIONS}
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
        _front["ready"] = ok
    return _front["ready"]


def register(handle: int, comm, MPI) -> None:
    """A processes' communicator (communicator.Communicator on an MpiGroup), answered by the front
    from now on."""
    if "lib" not in _front or not _ready(MPI):
        return
    shared = comm.transport.shared
    shared.handle, shared.enabled = handle, 1
    if _front["lib"].anycuda_nccl_front_register(_pointer(shared)) == 0:
        _registered[handle] = shared, comm


def unregister(handle: int) -> None:
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
