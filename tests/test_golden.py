"""Golden outputs from a real GPU: every record in tests/golden/ holds, for one module of the
conformance kernels (tests/kernels/), the inputs of each case and the bits an NVIDIA GPU
wrote for them, running the same PTX that these tests compile (scripts/record_golden.py
says how they were made). anycuda must write the same bits, except where TOLERANCES names
an output that an approximate instruction decides; there the bound is a few times the
accuracy the PTX ISA and CUDA's math documentation give (the differences measured against
the H200 are in benchmarks/NOTES.md). Outputs that the order of the threads' atomics decides
are compared by what every order gives alike (ORDER), and device printf's text as lines
(PRINTED)."""
from __future__ import annotations

import functools
import json
import re
from pathlib import Path

import numpy as np
import pytest

import anycuda as ac
from conformance import KERNELS
from golden_records import POISON_BYTE, UNSIGNED, array_key, kernel_fingerprint, text_key

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

# Atomics: an output that the order in which threads reach an atomic decides (returned old
# values, tickets, the winner of an exchange, a float sum's rounding) is compared by what
# every order gives alike; the GPU's order is not anycuda's, nor the same from run to run.
# Keys: (module, kernel, argument) -> rule; every output of an atomics kernel not named here
# (the final values of counters, minima, maxima, bitwise results, sums of integers) is
# compared bit for bit. In every rule, a slot the GPU left unwritten (0xCD bytes) must stay
# unwritten, in place.
#   ("multiset", group)       old values and tickets: within each run of `group` elements
#                             (None: the whole buffer; "block": the launch's threads per
#                             block) the same values as the GPU's, in any order
#   ("multiset_with", arg)    atomicExch's old values: together with the final value in
#                             argument `arg`, the same values as the GPU's (each value
#                             written comes back once or stays at the end)
#   ("bitchain", group, arg)  old values of or/and/xor of one bit per thread, the k-th element
#                             of each run of `group` owning bit k: the bits changed from the
#                             word's start (argument `arg`'s input) nest in one chain, none
#                             holds the element's own bit, and the chain's sizes are the GPU's
#   ("below", arg)            the last of many exchanges of thread indices: 0 <= value < the
#                             scalar argument `arg`
#   ("count_up", group)       tickets from a counter that a racing exchange may set back
#                             (shared_atomics reads si[4] and exchanges it back with no barrier
#                             between: a ticket can repeat): per group, values 0, 1, ..., max
#                             with none missing and max below the group's size
#   ("rel", r)                a float sum from a fractional start: |got - gpu| <= r |gpu|;
#                             k additions of terms of one sign, in any two orders, differ by at
#                             most k eps |sum|, and r is that for k = 1024 (global_atomics adds
#                             at most 1000 terms to one slot)
ORDER = {
    ("atomics", "global_atomics", 3): ("rel", 1024 * 2.0 ** -23),
    ("atomics", "tickets", 1): ("multiset", None),
    ("atomics", "inc_dec_exch_cas", 2): ("below", 6),
    **{("atomics", "returned_olds", a): ("multiset", None) for a in (12, 13, 14, 15, 16, 17, 22)},
    ("atomics", "returned_olds", 6): ("multiset_with", 18),
    ("atomics", "returned_olds", 18): ("multiset_with", 6),
    ("atomics", "returned_olds", 19): ("bitchain", 32, 7),
    ("atomics", "returned_olds", 20): ("bitchain", 32, 8),
    ("atomics", "returned_olds", 21): ("bitchain", 32, 9),
    ("atomics", "shared_atomics", 6): ("count_up", "block"),
}

# Device printf (cases that print): the GPU's text, as lines in any order (the GPU prints its
# warps' lines in an order of its own), under these rules per (module, kernel):
#   "pointers"               %p values compared as offsets from the smallest one printed (the
#                            buffers lie elsewhere)
#   ("program_order", re)    one thread's lines also keep program order: `re` matches a line
#                            and captures (thread, step), the steps of a thread rising
PRINTED = {
    ("printf", "say_all"): ("pointers",),
    ("printf", "say_seq"): (("program_order", rb"^(\d+):(\d+) "),),
}
# Where anycuda's text differs from the GPU's (a bug in anycuda, recorded here until fixed)
PRINTED_DIFFERS = {}


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


