"""Plain stores and loads for the vectoriser's masked ones: stores where every lane is on, loads
where some lane is on and their span lies in one page.

LLVM's loop vectoriser turns a store under a condition (a kernel's `if (x < nx && y < ny &&
z < nz) out[i] = ...`, where the guard holds in nearly every thread) into a masked store.
On a CPU whose masked stores are slow (irutil.masked_stores_slow: AMD's before Zen 4 make
AVX's vmaskmovps in microcode, ~7 ns for 32 bytes), such a store costs more than the
computation it ends: perf put 56% of stencil7_3d_block's (one worker) on its masked rows,
27% on the instruction after their masked store, every lane of it on.

So after LLVM's optimisation (`plain_where_safe`, called by jit, after loopprefetch's
prefetches), each masked store in a loop of one block (the vector body LLVM's vectoriser
makes) becomes a test of its mask: a plain store where every lane is on, the masked store
otherwise. Splitting the body renames it, for the phis that name it as their predecessor,
after the last split part. A plain store where every lane is on writes exactly what the
masked store would. stencil7_3d_block 21.5-22.3 -> 18.1-18.6 ms (A B B A, `run.py --repeats
3`); the guarded streaming kernels (saxpy, triad, copy under `if (i < n)`) within the noise.

Its masked loads likewise (irutil.masked_loads_slow: on a Zen 1 a 32-byte vmaskmovps load of
lines in L1 took 5-8 ns, a plain one 0.45), with a looser test: a plain load, blended with
the masked load's pass-through value, where some lane is on and the span lies in one page.
The page is then there wherever that lane's own read finds it, and what the lanes off read
is thrown away. Both are split in one pass: a split body is no longer a loop of one block.
The same pass tests the loops' gathers and scatters for runs (gatherruns.py), on every CPU.
"""
from __future__ import annotations

import re

import llvmlite.binding as llvm

from ..irutil import masked_loads_slow, masked_stores_slow
from . import gatherruns
from .textrewrite import ELEMENT_BYTES, VALUE, align_suffix, arguments, rewritten, split_in_self_loops, suffixed

_MASKED_STORE = re.compile(r"^(\s*)(?:tail )?call void @llvm\.masked\.store\.v(\d+)\w+\.p0\((.*)\)(?:, !.*)?$")
_MASKED_LOAD = re.compile(r"^(\s*)(" + VALUE + r") = (?:tail )?call <(\d+) x (float|double|half|bfloat|i8|i16|i32|i64)>"
                          r" @llvm\.masked\.load\.v\d+\w+\.p0\((.*)\)(?:, !.*)?$")
PAGE_BITS = 12


def _masked_call(argument_list: str, lanes: int, pointer_at: int, mask_at: int):
    """(its three arguments, the pointer's value, its `, align N` or "") of a masked store's
    or load's argument list, or None where its mask is a constant."""
    args = arguments(argument_list)
    if len(args) != 3 or not args[mask_at].startswith(f"<{lanes} x i1> %"):
        return None
    pointer = args[pointer_at]
    return args, pointer.split()[-1], align_suffix(pointer)


def _split(line: str, k: int, before: list, stores: bool, loads: bool, gathers: bool):
    """The lines that replace masked store or load `line` (the k-th split, `before` the lines
    before it; `stores`, `loads`, `gathers`: which kinds are split, gathers and scatters by
    gatherruns), ending in the label of the block that goes on after it; None where the line
    is not one to split (a constant mask)."""
    if gathers and "@llvm.masked.gather." in line:
        return gatherruns.split_gather(line, k, before)
    if gathers and "@llvm.masked.scatter." in line:
        return gatherruns.split_scatter(line, k, before)
    if loads and "@llvm.masked.load." in line:
        return _split_load(line, k)
    store = _MASKED_STORE.match(line) if stores else None
    if store is None:
        return None
    indent, lanes = store.group(1), int(store.group(2))
    call = _masked_call(store.group(3), lanes, pointer_at=1, mask_at=2)
    if call is None:
        return None
    (value, _, mask), pointer_value, align = call
    bits, whole, part, join = (f"anycuda.ms{what}.{k}" for what in ("bits", "whole", "part", "join"))
    return [
        f"{indent}%{bits} = bitcast {mask} to i{lanes}",
        f"{indent}%{bits}.all = icmp eq i{lanes} %{bits}, -1",
        f"{indent}br i1 %{bits}.all, label %{whole}, label %{part}",
        f"{whole}:",
        f"{indent}store {value}, ptr {pointer_value}{align}",
        f"{indent}br label %{join}",
        f"{part}:",
        line,
        f"{indent}br label %{join}",
        f"{join}:",
    ], join


