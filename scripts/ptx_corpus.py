"""Parse a corpus of real PTX with anycuda's front end and report every statement it refuses.

The front end is strict (ptx/forms.py, ptx/modifiers.py): this checks that it refuses no PTX
that NVIDIA's and Numba's compilers write. The corpus:

* `nvcc -ptx` of every CUDA source of the tests (tests/kernels, tests/programs) and of the
  bundled examples, for each architecture given with --arch;
* the PTX that the tests compiled through anycuda.cudac (its on-disk cache: NVRTC or nvcc
  output of the CUDA sources written inside the tests);
* the bundled examples' .ptx files;
* numba-cuda's PTX for a few kernels (when numba-cuda is installed);
* every PTX entry of the nvidia-cublas wheel's libraries (when it is installed), read with
  anycuda.fatbin.

Usage: python scripts/ptx_corpus.py [--arch sm_80 --arch sm_90] [--no-cublas] [--keep DIR]
Prints one line per source family (modules, instructions checked, refused) and every
refusal with its position; exits 1 when anything was refused.
"""
from __future__ import annotations

import argparse
import glob
import os
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "src"))

from anycuda import cudac, fatbin  # noqa: E402
from anycuda.ptx import PtxError, ir, parse  # noqa: E402


def cuda_sources() -> list:
    folders = [ROOT / "tests" / "kernels", ROOT / "tests" / "programs", ROOT / "src" / "anycuda" / "examples"]
    return sorted(p for folder in folders for p in folder.glob("*.cu"))


def wheel_includes() -> list:
    """-I options for the headers NVIDIA's wheels install (cuBLAS, cuRAND, ...)."""
    found = glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages", "nvidia", "*", "include"))
    return [option for folder in sorted(found) for option in ("-I", folder)]


def nvcc_ptx(sources, archs, out: Path):
    """(name, PTX text) of each source compiled by nvcc for each architecture; sources nvcc
    refuses on their own (they need flags of their own test) are listed, not counted."""
    nvcc = shutil.which("nvcc")
    if nvcc is None:
        print("nvcc: not on PATH, skipped")
        return
    for src in sources:
        for arch in archs:
            target = out / f"{src.stem}.{arch}.ptx"
            cmd = [nvcc, "-ptx", f"-arch={arch}", "-rdc=true", "-I", str(src.parent), "-o", str(target), str(src)]
            done = subprocess.run(cmd, capture_output=True, text=True)
            if done.returncode and "No such file" in done.stderr:   # a library's header: from the wheels
                after = ",".join(f"-idirafter{d}" for d in wheel_includes()[1::2])
                done = subprocess.run(cmd[:-1] + ["-Xcompiler", after, str(src)], capture_output=True, text=True)
            if done.returncode:
                print(f"  nvcc refused {src.name} for {arch} (not counted): {done.stderr.strip()[:160]}")
                continue
            yield f"nvcc {arch} {src.name}", target.read_text()


def cudac_cache_ptx():
    folder = cudac._cache_dir()
    for path in sorted(folder.rglob("*.ptx")):
        yield f"cudac cache {path.name[:12]}", path.read_text(errors="replace")


def example_ptx():
    for path in sorted((ROOT / "src" / "anycuda" / "examples").glob("*.ptx")):
        yield f"example {path.name}", path.read_text()


NUMBA_KERNELS = '''
from numba import cuda, float32, int32
import math

def saxpy(a, x, y, out):
    i = cuda.grid(1)
    if i < out.size:
        out[i] = a * x[i] + y[i]

def block_sum(x, out):
    tile = cuda.shared.array(128, float32)
    i = cuda.grid(1)
    tile[cuda.threadIdx.x] = x[i] if i < x.size else 0
    cuda.syncthreads()
    s = 64
    while s > 0:
        if cuda.threadIdx.x < s:
            tile[cuda.threadIdx.x] += tile[cuda.threadIdx.x + s]
        cuda.syncthreads()
        s //= 2
    if cuda.threadIdx.x == 0:
        cuda.atomic.add(out, 0, tile[0])

def maths(x, out):
    i = cuda.grid(1)
    if i < x.size:
        out[i] = math.exp(x[i]) + math.sin(x[i]) * math.sqrt(abs(x[i])) + math.log1p(abs(x[i]))

def histogram(x, bins):
    i = cuda.grid(1)
    if i < x.size:
        cuda.atomic.add(bins, int32(x[i]) % bins.size, 1)

def warp(x, out):
    i = cuda.grid(1)
    v = x[i]
    v += cuda.shfl_down_sync(0xffffffff, v, 16)
    out[i] = cuda.ballot_sync(0xffffffff, v > 0)
'''

