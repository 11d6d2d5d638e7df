"""Every cuFFT function anycuda implements: C name -> (kinds, the Python that answers it, taking
the C arguments in order, addresses as integers); kinds are in signatures.py. The plan
functions all come down to `_make`: cufftPlan* create and make, cufftMakePlan* make a created
plan, cufftEstimate*/cufftGetSize* only check and report the work area."""
from __future__ import annotations

import numpy as np

from ..memory import array, write_scalar
from . import execute, plan as plans, signatures, xt
from .plan import Layout
from .status import Result, require

VERSION = 12500           # cuFFT 12.5, what the headers anycuda is tested against report


def _sizes(address: int, count: int, dtype) -> tuple:
    require(address != 0, Result.INVALID_VALUE, "a size array is NULL")
    return tuple(int(v) for v in array(address, count, dtype))


def _layout(embed: int, rank: int, stride: int, dist: int, dtype) -> Layout | None:
    """An advanced layout, or None for NULL embed (the basic layout)."""
    return Layout(_sizes(embed, rank, dtype), stride, dist) if embed else None


def _report(work: int, size: int) -> None:
    if work:
        write_scalar(work, size, np.uint64)


def _make(p, sizes, kind, batch, inner=None, outer=None, work=0):
    _report(work, p.make(sizes, kind, batch, inner, outer))


def _many(dtype):
    """(rank, n, inembed, istride, idist, onembed, ostride, odist, type, batch) -> make arguments."""
    def arguments(rank, n, inembed, istride, idist, onembed, ostride, odist, kind, batch):
        require(1 <= rank <= 3, Result.INVALID_SIZE, f"rank {rank}")
        return (_sizes(n, rank, dtype), kind, batch, _layout(inembed, rank, istride, idist, dtype),
                _layout(onembed, rank, ostride, odist, dtype))
    return arguments


_many32, _many64 = _many(np.int32), _many(np.int64)


def _create(out: int) -> int:
    require(out != 0, Result.INVALID_VALUE, "the handle pointer is NULL")
    handle = plans.create()
    write_scalar(out, handle, np.int32)
    return handle


def _plan_new(out, arguments):
    """cufftPlan*: create and make with `arguments()` (a failure leaves no plan behind, and -1
    in *out: CUFFT_PLAN_NULL, which cufftDestroy accepts)."""
    handle = _create(out)
    try:
        _make(plans.get(handle, made=False), *arguments())
    except Exception:
        plans.destroy(handle)
        write_scalar(out, -1, np.int32)
        raise


def _estimate(*args, work):
    plans.Plan().make(*args)
    _report(work, 0)


def _property(kind, out):
    require(kind in (0, 1, 2) and out != 0, Result.INVALID_VALUE, f"library property {kind}")
    write_scalar(out, (12, 5, 0)[kind], np.int32)


def _set_property(handle, prop, value):
    require(prop in (1, 2, 3, 4), Result.INVALID_VALUE, f"plan property {prop}")
    plans.get(handle, made=False).properties[prop] = value


def _get_property(handle, prop, out):
    p = plans.get(handle, made=False)
    require(prop in p.properties, Result.INVALID_VALUE, f"plan property {prop} is not set")
    write_scalar(out, p.properties[prop], np.int64)


def _set(field):
    def setter(handle, value):
        setattr(plans.get(handle, made=False), field, value)
    return setter


_TABLE = {
    "cufftCreate": _create,
    "cufftDestroy": lambda h: None if h == -1 else plans.destroy(h),       # CUFFT_PLAN_NULL
    "cufftPlan1d": lambda out, nx, kind, batch: _plan_new(out, lambda: ((nx,), kind, batch)),
    "cufftPlan2d": lambda out, nx, ny, kind: _plan_new(out, lambda: ((nx, ny), kind, 1)),
    "cufftPlan3d": lambda out, nx, ny, nz, kind: _plan_new(out, lambda: ((nx, ny, nz), kind, 1)),
    "cufftPlanMany": lambda out, rank, *many: _plan_new(out, lambda: _many32(rank, *many)),
    "cufftMakePlan1d": lambda h, nx, kind, batch, work: _make(plans.get(h, False), (nx,), kind, batch, work=work),
    "cufftMakePlan2d": lambda h, nx, ny, kind, work: _make(plans.get(h, False), (nx, ny), kind, 1, work=work),
    "cufftMakePlan3d": lambda h, nx, ny, nz, kind, work: _make(plans.get(h, False), (nx, ny, nz), kind, 1, work=work),
    "cufftMakePlanMany": lambda h, rank, *rest: _make(plans.get(h, False), *_many32(rank, *rest[:-1]), work=rest[-1]),
    "cufftMakePlanMany64": lambda h, rank, *rest: _make(plans.get(h, False), *_many64(rank, *rest[:-1]),
                                                        work=rest[-1]),
    "cufftGetSizeMany64": lambda h, rank, *rest: (plans.get(h, False), _estimate(*_many64(rank, *rest[:-1]),
                                                                                 work=rest[-1])),
    "cufftEstimate1d": lambda nx, kind, batch, work: _estimate((nx,), kind, batch, None, None, work=work),
    "cufftEstimate2d": lambda nx, ny, kind, work: _estimate((nx, ny), kind, 1, None, None, work=work),
    "cufftEstimate3d": lambda nx, ny, nz, kind, work: _estimate((nx, ny, nz), kind, 1, None, None, work=work),
    "cufftEstimateMany": lambda rank, *rest: _estimate(*_many32(rank, *rest[:-1]), work=rest[-1]),
    "cufftGetSize1d": lambda h, nx, kind, batch, work: (plans.get(h, False),
                                                        _estimate((nx,), kind, batch, None, None, work=work)),
    "cufftGetSize2d": lambda h, nx, ny, kind, work: (plans.get(h, False),
                                                     _estimate((nx, ny), kind, 1, None, None, work=work)),
    "cufftGetSize3d": lambda h, nx, ny, nz, kind, work: (plans.get(h, False),
                                                         _estimate((nx, ny, nz), kind, 1, None, None, work=work)),
    "cufftGetSizeMany": lambda h, rank, *rest: (plans.get(h, False),
                                                _estimate(*_many32(rank, *rest[:-1]), work=rest[-1])),
    "cufftGetSize": lambda h, work: (plans.get(h), _report(work, 0)),
    "cufftSetWorkArea": _set("work_area"),
    "cufftSetAutoAllocation": _set("auto_allocation"),
    "cufftSetStream": _set("stream"),
    "cufftExecC2C": lambda h, i, o, d: execute.execute(h, "C2C", i, o, d),
    "cufftExecZ2Z": lambda h, i, o, d: execute.execute(h, "Z2Z", i, o, d),
    "cufftExecR2C": lambda h, i, o: execute.execute(h, "R2C", i, o),
    "cufftExecD2Z": lambda h, i, o: execute.execute(h, "D2Z", i, o),
    "cufftExecC2R": lambda h, i, o: execute.execute(h, "C2R", i, o),
    "cufftExecZ2D": lambda h, i, o: execute.execute(h, "Z2D", i, o),
    "cufftGetVersion": lambda out: write_scalar(out, VERSION, np.int32),
    "cufftGetProperty": _property,
    "cufftSetPlanPropertyInt64": _set_property,
    "cufftGetPlanPropertyInt64": _get_property,
    "cufftResetPlanProperty": lambda h, prop: plans.get(h, made=False).properties.pop(prop, None),
    **xt.TABLE,
}

VALUED = {}


def table() -> dict:
    return {name: (signatures.FUNCTIONS[name], fn) for name, fn in _TABLE.items()}
