"""Independent references for the NCCL tests: each data type's stored form and rounding
(bfloat16 and fp8 written here from their bit layouts, not from anycuda's code) and each
reduction computed element by element in rank order."""
import numpy as np

STORAGE = {0: np.int8, 1: np.uint8, 2: np.int32, 3: np.uint32, 4: np.int64, 5: np.uint64, 6: np.float16,
           7: np.float32, 8: np.float64, 9: np.uint16, 10: np.uint8, 11: np.uint8}
NAMES = {0: "int8", 1: "uint8", 2: "int32", 3: "uint32", 4: "int64", 5: "uint64", 6: "half", 7: "float",
         8: "double", 9: "bfloat16", 10: "e4m3", 11: "e5m2"}
NARROW = (6, 9, 10, 11)          # reduced in float32
FP8 = {10: (4, 3), 11: (5, 2)}


def fp8_value(code: int, dtype: int) -> float:
    e_bits, m_bits = FP8[dtype]
    sign = -1.0 if code & 0x80 else 1.0
    e, m = (code >> m_bits) & ((1 << e_bits) - 1), code & ((1 << m_bits) - 1)
    bias = (1 << (e_bits - 1)) - 1
    if dtype == 10 and e == 15 and m == 7:
        return float("nan")
    if dtype == 11 and e == 31:
        return sign * float("inf") if m == 0 else float("nan")
    if e == 0:
        return sign * m * 2.0 ** (1 - bias - m_bits)
    return sign * (1 + m / 2 ** m_bits) * 2.0 ** (e - bias)


def fp8_round(x: float, dtype: int) -> int:
    """Nearest finite code (ties to the even code), saturating; NaN to a NaN."""
    sign = 0x80 if np.signbit(x) else 0          # a zero keeps its sign, as a rounded tiny value does
    codes = [c for c in range(256) if np.isfinite(fp8_value(c, dtype)) and c & 0x80 == sign]
    if np.isnan(x):
        return 0x7F if dtype == 10 else 0x7E
    best = min(codes, key=lambda c: (abs(fp8_value(c, dtype) - x), c & 1, c))
    return best


def widen(stored: np.ndarray, dtype: int) -> np.ndarray:
    if dtype == 9:
        return (stored.astype(np.uint32) << 16).view(np.float32)
    if dtype in FP8:
        return np.array([fp8_value(int(c), dtype) for c in stored], np.float32)
    return stored.astype(np.float32) if dtype == 6 else stored.copy()


def narrow(values: np.ndarray, dtype: int) -> np.ndarray:
    if dtype == 6:
        return values.astype(np.float16)
    if dtype == 9:
        bits = np.ascontiguousarray(values, np.float32).view(np.uint32)
        return ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    if dtype in FP8:
        return np.array([fp8_round(float(v), dtype) for v in values], np.uint8)
    return values.astype(STORAGE[dtype])


def inputs(rng, dtype: int, count: int) -> np.ndarray:
    """Stored random elements of a type (small integers, so products stay meaningful)."""
    if dtype in (0, 2, 4):
        return rng.integers(-9, 10, count).astype(STORAGE[dtype])
    if dtype in (1, 3, 5):
        return rng.integers(0, 10, count).astype(STORAGE[dtype])
    values = rng.standard_normal(count).astype(np.float32)
    if dtype == 8:
        return rng.standard_normal(count)
    return narrow(values, dtype) if dtype in NARROW else values


def reduce(stored: list, dtype: int, op: str, factor=None) -> np.ndarray:
    """Stored result of reducing the ranks' stored contributions (rank order)."""
    parts = [widen(s, dtype) for s in stored]
    n = len(parts)
    with np.errstate(over="ignore", invalid="ignore"):
        if op == "avg" and parts[0].dtype.kind != "f":
            total = parts[0].copy()
            for p in parts[1:]:
                total = total + p
            out = np.array([int(v) // n if v >= 0 else -(-int(v) // n) for v in total.tolist()],
                           dtype=total.dtype) if total.size else total
        elif op in ("avg", "premulsum"):
            f = np.asarray(1.0 / n if op == "avg" else factor).astype(parts[0].dtype)
            out = parts[0] * f
            for p in parts[1:]:
                out = out + p * f
        else:
            fold = {"sum": np.add, "prod": np.multiply, "max": np.maximum, "min": np.minimum}[op]
            out = parts[0].copy()
            for p in parts[1:]:
                out = fold(out, p)
    return narrow(out, dtype) if dtype in NARROW else out.astype(STORAGE[dtype])
