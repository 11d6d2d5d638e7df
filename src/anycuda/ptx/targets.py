"""The PTX ISA versions and targets anycuda reads, as `.version` and `.target` name them.

A module declaring a newer ISA may use what anycuda's tables do not know: it is refused at its
`.version` line (ptx.errors.UnsupportedVersion, CUDA_ERROR_UNSUPPORTED_PTX_VERSION from the
driver API), as NVIDIA's driver refuses PTX from a toolkit newer than itself. A `.target` that
names no architecture or option of the ISA is refused as ptxas refuses it ("Unsupported .target
'sm_999'"), a failed compilation: CUDA_ERROR_INVALID_PTX.
"""
from __future__ import annotations

# The newest PTX ISA anycuda reads: 9.5, what the newest toolkit it is tested with (CUDA 13.5's
# NVRTC) writes.
NEWEST_ISA = (9, 5)

# The architectures a `.target` may name (PTX ISA 9.x, "Target ISA notes"): sm_XX, with the
# `a` (architecture-specific) and `f` (family) variants from sm_90 and sm_100 on, and the options
KNOWN_ARCHS = (10, 11, 12, 13, 20, 21, 30, 32, 35, 37, 50, 52, 53, 60, 61, 62, 70, 72, 75, 80, 86, 87, 88, 89,
               90, 100, 101, 103, 107, 110, 120, 121)
KNOWN_TARGETS = frozenset(
    [f"sm_{n}" for n in KNOWN_ARCHS] + [f"sm_{n}a" for n in KNOWN_ARCHS if n >= 90]
    + [f"sm_{n}f" for n in KNOWN_ARCHS if n >= 100]
    + ["texmode_unified", "texmode_independent", "debug", "map_f64_to_f32"])