NUMBA_SIGNATURES = {
    "saxpy": "void(float32, float32[:], float32[:], float32[:])",
    "block_sum": "void(float32[:], float32[:])",
    "maths": "void(float64[:], float64[:])",
    "histogram": "void(float32[:], int32[:])",
    "warp": "void(int32[:], int32[:])",
}


def numba_ptx():
    try:
        from numba import cuda
    except ImportError:
        print("numba-cuda: not installed, skipped")
        return
    space = {}
    exec(compile(NUMBA_KERNELS, "numba_kernels", "exec"), space)
    for name, signature in NUMBA_SIGNATURES.items():
        ptx, _ = cuda.compile_ptx(space[name], signature, cc=(8, 0))
        yield f"numba {name}", ptx


def cublas_ptx():
    libs = sorted(set(glob.glob(os.path.join(sys.prefix, "lib", "python3*", "site-packages", "nvidia", "*", "lib",
                                             "libcublas*.so*"))))
    if not libs:
        print("nvidia-cublas: not installed, skipped")
        return
    for lib in libs:
        for n, entry in enumerate(e for e in fatbin.entries_from_elf(lib) if e.kind == "ptx"):
            yield f"cublas {Path(lib).name} #{n}", entry.payload.split(b"\0", 1)[0].decode()


def check(label, text, tally, refusals):
    try:
        module = parse(text, label)
    except PtxError as e:
        tally[1] += 1
        refusals.extend(f"{label}: {x.source_name}:{x.line}:{x.col}: {x.message}\n    {x.source_line.strip()}"
                        for x in e.errors)
        return
    tally[0] += 1
    tally[2] += sum(isinstance(s, ir.Instruction) for f in module.functions for s in (f.body or ()))


def main(argv=None) -> int:
    args = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    args.add_argument("--arch", action="append", help="nvcc architectures (default sm_75, sm_90)")
    args.add_argument("--no-cublas", action="store_true")
    args.add_argument("--keep", help="folder to keep nvcc's PTX in")
    opts = args.parse_args(argv)
    archs = opts.arch or ["sm_75", "sm_90"]
    out = Path(opts.keep or tempfile.mkdtemp(prefix="anycuda-ptx-corpus-"))
    out.mkdir(parents=True, exist_ok=True)
    families = {
        "nvcc -ptx (tests, examples)": nvcc_ptx(cuda_sources(), archs, out),
        "cudac cache (tests' CUDA sources)": cudac_cache_ptx(),
        "bundled example .ptx": example_ptx(),
        "numba-cuda": numba_ptx(),
    }
    if not opts.no_cublas:
        families["nvidia-cublas wheel"] = cublas_ptx()
    refusals, total = [], [0, 0, 0]
    for family, modules in families.items():
        tally = [0, 0, 0]                 # modules parsed, modules refused, instructions checked
        for label, text in modules:
            check(label, text, tally, refusals)
        print(f"{family}: {tally[0] + tally[1]} modules, {tally[2]} instructions checked, {tally[1]} refused")
        total = [a + b for a, b in zip(total, tally)]
    print(f"total: {total[0] + total[1]} modules, {total[2]} instructions checked, {total[1]} modules refused")
    for line in refusals[:200]:
        print(line)
    if not opts.keep:
        shutil.rmtree(out, ignore_errors=True)
    return 1 if refusals else 0


if __name__ == "__main__":
    sys.exit(main())
