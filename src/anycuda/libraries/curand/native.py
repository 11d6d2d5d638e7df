"""Philox4x32-10 blocks in machine code: the one generator whose speed the host API is measured
by, and the one numpy cannot make fast (ten rounds of 32x32->64-bit products are a hundred
passes over memory as array operations; as one loop they stay in registers and LLVM vectorises
them across counters).

The functions are written here as LLVM IR text and compiled once per process by anycuda's JIT
(compiler/build/jit.py: optimised for the host CPU, linked and kept as kernels are). If that
fails, `available()` is False and the numpy path in generators/philox.py serves. Both compute
the same words (tests/test_curand_native.py).

    philox_bits(u32* out, i64 blocks, i64 first, i64 shift, i64 key, i64 run, i64 base)
        out[4i + j] = word j of Philox(counter, key) for block m = first + i of the host layout
        with 2^shift threads, each writing runs of 2^run consecutive blocks of its subsequence:
        unit u = m >> run goes to thread u & (2^shift - 1) (the counter's high half), and the
        block's index in that subsequence (the low half) is base + ((u >> shift) << run | m &
        (2^run - 1)); shift 0 walks subsequence 0
    philox_uniform(float* out, ...same)
        the same words as cuRAND's float uniforms, x * 2^-32 + 2^-33 in float
    philox_uniform_double(double* out, ...same)
        two doubles per block, (x ^ (y << 21)) * 2^-53 + 2^-54 and the same of (z, w), as
        curand_uniform2_double does
"""
from __future__ import annotations

import ctypes
import threading

_lock = threading.Lock()
_compiled = {}
_ROUNDS = 10


def _round_ir(r: int) -> str:
    """One Philox round on %c0..%c3 of round r (SSA names suffixed by the round)."""
    p, q = f"r{r}", f"r{r + 1}"
    k0 = (0 + r * 0x9E3779B9) & 0xFFFFFFFF
    k1 = (0 + r * 0xBB67AE85) & 0xFFFFFFFF
    return f"""
  %{p}.x0 = zext i32 %c0.{p} to i64
  %{p}.x2 = zext i32 %c2.{p} to i64
  %{p}.m0 = mul i64 %{p}.x0, 3528531795
  %{p}.m1 = mul i64 %{p}.x2, 3449720151
  %{p}.h0w = lshr i64 %{p}.m0, 32
  %{p}.h1w = lshr i64 %{p}.m1, 32
  %{p}.h0 = trunc i64 %{p}.h0w to i32
  %{p}.h1 = trunc i64 %{p}.h1w to i32
  %{p}.l0 = trunc i64 %{p}.m0 to i32
  %{p}.l1 = trunc i64 %{p}.m1 to i32
  %{p}.k0 = add i32 %key0, {k0 if k0 < 2**31 else k0 - 2**32}
  %{p}.k1 = add i32 %key1, {k1 if k1 < 2**31 else k1 - 2**32}
  %{p}.a = xor i32 %{p}.h1, %c1.{p}
  %c0.{q} = xor i32 %{p}.a, %{p}.k0
  %c1.{q} = add i32 %{p}.l1, 0
  %{p}.b = xor i32 %{p}.h0, %c3.{p}
  %c2.{q} = xor i32 %{p}.b, %{p}.k1
  %c3.{q} = add i32 %{p}.l0, 0
"""


