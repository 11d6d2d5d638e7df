"""Fuzzed PTX text: grammar-aware mutations of real PTX must parse, load and compile, or
fail with PtxError / CudaError and a message; never another exception, a hang or a crash.

The seeds are the PTX nvcc wrote for anycuda's examples (and any *.ptx in the folder named by
ANYCUDA_FUZZ_PTX_DIR in a campaign). Mutations work on statements and tokens, so that most
inputs get past the lexer into the parser, the module index and the compiler.
"""
from __future__ import annotations

import os
import re
from pathlib import Path

from hypothesis import given, strategies as st

import fuzz_harness as fh

EXAMPLES = Path(__file__).resolve().parent.parent / "src" / "anycuda" / "examples"


def seed_ptx() -> list:
    files = sorted(EXAMPLES.glob("*.ptx"))
    extra = os.environ.get("ANYCUDA_FUZZ_PTX_DIR")
    if extra:
        files += sorted(Path(extra).glob("*.ptx"))
    return [f.read_text() for f in files]


SEEDS = seed_ptx()
TOKEN = re.compile(r"%?[A-Za-z_$.][\w$.]*|0[xX][0-9a-fA-F]+|0[fFdD][0-9a-fA-F]+|\d+|\S")
POOL = sorted({t for s in SEEDS for t in TOKEN.findall(s)})
# values at the edges of what a field can hold, and shapes no real compiler writes
EXTREMES = ["18446744073709551616", "18446744073709551615", "-9223372036854775809", "0x" + "f" * 40,
            "0f7FFFFFFF", "0dFFFFFFFFFFFFFFFF", "4294967296", "-1", "0", "99999999999999999999999",
            ".v1024", ".v3", ".v0", ".b0", ".u7", ".f8", ".s128", ".b1024", "[", "]", "{", "}", "<", ">",
            "%r" + "9" * 30, "x" * 5000, ".align 0", ".align 3", ".align 4294967296", "%tid.w", "@!%p",
            "%p<-1>", "%r<4294967296>", "%r<99999999>", ".version 99.9", ".target sm_9999", "..", ";;", "//", "/*"]


def statements(text: str) -> list:
    """Lines, each keeping its newline: close enough to PTX statements for mutating."""
    return text.splitlines(keepends=True)


def mutated(d) -> str:
    """A seed's text mutated 1-4 times (`d`: fuzz_harness.Draws), cut short one time in ten."""
    lines = statements(d.pick(SEEDS))
    for _ in range(d.number(1, 4)):
        lines = d.pick(MUTATIONS)(d, lines)
    text = "".join(lines)
    if d.number(0, 9) == 0:
        text = text[:d.number(0, len(text))]          # truncated at any character
    return text


@st.composite
def mutated_ptx(draw) -> str:
    return mutated(fh.HypothesisDraws(draw))


def _index(d, lines) -> int:
    return d.number(0, max(len(lines) - 1, 0))


def delete_line(d, lines):
    i = _index(d, lines)
    return lines[:i] + lines[i + 1:]


def duplicate_line(d, lines):
    i = _index(d, lines)
    return lines[:i + 1] + lines[i:]


def swap_lines(d, lines):
    i, j = _index(d, lines), _index(d, lines)
    lines = list(lines)
    if lines:
        lines[i], lines[j] = lines[j], lines[i]
    return lines


def _token(d) -> str:
    """A token of the seeds, or an extreme one (half and half)."""
    return d.pick(d.pick([POOL, EXTREMES]))


def replace_token(d, lines):
    """One token of a line becomes another token of the seeds, or an extreme one."""
    i = _index(d, lines)
    if not lines:
        return lines
    spans = [m.span() for m in TOKEN.finditer(lines[i])]
    if not spans:
        return lines
    a, b = d.pick(spans)
    return lines[:i] + [lines[i][:a] + _token(d) + lines[i][b:]] + lines[i + 1:]


def insert_token(d, lines):
    i = _index(d, lines)
    if not lines:
        return lines
    at = d.number(0, len(lines[i]))
    return lines[:i] + [lines[i][:at] + " " + _token(d) + " " + lines[i][at:]] + lines[i + 1:]


def deep_nesting(d, lines):
    """A statement buried in many braces (or unbalanced ones)."""
    i = _index(d, lines)
    depth = d.pick([1, 50, 5000])
    opened, closed = d.pick([(depth, depth), (depth, 0), (0, depth)])
    return lines[:i] + ["{" * opened + "\n"] + lines[i:i + 1] + ["}" * closed + "\n"] + lines[i + 1:]


def long_identifier(d, lines):
    """A register or label renamed to something very long, everywhere it occurs."""
    text = "".join(lines)
    names = sorted(set(re.findall(r"%\w+|\$\w+", text)))
    if not names:
        return lines
    old = d.pick(names)
    new = old[0] + "n" * d.pick([300, 70_000])
    return statements(re.sub(re.escape(old) + r"\b", new, text))


MUTATIONS = [delete_line, duplicate_line, swap_lines, replace_token, replace_token, insert_token,
             deep_nesting, long_identifier]


def entry_names(text: str) -> list:
    return re.findall(r"\.entry\s+([\w$]+)", text)


def check_parse(text):
    from anycuda.ptx import PtxError, parse
    fh.allowed_outcome(lambda: parse(text), (PtxError,), text)


def check_index(text):
    from anycuda.ptx import PtxError
    from anycuda.ptx.index import ModuleIndex

    def index_and_cut():
        index = ModuleIndex(text)
        for name in entry_names(text)[:1]:
            if index.has_kernel(name):
                index.kernel_unit(name)
    fh.allowed_outcome(index_and_cut, (PtxError,), text)


