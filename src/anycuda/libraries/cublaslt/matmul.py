"""cublasLtMatmul: D = epilogue(alpha op(A) op(B) + beta C) over matrix layouts (column or row
order, leading dimensions, strided batches) and the epilogues training code fuses into it
(bias, ReLU, GELU, their auxiliary outputs, their gradients and bias gradients).

A problem is first made into a `Plan` (types, shapes, batch, epilogue, each checked as
cuBLASLt checks them); the heuristic query answers from the same plan, so a problem it accepts
is one cublasLtMatmul runs. The product itself is cuBLAS's blocked product (cublas/blocks.py),
with the epilogue applied to each block of D before it is narrowed and stored. GELU is the
tanh approximation cuBLASLt uses.
"""
from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from ...driver import api
from ..cublas import blocks, gemm_ex
from ..cublas.calls import read_scalar
from ..memory import array
from ..cublas.status import CublasError, Status, require
from . import descriptors as ds

# epilogue bits (cublasLtEpilogue_t)
RELU, BIAS, DRELU, BGRAD, GELU, DGELU, AUX, BGRADA, BGRADB = 2, 4, 8, 16, 32, 64, 128, 256, 512
EPILOGUES = {1, RELU, RELU | AUX, BIAS, RELU | BIAS, RELU | AUX | BIAS, DRELU | AUX, DRELU | AUX | BGRAD, GELU,
             GELU | AUX, GELU | BIAS, GELU | AUX | BIAS, DGELU | AUX, DGELU | AUX | BGRAD, BGRADA, BGRADB}
_C = math.sqrt(2 / math.pi)


def gelu(x):
    return 0.5 * x * (1 + np.tanh(_C * (x + 0.044715 * x ** 3)))


def gelu_gradient(x):
    t = np.tanh(_C * (x + 0.044715 * x ** 3))
    return 0.5 * (1 + t) + 0.5 * x * (1 - t * t) * _C * (1 + 3 * 0.044715 * x * x)


@dataclass
class Operand:
    layout: ds.MatrixLayout
    dtype: np.dtype

    def view(self, address: int, batch: int) -> np.ndarray:
        """The stored matrix of batch `batch` as a (rows, cols) numpy view."""
        lay = self.layout
        rows, cols, ld, size = lay.rows, lay.cols, lay.ld, self.dtype.itemsize
        start = address + (batch * lay.strided_batch_offset if lay.batch_count > 1 else 0) * size
        if rows == 0 or cols == 0:
            return np.empty((rows, cols), self.dtype)
        col = lay.order == ds.ORDER_COL
        extent = (cols - 1) * ld + rows if col else (rows - 1) * ld + cols
        flat = array(start, extent, self.dtype)
        strides = (size, ld * size) if col else (ld * size, size)
        return np.lib.stride_tricks.as_strided(flat, shape=(rows, cols), strides=strides)


@dataclass
class Plan:
    m: int
    n: int
    k: int
    batch: int
    transa: int
    transb: int
    a: Operand
    b: Operand
    c: Operand
    d: Operand
    types: tuple            # (A, C, D) cudaDataType codes
    scale: np.dtype
    epilogue: int
    desc: ds.MatmulDesc


def _operand(address: int, name: str) -> Operand:
    lay = ds.get(address, ds.MatrixLayout)
    code = lay.type
    if code not in blocks.STORAGE:
        raise CublasError(Status.NOT_SUPPORTED, f"matrix {name} of data type {code}")
    if lay.order not in (ds.ORDER_COL, ds.ORDER_ROW):
        _unsupported(f"matrix {name} in order {lay.order} (only column and row order are supported)")
    inner = lay.rows if lay.order == ds.ORDER_COL else lay.cols
    require(lay.ld >= max(1, inner), f"matrix {name}: ld {lay.ld} below {inner}")
    require(lay.batch_count >= 1, f"matrix {name}: batch count {lay.batch_count}")
    return Operand(lay, np.dtype(blocks.STORAGE[code]))


def _unsupported(what: str):
    raise CublasError(Status.NOT_SUPPORTED, what)


