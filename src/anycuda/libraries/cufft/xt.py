"""cuFFT's extensible API (cufftXt.h): plans of any cudaDataType precision (half, bfloat16,
single, double), plans over several GPUs (cufftXtSetGPUs, ANYCUDA_DEVICES of them), their
memory descriptors (descriptors.py) and executions on them. Executions are queued on the plan's
stream like cufftExec*; cufftXtMemcpy is synchronous, as cuFFT's is, and ordered after the
plan's work.

Callbacks are refused with CUFFT_NOT_SUPPORTED: a callback is a device function of the
program's own (a pointer into its device code, or LTO-IR for cufftXtSetJITCallback) that cuFFT
links into its kernels; anycuda's transforms are pocketfft, not PTX, so it would have to load,
compile and call the program's device code per element, which it does not do.
"""
from __future__ import annotations

import numpy as np

from ...driver import api
from ...runtime.device import device_count
from ..memory import array, write_scalar
from . import descriptors, execute, plan as plans
from .descriptors import INPLACE, INPLACE_SHUFFLED, PERMUTED
from .plan import Layout
from .status import CufftError, Result, require

HOST_TO_DEVICE, DEVICE_TO_HOST, DEVICE_TO_DEVICE = 0, 1, 2
CALLBACK_TYPES = range(8)           # CUFFT_CB_LD_COMPLEX .. CUFFT_CB_ST_REAL_DOUBLE
WORK_AREA_POLICIES = range(3)       # MINIMAL, USER, PERFORMANCE


def set_gpus(handle: int, count: int, which: int) -> None:
    p = plans.get(handle, made=False)
    require(not p.made, Result.INVALID_PLAN, f"plan {handle} is made already (cufftXtSetGPUs comes before)")
    require(which != 0, Result.INVALID_VALUE, "the GPU list is NULL")
    require(1 <= count <= descriptors.MAX_GPUS, Result.INVALID_VALUE, f"{count} GPUs")
    gpus = tuple(int(g) for g in array(which, count, np.int32))
    require(all(0 <= g < device_count() for g in gpus), Result.INVALID_DEVICE,
            f"GPUs {list(gpus)}: there are {device_count()} (ANYCUDA_DEVICES sets how many)")
    require(len(set(gpus)) == count, Result.INVALID_VALUE, f"GPUs {list(gpus)} name one twice")
    p.gpus = gpus


def _xt_arguments(rank, n, inembed, istride, idist, in_type, onembed, ostride, odist, out_type, batch, exec_type):
    """cufftXtMakePlanMany's arguments as Plan.make takes them."""
    require(1 <= rank <= 3, Result.INVALID_SIZE, f"rank {rank}")
    require(n != 0, Result.INVALID_VALUE, "the size array is NULL")
    transform = plans.XT_TRANSFORMS.get((in_type, out_type, exec_type))
    require(transform is not None, Result.INVALID_TYPE,
            f"input, output and execution types {in_type}, {out_type}, {exec_type} (cudaDataType)")

    def layout(embed, stride, dist):
        return Layout(tuple(int(e) for e in array(embed, rank, np.int64)), stride, dist) if embed else None
    return (tuple(int(s) for s in array(n, rank, np.int64)), transform, batch,
            layout(inembed, istride, idist), layout(onembed, ostride, odist))


def make_plan_many(handle, rank, *rest) -> None:
    *arguments, work, exec_type = rest
    size = plans.get(handle, made=False).make(*_xt_arguments(rank, *arguments, exec_type))
    if work:
        write_scalar(work, size, np.uint64)


def get_size_many(handle, rank, *rest) -> None:
    plans.get(handle, made=False)
    *arguments, work, exec_type = rest
    plans.Plan().make(*_xt_arguments(rank, *arguments, exec_type))
    if work:
        write_scalar(work, 0, np.uint64)


def malloc(handle: int, out: int, subformat: int) -> None:
    require(out != 0, Result.INVALID_VALUE, "the descriptor pointer is NULL")
    write_scalar(out, descriptors.allocate(plans.get(handle), subformat).address, np.uint64)


def free(address: int) -> None:
    """cufftXtFree: as cudaFree, after the work queued on the descriptor's plan."""
    d = descriptors.get(address)
    api.wait_for_stream(d.plan.stream)
    descriptors.free(address)


def _fitting(p: plans.Plan, address: int) -> descriptors.Descriptor:
    """The descriptor at `address`, which must hold data of the plan's shape."""
    d = descriptors.get(address)
    q = d.plan
    require(d.plan is p or (q.sizes, q.batch, q.gpus, q.transform) == (p.sizes, p.batch, p.gpus, p.transform),
            Result.INVALID_VALUE, "the descriptor was allocated for a plan of another shape")
    return d


