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

from ..runtime import profile
from ..runtime.errors import CudaError, CUresult
from .libraries import LIBRARIES, python_name, unsupported_name
from .settings import TRACE

_said = set()


def _say_once(text: str) -> None:
    if text not in _said:
        _said.add(text)
        sys.stderr.write(f"anycuda: {text}\n")


def _argument(ffi, value):
    """A C argument as a Python value: pointers and handles as integers (their address), a char
    as its code, a cuComplex or cuDoubleComplex passed by value as a complex, an ncclUniqueId
    as its 128 bytes."""
    if isinstance(value, (int, float)):
        return value
    if isinstance(value, bytes):
        return value[0]
    if ffi.typeof(value).kind == "struct":
        if ffi.typeof(value).cname == "ncclUniqueId":
            return bytes(ffi.buffer(ffi.addressof(value)))
        return complex(value.x, value.y)
    return int(ffi.cast("uintptr_t", value))


def _result(ffi, result: str, value, kept: dict):
    """A Python result as the C type `result` (None, from a failed call, as zero or NULL)."""
    if result == "void":
        return None
    if result == "const char *":
        if value is None:
            return ffi.NULL
        if value not in kept:
            kept[value] = ffi.new("char[]", value.encode())
        return kept[value]
    if result.endswith("*"):                     # an address (cuFFTW's plans and memory), NULL for None
        return ffi.cast(result, value or 0)
    if result in ("cuComplex", "cuDoubleComplex"):
        value = complex(value or 0)
        return ffi.new(result + " *", (value.real, value.imag))[0]
    return 0 if value is None else value


def define(ffi, lib, name: str) -> None:
    spec = next(lib_ for lib_ in LIBRARIES if lib_.module == name)
    functions = importlib.import_module(f"anycuda.libraries.{name}.functions")
    status = importlib.import_module(f"anycuda.libraries.{name}.status")       # Error, ANSWERS
    Error, answer = status.Error, status.ANSWERS
    kept = {}

    def run(cname, fn, args):
        """(status, result) of `fn` on the C arguments: every exception becomes the library's status."""
        try:
            values = [_argument(ffi, a) for a in args]
            if TRACE:
                sys.stderr.write(f"anycuda: {cname}{tuple(values)}\n")
            if profile.ENABLED:          # the work the call queues is timed under its name
                with profile.library_call(cname):
                    return answer["success"], fn(*values)
            return answer["success"], fn(*values)
        except Error as e:
            if e.status != answer["quiet"] or TRACE:      # argument errors are the program's to handle
                _say_once(f"{cname}: {e}")
            return e.status, None
        except CudaError as e:
            _say_once(f"{cname}: {e}")
            return answer["unsupported"] if e.code == CUresult.CUDA_ERROR_NOT_SUPPORTED else answer["failed"], None
        except Exception:                   # noqa: BLE001 -- a bug of anycuda: say it, answer a status
            _say_once(f"{cname}: internal error\n{traceback.format_exc()}")
            return answer["internal"], None

    def entry(cname, fn):
        def call(*args):
            return run(cname, fn, args)[0]
        call.__name__ = cname
        return call

    for cname, (kinds, fn) in functions.table().items():
        ffi.def_extern(name=python_name(spec, cname))(entry(cname, fn))
    if spec.front is not None:           # the Python half of the library's C front
        importlib.import_module(f"anycuda.libraries.{name}.front").attach(ffi, lib, enabled=not TRACE)

    # a function whose result is not a status answers zero when it fails; the library may keep
    # the status (`valued_failed`: cuBLAS's legacy routines keep it for cublasGetError)
    failed = getattr(functions, "valued_failed", None)

    def valued(cname, fn, result):
        def call(*args):
            code, value = run(cname, fn, args)
            if code != answer["success"] and failed is not None:
                failed(cname, code)
            return _result(ffi, result, value, kept)
        return call

    for cname, fn in functions.VALUED.items():
        kinds, result = functions.signatures.VALUED[cname]
        ffi.def_extern(name=cname, onerror=lambda *exc: None)(valued(cname, fn, result))

    @ffi.def_extern(name="anycuda_unsupported")
    def unsupported(index):
        _say_once(f"{unsupported_name(spec, index)} is not implemented by anycuda's {spec.sonames[0]} "
                  f"(it answers {spec.not_supported[1]})")
        return spec.not_supported[0]
