"""A kernel's code specialised to the values its launches pass in its index parameters.

CuPy's elementwise kernels take an array's shape and strides as parameters and divide and
multiply by them (compiler/analysis/indexparams.py); a program runs such a kernel again and
again on arrays of one shape. Once SPECIALISE_AFTER launches have passed the same bytes in
those parameters and run SPECIALISE_AFTER_SECONDS together (a kernel of microseconds gains
less than the compile costs), the kernel is compiled once more with the values written in as
constants (compiler/constantprop.py: a quotient of a number, strides the warp regions know),
by the compile server where the code tiers (else after that launch, as optimised code is),
and the launches that pass those bytes run that code from then on. Any other bytes run the
kernel's own code: a variant is only ever used for the values it was made for. At most
MOST_VARIANTS a kernel (a program sweeping shapes makes no more); none where a block program
runs the launch, for a cooperative launch, a checked kernel or with ANYCUDA_JIT=quick, and
none with ANYCUDA_SPECIALISE=0.

The variant's object links against the kernel's module variables as the kernel's own does,
and keeps its ABI (pipeline._optimised_ir refuses one that differs): the launch record made
for the kernel serves it unchanged.
"""
from __future__ import annotations

import ctypes
import os

from ..compiler import pipeline
from ..compiler.build import tiers
from ..compiler.build.jit import LoadedObject

SPECIALISE_AFTER = 3          # launches with the same index parameter bytes before a variant is made
SPECIALISE_AFTER_SECONDS = 0.05     # ... and the time they ran, together
MOST_VARIANTS = 4             # per kernel

_PENDING = object()


def enabled() -> bool:
    return os.environ.get("ANYCUDA_SPECIALISE", "1") != "0" and tiers.mode() != tiers.QUICK


class Variants:
    """The specialised variants of one kernel (a runtime.program.KernelImage, linked)."""

    def __init__(self, image):
        self.image = image
        self.spans, self._slots = _index_spans(image)
        self._counts = {}         # parameter bytes -> (launches that passed them, seconds they ran)
        self._entries = {}        # parameter bytes -> launch function of its variant, _PENDING or None (failed)
        self._objects = []        # the variants' objects, kept linked

    def entry(self, params: bytes) -> tuple:
        """(the launch function, a ctypes function, of the variant made for the index
        parameter bytes of `params` if one is linked, else None; those bytes, for ran())."""
        key = b"".join(params[o:o + n] for o, n in self.spans)
        got = self._entries.get(key)
        return (None if got is _PENDING else got), key

    def ran(self, key: bytes, seconds: float) -> None:
        """A launch with index parameter bytes `key` ran the kernel's own code for `seconds`:
        once such launches are SPECIALISE_AFTER and took SPECIALISE_AFTER_SECONDS, ask for
        their variant (a variant costs a compile: a kernel that runs for microseconds gains
        less than that)."""
        if key in self._entries:
            return
        count, total = self._counts.get(key, (0, 0.0))
        count, total = count + 1, total + seconds
        self._counts[key] = (count, total)
        if count < SPECIALISE_AFTER or total < SPECIALISE_AFTER_SECONDS or len(self._entries) >= MOST_VARIANTS:
            return
        self._entries[key] = _PENDING
        self._make(key)

    def made(self) -> int:
        """How many variants are linked."""
        return sum(1 for v in self._entries.values() if v is not None and v is not _PENDING)

    def _make(self, key: bytes) -> None:
        image = self.image
        constants, at = {}, 0
        for slot, (_, n) in zip(self._slots, self.spans):
            constants[slot] = (int.from_bytes(key[at:at + n], "little"), n)
            at += n

        def arrived(code):
            if not code:
                self._entries[key] = None
                return
            linked = LoadedObject(code, image._externals)
            self._objects.append(linked)
            self._entries[key] = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(linked.address(image.info.export))
        unit = image.program.index.kernel_unit(image.name)
        pipeline.compile_specialised(unit, image.program.source_name, image.info, constants, arrived)


def variants_of(image) -> Variants | None:
    """Variants for a linked KernelImage whose launches may be specialised, else None."""
    if not enabled() or image.info.error is not None or image.info.check_tool:
        return None
    found = Variants(image)
    return found if found.spans else None


def _index_spans(image) -> tuple:
    """([(byte offset in the parameter buffer, size)], [(parameter name, offset in it)]) of the
    kernel's index parameters (KernelInfo.index_params, found as it was compiled)."""
    params = {p.name: p for p in image.info.params}
    widest = {}                   # (parameter, offset) -> bytes: a slot loaded at two widths, its wider
    for name, offset, size in image.info.index_params:
        p = params.get(name)
        if p is not None and offset + size <= p.size * p.count:
            widest[name, offset] = max(widest.get((name, offset), 0), size)
    slots = list(widest)
    return [(params[name].offset + offset, widest[name, offset]) for name, offset in slots], slots
