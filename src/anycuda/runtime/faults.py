"""Memory faults in kernels become CUDA_ERROR_ILLEGAL_ADDRESS instead of a dead process.

Installs the native handler from compiler/cpu/faults.py for SIGSEGV and SIGBUS once per process
and hands launches the pthread key under which workers register. Faults on threads that
are not running a kernel go to the handler that was there before.
"""
from __future__ import annotations

import ctypes
import signal
import threading

from ..compiler.cpu import faults
from ..compiler.build.jit import LoadedObject, compile_to_object

_lock = threading.Lock()
_installed = {}

SA_SIGINFO = 4


class _SigAction(ctypes.Structure):
    # glibc's struct sigaction on 64-bit Linux (x86-64 and AArch64 alike)
    _fields_ = [("handler", ctypes.c_void_p), ("mask", ctypes.c_uint64 * 16),
                ("flags", ctypes.c_int), ("restorer", ctypes.c_void_p)]


def fault_key() -> int:
    """The pthread key workers register under; installs the handler on first use."""
    with _lock:
        if _installed:
            return _installed["key"]
        libc = ctypes.CDLL(None, use_errno=True)
        key = ctypes.c_uint()
        if libc.pthread_key_create(ctypes.byref(key), None) != 0:
            raise OSError(ctypes.get_errno(), "pthread_key_create failed")
        obj = LoadedObject(compile_to_object(str(faults.build_handler_module()), "anycuda_faults"))
        ctypes.c_uint64.from_address(obj.address(faults.KEY)).value = key.value
        handler = obj.address(faults.HANDLER)
        for sig in (signal.SIGSEGV, signal.SIGBUS):
            new, old = _SigAction(), _SigAction()
            new.handler = handler
            new.flags = SA_SIGINFO
            if libc.sigaction(int(sig), ctypes.byref(new), ctypes.byref(old)) != 0:
                raise OSError(ctypes.get_errno(), "sigaction failed")
            if sig == signal.SIGSEGV:
                ctypes.c_uint64.from_address(obj.address(faults.PREV)).value = old.handler or 0
                ctypes.c_uint64.from_address(obj.address(faults.PREV_INFO)).value = int(bool(old.flags & SA_SIGINFO))
        _installed.update(key=key.value, object=obj)
        return key.value
