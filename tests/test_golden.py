"""Golden outputs from a real GPU: every record in tests/golden/ holds, for one module of the
conformance kernels (tests/kernels/), the inputs of each case and the bits an NVIDIA GPU
wrote for them, running the same PTX that these tests compile (scripts/record_golden.py
says how they were made). anycuda must write the same bits, except where TOLERANCES names
an output that an approximate instruction decides; there the bound is a few times the
accuracy the PTX ISA and CUDA's math documentation give (the differences measured against
the H200 are in benchmarks/NOTES.md)."""
from __future__ import annotations

import functools
import json
from pathlib import Path

import numpy as np
import pytest

import anycuda as ac
from conformance import KERNELS
from golden_records import POISON_BYTE, UNSIGNED, array_key, kernel_fingerprint

GOLDEN = Path(__file__).parent / "golden"
RECORDS = sorted(GOLDEN.glob("*.npz"))


# Where an output depends on an approximate instruction (ex2, lg2, rcp, rsqrt, sqrt, sin, cos
# and div .approx: the PTX ISA gives them an error bound, not a bit pattern, and the GPU's
# function units are not reproduced bit for bit), its elements are compared within a bound:
#   ("ulp", n)        |got - gpu| <= n units in the last place of the GPU's value
#   ("log", n)        n ulp + 2^-21: lg2.approx's error is absolute, large in ulp near 1
#   ("rel", r)        |got - gpu| <= r |gpu| (powers and tanh built from ex2 and lg2)
#   ("angle", a)      sin/cos .approx of input 0: |got - gpu| <= a max(1, |x|/pi) where
#                     |x| <= 100 pi; past that the GPU's argument reduction loses the angle's
#                     low bits, so only NaN-ness is compared there
#   ("tan", a)        as "angle" with a (1 + gpu^2); at a pole the GPU may give an infinity
#                     where anycuda gives a value past 2^20
#   ("scaled", r)     |got - gpu| <= r max |gpu| over the array (whole programs whose sums
#                     carry an rsqrt or exp approximation)
#   OFFSET            integers equal up to one constant added to every element of the slot
# Infinities and NaN-ness must agree under every rule. Keys: (module, kernel) for its float
# outputs, or (module, kernel, argument) -> (outputs per thread, {slot: rule}, rule for the
# other slots or None for exact). Everything not named here is compared bit for bit.
ULP2, LOG, POW, ANGLE = ("ulp", 2), ("log", 4), ("rel", 2.0 ** -15), ("angle", 2.0 ** -18)
TAN = ("tan", 2.0 ** -18)
_MATH = {2: ULP2, 4: ULP2, 7: ULP2, 10: ANGLE, 11: ULP2, 12: ULP2, 13: ULP2}
_INTRINSICS = (10, {0: ANGLE, 1: ANGLE, 2: ULP2, 3: ULP2, 4: LOG, 5: LOG, 6: LOG, 7: ULP2, 8: TAN, 9: POW}, None)
TOLERANCES = {
    ("arith_float", "f32_math"): (14, _MATH, None),
    ("arith_float", "f32_library"): (34, {}, ULP2),
    ("arith_float", "f64_library"): (24, {}, ULP2),
    ("arith_float", "f32_intrinsics"): _INTRINSICS,
    # -use_fast_math: the library's logs, powers and trigonometry become the approximations
    ("arith_float.fast", "f32_math"): (14, {**_MATH, 0: ANGLE, 1: ANGLE, 3: LOG, 5: LOG, 6: POW, 7: POW}, ULP2),
    ("arith_float.fast", "f32_exact2"): (18, {0: ULP2, 1: ULP2}, None),
    ("arith_float.fast", "f32_library"): (34, {0: ANGLE, 1: ANGLE, 2: TAN, 9: POW, 17: LOG, 18: LOG, 19: LOG,
                                               21: POW, 30: ANGLE, 31: ANGLE}, ULP2),
    ("arith_float.fast", "f64_library"): (24, {}, ULP2),
    ("arith_float.fast", "f32_intrinsics"): _INTRINSICS,
}
# Shared-window addresses (cvta.to.shared) differ by one offset: the H200 reserves the first
# 1 KiB of a block's shared memory (cudaDevAttrReservedSharedMemoryPerBlock), anycuda does not
OFFSET = ("offset", None)
TOLERANCES[("memory", "locals_and_generic", 2)] = (3, {1: OFFSET}, None)
for _m in ("programs", "programs.fast"):
    TOLERANCES.update({(_m, "nbody_accel"): (1, {}, ("scaled", 2.0 ** -20)),
                       (_m, "layernorm_forward"): (1, {}, ("scaled", 2.0 ** -20)),
                       (_m, "softmax_forward"): (1, {}, ("scaled", 2.0 ** -20)),
                       (_m, "softmax_online_warp"): (1, {}, ("scaled", 2.0 ** -20))})


