"""Which execution strategy anycuda's JIT takes for each idiom kernel (benchmarks/idioms.py)
at the block shape the suite launches it with, as the compiler decides it:

- "thread loop": no barrier, shuffle or other suspension; a block runs as one loop over its
  threads (compiler/simt: one stretch, which LLVM may vectorise across threads). A
  grid-stride loop in such a kernel gets no yield (analysis/gridstride.py: only kernels that
  have sites already), so each thread walks its whole loop alone. Where the threads loop, a
  warp region from the kernel's start runs the lanes side by side, except where each thread
  walks memory of its own (analysis/walks.py: a thread per CSR row), which stays thread by
  thread.
- "block program": all threads of the block as one vector program (compiler/vector/
  blockprograms.py); for kernels with barriers or shuffles, or a memory-bound loop that is not
  a grid-stride loop, in blocks whose x is a multiple of 8 (rows of whole vectors).
- "rounds": the scheduler's rounds, stretch by stretch between suspensions (compiler/simt),
  with warp regions from fixed shuffles on (compiler/vector/warpregions.py).

    python benchmarks/strategies.py [--only NAME,...]

It compiles each kernel file to PTX and asks the compiler's own tests; it launches nothing.
"""
from __future__ import annotations

import argparse
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import idioms  # noqa: E402  (benchmarks/ is a folder of scripts)
import suite  # noqa: E402

import anycuda as ac  # noqa: E402
from anycuda.compiler import pipeline  # noqa: E402
from anycuda.compiler.analysis.suspensions import has_suspensions  # noqa: E402
from anycuda.compiler.vector import blockprograms  # noqa: E402
from anycuda.ptx import ir, parse  # noqa: E402

SITE_OPCODES = ("bar", "barrier", "shfl", "vote", "atom", "red")


def strategy(ptx: str, source: str, kernel: str, block: tuple) -> tuple[str, str]:
    """(strategy, why) for `kernel` of the PTX module `ptx` launched with `block`."""
    pfn = next(f for f in parse(ptx, source).functions if f.is_kernel and f.name == kernel)
    otherwise = "rounds" if has_suspensions(pfn.body) else "thread loop"
    shape = tuple(block) + (1,) * (3 - len(block))
    if not blockprograms.supported_shape(shape):
        return otherwise, f"block {shape} is not rows of whole vectors (8, 16 or 32 threads)"
    try:
        pipeline.block_program_ir(ptx, source, kernel, shape)
    except blockprograms.NotVectorisable as e:
        return otherwise, f"no block program: {e}"
    return "block program", ""


def sites(ptx: str, source: str, kernel: str) -> str:
    pfn = next(f for f in parse(ptx, source).functions if f.is_kernel and f.name == kernel)
    ops = {st.opcode for st in pfn.body if isinstance(st, ir.Instruction)}
    return ",".join(op for op in SITE_OPCODES if op in ops) or "-"


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--only", help="comma-separated idiom names")
    args = ap.parse_args(argv)
    benches = idioms.BENCHMARKS
    if args.only:
        wanted = set(args.only.split(","))
        benches = [b for b in benches if b.name in wanted]
    ptx = {}
    print(f"{'benchmark':24s} {'kernel':22s} {'block':10s} {'sites':14s} strategy")
    for B in benches:
        if B.cu not in ptx:
            ptx[B.cu] = ac.compile((suite.KERNELS / "cuda" / B.cu).read_text(), name=B.cu)
        how, why = strategy(ptx[B.cu], B.cu, B.kernel, B.block)
        block = "x".join(map(str, B.block))
        print(f"{B.name:24s} {B.kernel:22s} {block:10s} {sites(ptx[B.cu], B.cu, B.kernel):14s} {how}"
              + (f" ({why})" if why else ""))


if __name__ == "__main__":
    main()
