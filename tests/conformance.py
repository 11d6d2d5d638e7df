"""Shared helpers for the conformance tests: compile our CUDA C++ kernels once per session
(skipping with the reason when no CUDA C++ compiler exists), fresh random inputs with the
seed in failure messages, and poisoned output buffers."""
from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

import anycuda as ac

KERNELS = Path(__file__).parent / "kernels"
_modules = {}


def load_cuda(name: str, options=()) -> ac.RawModule:
    """The RawModule for tests/kernels/<name>.cu (compiled once per session)."""
    key = (name, tuple(options))
    if key not in _modules:
        source = (KERNELS / f"{name}.cu").read_text()
        try:
            _modules[key] = ac.RawModule(code=source, options=tuple(options), name=f"{name}.cu")
        except ac.CompileError as e:
            if "no CUDA C++ compiler" in str(e):
                pytest.skip(str(e))
            raise
    return _modules[key]


def poison(shape, dtype) -> ac.ndarray:
    """A device array full of a recognisable garbage pattern (NaN for floats)."""
    dtype = np.dtype(dtype)
    a = ac.empty(shape, dtype)
    if dtype.kind == "f":
        a.set(np.full(shape, np.nan, dtype))
    else:
        a.set(np.frombuffer(b"\xcd" * (int(np.prod(shape)) * dtype.itemsize), dtype=dtype).reshape(shape))
    return a


def make_rng():
    seed = int.from_bytes(os.urandom(4), "little")
    return np.random.default_rng(seed), seed


def round_directed(exact, mode: str, dtype=np.float32):
    """The `dtype` value nearest to the rational `exact` in direction `mode`: 'rn' (to
    nearest even), 'rz' (toward zero), 'rd' (toward -inf), 'ru' (toward +inf). Overflow gives
    infinity only when rounding away from zero, as IEEE 754 says."""
    from fractions import Fraction
    dtype = np.dtype(dtype).type
    with np.errstate(over="ignore"):
        cand = dtype(float(exact)) if abs(exact) < 2 ** 1100 else dtype(np.copysign(np.inf, float(exact.numerator)))
    if mode == "rz":
        mode = "rd" if exact >= 0 else "ru"
    biggest = dtype(np.finfo(dtype).max)
    if np.isinf(cand):
        if mode == "rd" and exact > 0:
            return biggest
        if mode == "ru" and exact < 0:
            return -biggest
        return cand
    if mode == "rn":
        return cand
    while mode == "rd" and Fraction(float(cand)) > exact:
        cand = np.nextafter(cand, dtype(-np.inf))
    while mode == "ru" and Fraction(float(cand)) < exact:
        cand = np.nextafter(cand, dtype(np.inf))
    return cand