def plan(desc_address, a_address, b_address, c_address, d_address) -> Plan:
    desc = ds.get(desc_address, ds.MatmulDesc)
    a, b, c = _operand(a_address, "A"), _operand(b_address, "B"), _operand(c_address, "C")
    d = _operand(d_address, "D") if d_address else c
    require(desc.transa in (0, 1, 2) and desc.transb in (0, 1, 2), "transa/transb")
    if desc.transc != 0 or desc.fill_mode != 2:
        _unsupported("a transposed C or a triangular fill mode")
    if desc.pointer_mode not in (0, 1):
        _unsupported(f"pointer mode {desc.pointer_mode} (alpha vectors)")
    require(desc.epilogue in EPILOGUES, f"epilogue {desc.epilogue}")
    m, n = d.layout.rows, d.layout.cols
    am, ak = (a.layout.rows, a.layout.cols) if desc.transa == 0 else (a.layout.cols, a.layout.rows)
    bk, bn = (b.layout.rows, b.layout.cols) if desc.transb == 0 else (b.layout.cols, b.layout.rows)
    require(am == m and bn == n and ak == bk, f"op(A) {am}x{ak}, op(B) {bk}x{bn} and D {m}x{n} do not fit")
    require((c.layout.rows, c.layout.cols) == (m, n), "C and D differ in shape")
    if c.layout.type != d.layout.type:
        _unsupported("C and D of different types")
    batch = d.layout.batch_count
    for name, op in (("A", a), ("B", b), ("C", c)):
        require(op.layout.batch_count in (1, batch), f"matrix {name}: batch count {op.layout.batch_count}, D's {batch}")
    if a.layout.type != b.layout.type:
        _unsupported("A and B of different types")
    scale_code = gemm_ex.signature(a.layout.type, b.layout.type, d.layout.type, desc.compute_type)
    if desc.scale_type != scale_code:
        _unsupported(f"scale type {desc.scale_type} with these types (cuBLASLt's table gives {scale_code})")
    epi = desc.epilogue
    if epi & (BIAS | BGRAD | BGRADA | BGRADB):
        require(desc.bias_pointer != 0, "the epilogue needs CUBLASLT_MATMUL_DESC_BIAS_POINTER")
    if epi & AUX:
        require(desc.aux_pointer != 0, "the epilogue needs CUBLASLT_MATMUL_DESC_EPILOGUE_AUX_POINTER")
        require(desc.aux_ld >= m, f"EPILOGUE_AUX_LD {desc.aux_ld} below the {m} rows of D")
        if epi & (RELU | DRELU):
            require(desc.aux_ld % 128 == 0, "a ReLU bit-mask's EPILOGUE_AUX_LD must be a multiple of 128")
    return Plan(m, n, ak, batch, desc.transa, desc.transb, a, b, c, d, (a.layout.type, c.layout.type, d.layout.type),
                np.dtype(gemm_ex.SCALE_DTYPES[scale_code]), epi, desc)


def _op(view: np.ndarray, operation: int) -> np.ndarray:
    if operation == 0:
        return view
    return view.T.conj() if operation == 2 and view.dtype.kind == "c" else view.T