def _split_load(line: str, k: int):
    """The lines that replace masked load `line`: a plain load where some lane is on and the
    span lies in one page (blended with the pass-through value), the masked load otherwise,
    joined by a phi of the load's name; None for a constant mask."""
    load = _MASKED_LOAD.match(line)
    if load is None:
        return None
    indent, name, lanes, element = load.group(1), load.group(2), int(load.group(3)), load.group(4)
    call = _masked_call(load.group(5), lanes, pointer_at=0, mask_at=1)
    if call is None:
        return None
    (_, mask, passthru), pointer_value, align = call
    vec = f"<{lanes} x {element}>"
    bits, at, plain, whole, part, join = (f"anycuda.ml{what}.{k}" for what in ("bits", "at", "plain", "whole",
                                                                             "part", "join"))
    loaded, blended, masked = (suffixed(name, f".anycuda.{what}") for what in ("plain", "whole", "part"))
    last = lanes * ELEMENT_BYTES[element] - 1
    return [
        f"{indent}%{bits} = bitcast {mask} to i{lanes}",
        f"{indent}%{bits}.some = icmp ne i{lanes} %{bits}, 0",
        f"{indent}%{at} = ptrtoint ptr {pointer_value} to i64",
        f"{indent}%{at}.end = add i64 %{at}, {last}",
        f"{indent}%{at}.page = lshr i64 %{at}, {PAGE_BITS}",
        f"{indent}%{at}.end.page = lshr i64 %{at}.end, {PAGE_BITS}",
        f"{indent}%{at}.one = icmp eq i64 %{at}.page, %{at}.end.page",
        f"{indent}%{plain} = and i1 %{bits}.some, %{at}.one",
        f"{indent}br i1 %{plain}, label %{whole}, label %{part}",
        f"{whole}:",
        f"{indent}{loaded} = load {vec}, ptr {pointer_value}{align}",
        f"{indent}{blended} = select {mask}, {vec} {loaded}, {passthru}",
        f"{indent}br label %{join}",
        f"{part}:",
        line.replace(f"{name} = ", f"{masked} = ", 1),
        f"{indent}br label %{join}",
        f"{join}:",
        f"{indent}{name} = phi {vec} [ {blended}, %{whole} ], [ {masked}, %{part} ]",
    ], join


def rewrite(text: str, stores: bool = True, loads: bool = True, gathers: bool = True) -> str:
    """The optimised module's IR text with each masked store in a loop of one block tested
    for a whole mask, each masked load for a span in one page (see the module docstring),
    and each gather and scatter for addresses in one run (gatherruns); the text itself where
    there is none."""
    stores = stores and "@llvm.masked.store." in text
    loads = loads and "@llvm.masked.load." in text
    gathers = gathers and ("@llvm.masked.gather." in text or "@llvm.masked.scatter." in text)
    if not stores and not loads and not gathers:
        return text
    return split_in_self_loops(text, lambda line, k, before: _split(line, k, before, stores, loads, gathers))


def plain_where_safe(mod: llvm.ModuleRef) -> llvm.ModuleRef:
    """`mod` (optimised) with its loops' masked stores made plain where every lane is on, and
    its masked loads where their span lies in one page, for those of the two that are slow
    on this CPU, and its loops' gathers and scatters tested for runs (gatherruns): a new
    module, or `mod` itself where there is nothing to do."""
    stores, loads, gathers = masked_stores_slow(), masked_loads_slow(), _has_gathers(mod)
    if not stores and not loads and not gathers:
        return mod
    return rewritten(mod, lambda text: rewrite(text, stores, loads, gathers))


def _has_gathers(mod: llvm.ModuleRef) -> bool:
    """Whether the module calls a gather or scatter (their declarations say so without
    printing the module's text, which costs a big module tens of milliseconds)."""
    return any(fn.name.startswith(("llvm.masked.gather.", "llvm.masked.scatter.")) for fn in mod.functions)