def memcpy(handle: int, dst: int, src: int, kind: int) -> None:
    p = plans.get(handle)
    require(dst != 0 and src != 0, Result.INVALID_VALUE, "a pointer is NULL")
    require(kind in (HOST_TO_DEVICE, DEVICE_TO_HOST, DEVICE_TO_DEVICE), Result.INVALID_VALUE, f"copy type {kind}")
    if kind == HOST_TO_DEVICE:
        d = _fitting(p, dst)
        api.submit(p.stream, descriptors.scatter, d, src, d.format)
    elif kind == DEVICE_TO_HOST:
        d = _fitting(p, src)
        api.submit(p.stream, descriptors.gather, d, dst, d.format)
    else:
        source, dest = _fitting(p, src), _fitting(p, dst)
        api.submit(p.stream, _redistribute, source, source.format, dest, dest.format)
    api.wait_for_stream(p.stream)


def _redistribute(source, source_format, dest, dest_format) -> None:
    """Copy one descriptor's data into another, each in its own order."""
    whole = np.empty(max(int(d.body["size"][0].sum()) for d in (source, dest)), np.uint8)
    descriptors.gather(source, whole.ctypes.data, source_format)
    descriptors.scatter(dest, whole.ctypes.data, dest_format)


def _distributed_run(p: plans.Plan, d, before: int, after: int, direction: int) -> None:
    """A multi-GPU transform: the GPUs' parts gathered in natural order, transformed in place
    and shared out again in the order the transform leaves them."""
    whole = np.empty(descriptors.natural_bytes(p), np.uint8)
    descriptors.gather(d, whole.ctypes.data, before)
    execute.run(p, whole.ctypes.data, whole.ctypes.data, direction)
    descriptors.scatter(d, whole.ctypes.data, after)


def exec_descriptor(handle: int, source: int, dest: int, direction: int | None, name: str = "") -> None:
    """cufftXtExecDescriptor (any plan), or cufftXtExecDescriptor<name> (a plan of that type)."""
    p = plans.get(handle)
    require(not name or p.transform.name == name, Result.INVALID_VALUE,
            f"cufftXtExecDescriptor{name} on a {p.transform.name} plan")
    require(source != 0 and dest != 0, Result.INVALID_VALUE, "a descriptor is NULL")
    src, dst = _fitting(p, source), _fitting(p, dest)
    direction = execute.checked_direction(p, direction)
    if not p.distributed:
        execute.submit(p, src.pointer(0), dst.pointer(0), direction)
        return
    require(src is dst, Result.INVALID_VALUE, "transforms on several GPUs are in place: one descriptor in and out")
    before = src.format
    # batches stay where they are; a single transform turns natural order into permuted and back
    after = before if p.batch > 1 else (INPLACE if before in PERMUTED else INPLACE_SHUFFLED)
    src.format = after
    api.submit(p.stream, _distributed_run, p, src, before, after, direction)


def _no_callbacks(handle: int, kind: int, *_) -> None:
    plans.get(handle, made=False)
    raise CufftError(Result.NOT_SUPPORTED, "cuFFT callbacks are device code of the program, which anycuda's "
                           "transforms (pocketfft on the CPU) cannot call")


def _clear_callback(handle: int, kind: int) -> None:
    plans.get(handle, made=False)
    require(kind in CALLBACK_TYPES, Result.INVALID_VALUE, f"callback type {kind}")   # none can be set


def _set_work_area_policy(handle: int, policy: int, size: int) -> None:
    plans.get(handle, made=False)
    require(policy in WORK_AREA_POLICIES, Result.INVALID_VALUE, f"work area policy {policy}")


def _set_work_areas(handle: int, areas: int) -> None:
    plans.get(handle).work_area = areas           # anycuda needs none; kept as cufftSetWorkArea keeps one


def _exec_descriptor_as(name: str, directed: bool):
    if directed:
        return lambda h, i, o, d: exec_descriptor(h, i, o, d, name)
    return lambda h, i, o: exec_descriptor(h, i, o, None, name)


TABLE = {
    "cufftXtSetGPUs": set_gpus,
    "cufftXtMakePlanMany": make_plan_many,
    "cufftXtGetSizeMany": get_size_many,
    "cufftXtMalloc": malloc,
    "cufftXtFree": free,
    "cufftXtMemcpy": memcpy,
    "cufftXtExec": lambda h, i, o, d: execute.submit(plans.get(h), i, o, d),
    "cufftXtExecDescriptor": exec_descriptor,
    **{f"cufftXtExecDescriptor{name}": _exec_descriptor_as(name, name in ("C2C", "Z2Z"))
       for name in ("C2C", "Z2Z", "R2C", "D2Z", "C2R", "Z2D")},
    "cufftXtSetWorkArea": _set_work_areas,
    "cufftXtSetWorkAreaPolicy": _set_work_area_policy,
    "cufftXtSetCallback": lambda h, routine, kind, info: _no_callbacks(h, kind),
    "cufftXtSetJITCallback": lambda h, symbol, fatbin, size, kind, info: _no_callbacks(h, kind),
    "cufftXtSetCallbackSharedSize": lambda h, kind, size: _no_callbacks(h, kind),
    "cufftXtClearCallback": _clear_callback,
}
