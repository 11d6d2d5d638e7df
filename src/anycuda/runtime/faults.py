"""Memory faults in kernels become CUDA_ERROR_ILLEGAL_ADDRESS instead of a dead process.

Installs the native handler from compiler/cpu/faults.py for SIGSEGV and SIGBUS (and for
STOP_SIGNAL, the watchdog's: runtime/watchdog.py) once per process and hands launches the
pthread key under which workers register. Faults on threads that
are not running a kernel go to the handler that was there before. Also makes the workers'
workspaces end at guards (compiler/cpu/workermemory.py), so that shared memory indexed past
its window faults here too.
"""
from __future__ import annotations

import ctypes
import functools
import signal
import threading

from ..compiler.cpu import faults, workermemory
from ..compiler.build.jit import LoadedObject, compile_to_object

_lock = threading.Lock()
_installed = {}

SA_SIGINFO = 4
SA_RESTART = 0x10000000
# the watchdog's stop (runtime/watchdog.py): a real-time signal near the top, away from the
# ones libraries take from SIGRTMIN up
STOP_SIGNAL = signal.SIGRTMAX - 3


class _SigAction(ctypes.Structure):
    # glibc's struct sigaction on 64-bit Linux (x86-64 and AArch64 alike)
    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_uint64 * 16),
                ("flags", ctypes.c_int), ("restorer", ctypes.c_void_p)]


def fault_key() -> int:
    """The pthread key workers register under; installs the handler on first use."""
    with _lock:
        if "key" in _installed:
            return _installed["key"]
        libc = ctypes.CDLL(None, use_errno=True)
        obj = LoadedObject(compile_to_object(str(faults.build_handler_module(int(STOP_SIGNAL))), "anycuda_faults"))
        key = _key_into(obj, faults.KEY, None)
        handler = obj.address(faults.HANDLER)
        for sig, old in _install(libc, handler).items():
            if sig == signal.SIGSEGV:
                ctypes.c_uint64.from_address(obj.address(faults.PREV)).value = old.handler or 0
                ctypes.c_uint64.from_address(obj.address(faults.PREV_INFO)).value = int(bool(old.flags & SA_SIGINFO))
        asked = _SigAction()
        query = ctypes.CDLL(None).sigaction            # (its own: argtypes set for the quick check)
        query.argtypes = (ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p)
        _installed.update(key=key.value, object=obj, handler=handler, libc=libc, asked=asked,
                          ask=functools.partial(query, int(signal.SIGSEGV), None, ctypes.addressof(asked)))
        return key.value


def _install(libc, handler) -> dict:
    """The native handler installed for SIGSEGV, SIGBUS and STOP_SIGNAL: {signal: the action
    that was there}."""
    replaced = {}
    for sig in (signal.SIGSEGV, signal.SIGBUS, STOP_SIGNAL):
        new, old = _SigAction(), _SigAction()
        new.handler = handler
        new.flags = SA_SIGINFO | (SA_RESTART if sig == STOP_SIGNAL else 0)
        if libc.sigaction(int(sig), ctypes.byref(new), ctypes.byref(old)) != 0:
            raise OSError(ctypes.get_errno(), "sigaction failed")
        replaced[sig] = old
    return replaced


def keep_handler() -> None:
    """Put the handler back where a library has installed its own since (called before each
    launch). LLVM's, which PoCL installs when it compiles, resets itself to the default
    action as it is entered (SA_RESETHAND): of two workers that faulted at once, the second
    met the default action and the process died. Faults outside kernels still go to the
    handler that was there before anycuda's first (not to the library's)."""
    ask = _installed.get("ask")
    if ask is None or (ask() == 0 and _installed["asked"].handler == _installed["handler"]):
        return
    with _lock:
        _install(_installed["libc"], _installed["handler"])


def worker_memory_hook() -> int:
    """The address of `i8* (i64 bytes)`, a worker thread's workspace ending at a guard
    (compiler/cpu/workermemory.py); made once per process, with the pthread key whose
    destructor unmaps a thread's workspace when the thread ends."""
    with _lock:
        if "worker_memory" in _installed:
            return _installed["worker_memory"]
        obj = LoadedObject(compile_to_object(str(workermemory.build_module()), "anycuda_worker_memory"))
        _key_into(obj, workermemory.KEY, obj.address(workermemory.RELEASE))
        _installed.update(worker_memory=obj.address(workermemory.GET), worker_memory_object=obj)
        return _installed["worker_memory"]


def _key_into(obj, symbol: str, destructor) -> ctypes.c_uint:
    """A new pthread key (with the native `destructor` address, or None), written into the
    loaded object's u64 variable `symbol`, where its code reads it."""
    libc = ctypes.CDLL(None, use_errno=True)
    key = ctypes.c_uint()
    if libc.pthread_key_create(ctypes.byref(key), ctypes.c_void_p(destructor) if destructor else None) != 0:
        raise OSError(ctypes.get_errno(), "pthread_key_create failed")
    ctypes.c_uint64.from_address(obj.address(symbol)).value = key.value
    return key