LOCAL_SIZE_BYTES = 3          # CU_FUNC_ATTRIBUTE_LOCAL_SIZE_BYTES: known once the kernel is compiled


def check_load(text):
    """The whole load through the driver API: module, then one kernel compiled (kernels
    compile at their first use, CUDA_MODULE_LOADING=LAZY: asking for the kernel's frame size
    is that use)."""
    from anycuda.driver import api
    from anycuda.runtime.errors import CudaError
    api.cuInit(0)
    api.cuCtxSetCurrent(api.cuDevicePrimaryCtxRetain(0))

    def load_and_get():
        mod = api.cuModuleLoadData(text.encode())
        try:
            for name in entry_names(text)[:1]:
                try:
                    api.cuFuncGetAttribute(LOCAL_SIZE_BYTES, api.cuModuleGetFunction(mod, name))
                except CudaError as e:
                    if e.code.name != "CUDA_ERROR_NOT_FOUND":
                        raise
        finally:
            api.cuModuleUnload(mod)
    fh.allowed_outcome(load_and_get, (CudaError,), text)


# each launch's time limit in the run target (ANYCUDA_LAUNCH_TIMEOUT): a mutated loop that never ends
# costs this much, about one input in 200; no seed's launch takes a millisecond (2 s made those
# few a third of a campaign's time)
RUN_LIMIT_S = "0.5"
RUN_BUFFERS, RUN_BUFFER_BYTES = 4, 4096


def check_run(text):
    """The load, then the first kernel launched (2 blocks of 64 threads; its pointer
    parameters at poisoned 4 KiB buffers, its 4-byte ones 64, the rest zeros) and awaited.
    The process compiles kernels under memcheck (a mutated kernel's wild accesses are
    reported, never made: they would land in the host's memory) and stops launches after
    RUN_LIMIT_S (a mutated loop that never ends). A sticky error resets the context."""
    from anycuda.driver import api
    from anycuda.driver.handles import STICKY
    from anycuda.runtime.errors import CudaError
    os.environ.update(ANYCUDA_SANITIZE="memcheck", ANYCUDA_SANITIZE_PRINT_LIMIT="1", ANYCUDA_LAUNCH_TIMEOUT=RUN_LIMIT_S)
    api.cuInit(0)
    api.cuCtxSetCurrent(api.cuDevicePrimaryCtxRetain(0))
    buffers = []

    def load_and_run():
        mod = api.cuModuleLoadData(text.encode())
        try:
            for name in entry_names(text)[:1]:
                f = api.cuModuleGetFunction(mod, name)
                for k in range(RUN_BUFFERS):
                    buffers.append(api.cuMemAlloc(RUN_BUFFER_BYTES))
                    api.cuMemsetD32(buffers[-1], 0x7FC00000 + k, RUN_BUFFER_BYTES // 4)
                layout = api.kernel_param_layout(f)
                params = bytearray(max((o + n for o, n in layout), default=0))
                for i, (offset, size) in enumerate(layout):
                    value = buffers[i % RUN_BUFFERS] if size == 8 else 64 if size == 4 else 0
                    params[offset:offset + min(size, 8)] = value.to_bytes(8, "little")[:size]
                api.cuLaunchKernel(f, (2, 1, 1), (64, 1, 1), 0, 0, bytes(params))
                api.cuCtxSynchronize()
        finally:
            api.cuModuleUnload(mod)
    outcome = fh.allowed_outcome(load_and_run, (CudaError,), text)
    if isinstance(outcome, CudaError) and outcome.code in STICKY:
        api.cuDevicePrimaryCtxReset(0)            # (its allocations go with it)
        api.cuCtxSetCurrent(api.cuDevicePrimaryCtxRetain(0))
    else:
        for p in buffers:
            api.cuMemFree(p)


CHECKS = {"parse": check_parse, "index": check_index, "load": check_load, "run": check_run}


@fh.fuzz_settings(default=300)
@given(mutated_ptx())
def fuzz_parse(text):
    check_parse(text)


@fh.fuzz_settings(default=300)
@given(mutated_ptx())
def fuzz_index(text):
    check_index(text)


@fh.fuzz_settings(default=40)
@given(mutated_ptx())
def fuzz_load(text):
    check_load(text)


def replay(target: str, seed: int, index: int) -> None:
    """Input `index` of `seed` through check_<target> (what a plain driver's failure names)."""
    CHECKS[target](mutated(fh.plain_draws(seed, index)))


def fuzz_plain(target: str, default: int):
    fh.plain_run(f"test_fuzz_ptx.replay({target!r}, {{seed}}, {{index}})",
                 lambda seed, index: replay(target, seed, index), default)


def fuzz_parse_plain():
    fuzz_plain("parse", 300)


def fuzz_index_plain():
    fuzz_plain("index", 300)


def fuzz_load_plain():
    fuzz_plain("load", 40)


def fuzz_run_plain():
    fuzz_plain("run", 30)


def test_fuzz_parse():
    fh.run_in_child("test_fuzz_ptx", "fuzz_parse")


def test_fuzz_index():
    fh.run_in_child("test_fuzz_ptx", "fuzz_index")


def test_fuzz_load():
    fh.run_in_child("test_fuzz_ptx", "fuzz_load")


def test_fuzz_parse_plain():
    fh.run_in_child("test_fuzz_ptx", "fuzz_parse_plain")


def test_fuzz_index_plain():
    fh.run_in_child("test_fuzz_ptx", "fuzz_index_plain")


def test_fuzz_load_plain():
    fh.run_in_child("test_fuzz_ptx", "fuzz_load_plain")


def test_fuzz_run_plain():
    fh.run_in_child("test_fuzz_ptx", "fuzz_run_plain")
