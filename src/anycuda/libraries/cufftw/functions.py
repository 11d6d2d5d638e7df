"""Every FFTW function anycuda's libcufftw implements, in double (fftw_) and single (fftwf_)
precision: C name -> the Python that answers it (the C arguments in order, addresses as
integers). None returns a status (FFTW's interface has none), so all are in VALUED; a planner
that fails answers NULL, as FFTW's do. Plans are numbers handed out by plan.py, never
addresses. Wisdom, time limits and planner flags change nothing: there is no planning to
measure, so every plan is what FFTW_ESTIMATE makes, and none reads or writes its arrays."""
from __future__ import annotations

import ctypes
import math
import os

import numpy as np

from ..memory import array, write_scalar
from . import plan as plans, signatures
from .status import Failure, require

ALIGNMENT = 64            # fftw_malloc's alignment: what SIMD loads of any width want

_libc = ctypes.CDLL(None)
_libc.posix_memalign.argtypes = [ctypes.POINTER(ctypes.c_void_p), ctypes.c_size_t, ctypes.c_size_t]
_libc.free.argtypes = [ctypes.c_void_p]


def malloc(size: int) -> int:
    """Memory for arrays, aligned as FFTW's is (NULL when it cannot be had, as FFTW's malloc)."""
    out = ctypes.c_void_p()
    if _libc.posix_memalign(ctypes.byref(out), ALIGNMENT, max(size, 1)) != 0:
        return 0
    return out.value or 0


def free(address: int) -> None:
    _libc.free(address or None)


def _ints(address: int, count: int, what: str) -> tuple:
    require(address != 0, Failure.INVALID, f"the {what} array is NULL")
    return tuple(int(v) for v in array(address, count, np.int32))


def _embed(address: int, rank: int):
    return _ints(address, rank, "embed") if address else None


_IODIM = {"guru": np.dtype([("n", np.int32), ("is", np.int32), ("os", np.int32)]),
          "guru64": np.dtype([("n", np.int64), ("is", np.int64), ("os", np.int64)])}


def _iodims(address: int, rank: int, form: str) -> list:
    """fftw_iodim (or fftw_iodim64) entries: (n, input stride, output stride)."""
    if rank == 0:
        return []
    require(address != 0, Failure.INVALID, "the dims array is NULL")
    return [tuple(int(v) for v in entry) for entry in array(address, rank, _IODIM[form])]


def _planners(single: bool) -> dict:
    """The planners of one precision: name after the prefix -> function."""
    def new(plan):
        return plans.add(plan)

    def basic(kind):
        def planner(*args):
            *sizes, source, dest = args[:-1] if kind != "c2c" else args[:-2]
            return new(plans.basic(kind, single, sizes, args[-2] if kind == "c2c" else 0, source, dest))
        return planner

    def rank_n(kind):
        def planner(rank, n, source, dest, *rest):
            require(rank >= 1, Failure.INVALID, f"rank {rank}")
            return new(plans.basic(kind, single, _ints(n, rank, "n"), rest[0] if kind == "c2c" else 0, source, dest))
        return planner

    def many(kind):
        def planner(rank, n, howmany, source, inembed, istride, idist, dest, onembed, ostride, odist, *rest):
            require(rank >= 1, Failure.INVALID, f"rank {rank}")
            return new(plans.many(kind, single, _ints(n, rank, "n"), howmany, _embed(inembed, rank), istride, idist,
                                  _embed(onembed, rank), ostride, odist, rest[0] if kind == "c2c" else 0, source,
                                  dest))
        return planner

    def guru(kind, form):
        def planner(rank, dims, batch_rank, batch_dims, source, dest, *rest):
            require(rank >= 1 and batch_rank >= 0, Failure.INVALID, f"rank {rank}, howmany rank {batch_rank}")
            transform = _iodims(dims, rank, form)
            return new(plans.make(kind, single, [d[0] for d in transform], [d[1] for d in transform],
                                  [d[2] for d in transform], tuple(_iodims(batch_dims, batch_rank, form)),
                                  rest[0] if kind == "c2c" else 0, source, dest))
        return planner

    out = {}
    for kind, infix in (("c2c", ""), ("r2c", "_r2c"), ("c2r", "_c2r")):
        for d in ("1d", "2d", "3d"):
            out[f"plan_dft{infix}_{d}"] = basic(kind)
        out[f"plan_dft{infix}"] = rank_n(kind)
        out[f"plan_many_dft{infix}"] = many(kind)
        out[f"plan_guru_dft{infix}"] = guru(kind, "guru")
        out[f"plan_guru64_dft{infix}"] = guru(kind, "guru64")
    return out


def _execute(number: int) -> None:
    p = plans.get(number)
    plans.execute(p, p.source, p.dest)


def _execute_on(kind: str):
    """fftw_execute_dft*: the plan on other arrays (of the plan's kind, layout and alignment)."""
    def execute(number, source, dest):
        p = plans.get(number)
        require(p.kind == kind, Failure.INVALID, f"a {p.kind} plan executed as {kind}")
        plans.execute(p, source, dest)
    return execute


def _transforms(p: plans.Plan) -> tuple:
    """(points of one transform, number of transforms)."""
    return math.prod(p.sizes), math.prod(n for n, _, _ in p.batch)


def _flops(number, add, mul, fma):
    """An estimate, as FFTW's is: 5 n log2 n operations per complex transform (half that for a
    real one), split into additions and multiplications; no fused ones are counted."""
    p = plans.get(number)
    points, count = _transforms(p)
    total = 5 * points * math.log2(max(points, 2)) * count * (1 if p.kind == "c2c" else 0.5)
    for address, value in ((add, total * 0.6), (mul, total * 0.4), (fma, 0.0)):
        if address:
            write_scalar(address, value, np.float64)


def _print_plan(number):
    p = plans.get(number)
    points, count = _transforms(p)
    text = (f"(anycuda-dft-{p.kind} {'x'.join(map(str, p.sizes))} {'forward' if p.sign < 0 else 'backward'}"
            f"{f' howmany {count}' if p.batch else ''})")
    os.write(1, text.encode())


def _common(single: bool) -> dict:
    real_size, complex_size = (4, 8) if single else (8, 16)
    return {
        **_planners(single),
        "execute": _execute, "execute_dft": _execute_on("c2c"), "execute_dft_r2c": _execute_on("r2c"),
        "execute_dft_c2r": _execute_on("c2r"), "destroy_plan": lambda number: number and plans.destroy(number),
        "cleanup": lambda: None,
        "malloc": malloc, "free": free,
        "alloc_real": lambda n: malloc(n * real_size), "alloc_complex": lambda n: malloc(n * complex_size),
        "export_wisdom_to_file": lambda f: None, "import_wisdom_from_file": lambda f: 0,     # no wisdom to keep
        "print_plan": _print_plan, "set_timelimit": lambda seconds: None, "cost": lambda number: 0.0,
        "flops": _flops,
    }


VALUED = {prefix + name: fn for prefix, single in zip(signatures.PREFIXES, (False, True))
          for name, fn in _common(single).items()}
assert set(VALUED) == set(signatures.VALUED)


def table() -> dict:
    return {}
