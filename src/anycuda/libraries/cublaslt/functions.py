"""Every cuBLASLt function anycuda implements: C name -> (kinds, the Python that answers it,
taking the C arguments in order, addresses as integers); kinds are in signatures.py."""
from __future__ import annotations


import numpy as np

from ...driver import api
from ..cublas import blocks, handle as handles
from ..cublas.calls import read_scalar
from ..memory import write_scalar
from ..cublas.functions import VERSION, CUDART_VERSION
from ..cublas.status import require, status_name, status_text
from . import algorithms, descriptors as ds, matmul, signatures

_cache_capacity = [8192]


def _create(out):
    require(out != 0, "the handle pointer is NULL")
    write_scalar(out, handles.create(), np.uint64)


def _property(kind, out):
    require(kind in (0, 1, 2) and out != 0, f"library property {kind}")
    write_scalar(out, (VERSION // 10000, VERSION // 100 % 100, VERSION % 100)[kind], np.int32)


def _matmul_desc(compute, scale):
    return ds.MatmulDesc(compute_type=compute, scale_type=scale)


def _layout(dtype, rows, cols, ld):
    return ds.MatrixLayout(type=dtype, rows=rows, cols=cols, ld=ld)


def _transform(desc, alpha, A, Adesc, beta, B, Bdesc, C, Cdesc, stream):
    """C = alpha op(A) + beta op(B) over layouts (a matrix whose scale is 0 is not read)."""
    t = ds.get(desc, ds.TransformDesc)
    c = matmul._operand(Cdesc, "C")
    a = matmul._operand(Adesc, "A") if A else None
    b = matmul._operand(Bdesc, "B") if B else None
    scale = np.dtype(blocks.STORAGE.get(t.scale_type, np.float32))

    def work(x, y):
        for i in range(c.layout.batch_count):
            total = np.zeros((c.layout.rows, c.layout.cols), np.float64 if scale.itemsize == 8 else np.float32)
            for op, operation, address, s in ((a, t.transa, A, x), (b, t.transb, B, y)):
                if op is not None and s != 0:
                    total += s * blocks.widen(matmul._op(op.view(address, i), operation), op.layout.type, total.dtype)
            blocks.store(c.view(C, i), total, c.layout.type)
    if t.pointer_mode == 0:
        api.submit(stream, work, read_scalar(alpha, scale), read_scalar(beta, scale))
    else:
        api.submit(stream, lambda: work(read_scalar(alpha, scale), read_scalar(beta, scale)))


def _descriptor_functions(kind: str, cls, make):
    def create(out, *args):
        ds.create(out, make(*args))

    def initialise(address, size, *args):
        ds.initialise(address, size, make(*args))
    return {f"cublasLt{kind}Create": create, f"cublasLt{kind}Init_internal": initialise,
            f"cublasLt{kind}Destroy": ds.destroy,
            f"cublasLt{kind}SetAttribute": lambda d, attr, buf, size: ds.get(d, cls).set(attr, buf, size),
            f"cublasLt{kind}GetAttribute": lambda d, attr, buf, size, written: ds.get(d, cls).get(attr, buf, size, written)}


_TABLE = {
    "cublasLtCreate": _create,
    "cublasLtDestroy": handles.destroy,
    "cublasLtGetProperty": _property,
    "cublasLtMatmul": lambda h, *args: (handles.get(h), matmul.matmul(h, *args)),
    "cublasLtMatmulAlgoGetHeuristic": algorithms.heuristic,
    "cublasLtMatmulAlgoGetIds": algorithms.get_ids,
    "cublasLtMatmulAlgoInit": algorithms.init,
    "cublasLtMatmulAlgoCheck": algorithms.check,
    "cublasLtMatmulAlgoGetHeuristicForStream": algorithms.heuristic_for_stream,
    "cublasLtMatmulAlgoCheckForStream": algorithms.check_for_stream,
    "cublasLtMatmulAlgoCapGetAttribute": algorithms.capability,
    "cublasLtMatmulAlgoConfigSetAttribute": algorithms.set_config,
    "cublasLtMatmulAlgoConfigGetAttribute": algorithms.get_config,
    "cublasLtMatrixTransform": lambda h, *args: (handles.get(h), _transform(*args)),
    "cublasLtLoggerSetCallback": lambda *a: None, "cublasLtLoggerSetFile": lambda *a: None,
    "cublasLtLoggerOpenFile": lambda *a: None, "cublasLtLoggerSetLevel": lambda *a: None,
    "cublasLtLoggerSetMask": lambda *a: None, "cublasLtLoggerForceDisable": lambda: None,
    "cublasLtHeuristicsCacheGetCapacity": lambda out: write_scalar(out, _cache_capacity[0], np.uint64),
    "cublasLtHeuristicsCacheSetCapacity": lambda n: _cache_capacity.__setitem__(0, n),
    **_descriptor_functions("MatmulDesc", ds.MatmulDesc, _matmul_desc),
    **_descriptor_functions("MatrixLayout", ds.MatrixLayout, _layout),
    **_descriptor_functions("MatmulPreference", ds.Preference, ds.Preference),
    **_descriptor_functions("MatrixTransformDesc", ds.TransformDesc, lambda scale: ds.TransformDesc(scale_type=scale)),
}

VALUED = {
    "cublasLtGetStatusName": status_name,
    "cublasLtGetStatusString": status_text,
    "cublasLtGetVersion": lambda: VERSION,
    "cublasLtGetCudartVersion": lambda: CUDART_VERSION,
    "cublasLtDisableCpuInstructionsSetMask": lambda mask: 0,
}


def table() -> dict:
    return {name: (signatures.FUNCTIONS[name], fn) for name, fn in _TABLE.items()}


