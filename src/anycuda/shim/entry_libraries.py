"""The C entry points of anycuda's CUDA libraries (libcublas.so.13...), defined with cffi's
`def_extern` from each library's table (anycuda.libraries.<name>.functions).

Nothing but marshalling: pointers and handles become integers, the library's function runs,
and every exception becomes the library's status (never one escaping into C). A failure whose
reason the status alone cannot tell (an unsupported type combination, an argument rule) is
said once on stderr, like libcuda.so.1's.
"""
from __future__ import annotations

import importlib
import sys
import traceback

from ..runtime.errors import CudaError, CUresult
from .libraries import LIBRARIES, unsupported_name
from .settings import TRACE

_said = set()


def _say_once(text: str) -> None:
    if text not in _said:
        _said.add(text)
        sys.stderr.write(f"anycuda: {text}\n")


def _integer(ffi, value):
    """A C argument as a Python number (pointers and handles as integers, their address)."""
    if isinstance(value, (int, float)):
        return value
    return int(ffi.cast("uintptr_t", value))


def define(ffi, lib, name: str) -> None:
    spec = next(lib_ for lib_ in LIBRARIES if lib_.module == name)
    functions = importlib.import_module(f"anycuda.libraries.{name}.functions")
    status = importlib.import_module(f"anycuda.libraries.{name}.status")       # Error, ANSWERS
    Error, answer = status.Error, status.ANSWERS
    kept = {}

    def entry(cname, fn):
        def call(*args):
            try:
                if TRACE:
                    sys.stderr.write(f"anycuda: {cname}{tuple(_integer(ffi, a) for a in args)}\n")
                fn(*[_integer(ffi, a) for a in args])
                return answer["success"]
            except Error as e:
                if e.status != answer["quiet"] or TRACE:      # argument errors are the program's to handle
                    _say_once(f"{cname}: {e}")
                return e.status
            except CudaError as e:
                _say_once(f"{cname}: {e}")
                return answer["unsupported"] if e.code == CUresult.CUDA_ERROR_NOT_SUPPORTED else answer["failed"]
            except Exception:                   # noqa: BLE001 -- a bug of anycuda: say it, answer a status
                _say_once(f"{cname}: internal error\n{traceback.format_exc()}")
                return answer["internal"]
        call.__name__ = cname
        return call

    for cname, (kinds, fn) in functions.table().items():
        ffi.def_extern(name=cname)(entry(cname, fn))

    def valued(cname, fn, result):
        def call(*args):
            value = fn(*[_integer(ffi, a) for a in args])
            if result == "const char *":
                if value not in kept:
                    kept[value] = ffi.new("char[]", value.encode())
                return kept[value]
            return value
        return call

    for cname, fn in functions.VALUED.items():
        kinds, result = functions.signatures.VALUED[cname]
        ffi.def_extern(name=cname, onerror=lambda *exc: None)(valued(cname, fn, result))

    @ffi.def_extern(name="anycuda_unsupported")
    def unsupported(index):
        _say_once(f"{unsupported_name(spec, index)} is not implemented by anycuda's {spec.sonames[0]} "
                  f"(it answers {spec.not_supported[1]})")
        return spec.not_supported[0]
