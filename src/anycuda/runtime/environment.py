"""Settings that apply per launch, read from the environment at each one, cheaply.

A launch reads a few settings (ANYCUDA_LAUNCH_TIMEOUT, ANYCUDA_PER_THREAD_DEFAULT_STREAM)
that a program or a test may change between launches. `os.environ.get` encodes the name and
decodes the value at every call: 2.2 us a read on the 2-core VM of the benchmarks, a tenth of
what the Python side of a launch took in all. os.environ keeps the raw bytes in its `_data`
mapping (CPython's, on POSIX, in every version), which every change made through os.environ
updates; a lookup there by a name already encoded took 0.1 us. Where that mapping is missing
(another Python), os.environ itself is read. A change made by C code with setenv reaches
neither, as it never reached os.environ.
"""
from __future__ import annotations

import os


def _raw_mapping():
    data = getattr(os.environ, "_data", None)
    if isinstance(data, dict) and all(isinstance(k, bytes) for k in list(data)[:8]):
        return data
    return None


_RAW = _raw_mapping()


def raw(name: bytes):
    """The value of environment variable `name` as bytes, or None where it is unset."""
    if _RAW is not None:
        return _RAW.get(name)
    value = os.environ.get(os.fsdecode(name))
    return None if value is None else os.fsencode(value)


def is_set(name: bytes, off=(b"", b"0")) -> bool:
    """Whether `name` is set to anything but what `off` names (stripped): unset, empty or 0."""
    value = raw(name)
    return value is not None and value.strip() not in off
