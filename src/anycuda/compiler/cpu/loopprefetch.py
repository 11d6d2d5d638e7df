"""Prefetches ahead of the loads of vectorised loops.

LLVM's loop vectoriser turns a load under a condition (`if (!boundary) s = in[i - plane]
+ ...`, a guard that lets some threads read) into a masked load (AVX-512 `vmovups
(mem){k}{z}`): it may not read where the condition fails, which a plain load would. On the
Zen 4 this was measured on, a masked load that misses the caches is not followed by the
hardware prefetchers: a C model of the 7-point stencil's row loop (256^3 floats, one core)
took 6.3 ms with plain loads and 11.1 with masked ones, however the mask was set (all lanes
on included), and 11.3 with only the one stream that comes from memory masked. A software
prefetch ahead of each masked load took it to 5.3 ms: faster than the plain loads
(benchmarks/NOTES.md, "Masked loads and the prefetchers").

Plain vector loads get one too: a band's loop over a row of a block's threads
(simt/bands.py) runs one vector a turn, 16 threads of a 16 x 16 block, between the
bookkeeping of block after block, and keeps few of the row's next lines in flight; the
hardware prefetchers did not make up for it on a Zen 5 (stencil5_16x16, one worker,
10.7-11.8 -> 8.8-9.1 ms with the prefetches; NOTES "Prefetches ahead of plain loads").

So after LLVM's optimisation (`add_prefetches`, called by jit), each load of a vector of 16
bytes or more, masked or plain, in a loop of one basic block (the vector body LLVM's
vectoriser makes) gets a prefetch DISTANCE bytes above its address: such loops step their
consecutive loads upwards by the vector a turn, and a band's next block in the row is the
next vector above. One prefetch serves the loads of one base register within a line of each
other (a stencil's neighbours in a row): conv2d_global's 25 taps take 5, not 25 (two workers,
env-switched: 13.8-14.0 -> 11.6-12.2 ms). Loads outside loops, and the masked loads of
anycuda's own vector code (each behind a test that some lane is on, so never in a loop of one
block), are left alone: their next address is not the one above. A prefetch never faults;
one past an array's end costs its slot, and a page walk where the page there is not present
(a Zen 1 in a virtual machine walked for each: blockmemory._prefetch_next_rounds). Here that
is at most DISTANCE past a loop's last vector, once per pass: a block's 1 KB table read by
every block, in a slab slot with untouched pages past it, ran as fast as one inside a 4 MB
array on that machine.
"""
from __future__ import annotations

import re

import llvmlite.binding as llvm

from .textrewrite import ELEMENT_BYTES, LABEL, VALUE, in_self_loop, rewritten

DISTANCE = 1024           # bytes ahead: 256, 512, 1024 and 2048 measured (NOTES)
LOCALITY = 2              # into L2, as compiler/irutil.prefetch_into_l2's
MIN_BYTES = 16            # the scalar epilogues' narrow vectors are left alone
LINE_BYTES = 64           # loads of one base this close share a prefetch

_MASKED_LOAD = re.compile(r"^(\s*)%[-\w.$\"]+ = (?:tail )?call <(\d+) x (float|double|half|bfloat|i8|i16|i32|i64)>"
                          r" @llvm\.masked\.load\.[\w.]+\(ptr (?:align \d+ )?(" + VALUE + r"),")
_PLAIN_LOAD = re.compile(r"^(\s*)%[-\w.$\"]+ = load <(\d+) x (float|double|half|bfloat|i8|i16|i32|i64)>,"
                         r" ptr (" + VALUE + r")")
_OFFSET = re.compile(r"^\s*(" + VALUE + r") = getelementptr (?:inbounds |nuw |nusw )*i8, ptr "
                     r"(" + VALUE + r"), i64 (-?\d+)$")
_DECLARATION = "declare void @llvm.prefetch.p0(ptr, i32, i32, i32)"
SHARED_ARGUMENT = "%shared"       # a block program's window of shared memory (blockprograms.py)
_ADDRESS_ARITHMETIC = ("ptrtoint", "inttoptr", "getelementptr", "add", "sub", "or", "phi", "select")
_DEFINITION = re.compile(r"^\s*(" + VALUE + r") = (?:\w+ )*?(?:" + "|".join(_ADDRESS_ARITHMETIC) + r")\b")
_VALUE = re.compile(VALUE)


def rewrite(text: str) -> str:
    """The optimised module's IR text with a prefetch before each vector load in a loop of
    one block (see the module docstring); the text itself where there is none."""
    if "@llvm.masked.load." not in text and " = load <" not in text:
        return text
    out, looping, added, shared = [], False, 0, set()
    for line in text.split("\n"):
        label = LABEL.match(line)
        if label:
            looping = in_self_loop(label)
            offsets, fetched = {}, []       # this block's constant-offset pointers, prefetched spots
        elif line.startswith(("define ", "}")):
            looping = False
            shared = {SHARED_ARGUMENT} if f"ptr {SHARED_ARGUMENT}" in line else set()
        if shared:
            _note_shared(line, shared)
        if looping and not label:
            step = _OFFSET.match(line)
            if step:
                base, off = offsets.get(step.group(2), (step.group(2), 0))
                offsets[step.group(1)] = (base, off + int(step.group(3)))
            load = _MASKED_LOAD.match(line) or _PLAIN_LOAD.match(line)
            if load and int(load.group(2)) * ELEMENT_BYTES[load.group(3)] >= MIN_BYTES \
                    and load.group(4) not in shared and _first_in_its_line(offsets.get(load.group(4), (load.group(4), 0)), fetched):
                indent, ptr = load.group(1), load.group(4)
                added += 1
                ahead = f"%anycuda.ahead.{added}"
                out.append(f"{indent}{ahead} = getelementptr i8, ptr {ptr}, i64 {DISTANCE}")
                out.append(f"{indent}call void @llvm.prefetch.p0(ptr {ahead}, i32 0, i32 {LOCALITY}, i32 1)")
        out.append(line)
    if not added:
        return text
    declared = "declare void @llvm.prefetch.p0(" in text
    return "\n".join(out) + ("" if declared else "\n" + _DECLARATION + "\n")


def _note_shared(line, shared) -> None:
    """Adds to `shared` the value an instruction line defines from one of `shared` (pointer and
    integer arithmetic on a block program's shared-memory window)."""
    defined = _DEFINITION.match(line)
    if defined and any(v in shared for v in _VALUE.findall(line[defined.end():])):
        shared.add(defined.group(1))


def _first_in_its_line(spot, fetched) -> bool:
    """Whether no prefetch of the loop block so far is within a line of `spot` (base register,
    byte offset): a stencil's loads of in[i - 1], in[i], in[i + 1] share their lines, and one
    prefetch of the row serves them all (conv2d_global's 25 taps, 5 rows: 25 prefetches a
    vector otherwise). Records `spot` where it is."""
    base, off = spot
    if any(b == base and abs(o - off) < LINE_BYTES for b, o in fetched):
        return False
    fetched.append(spot)
    return True


def add_prefetches(mod: llvm.ModuleRef) -> llvm.ModuleRef:
    """`mod` (optimised) with prefetches ahead of its loops' vector loads: a new module, or
    `mod` itself where it has none or the host is not x86-64 (the one place measured)."""
    if not mod.triple.startswith("x86_64"):
        return mod
    return rewritten(mod, rewrite)
