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


@st.composite
def mutated_ptx(draw) -> str:
    lines = statements(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 4))):
        lines = draw(st.sampled_from(MUTATIONS))(draw, lines)
    text = "".join(lines)
    if draw(st.integers(0, 9)) == 0:
        text = text[:draw(st.integers(0, len(text)))]          # truncated at any character
    return text


def _index(draw, lines) -> int:
    return draw(st.integers(0, max(len(lines) - 1, 0)))


def delete_line(draw, lines):
    i = _index(draw, lines)
    return lines[:i] + lines[i + 1:]


def duplicate_line(draw, lines):
    i = _index(draw, lines)
    return lines[:i + 1] + lines[i:]


def swap_lines(draw, lines):
    i, j = _index(draw, lines), _index(draw, lines)
    lines = list(lines)
    if lines:
        lines[i], lines[j] = lines[j], lines[i]
    return lines


def replace_token(draw, lines):
    """One token of a line becomes another token of the seeds, or an extreme one."""
    i = _index(draw, lines)
    if not lines:
        return lines
    spans = [m.span() for m in TOKEN.finditer(lines[i])]
    if not spans:
        return lines
    a, b = draw(st.sampled_from(spans))
    new = draw(st.sampled_from(POOL) | st.sampled_from(EXTREMES))
    return lines[:i] + [lines[i][:a] + new + lines[i][b:]] + lines[i + 1:]


def insert_token(draw, lines):
    i = _index(draw, lines)
    if not lines:
        return lines
    at = draw(st.integers(0, len(lines[i])))
    new = " " + draw(st.sampled_from(POOL) | st.sampled_from(EXTREMES)) + " "
    return lines[:i] + [lines[i][:at] + new + lines[i][at:]] + lines[i + 1:]


def deep_nesting(draw, lines):
    """A statement buried in many braces (or unbalanced ones)."""
    i = _index(draw, lines)
    depth = draw(st.sampled_from([1, 50, 5000]))
    opened, closed = draw(st.sampled_from([(depth, depth), (depth, 0), (0, depth)]))
    return lines[:i] + ["{" * opened + "\n"] + lines[i:i + 1] + ["}" * closed + "\n"] + lines[i + 1:]


def long_identifier(draw, lines):
    """A register or label renamed to something very long, everywhere it occurs."""
    text = "".join(lines)
    names = sorted(set(re.findall(r"%\w+|\$\w+", text)))
    if not names:
        return lines
    old = draw(st.sampled_from(names))
    new = old[0] + "n" * draw(st.sampled_from([300, 70_000]))
    return statements(re.sub(re.escape(old) + r"\b", new, text))


MUTATIONS = [delete_line, duplicate_line, swap_lines, replace_token, replace_token, insert_token,
             deep_nesting, long_identifier]


def entry_names(text: str) -> list:
    return re.findall(r"\.entry\s+([\w$]+)", text)


@fh.fuzz_settings(default=300)
@given(mutated_ptx())
def fuzz_parse(text):
    from anycuda.ptx import PtxError, parse
    fh.allowed_outcome(lambda: parse(text), (PtxError,), text)


@fh.fuzz_settings(default=300)
@given(mutated_ptx())
def fuzz_index(text):
    from anycuda.ptx import PtxError
    from anycuda.ptx.index import ModuleIndex

    def index_and_cut():
        index = ModuleIndex(text)
        for name in entry_names(text)[:1]:
            if index.has_kernel(name):
                index.kernel_unit(name)
    fh.allowed_outcome(index_and_cut, (PtxError,), text)


@fh.fuzz_settings(default=40)
@given(mutated_ptx())
def fuzz_load(text):
    """The whole load through the driver API: module, then one kernel compiled."""
    from anycuda.driver import api
    from anycuda.runtime.errors import CudaError
    api.cuInit(0)
    api.cuCtxSetCurrent(api.cuDevicePrimaryCtxRetain(0))

    def load_and_get():
        mod = api.cuModuleLoadData(text.encode())
        try:
            for name in entry_names(text)[:1]:
                try:
                    api.cuModuleGetFunction(mod, name)
                except CudaError as e:
                    if e.code.name != "CUDA_ERROR_NOT_FOUND":
                        raise
        finally:
            api.cuModuleUnload(mod)
    fh.allowed_outcome(load_and_get, (CudaError,), text)


def test_fuzz_parse():
    fh.run_in_child("test_fuzz_ptx", "fuzz_parse")


def test_fuzz_index():
    fh.run_in_child("test_fuzz_ptx", "fuzz_index")


def test_fuzz_load():
    fh.run_in_child("test_fuzz_ptx", "fuzz_load")