_fresh = {}


def _module(meta) -> ac.RawModule:
    """The record's module, compiled for these tests alone: the GPU ran each record's cases on
    a module just loaded, in order, and other tests change module variables (memory.cu's
    `counter`) of the modules they share."""
    key = (meta["file"], tuple(meta["options"]))
    if key not in _fresh:
        try:
            _fresh[key] = ac.RawModule(code=(KERNELS / f"{meta['file']}.cu").read_text(),
                                       options=key[1], name=f"{meta['file']}.cu")
        except ac.CompileError as e:
            if "no CUDA C++ compiler" in str(e):
                pytest.skip(str(e))
            raise
    return _fresh[key]


@functools.lru_cache(maxsize=None)
def _meta(record: Path) -> dict:
    """The record's meta data (read once; not to be changed)."""
    with np.load(record) as z:
        return json.loads(str(z["meta"]))


def _cases():
    for record in RECORDS:
        meta = _meta(record)
        for c, case in enumerate(meta["cases"]):
            yield pytest.param(record, c, id=f"{meta['module']}-{case['kernel']}-{c}")


def _launch(module, meta, c, arrays):
    case = meta["cases"][c]
    args, outs = [], {}
    for i, a in enumerate(case["args"]):
        if a["kind"] == "scalar":
            args.append(np.dtype(a["dtype"]).type(a["value"]))
            continue
        if a["kind"] == "out":
            host = np.frombuffer(bytes([POISON_BYTE]) * (a["count"] * np.dtype(a["dtype"]).itemsize), a["dtype"])
        else:
            host = arrays[array_key(c, i)]
        dev = ac.asarray(host.copy())
        args.append(dev)
        if a["kind"] != "in":
            outs[i] = dev
    module.get_function(case["kernel"])(tuple(case["grid"]), tuple(case["block"]), tuple(args),
                                        shared_mem=case["shared_mem"])
    return {i: d.get() for i, d in outs.items()}


def _same_bits(got: np.ndarray, want: np.ndarray) -> np.ndarray:
    """Elementwise: equal bit patterns, or both NaN (a NaN's payload is not compared)."""
    width = UNSIGNED[want.dtype.itemsize]
    same = got.view(width) == want.view(width)
    if want.dtype.kind == "f":
        same |= np.isnan(got) & np.isnan(want)
    return same


def _within(rule, got, want, angle):
    """Elementwise: is `got` within `rule` of the GPU's `want`? (see TOLERANCES)"""
    kind, bound = rule
    g, w = got.astype(np.float64), want.astype(np.float64)
    with np.errstate(all="ignore"):
        diff = np.abs(g - w)
        if kind in ("ulp", "log"):
            allowed = bound * np.abs(np.spacing(want)).astype(np.float64) + (2.0 ** -21 if kind == "log" else 0)
        elif kind == "rel":
            allowed = bound * np.abs(w)
        elif kind == "scaled":
            allowed = np.full_like(w, bound * np.nanmax(np.abs(w[np.isfinite(w)]), initial=0))
        else:
            x = np.abs(angle.astype(np.float64))
            allowed = bound * np.maximum(1, x / np.pi) * (1 + w * w if kind == "tan" else 1)
        close = np.isfinite(g) & np.isfinite(w) & (diff <= allowed)
        close |= _same_bits(got, want)
        if kind == "tan":       # at a pole: a huge value or an infinity, as the approximations fall
            close |= np.isinf(w) & (np.abs(g) >= 2.0 ** 20)
        if kind in ("angle", "tan"):
            close |= (x > 100 * np.pi) & np.isfinite(angle) & (np.isnan(g) == np.isnan(w))
    return close


