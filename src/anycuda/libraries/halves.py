"""16-bit floats as the libraries read and write them: IEEE half (numpy's float16) and bfloat16
(the top 16 bits of an IEEE single; numpy has none, so a stored element is a uint16), widened to
float32 exactly and narrowed from it rounding to nearest even, a NaN kept a NaN (rounding a
bfloat16 NaN's bits could carry it into infinity: it is written as 0x7FC0).

numpy narrows float32 to float16 one element at a time (~8 ns each), and bfloat16 takes half a
dozen passes over memory as array operations; products on these types spend as much time
converting as multiplying. So the conversions are loops in LLVM IR, compiled once per process
by anycuda's JIT for this CPU (vcvtps2ph/vcvtph2ps where it has F16C; LLVM vectorises the
bfloat16 bit operations), called on whole contiguous arrays or line by line. If the JIT cannot
make them, `available()` is False and numpy's casts serve; both give the same bits
(tests/test_halves.py).

    <name>(ptr src, ptr dst, i64 n): dst[i] = conversion of src[i] for i < n
"""
from __future__ import annotations

import ctypes
import threading

import numpy as np

QUIET_NAN_BF16 = 0x7FC0

_lock = threading.Lock()
_compiled = {}

# name -> (source element, destination element, body from %x (source) to %y (destination))
_CONVERSIONS = {
    "widen_f16": ("half", "float", "  %y = fpext half %x to float"),
    "narrow_f16": ("float", "half", "  %y = fptrunc float %x to half"),
    "widen_bf16": ("i16", "float", "  %w = zext i16 %x to i32\n  %s = shl i32 %w, 16\n  %y = bitcast i32 %s to float"),
    "narrow_bf16": ("float", "i16", """  %b = bitcast float %x to i32
  %lsb16 = lshr i32 %b, 16
  %lsb = and i32 %lsb16, 1
  %bias = add i32 %lsb, 32767
  %r32 = add i32 %b, %bias
  %rs = lshr i32 %r32, 16
  %r = trunc i32 %rs to i16
  %nan = fcmp uno float %x, 0.0
  %y = select i1 %nan, i16 32704, i16 %r"""),
}


def _function_ir(name: str, source: str, dest: str, body: str) -> str:
    return f"""
define void @{name}(ptr noalias nocapture readonly %src, ptr noalias nocapture writeonly %dst, i64 %n) {{
entry:
  %empty = icmp sle i64 %n, 0
  br i1 %empty, label %done, label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %p = getelementptr {source}, ptr %src, i64 %i
  %x = load {source}, ptr %p
{body}
  %q = getelementptr {dest}, ptr %dst, i64 %i
  store {dest} %y, ptr %q
  %next = add i64 %i, 1
  %more = icmp slt i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}}
"""


def _compile():
    # the JIT is the compiler's; the libraries use it for these loops only, as cuRAND's Philox does
    from ..compiler.build import jit
    text = "".join(_function_ir(name, *parts) for name, parts in _CONVERSIONS.items())
    loaded = jit.LoadedObject(jit.compile_to_object(text, "halves"))
    prototype = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_int64)
    return loaded, {name: prototype(loaded.address(name)) for name in _CONVERSIONS}


def _functions():
    with _lock:
        if "functions" not in _compiled:
            try:
                # kept for the whole process (the JIT keeps it past an embedding process's exit)
                _compiled["code"], _compiled["functions"] = _compile()
            except Exception as e:             # noqa: BLE001 -- no JIT: numpy's casts serve
                _compiled["functions"], _compiled["error"] = None, e
        return _compiled["functions"]


def available() -> bool:
    return _functions() is not None


def _same_order(a: np.ndarray, b: np.ndarray) -> bool:
    """True when both are contiguous with their elements in the same order."""
    return ((a.flags.c_contiguous and b.flags.c_contiguous) or (a.flags.f_contiguous and b.flags.f_contiguous))


def _convert(name: str, source: np.ndarray, dest: np.ndarray) -> bool:
    """dest = conversion of source by the compiled loop; False when the layouts do not let it
    (neither whole arrays in one order nor lines of contiguous elements), or without the JIT."""
    functions = _functions()
    if functions is None or source.shape != dest.shape:
        return False
    fn = functions[name]
    if _same_order(source, dest):
        fn(source.ctypes.data, dest.ctypes.data, source.size)
        return True
    if source.ndim != 2:
        return False
    for axis in (1, 0):                    # lines along a unit-stride axis of both
        if source.strides[axis] == source.itemsize and dest.strides[axis] == dest.itemsize:
            count = source.shape[axis]
            lines = source.shape[1 - axis]
            s_step, d_step = source.strides[1 - axis], dest.strides[1 - axis]
            s0, d0 = source.ctypes.data, dest.ctypes.data
            for i in range(lines):
                fn(s0 + i * s_step, d0 + i * d_step, count)
            return True
    return False


def widen(stored: np.ndarray, bfloat16: bool) -> np.ndarray:
    """Stored half or bfloat16 elements as float32 (exact), in the same memory order."""
    out = np.empty_like(stored, dtype=np.float32)
    if not _convert("widen_bf16" if bfloat16 else "widen_f16", stored, out):
        out[...] = (stored.astype(np.uint32) << 16).view(np.float32) if bfloat16 else stored
    return out


def narrow(dest: np.ndarray, values, bfloat16: bool) -> None:
    """Write float values into stored half or bfloat16 elements, rounded to nearest even."""
    values = np.asarray(values, dtype=np.float32)
    if values.shape != dest.shape:
        values = np.broadcast_to(values, dest.shape)
    if not _convert("narrow_bf16" if bfloat16 else "narrow_f16", values, dest.view(np.uint16)):
        dest[...] = _narrow_bf16(values) if bfloat16 else values.astype(np.float16).view(dest.dtype)


def _narrow_bf16(values: np.ndarray) -> np.ndarray:
    f = np.ascontiguousarray(values, dtype=np.float32)
    bits = f.view(np.uint32)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    return np.where(np.isnan(f), np.uint16(QUIET_NAN_BF16), rounded)
