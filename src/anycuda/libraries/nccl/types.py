"""ncclDataType_t: how each type is stored and in what it is reduced. Integers and IEEE single
and double reduce in their own type (integers wrap, as C's do); half, bfloat16 and the two fp8
types are widened to float32, reduced there and rounded back to nearest even (fp8 saturating to
its largest finite value, as cuda_fp8.h's conversions NCCL uses do; a NaN stays a NaN).

numpy has no bfloat16 or fp8: a stored element is a uint16 or uint8, converted by
../halves.py (16-bit) or by the tables below (8-bit: 256 codes, decoded by lookup, encoded by
a search over the sorted finite magnitudes)."""
from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from .. import halves


class DataType(enum.IntEnum):
    Int8 = 0
    Uint8 = 1
    Int32 = 2
    Uint32 = 3
    Int64 = 4
    Uint64 = 5
    Float16 = 6
    Float32 = 7
    Float64 = 8
    Bfloat16 = 9
    Float8e4m3 = 10
    Float8e5m2 = 11


def _fp8_values(exponent_bits: int, mantissa_bits: int, finite_codes: int) -> np.ndarray:
    """float32 value of each of the 128 positive codes (NaN past the finite ones; e5m2's first
    code past them is infinity, as in IEEE)."""
    bias = (1 << (exponent_bits - 1)) - 1
    values = np.full(128, np.nan, np.float64)
    for code in range(finite_codes):
        e, m = code >> mantissa_bits, code & ((1 << mantissa_bits) - 1)
        if e == 0:
            values[code] = m / (1 << mantissa_bits) * 2.0 ** (1 - bias)
        else:
            values[code] = (1 + m / (1 << mantissa_bits)) * 2.0 ** (e - bias)
    if exponent_bits == 5:
        values[finite_codes] = np.inf
    return values.astype(np.float32)


@dataclass(frozen=True)
class Fp8:
    positive: np.ndarray          # value of each code 0..127
    finite: int                   # codes 0..finite-1 are finite
    nan: int                      # the positive NaN code written for a NaN

    @property
    def table(self) -> np.ndarray:
        return np.concatenate([self.positive, -self.positive])

    def decode(self, stored: np.ndarray) -> np.ndarray:
        return self.table[stored]

    def encode(self, values: np.ndarray) -> np.ndarray:
        """Round float32 values to the nearest code (ties to the even code), saturating."""
        x = np.asarray(values, np.float32)
        mags = self.positive[:self.finite]
        a = np.minimum(np.abs(x), mags[-1])
        hi = np.clip(np.searchsorted(mags, a), 0, self.finite - 1)
        lo = np.maximum(hi - 1, 0)
        d_lo, d_hi = a - mags[lo], mags[hi] - a
        pick_hi = (d_hi < d_lo) | ((d_hi == d_lo) & (hi % 2 == 0))
        code = np.where(pick_hi, hi, lo).astype(np.uint8)
        code = np.where(np.isnan(x), self.nan, code).astype(np.uint8)
        return code | np.where(np.signbit(x), 0x80, 0).astype(np.uint8)


FP8 = {DataType.Float8e4m3: Fp8(_fp8_values(4, 3, 127), 127, 0x7F),
       DataType.Float8e5m2: Fp8(_fp8_values(5, 2, 124), 124, 0x7E)}

# stored element, element reduced in
STORAGE = {DataType.Int8: np.int8, DataType.Uint8: np.uint8, DataType.Int32: np.int32,
           DataType.Uint32: np.uint32, DataType.Int64: np.int64, DataType.Uint64: np.uint64,
           DataType.Float16: np.float16, DataType.Float32: np.float32, DataType.Float64: np.float64,
           DataType.Bfloat16: np.uint16, DataType.Float8e4m3: np.uint8, DataType.Float8e5m2: np.uint8}
WIDENED = (DataType.Float16, DataType.Bfloat16, DataType.Float8e4m3, DataType.Float8e5m2)


def storage(dtype: DataType) -> np.dtype:
    return np.dtype(STORAGE[dtype])


def compute(dtype: DataType) -> np.dtype:
    return np.dtype(np.float32) if dtype in WIDENED else storage(dtype)


def is_float(dtype: DataType) -> bool:
    return compute(dtype).kind == "f"


def widen(dtype: DataType, stored: np.ndarray) -> np.ndarray:
    """Stored elements as a new array of the type they are reduced in (always a copy, so a
    result may be written over its own input)."""
    if dtype in FP8:
        return FP8[dtype].decode(stored)
    if dtype in (DataType.Float16, DataType.Bfloat16):
        return halves.widen(stored, dtype == DataType.Bfloat16)
    return np.array(stored, copy=True)


def narrow(dtype: DataType, dest: np.ndarray, values: np.ndarray) -> None:
    """Write reduced values into stored elements, rounded to the stored type."""
    if dtype in FP8:
        dest[...] = FP8[dtype].encode(values)
    elif dtype in (DataType.Float16, DataType.Bfloat16):
        halves.narrow(dest, values, dtype == DataType.Bfloat16)
    else:
        dest[...] = values


def scalar(dtype: DataType, raw: bytes):
    """One element's bytes (a PreMulSum factor) as the value it is reduced with."""
    stored = np.frombuffer(raw, storage(dtype), count=1)
    return widen(dtype, stored)[0]