def _cases(prints=False):
    for record in RECORDS:
        meta = _meta(record)
        for c, case in enumerate(meta["cases"]):
            if bool(case.get("prints")) != prints:
                continue
            reason = PRINTED_DIFFERS.get((meta["module"], case["kernel"])) if prints else None
            marks = [pytest.mark.xfail(strict=True, reason=reason)] if reason else []
            yield pytest.param(record, c, id=f"{meta['module']}-{case['kernel']}-{c}", marks=marks)


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


def _bits(a: np.ndarray) -> np.ndarray:
    return a.view(UNSIGNED[a.dtype.itemsize])


def _unwritten(a: np.ndarray) -> np.ndarray:
    return (a.view(np.uint8).reshape(len(a), -1) == POISON_BYTE).all(axis=1)


def _runs(group, case, length):
    """The slices a rule's `group` cuts a buffer of `length` elements into."""
    if group == "block":
        group = int(np.prod(case["block"]))
    group = group or max(length, 1)
    return [slice(k, min(k + group, length)) for k in range(0, length, group)]


def _order_same(rule, case, c, arrays, got_outs, want_outs, arg):
    """Elementwise agreement, under an ORDER rule, of output `arg` (a failing run of elements
    is marked whole): the GPU's unwritten slots bit for bit, the rest by the rule."""
    got, want = got_outs[arg], want_outs[arg]
    kind = rule[0]
    if kind == "rel":
        return _within(rule, got, want, None)
    fixed = _unwritten(want)
    same = fixed & _same_bits(got, want)
    if kind == "multiset_with":
        partner_got, partner_want = got_outs[rule[1]], want_outs[rule[1]]
        keep = ~_unwritten(partner_want)
        pool = lambda a, p: np.sort(np.concatenate([_bits(a)[~fixed], _bits(p)[keep]]))
        same |= ~fixed & np.array_equal(pool(got, partner_got), pool(want, partner_want))
        return same
    if kind == "below":
        bound = case["args"][rule[1]]["value"]
        inside = lambda a: (a >= 0) & (a < bound)
        same |= ~fixed & inside(got) & inside(want)
        return same
    for w, run in enumerate(_runs(rule[1], case, len(want))):
        written = ~fixed[run]
        if not written.any():
            continue
        g, v = got[run][written], want[run][written]
        if kind == "multiset":
            ok = np.array_equal(np.sort(_bits(g)), np.sort(_bits(v)))
        elif kind == "count_up":
            ok = all(len(x) and x.min() == 0 and x.max() < run.stop - run.start
                     and np.array_equal(np.unique(x), np.arange(x.max() + 1)) for x in (g, v))
        elif kind == "bitchain":
            start = _bits(arrays[array_key(c, rule[2])])[w]
            own = np.arange(run.stop - run.start)[written].astype(_bits(g).dtype)
            changed = _bits(g) ^ start
            chain = changed[np.argsort(np.bitwise_count(changed), kind="stable")]
            ok = (not ((changed >> own) & 1).any()
                  and not (chain[:-1] & ~chain[1:]).any()
                  and np.array_equal(np.sort(np.bitwise_count(changed)), np.sort(np.bitwise_count(_bits(v) ^ start))))
        else:
            raise ValueError(f"unknown ORDER rule {rule!r}")
        same[run] |= written & ok
    return same


def compare_case(meta, c, arrays, got_outs) -> list[str]:
    """What of one case's outputs `got_outs` ({argument: array}) differs from the record's,
    under TOLERANCES and ORDER (also used to compare two GPU runs with each other)."""
    case = meta["cases"][c]
    want_outs = {i: arrays[array_key(c, i, after=True)] for i in got_outs}
    first_input = next((arrays[array_key(c, i)] for i, a in enumerate(case["args"]) if a["kind"] == "in"), np.zeros(1))
    failures = []
    for i, got in got_outs.items():
        key = (meta["module"], case["kernel"])
        rule = ORDER.get(key + (i,))
        if rule is not None:
            same = _order_same(rule, case, c, arrays, got_outs, want_outs, i)
        else:
            same = _compare(key, i, got, want_outs[i], first_input)
        if not same.all():
            failures.append(_describe(case, i, got, want_outs[i], same))
    return failures


