"""cuBLASLt's algorithm queries. anycuda has one way to compute any problem it accepts, offered
as algorithm 0: the heuristic answers with it (workspace 0, one wave) for every problem
`matmul.plan` accepts and with CUBLAS_STATUS_NOT_SUPPORTED otherwise, so a program's search
finds exactly what cublasLtMatmul will run. An algorithm's configuration attributes are kept in
the algorithm's own 64 bytes, as NVIDIA's are."""
from __future__ import annotations

import ctypes

import numpy as np

from ..cublas.status import CublasError, Status, require
from . import matmul

ALGO_BYTES = 64
RESULT_BYTES = 96             # cublasLtMatmulHeuristicResult_t: algo, workspaceSize, state, wavesCount, reserved[4]
ALGO_ID = 0


def _write_algo(address: int, algo_id: int = ALGO_ID) -> None:
    words = np.frombuffer((ctypes.c_char * ALGO_BYTES).from_address(address), np.uint64)
    words[:] = 0
    words[0] = algo_id


def _write_result(address: int) -> None:
    ctypes.memset(address, 0, RESULT_BYTES)
    _write_algo(address)
    ctypes.c_float.from_address(address + 76).value = 1.0


def heuristic(handle, desc, A, B, C, D, preference, requested, results, count) -> None:
    require(requested > 0, f"requestedAlgoCount {requested}")
    require(results != 0 and count != 0, "a result pointer is NULL")
    ctypes.c_int.from_address(count).value = 0
    matmul.plan(desc, A, B, C, D)             # NOT_SUPPORTED or INVALID_VALUE for what cannot run
    _write_result(results)
    ctypes.c_int.from_address(count).value = 1


def get_ids(handle, compute, scale, a, b, c, d, requested, ids, count) -> None:
    require(requested >= 0 and count != 0, "requestedAlgoCount or returnAlgoCount")
    found = 1 if requested >= 1 and ids else 0
    if found:
        ctypes.c_int.from_address(ids).value = ALGO_ID
    ctypes.c_int.from_address(count).value = found


def init(handle, compute, scale, a, b, c, d, algo_id, algo) -> None:
    require(algo != 0, "the algorithm pointer is NULL")
    if algo_id != ALGO_ID:
        raise CublasError(Status.INVALID_VALUE, f"algorithm {algo_id} (anycuda offers algorithm {ALGO_ID})")
    _write_algo(algo)


def check(handle, desc, A, B, C, D, algo, result) -> None:
    require(algo != 0 and result != 0, "a pointer is NULL")
    matmul.plan(desc, A, B, C, D)
    _write_result(result)


def heuristic_for_stream(handle, desc, A, B, C, D, preference, requested, results, count, stream) -> None:
    """cublasLtMatmulAlgoGetHeuristicForStream: the stream only limits what a GPU's context
    could run there; every stream runs the one algorithm here."""
    heuristic(handle, desc, A, B, C, D, preference, requested, results, count)


def check_for_stream(handle, desc, A, B, C, D, algo, result, stream) -> None:
    check(handle, desc, A, B, C, D, algo, result)


def capability(algo, attribute, buf, size, written) -> None:
    """CUBLASLT_ALGO_CAP_*: what algorithm 0 can do (every attribute an integer: 0 for the
    tiling and scheduling ones, which have no meaning on a CPU)."""
    values = {3: 1, 4: 1, 11: 0b11, 12: 0xFFFFFFFF, 16: 1, 17: 1, 18: 1, 19: 1}      # batches, out of place, modes
    wide = {12}                                                                       # uint32 masks vs int32 flags
    dtype = np.uint32 if attribute in wide else np.int32
    if written:
        ctypes.c_size_t.from_address(written).value = 4
    if size == 0:
        return
    require(size >= 4 and buf != 0, f"a buffer of {size} bytes")
    np.frombuffer((ctypes.c_char * 4).from_address(buf), dtype)[0] = values.get(attribute, 0)


def set_config(algo, attribute, buf, size) -> None:
    require(0 <= attribute < 7 and algo != 0 and buf != 0 and size in (4, 8), f"configuration attribute {attribute}")
    words = np.frombuffer((ctypes.c_char * ALGO_BYTES).from_address(algo), np.uint64)
    words[attribute] = int.from_bytes(ctypes.string_at(buf, size), "little")


def get_config(algo, attribute, buf, size, written) -> None:
    require(0 <= attribute < 7 and algo != 0, f"configuration attribute {attribute}")
    words = np.frombuffer((ctypes.c_char * ALGO_BYTES).from_address(algo), np.uint64)
    value = int(words[attribute])
    if written:
        ctypes.c_size_t.from_address(written).value = 4
    if size == 0:
        return
    require(size >= 4 and buf != 0, f"a buffer of {size} bytes")
    ctypes.memmove(buf, value.to_bytes(8, "little"), min(size, 8))