class _Epilogue:
    """What the epilogue does to each block of D (rows, cols: its slices) for batch `i`."""

    def __init__(self, p: Plan, i: int, work):
        self.p, self.i, self.work = p, i, work
        desc = p.desc
        d_type = p.types[2]
        self.bias_type = desc.bias_data_type if desc.bias_data_type >= 0 else d_type
        self.aux_type = desc.aux_data_type if desc.aux_data_type >= 0 else d_type
        self.bias_address = desc.bias_pointer + i * desc.bias_batch_stride * np.dtype(blocks.STORAGE[self.bias_type]).itemsize
        self.gradient = np.zeros(p.m, work) if p.epilogue & BGRAD else None

    def _aux(self, rows, cols, dtype):
        desc, p = self.p.desc, self.p
        size = np.dtype(dtype).itemsize
        base = desc.aux_pointer + self.i * desc.aux_batch_stride * size
        flat = array(base, (p.n - 1) * desc.aux_ld + p.m, dtype)
        full = np.lib.stride_tricks.as_strided(flat, shape=(p.m, p.n), strides=(size, desc.aux_ld * size))
        return full[rows, cols]

    def _mask(self, rows, cols):
        """The ReLU bit-mask block: one bit per element of D, column-major, EPILOGUE_AUX_LD bits
        a column, least significant bit first."""
        desc, p = self.p.desc, self.p
        words = desc.aux_ld // 8
        base = desc.aux_pointer + self.i * desc.aux_batch_stride // 8
        packed = array(base, p.n * words, np.uint8).reshape(p.n, words)
        return packed, rows, cols

    def __call__(self, block, rows, cols):
        epi = self.p.epilogue
        if epi & BIAS:
            bias = array(self.bias_address, self.p.m, blocks.STORAGE[self.bias_type])[rows]
            block += blocks.widen(bias, self.bias_type, block.dtype)[:, None]
        if epi & AUX and epi & (GELU | RELU):
            if epi & GELU:
                blocks.store(self._aux(rows, cols, blocks.STORAGE[self.aux_type]), block, self.aux_type)
            else:
                packed, r, c = self._mask(rows, cols)
                bits = np.unpackbits(packed[c], axis=1, bitorder="little")
                bits[:, r] = (block > 0).T
                packed[c] = np.packbits(bits, axis=1, bitorder="little")
        if epi & RELU:
            np.maximum(block, 0, out=block)
        elif epi & GELU:
            block[...] = gelu(block)
        elif epi & DGELU:
            block *= gelu_gradient(blocks.widen(self._aux(rows, cols, blocks.STORAGE[self.aux_type]), self.aux_type,
                                                block.dtype))
        elif epi & DRELU:
            packed, r, c = self._mask(rows, cols)
            block *= np.unpackbits(packed[c], axis=1, bitorder="little")[:, r].T
        if self.gradient is not None:
            self.gradient[rows] += block.sum(axis=1)

    def finish(self, a_view, b_view):
        """Bias gradients: of D (with BGRAD), or of op(A) / op(B) over the shared dimension."""
        epi, p = self.p.epilogue, self.p
        out_type = p.types[2]
        if self.gradient is not None:
            values = self.gradient
        elif epi & BGRADA:
            values = blocks.widen(a_view, p.types[0], self.work).sum(axis=1)
        elif epi & BGRADB:
            values = blocks.widen(b_view, p.types[0], self.work).sum(axis=0)
        else:
            return
        dest = array(self.bias_address, values.size, blocks.STORAGE[out_type])
        blocks.store(dest, values, out_type)


def run(p: Plan, alpha, beta, A: int, B: int, C: int, D: int) -> None:
    work, _ = blocks.work_types(p.types[0], p.types[2])
    for i in range(p.batch):
        a = _op(p.a.view(A, i), p.transa)
        b = _op(p.b.view(B, i), p.transb)
        epilogue = _Epilogue(p, i, work) if p.epilogue != 1 else None
        blocks.product(a, p.types[0], b, p.c.view(C, i), p.types[1], p.d.view(D, i), p.types[2], alpha, beta,
                       finish=epilogue)
        if epilogue is not None:
            epilogue.finish(a, b)


def matmul(handle, desc, alpha, A, Adesc, B, Bdesc, beta, C, Cdesc, D, Ddesc, algo, workspace, workspace_size, stream):
    p = plan(desc, Adesc, Bdesc, Cdesc, Ddesc)
    if p.m == 0 or p.n == 0:
        return
    require(A != 0 and B != 0 and D != 0, "a matrix pointer is NULL")
    if p.desc.pointer_mode == 0:
        a, b = read_scalar(alpha, p.scale), read_scalar(beta, p.scale)
        api.submit(stream, run, p, a, b, A, B, C or D, D)
    else:
        api.submit(stream, lambda: run(p, read_scalar(alpha, p.scale), read_scalar(beta, p.scale), A, B, C or D, D))
