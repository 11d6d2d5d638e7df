"""ncclRedOp_t: the built-in operations and the PreMulSum operations a communicator creates
(ncclRedOpCreatePreMulSum), applied to the ranks' contributions in rank order.

Contributions arrive widened (types.widen); the result is in the same compute type. Integer
arithmetic wraps; an integer average truncates towards zero as C's division does. A float
average is a PreMulSum by 1/nranks, as NCCL computes it (each contribution scaled first)."""
from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np

from . import types
from .status import NcclError, Result, require


class RedOp(enum.IntEnum):
    Sum = 0
    Prod = 1
    Max = 2
    Min = 3
    Avg = 4


NUM_OPS = 5
FOLDS = {RedOp.Sum: np.add, RedOp.Prod: np.multiply, RedOp.Max: np.maximum, RedOp.Min: np.minimum}


@dataclass
class PreMulSum:
    """A created operation: each contribution times `factor` (an element of `dtype`), summed.
    With `address` (ncclScalarDevice) the factor is read from device memory when the
    collective runs; else it was read when the operation was created."""
    dtype: int
    factor: object = None
    address: int = 0

    def value(self):
        if self.address:
            from ..memory import array
            raw = array(self.address, 1, types.storage(self.dtype)).tobytes()
            return types.scalar(self.dtype, raw)
        return self.factor


def folded(fold, parts: list) -> np.ndarray:
    """`parts` folded left to right by `fold` (np.add...): a new array; integers wrap."""
    with np.errstate(over="ignore", invalid="ignore"):
        out = parts[0].copy()
        for p in parts[1:]:
            fold(out, p, out=out)
    return out


def _scaled(parts, factor, dtype):
    with np.errstate(over="ignore", invalid="ignore"):
        return [p * np.asarray(factor).astype(p.dtype) for p in parts]


def reduce(parts: list, op, dtype: int, created: dict, nranks: int) -> np.ndarray:
    """The reduction of the ranks' widened contributions `parts` (rank order) by `op`;
    `created` holds the communicator's PreMulSum operations."""
    if op in FOLDS:
        return folded(FOLDS[op], parts)
    if op == RedOp.Avg:
        if types.is_float(dtype):
            return folded(np.add, _scaled(parts, 1.0 / nranks, dtype))
        return int_average(folded(np.add, parts), nranks)
    pre = created.get(op)
    if pre is None:
        raise NcclError(Result.InvalidArgument, f"reduction operation {op} does not exist")
    return folded(np.add, _scaled(parts, pre.value(), dtype))


def as_built_in(op: int, dtype: int, values: np.ndarray, nranks: int, created: dict):
    """(values to reduce, the built-in operation reducing them, what the total needs after) for
    one rank's widened contribution to a reduction by `op`: an average or a PreMulSum is a sum of
    contributions each scaled first (as NCCL computes them), an integer average a sum divided after."""
    if op in FOLDS:
        return values, op, None
    if op == RedOp.Avg and not types.is_float(dtype):
        return values, RedOp.Sum, lambda total: int_average(total, nranks)
    factor = (1.0 / nranks) if op == RedOp.Avg else created[op].value()
    with np.errstate(over="ignore", invalid="ignore"):
        return values * np.asarray(factor).astype(values.dtype), RedOp.Sum, None


def int_average(total: np.ndarray, n: int) -> np.ndarray:
    """An integer sum divided by n, truncated towards zero (C's division)."""
    if total.dtype.kind == "u":
        return total // total.dtype.type(n)
    q = np.abs(total) // total.dtype.type(n)
    return np.where(total < 0, -q, q).astype(total.dtype)


def check(op: int, dtype: int, created: dict) -> None:
    """An operation a collective may use with `dtype` (argument rule, before queueing)."""
    if 0 <= op < NUM_OPS:
        return
    pre = created.get(op)
    require(pre is not None, Result.InvalidArgument, f"reduction operation {op} is neither built in nor created "
            "on this communicator")
    require(pre.dtype == dtype, Result.InvalidArgument,
            f"reduction operation {op} was created for data type {pre.dtype}, used with {dtype}")
