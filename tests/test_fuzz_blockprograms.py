"""Fuzzed kernels through block programs (compiler/vector/): random straight-line, branching
and looping kernels from ptx_generators, at block sizes of one to eight warps, each compared
word for word with the generator's own model of what every thread computes. Kernels the
block-program compiler refuses (NotVectorisable: most have no barrier or shuffle) are drawn
again rather than run; the target reports how many were, and fails if none took a block
program, so that a generator which stopped exercising them shows it.

A campaign: ANYCUDA_FUZZ_EXAMPLES=400 ANYCUDA_FUZZ_RANDOM=1 python -m pytest -n 0 \
    tests/test_fuzz_blockprograms.py
"""
from __future__ import annotations

import os

import numpy as np
from hypothesis import assume, given, strategies as st

import fuzz_harness as fh
import ptx_generators as gen

kernels = st.fixed_dictionaries({
    "seed": st.integers(0, 2**31 - 1),
    "size": st.integers(100, 300),                  # smaller kernels seldom hold a barrier
    "block": st.sampled_from([32, 64, 128, 256]),   # the generator assumes power-of-two blocks
    "grid": st.integers(1, 3),
    "n_fraction": st.floats(0.0, 1.0),              # n as a share of 1.5 x the threads
})

_taken = {"program": 0, "rounds": 0}


def takes_a_block_program(kernel, block: int) -> bool:
    from anycuda.compiler import pipeline
    from anycuda.compiler.vector import blockprograms
    try:
        pipeline.block_program_ir(kernel.ptx, f"{kernel.name}.ptx", kernel.name, block)
    except blockprograms.NotVectorisable:
        return False
    return True


def run_and_compare(kernel, case):
    grid, block = case["grid"], case["block"]
    n = max(1, int(case["n_fraction"] * 1.5 * grid * block))
    kernel.check_launch(grid, block, np.random.default_rng(case["seed"]), n)


@fh.fuzz_settings(default=4)
@given(kernels)
def _fuzz_block_programs(case):
    # a fifth of the ifs alike in every thread: a warp skipping a part whole is a way of its
    # own through a block program (a register a skipped loop let go of was lost: 512d8bc)
    kernel = gen.random_kernel(case["size"], case["seed"], name=f"fz{case['seed']}", uniform_branches=0.2)
    taken = takes_a_block_program(kernel, case["block"])
    _taken["program" if taken else "rounds"] += 1
    assume(taken)     # kernels in rounds are the other compiler tests' ground
    fh.allowed_outcome(lambda: run_and_compare(kernel, case), (), case)


def fuzz_block_programs():
    # optimised code: block programs are compiled before the first launch, not in the background
    os.environ["ANYCUDA_JIT"] = "optimised"
    os.environ["ANYCUDA_QUIET"] = "1"
    _fuzz_block_programs()
    print(f"inputs that took a block program: {_taken['program']}, refused: {_taken['rounds']}")
    assert _taken["program"], "no input took a block program: the target no longer exercises them"


def test_fuzz_block_programs():
    fh.run_in_child("test_fuzz_blockprograms", "fuzz_block_programs")