def _describe(case, arg, got, want, same):
    where = np.nonzero(~same)[0]
    show = ", ".join(f"[{k}] got {got[k]!r} ({got.view(np.uint8).reshape(len(got), -1)[k].tobytes()[::-1].hex()}) "
                     f"want {want[k]!r} ({want.view(np.uint8).reshape(len(want), -1)[k].tobytes()[::-1].hex()})"
                     for k in where[:6])
    return f"{case['kernel']} argument {arg}: {len(where)} of {len(want)} elements differ from the GPU: {show}"


def _recorded_case(record, c):
    """(meta, case, its arrays, the module) of case c of a record; skipped where the PTX the
    tests compile is not the one the GPU ran."""
    meta = _meta(record)
    case = meta["cases"][c]
    with np.load(record) as z:
        arrays = {k: z[k] for k in z.files if k.startswith(f"c{c}_")}
    module = _module(meta)
    if kernel_fingerprint(module.ptx, case["kernel"]) != case["fingerprint"]:
        pytest.skip(f"{case['kernel']}'s PTX is not the one recorded on the GPU (the kernel in "
                    f"tests/kernels/{meta['file']}.cu changed, or the compiler is not {meta['compiler']!r}): "
                    f"record again with scripts/record_golden.py")
    return meta, case, arrays, module


@pytest.mark.parametrize("record,c", list(_cases()))
def test_same_bits_as_the_gpu(record, c):
    meta, case, arrays, module = _recorded_case(record, c)
    failures = compare_case(meta, c, arrays, _launch(module, meta, c, arrays))
    assert not failures, "\n".join(failures)


def _printed_lines(text: bytes, rules) -> list:
    lines = text.splitlines()
    if "pointers" in rules:
        found = [int(m, 16) for line in lines for m in re.findall(rb"\b0x([0-9a-f]+)\b", line)]
        base = min(found, default=0)
        lines = [re.sub(rb"\b0x([0-9a-f]+)\b", lambda m: b"<+%d>" % (int(m.group(1), 16) - base), line)
                 for line in lines]
    return sorted(lines)


def _out_of_order(text: bytes, rules) -> list:
    """Lines that come before an earlier step of their own thread."""
    wrong = []
    for rule in rules:
        if isinstance(rule, tuple) and rule[0] == "program_order":
            last = {}
            for line in text.splitlines():
                m = re.match(rule[1], line)
                if m:
                    thread, step = int(m.group(1)), int(m.group(2))
                    if step < last.get(thread, -1):
                        wrong.append(line)
                    last[thread] = step
    return wrong


@pytest.mark.parametrize("record,c", list(_cases(prints=True)))
def test_same_printf_text_as_the_gpu(record, c, capfdbinary):
    meta, case, arrays, module = _recorded_case(record, c)
    capfdbinary.readouterr()
    _launch(module, meta, c, arrays)
    ac.synchronize()
    got = capfdbinary.readouterr().out
    want = arrays[text_key(c)].tobytes()
    rules = PRINTED.get((meta["module"], case["kernel"]), ())
    assert not _out_of_order(want, rules), "the GPU's own record breaks a thread's program order"
    assert not _out_of_order(got, rules), f"lines out of a thread's program order: {_out_of_order(got, rules)[:4]}"
    g, w = _printed_lines(got, rules), _printed_lines(want, rules)
    missing, extra = sorted(set(w) - set(g)), sorted(set(g) - set(w))
    assert g == w, (f"{case['kernel']}: {len(g)} lines printed, the GPU {len(w)}; the GPU's not printed: {missing[:4]}; "
                    f"printed, not the GPU's: {extra[:4]}")


def test_records_come_from_a_gpu_and_cover_the_modules():
    """The records are the GPU's (not anycuda's own output saved by mistake) and none is missing."""
    modules = {meta["module"]: meta for meta in map(_meta, RECORDS)}
    assert {"arith_float", "arith_float.fast", "arith_int", "bits", "convert", "half", "warp", "programs",
            "sync", "memory", "special_regs", "atomics", "functions", "printf"} <= set(modules)
    for meta in modules.values():
        assert meta["recorded_on"]["backend"] == "cupy" and "NVIDIA" in meta["recorded_on"]["device"], meta["recorded_on"]
        assert meta["cases"]