def _compare(key, arg, got, want, angle):
    """Elementwise agreement with the GPU: bit for bit, or within TOLERANCES' rule (keyed by
    (module, kernel, argument) or (module, kernel); the latter for float outputs only)."""
    same = _same_bits(got, want)
    found = TOLERANCES.get(key + (arg,)) or (TOLERANCES.get(key) if want.dtype.kind == "f" else None)
    if found is None:
        return same
    per_thread, slots, default = found
    slot = np.arange(len(want)) % per_thread
    thread = np.minimum(np.arange(len(want)) // per_thread, len(angle) - 1)
    for s in range(per_thread):
        rule = slots.get(s, default)
        if rule == OFFSET:
            at = (slot == s) & (want.view(np.uint8).reshape(len(want), -1) != POISON_BYTE).any(axis=1)
            moved = got[at].astype(np.int64) - want[at].astype(np.int64)
            same[at] = moved == (moved[0] if len(moved) else 0)
            continue
        at = (slot == s) & ~same
        if rule is not None and at.any():
            same[at] = _within(rule, got[at], want[at], angle[thread[at]])
    return same


def _describe(case, arg, got, want, same):
    where = np.nonzero(~same)[0]
    show = ", ".join(f"[{k}] got {got[k]!r} ({got.view(np.uint8).reshape(len(got), -1)[k].tobytes()[::-1].hex()}) "
                     f"want {want[k]!r} ({want.view(np.uint8).reshape(len(want), -1)[k].tobytes()[::-1].hex()})"
                     for k in where[:6])
    return f"{case['kernel']} argument {arg}: {len(where)} of {len(want)} elements differ from the GPU: {show}"


@pytest.mark.parametrize("record,c", list(_cases()))
def test_same_bits_as_the_gpu(record, c):
    meta = _meta(record)
    case = meta["cases"][c]
    with np.load(record) as z:
        arrays = {k: z[k] for k in z.files if k.startswith(f"c{c}_")}
    module = _module(meta)
    if kernel_fingerprint(module.ptx, case["kernel"]) != case["fingerprint"]:
        pytest.skip(f"{case['kernel']}'s PTX is not the one recorded on the GPU (the kernel in "
                    f"tests/kernels/{meta['file']}.cu changed, or the compiler is not {meta['compiler']!r}): "
                    f"record again with scripts/record_golden.py")
    outs = _launch(module, meta, c, arrays)
    failures = []
    first_input = next((arrays[array_key(c, i)] for i, a in enumerate(case["args"]) if a["kind"] == "in"), np.zeros(1))
    for i, got in outs.items():
        want = arrays[array_key(c, i, after=True)]
        same = _compare((meta["module"], case["kernel"]), i, got, want, first_input)
        if not same.all():
            failures.append(_describe(case, i, got, want, same))
    assert not failures, "\n".join(failures)


def test_records_come_from_a_gpu_and_cover_the_modules():
    """The records are the GPU's (not anycuda's own output saved by mistake) and none is missing."""
    modules = {meta["module"]: meta for meta in map(_meta, RECORDS)}
    assert {"arith_float", "arith_float.fast", "arith_int", "bits", "convert", "half", "warp", "programs"} <= set(modules)
    for meta in modules.values():
        assert meta["recorded_on"]["backend"] == "cupy" and "NVIDIA" in meta["recorded_on"]["device"], meta["recorded_on"]
        assert meta["cases"]
