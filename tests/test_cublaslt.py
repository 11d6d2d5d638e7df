"""anycuda's cuBLASLt, called as the C library calls it (anycuda.libraries.cublaslt.functions),
against numpy on fresh random inputs with poisoned outputs: layouts in both orders, strided
batches, 16-bit types, every epilogue family, the algorithm queries and the argument rules."""

import numpy as np
import pytest

from library_calls import caller, device, read, scalar
from anycuda.libraries.cublas import blocks
from anycuda.libraries.cublas.status import CublasError, Status
from anycuda.libraries.cublaslt import functions, matmul as ltmatmul

TABLE = functions.table()
R_32F, R_64F, R_16F, R_16BF = 0, 1, 2, 14
COMPUTE_32F, COMPUTE_64F = 68, 70
DESC = {"transa": 3, "transb": 4, "epilogue": 7, "bias": 8, "bias_stride": 10, "aux": 11, "aux_ld": 12,
        "aux_stride": 13, "pointer_mode": 2, "bias_type": 26}
LAYOUT = {"order": 1, "batch": 5, "stride": 6}
call = caller(TABLE)
value = scalar


def new(name, *args) -> int:
    out = np.zeros(1, np.uint64)
    call(name, out.ctypes.data, *args)
    return int(out[0])


def set_attr(kind, obj, attribute, v, dtype):
    data = np.array([v], dtype)
    call(f"cublasLt{kind}SetAttribute", obj, attribute, data.ctypes.data, data.nbytes)


def layout(dtype_code, rows, cols, ld, order=0, batch=1, stride=0):
    lay = new("cublasLtMatrixLayoutCreate", dtype_code, rows, cols, ld)
    set_attr("MatrixLayout", lay, LAYOUT["order"], order, np.int32)
    set_attr("MatrixLayout", lay, LAYOUT["batch"], batch, np.int32)
    set_attr("MatrixLayout", lay, LAYOUT["stride"], stride, np.int64)
    return lay


def stored(matrix, order=0):
    """Column- or row-major bytes of a 2-D array."""
    return np.asarray(matrix.T if order == 0 else matrix).reshape(-1).copy()


def unstored(flat, rows, cols, order=0):
    return flat.reshape(cols, rows).T if order == 0 else flat.reshape(rows, cols)


def gelu(x):
    """GELU's tanh approximation, as cuBLASLt documents it (written here, not imported)."""
    return 0.5 * x * (1 + np.tanh(np.sqrt(2 / np.pi) * (x + 0.044715 * x ** 3)))


def gelu_gradient(x, h=1e-6):
    """Its derivative by central differences (independent of anycuda's closed form)."""
    x = np.asarray(x, np.float64)
    return (gelu(x + h) - gelu(x - h)) / (2 * h)


def bf16(x):
    bits = np.asarray(x, np.float32).view(np.uint32)
    return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)


def from_bf16(u):
    return (u.astype(np.uint32) << 16).view(np.float32)


@pytest.fixture
def lt():
    h = new("cublasLtCreate")
    yield h
    call("cublasLtDestroy", h)


def run(lt, desc, a, la, b, lb, c, lc, d, ld_, alpha=1.0, beta=0.0, scale=np.float32, stream=0):
    call("cublasLtMatmul", lt, desc, value(alpha, scale), a, la, b, lb, value(beta, scale), c, lc, d, ld_, 0, 0, 0,
         stream)


@pytest.mark.parametrize("order", [0, 1])
@pytest.mark.parametrize("ta,tb", [(0, 0), (1, 0), (0, 1)])
def test_float_matmul_in_both_orders_with_batches(lt, rng, order, ta, tb):
    m, n, k, batch = 13, 9, 7, 3
    A = [rng.standard_normal((m, k) if ta == 0 else (k, m)).astype(np.float32) for _ in range(batch)]
    B = [rng.standard_normal((k, n) if tb == 0 else (n, k)).astype(np.float32) for _ in range(batch)]
    C = [rng.standard_normal((m, n)).astype(np.float32) for _ in range(batch)]
    desc = new("cublasLtMatmulDescCreate", COMPUTE_32F, R_32F)
    set_attr("MatmulDesc", desc, DESC["transa"], ta, np.int32)
    set_attr("MatmulDesc", desc, DESC["transb"], tb, np.int32)
    ld = lambda x: x.shape[0] if order == 0 else x.shape[1]
    la = layout(R_32F, *A[0].shape, ld(A[0]), order, batch, A[0].size)
    lb = layout(R_32F, *B[0].shape, ld(B[0]), order, batch, B[0].size)
    lc = layout(R_32F, m, n, ld(C[0]), order, batch, m * n)
    dC = device(np.concatenate([stored(c, order) for c in C]))
    dD = device(np.full(batch * m * n, np.nan, np.float32))
    run(lt, desc, device(np.concatenate([stored(a, order) for a in A])), la,
        device(np.concatenate([stored(b, order) for b in B])), lb, dC, lc, dD, lc, alpha=2.0, beta=-1.0)
    got = read(dD, batch * m * n, np.float32)
    for i in range(batch):
        want = 2 * (A[i] if ta == 0 else A[i].T).astype(np.float64) @ (B[i] if tb == 0 else B[i].T) - C[i]
        np.testing.assert_allclose(unstored(got[i * m * n:(i + 1) * m * n], m, n, order), want, rtol=1e-4, atol=1e-4)