def _function_ir(name: str, convert) -> str:
    words = [f"%c{j}.r{_ROUNDS}" for j in range(4)]
    text, ty, per_block = convert(words)
    stores = [text]
    for j in range(per_block):
        stores.append(f"""  %idx{j} = add i64 %base, {j}
  %ptr{j} = getelementptr {ty}, ptr %out, i64 %idx{j}
  store {ty} %v{j}, ptr %ptr{j}, align 4""")
    rounds = "".join(_round_ir(r) for r in range(_ROUNDS))
    store_text = "\n".join(stores)
    shift = {4: 2, 2: 1}[per_block]
    return f"""
define void @{name}(ptr noalias %out, i64 %n, i64 %first, i64 %shift, i64 %key, i64 %run, i64 %blockbase) {{
entry:
  %key0 = trunc i64 %key to i32
  %keyh = lshr i64 %key, 32
  %key1 = trunc i64 %keyh to i32
  %empty = icmp eq i64 %n, 0
  br i1 %empty, label %done, label %loop
loop:
  %i = phi i64 [0, %entry], [%next, %loop]
  %m = add i64 %first, %i
  %u = lshr i64 %m, %run
  %runone = shl i64 1, %run
  %runmask = sub i64 %runone, 1
  %within = and i64 %m, %runmask
  %step = lshr i64 %u, %shift
  %steps = shl i64 %step, %run
  %inrun = or i64 %steps, %within
  %lo = add i64 %inrun, %blockbase
  %one = shl i64 1, %shift
  %mask = sub i64 %one, 1
  %hi = and i64 %u, %mask
  %c0.r0 = trunc i64 %lo to i32
  %lo32 = lshr i64 %lo, 32
  %c1.r0 = trunc i64 %lo32 to i32
  %c2.r0 = trunc i64 %hi to i32
  %hi32 = lshr i64 %hi, 32
  %c3.r0 = trunc i64 %hi32 to i32
{rounds}
  %base = shl i64 %i, {shift}
{store_text}
  %next = add i64 %i, 1
  %more = icmp ult i64 %next, %n
  br i1 %more, label %loop, label %done
done:
  ret void
}}
"""


def _bits(words):
    return "\n".join(f"  %v{j} = add i32 {w}, 0" for j, w in enumerate(words)), "i32", 4


def _float(words):
    # x * 2^-32 + 2^-33 in float: 0x3DF0000000000000 is 2^-32 and 0x3DE0000000000000 2^-33 (as
    # LLVM spells float constants, in double hex form)
    return "\n".join(f"  %f{j} = uitofp i32 {w} to float\n  %g{j} = fmul float %f{j}, 0x3DF0000000000000\n"
                     f"  %v{j} = fadd float %g{j}, 0x3DE0000000000000" for j, w in enumerate(words)), "float", 4


def _double(words):
    # (x ^ (y << 21)) * 2^-53 + 2^-54: 0x3CA0000000000000 is 2^-53, 0x3C90000000000000 2^-54
    text = []
    for j in range(2):
        x, y = words[2 * j], words[2 * j + 1]
        text.append(f"  %x{j} = zext i32 {x} to i64\n  %y{j} = zext i32 {y} to i64\n"
                    f"  %s{j} = shl i64 %y{j}, 21\n  %z{j} = xor i64 %x{j}, %s{j}\n"
                    f"  %f{j} = uitofp i64 %z{j} to double\n  %g{j} = fmul double %f{j}, 0x3CA0000000000000\n"
                    f"  %v{j} = fadd double %g{j}, 0x3C90000000000000")
    return "\n".join(text), "double", 2


_FUNCTIONS = {"philox_bits": _bits, "philox_uniform": _float, "philox_uniform_double": _double}


def _compile():
    """The kernels as machine code, through anycuda's own JIT (verified, optimised for this
    CPU, linked and kept as its kernels are)."""
    from ...compiler.build import jit
    text = "".join(_function_ir(name, convert) for name, convert in _FUNCTIONS.items())
    loaded = jit.LoadedObject(jit.compile_to_object(text, "curand_philox"))
    prototype = ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_int64, ctypes.c_uint64, ctypes.c_uint64,
                                 ctypes.c_uint64, ctypes.c_uint64, ctypes.c_uint64)
    functions = {name: prototype(loaded.address(name)) for name in _FUNCTIONS}
    return loaded, functions


def _functions():
    with _lock:
        if "functions" not in _compiled:
            try:
                # kept for the whole process (the JIT keeps it past an embedding process's exit)
                _compiled["code"], _compiled["functions"] = _compile()
            except Exception as e:             # noqa: BLE001 -- no JIT: the numpy path serves
                _compiled["functions"], _compiled["error"] = None, e
        return _compiled["functions"]


def available() -> bool:
    return _functions() is not None


def fill(kind: str, address: int, blocks: int, first: int, shift: int, key: int, run: int = 0,
         base: int = 0) -> None:
    """Write `blocks` Philox blocks at `address` converted as kind "philox_bits",
    "philox_uniform" or "philox_uniform_double"; counters as the module docstring says."""
    _functions()[kind](address, blocks, first, shift, key & 0xFFFFFFFFFFFFFFFF, run, base & 0xFFFFFFFFFFFFFFFF)
