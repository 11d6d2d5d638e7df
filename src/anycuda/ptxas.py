"""anycuda's stand-in for NVIDIA's `ptxas`, installed as the `anycuda-ptxas` command.

JIT compilers that generate PTX themselves (Triton) assemble it with ptxas into a cubin of
machine code and load that. `anycuda run` points them at this command instead
(TRITON_PTXAS_PATH): it checks the PTX with anycuda's parser, reports errors as ptxas does
(`ptxas fatal :` / `ptxas error :` on stderr, status 255), and writes, where the cubin would go,
a fatbinary container carrying the PTX, which anycuda's driver (and NVIDIA's) loads. Options
about machine code (optimisation level, register limits, debug info, verbosity) do not apply to
PTX and are accepted and ignored.
"""
from __future__ import annotations

import os
import re
import sys

from . import __version__

# the CUDA release whose PTX ISA anycuda reads (9.0): tools choose the PTX they emit from it
RELEASE = "13.0"
VERSION_TEXT = (f"ptxas: anycuda's stand-in for NVIDIA's PTX assembler (anycuda {__version__})\n"
                f"Cuda compilation tools, release {RELEASE}, V{RELEASE}.0\n")

# options that take a value as the next argument (or after '='), and those that take none
_VALUED = {"-o", "--output-file", "-arch", "--gpu-name", "-O", "--opt-level", "-maxrregcount",
           "--maxrregcount", "-m", "--machine", "--entry", "-e", "-Xptxas", "--def-load-cache",
           "--def-store-cache", "-dlcm", "-dscm", "--fmad", "-fmad", "--split-compile", "-split-compile",
           "--position-independent-code", "-pic", "--compile-as-tools-patch", "--input-as-string",
           "--options-file", "-optf", "--suppress-debug-info", "-minnctapersm", "--minnctapersm",
           "-maxntid", "--maxntid", "-allow-expensive-optimizations", "--allow-expensive-optimizations"}


class UsageError(Exception):
    pass


def _parse(argv):
    """(inputs, output, architecture) from ptxas's command line."""
    inputs, output, arch, i = [], "elf.o", None, 0
    while i < len(argv):
        arg = argv[i]
        name, eq, value = arg.partition("=")
        if arg.startswith("-") and name in _VALUED:
            if not eq:
                if i + 1 >= len(argv):
                    raise UsageError(f"option {arg} expects a value")
                i += 1
                value = argv[i]
            if name in ("-o", "--output-file"):
                output = value
            elif name in ("-arch", "--gpu-name"):
                arch = value
        elif arg.startswith("-"):
            pass                                   # machine-code options (-O3, -v, -lineinfo): nothing to do for PTX
        else:
            inputs.append(arg)
        i += 1
    return inputs, output, arch


def _sm(arch, target: tuple) -> int:
    """The architecture number asked for (sm_90a -> 90), else the PTX's own .target."""
    for text in (arch or "", *target):
        m = re.match(r"(?:sm|compute)_(\d+)", text)
        if m:
            return int(m.group(1))
    return 52


def assemble(ptx: str, source_name: str, arch=None) -> bytes:
    """The container to write for `ptx`; raises anycuda.ptx.errors.PtxError when it is invalid."""
    from .fatbin import ptx_container
    from .ptx.parser import parse
    module = parse(ptx, source_name)
    return ptx_container(ptx, _sm(arch, module.target), module.version)


def main(argv=None) -> int:
    from .ptx.errors import PtxError
    argv = sys.argv[1:] if argv is None else argv
    if any(a in ("--version", "-V") for a in argv):
        sys.stdout.write(VERSION_TEXT)
        return 0
    if any(a in ("--help", "-h") for a in argv):
        sys.stdout.write("usage: anycuda-ptxas [options] FILE.ptx -o OUTPUT\n" + __doc__)
        return 0
    try:
        inputs, output, arch = _parse(argv)
    except UsageError as e:
        print(f"ptxas fatal   : {e}", file=sys.stderr)
        return 255
    if len(inputs) != 1:
        print("ptxas fatal   : expected one PTX input file" + (f", got {len(inputs)}" if inputs else ""),
              file=sys.stderr)
        return 255
    try:
        with open(inputs[0], encoding="utf-8", errors="replace") as f:
            ptx = f.read()
    except OSError as e:
        print(f"ptxas fatal   : Unable to open input file '{inputs[0]}': {e.strerror}", file=sys.stderr)
        return 255
    try:
        container = assemble(ptx, inputs[0], arch)
    except PtxError as e:
        print(f"ptxas error   : {e}", file=sys.stderr)
        print("ptxas fatal   : Ptx assembly aborted due to errors", file=sys.stderr)
        return 255
    staged = f"{output}.tmp{os.getpid()}"
    try:
        with open(staged, "wb") as f:
            f.write(container)
        os.replace(staged, output)
    except OSError as e:
        print(f"ptxas fatal   : Unable to write output file '{output}': {e.strerror}", file=sys.stderr)
        return 255
    return 0


if __name__ == "__main__":
    sys.exit(main())