def _in_blocks(monkeypatch, blocked):
    """With `blocked`, products go in blocks of 8 (epilogues and bias gradients across blocks)."""
    if blocked:
        monkeypatch.setattr(blocks, "WHOLE_BYTES", 0)
        monkeypatch.setattr(blocks, "BLOCK", 8)


def _epilogue_problem(lt, rng, epilogue, dtype_code=R_32F, m=11, n=17, k=9):
    """D = epilogue(A B) with A, B, bias and aux (llm.c's layer: A^T B, column-major)."""
    store = {R_32F: np.float32, R_16BF: np.uint16}[dtype_code]
    A = rng.standard_normal((k, m)).astype(np.float32)
    B = rng.standard_normal((k, n)).astype(np.float32)
    bias = rng.standard_normal(m).astype(np.float32)
    pre = rng.standard_normal((m, n)).astype(np.float32)
    conv = (lambda x: bf16(x)) if dtype_code == R_16BF else (lambda x: x)
    back = (lambda x: from_bf16(x)) if dtype_code == R_16BF else (lambda x: x)
    A, B, bias, pre = back(conv(A)), back(conv(B)), back(conv(bias)), back(conv(pre))
    desc = new("cublasLtMatmulDescCreate", COMPUTE_32F, R_32F)
    set_attr("MatmulDesc", desc, DESC["transa"], 1, np.int32)
    set_attr("MatmulDesc", desc, DESC["epilogue"], epilogue, np.uint32)
    dbias = device(conv(bias) if epilogue & ltmatmul.BIAS else conv(np.full(max(m, n), np.nan, np.float32)))
    set_attr("MatmulDesc", desc, DESC["bias"], dbias, np.uint64)
    aux_ld = 128 if epilogue & (ltmatmul.RELU | ltmatmul.DRELU) else m + 3
    if epilogue & ltmatmul.DRELU:
        mask = np.zeros((n, aux_ld // 8), np.uint8)
        bits = np.zeros((n, aux_ld), np.uint8)
        bits[:, :m] = (pre > 0).T
        mask[...] = np.packbits(bits, axis=1, bitorder="little")
        daux = device(mask)
    else:
        aux = np.full((n, aux_ld), np.nan, np.float32)
        aux[:, :m] = pre.T
        daux = device(conv(aux).reshape(-1) if dtype_code == R_16BF else aux.reshape(-1))
    set_attr("MatmulDesc", desc, DESC["aux"], daux, np.uint64)
    set_attr("MatmulDesc", desc, DESC["aux_ld"], aux_ld, np.int64)
    la, lb, ld_ = layout(dtype_code, k, m, k), layout(dtype_code, k, n, k), layout(dtype_code, m, n, m)
    dD = device(conv(np.full(m * n, np.nan, np.float32)))
    run(lt, desc, device(stored(conv(A))), la, device(stored(conv(B))), lb, dD, ld_, dD, ld_)
    D = back(unstored(read(dD, m * n, store), m, n))
    return dict(A=A, B=B, bias=bias, pre=pre, D=D, dbias=dbias, daux=daux, aux_ld=aux_ld, m=m, n=n, store=store,
                back=back)


@pytest.mark.parametrize("dtype_code,tol", [(R_32F, 1e-4), (R_16BF, 3e-2)])
@pytest.mark.parametrize("blocked", [False, True], ids=["one block", "blocks of 8"])
def test_forward_epilogues(lt, rng, dtype_code, tol, blocked, monkeypatch):
    _in_blocks(monkeypatch, blocked)
    E = ltmatmul
    for epilogue in (E.BIAS, E.RELU, E.RELU | E.BIAS, E.GELU, E.GELU | E.BIAS, E.GELU | E.AUX | E.BIAS):
        p = _epilogue_problem(lt, rng, epilogue, dtype_code)
        x = p["A"].T.astype(np.float64) @ p["B"]
        if epilogue & E.BIAS:
            x = x + p["bias"][:, None]
        if epilogue & E.AUX:
            aux = p["back"](read(p["daux"], p["n"] * p["aux_ld"], p["store"])).reshape(p["n"], p["aux_ld"])
            np.testing.assert_allclose(aux[:, :p["m"]].T, x, rtol=tol, atol=tol, err_msg=f"aux of {epilogue}")
            assert np.all(np.isnan(aux[:, p["m"]:])), "aux padding written"
        want = np.maximum(x, 0) if epilogue & E.RELU else (gelu(x) if epilogue & E.GELU else x)
        np.testing.assert_allclose(p["D"], want, rtol=tol, atol=tol, err_msg=f"epilogue {epilogue}")


def test_relu_aux_is_a_bit_mask_and_drelu_reads_it(lt, rng):
    E = ltmatmul
    p = _epilogue_problem(lt, rng, E.RELU | E.AUX | E.BIAS)
    x = p["A"].T.astype(np.float64) @ p["B"] + p["bias"][:, None]
    mask = np.unpackbits(read(p["daux"], p["n"] * 16, np.uint8).reshape(p["n"], 16), axis=1, bitorder="little")
    assert np.array_equal(mask[:, :p["m"]].T, (x > 0).astype(np.uint8))
    q = _epilogue_problem(lt, rng, E.DRELU | E.AUX | E.BGRAD)
    g = (q["A"].T.astype(np.float64) @ q["B"]) * (q["pre"] > 0)
    np.testing.assert_allclose(q["D"], g, rtol=1e-4, atol=1e-4)
    np.testing.assert_allclose(read(q["dbias"], q["m"], np.float32), g.sum(axis=1), rtol=1e-4, atol=1e-4)


@pytest.mark.parametrize("dtype_code,tol", [(R_32F, 1e-4), (R_16BF, 5e-2)])
@pytest.mark.parametrize("blocked", [False, True], ids=["one block", "blocks of 8"])
def test_gradient_epilogues(lt, rng, dtype_code, tol, blocked, monkeypatch):
    _in_blocks(monkeypatch, blocked)
    E = ltmatmul
    p = _epilogue_problem(lt, rng, E.DGELU | E.AUX, dtype_code)
    g = (p["A"].T.astype(np.float64) @ p["B"]) * gelu_gradient(p["pre"].astype(np.float64))
    np.testing.assert_allclose(p["D"], g, rtol=tol, atol=tol)
    p = _epilogue_problem(lt, rng, E.DGELU | E.AUX | E.BGRAD, dtype_code)
    g = (p["A"].T.astype(np.float64) @ p["B"]) * gelu_gradient(p["pre"].astype(np.float64))
    np.testing.assert_allclose(p["back"](read(p["dbias"], p["m"], p["store"])), g.sum(axis=1), rtol=tol, atol=tol * 10)
    p = _epilogue_problem(lt, rng, E.BGRADB, dtype_code)
    np.testing.assert_allclose(p["back"](read(p["dbias"], p["n"], p["store"])), p["B"].sum(axis=0), rtol=tol, atol=tol)
    np.testing.assert_allclose(p["D"], p["A"].T.astype(np.float64) @ p["B"], rtol=tol, atol=tol)
    p = _epilogue_problem(lt, rng, E.BGRADA, dtype_code)
    np.testing.assert_allclose(p["back"](read(p["dbias"], p["m"], p["store"])), p["A"].T.sum(axis=1), rtol=tol, atol=tol)


def test_descriptors_in_the_programs_memory_and_attribute_rules(lt, rng):
    block = np.zeros(64, np.uint64)                # what cublasLtMatmulDescInit's caller allocates
    call("cublasLtMatmulDescInit_internal", block.ctypes.data, block.nbytes, COMPUTE_64F, R_64F)
    got = np.zeros(1, np.int32)
    written = np.zeros(1, np.uint64)
    call("cublasLtMatmulDescGetAttribute", block.ctypes.data, 0, got.ctypes.data, 4, written.ctypes.data)
    assert got[0] == COMPUTE_64F and written[0] == 4
    call("cublasLtMatmulDescGetAttribute", block.ctypes.data, 7, 0, 0, written.ctypes.data)   # size query
    assert written[0] == 4
    with pytest.raises(CublasError) as e:                                                     # wrong size
        call("cublasLtMatmulDescSetAttribute", block.ctypes.data, 7, got.ctypes.data, 8)
    assert e.value.status == Status.INVALID_VALUE
    with pytest.raises(CublasError) as e:                                                     # no such attribute
        call("cublasLtMatmulDescSetAttribute", block.ctypes.data, 9, got.ctypes.data, 4)
    assert e.value.status == Status.INVALID_VALUE
    m = n = k = 5
    a = rng.standard_normal((m, k))
    lay = np.zeros(8, np.uint64)
    call("cublasLtMatrixLayoutInit_internal", lay.ctypes.data, lay.nbytes, R_64F, m, k, m)
    dD = device(np.full(m * n, np.nan))
    run(lt, block.ctypes.data, device(stored(a)), lay.ctypes.data, device(stored(np.eye(k))), lay.ctypes.data, dD,
        lay.ctypes.data, dD, lay.ctypes.data, scale=np.float64)
    np.testing.assert_allclose(unstored(read(dD, m * n, np.float64), m, n), a)


def test_heuristic_answers_what_matmul_runs(lt):
    desc = new("cublasLtMatmulDescCreate", COMPUTE_32F, R_32F)
    pref = new("cublasLtMatmulPreferenceCreate")
    set_attr("MatmulPreference", pref, 1, 1 << 20, np.uint64)
    la = layout(R_16BF, 8, 8, 8)
    results = np.zeros(96 // 8 * 4, np.uint64)
    count = np.zeros(1, np.int32)
    call("cublasLtMatmulAlgoGetHeuristic", lt, desc, la, la, la, la, pref, 4, results.ctypes.data, count.ctypes.data)
    assert count[0] == 1
    assert np.frombuffer(results.tobytes()[72:76], np.int32)[0] == 0            # state: success
    again, count[0] = np.zeros_like(results), 0                       # the ForStream forms answer alike
    call("cublasLtMatmulAlgoGetHeuristicForStream", lt, desc, la, la, la, la, pref, 4, again.ctypes.data,
         count.ctypes.data, 0)
    assert count[0] == 1 and np.array_equal(again, results)
    checked = np.zeros_like(results)
    call("cublasLtMatmulAlgoCheckForStream", lt, desc, la, la, la, la, results.ctypes.data, checked.ctypes.data, 0)
    assert np.frombuffer(checked.tobytes()[72:76], np.int32)[0] == 0
    bad = layout(R_64F, 8, 8, 8)                    # f64 D for bf16 inputs: no such combination
    count[0] = 7
    with pytest.raises(CublasError) as e:
        call("cublasLtMatmulAlgoGetHeuristic", lt, desc, la, la, bad, bad, pref, 4, results.ctypes.data,
             count.ctypes.data)
    assert e.value.status == Status.NOT_SUPPORTED and count[0] == 0
    small = layout(R_32F, 8, 8, 4)                  # ld below the rows
    with pytest.raises(CublasError) as e:
        call("cublasLtMatmulAlgoGetHeuristic", lt, desc, small, small, small, small, pref, 1, results.ctypes.data,
             count.ctypes.data)
    assert e.value.status == Status.INVALID_VALUE


def test_epilogue_needs_its_pointers(lt):
    desc = new("cublasLtMatmulDescCreate", COMPUTE_32F, R_32F)
    set_attr("MatmulDesc", desc, DESC["epilogue"], ltmatmul.GELU | ltmatmul.AUX, np.uint32)
    la = layout(R_32F, 4, 4, 4)
    buf = device(np.zeros(16, np.float32))
    with pytest.raises(CublasError) as e:
        run(lt, desc, buf, la, buf, la, buf, la, buf, la)
    assert e.value.status == Status.INVALID_VALUE


def test_matrix_transform(lt, rng):
    m, n = 6, 4
    a, b = rng.standard_normal((n, m)).astype(np.float32), rng.standard_normal((m, n)).astype(np.float32)
    t = new("cublasLtMatrixTransformDescCreate", R_32F)
    set_attr("MatrixTransformDesc", t, 2, 1, np.int32)                    # transa: T
    la, lb = layout(R_32F, n, m, n), layout(R_32F, m, n, n, order=1)      # B stored row-major
    lc = layout(R_32F, m, n, m)
    dC = device(np.full(m * n, np.nan, np.float32))
    call("cublasLtMatrixTransform", lt, t, value(2.0, np.float32), device(stored(a)), la, value(-1.0, np.float32),
         device(stored(b, 1)), lb, dC, lc, 0)
    np.testing.assert_allclose(unstored(read(dC, m * n, np.float32), m, n), 2 * a.T - b, rtol=1e-6)
