"""MTGP32 (Saito and Matsumoto's Mersenne Twister for graphics processors) as cuRAND's host
generator lays it out: B blocks (192; 64 under PSEUDO_LEGACY), block b running parameter set b from
init_state((seed ^ (seed >> 32)) + b + 1) as curandMakeMTGP32KernelState seeds it, each producing
256 results at a time; the result at position n comes from block (n // 256) mod B at index
(n // (256 B)) * 256 + n mod 256 (found and checked against NVIDIA's host library, NOTES.md).

The 200 parameter sets (period 2^11213 - 1) are data of the algorithm's authors, found by their
dynamic creator's long search: nothing derives them, and anycuda carries no copy. They are read
where the program's own toolkit has them: NVIDIA's cuRAND headers (curand_mtgp32dc_p_11213.h, from
the nvidia-curand wheel or a CUDA toolkit), the same tables every program that uses MTGP32's device
API compiles in. With them the sequence equals NVIDIA's. Without them this engine is a STAND-IN
that keeps the layout and fills each block from an MT19937 stream of its own (numpy's, seeded
from the seed and the block): MT19937's statistics, not NVIDIA's numbers; `exact()` says which.
"""
from __future__ import annotations

import functools
import os
import re
import shutil

import numpy as np

from ..kinds import Ordering
from .layout import Layout

BLOCKS, LEGACY_BLOCKS, BLOCK_RESULTS = 192, 64, 256
N = 351                               # MTGP32's state words for period 2^11213 - 1
HEADER = "curand_mtgp32dc_p_11213.h"
FIELDS = 74                           # numbers per set: mexp, pos, sh1, sh2, 3 x 16 tables, mask, 21 sha1 bytes


def _header_paths():
    try:
        import nvidia
        for base in nvidia.__path__:
            for sub in ("cu13", "cu12", "curand"):
                yield os.path.join(base, sub, "include", HEADER)
    except ImportError:
        pass
    for root in (os.environ.get("CUDA_HOME"), os.environ.get("CUDA_PATH"), "/usr/local/cuda"):
        if root:
            yield os.path.join(root, "include", HEADER)
    nvcc = shutil.which("nvcc")
    if nvcc:
        yield os.path.join(os.path.dirname(os.path.dirname(os.path.realpath(nvcc))), "include", HEADER)


def parse_parameter_sets(text: str) -> list:
    """The sets of a curand_mtgp32dc_p_11213.h: dicts of pos, sh1, sh2, tbl, tmp_tbl, mask."""
    start = text.index("mtgp32dc_params_fast_11213[]")
    body = re.sub(r"/\*.*?\*/", "", text[text.index("{", start):], flags=re.S)
    numbers = [int(v, 0) for v in re.findall(r"0x[0-9a-fA-F]+|\b\d+\b", body)]
    sets = []
    for first in range(0, len(numbers) - FIELDS + 1, FIELDS):
        row = numbers[first:first + FIELDS]
        if row[0] != 11213:
            raise ValueError(f"parameter set {len(sets)} does not start with its exponent 11213")
        sets.append({"pos": row[1], "sh1": row[2], "sh2": row[3], "tbl": np.array(row[4:20], np.uint32),
                     "tmp_tbl": np.array(row[20:36], np.uint32), "mask": row[52]})
    return sets


@functools.lru_cache(maxsize=1)
def parameter_sets():
    """The 200 sets from the first readable header, or None."""
    for path in _header_paths():
        try:
            with open(path) as f:
                sets = parse_parameter_sets(f.read())
        except (OSError, ValueError):
            continue
        if len(sets) >= BLOCKS:
            return sets
    return None


def exact() -> bool:
    return parameter_sets() is not None


def init_state(params: dict, seed: int) -> list:
    """mtgp32_init_state: the state bytes filled from the hidden seed, then the MT19937-style
    recurrence over the seed and the hidden seed."""
    hidden = int(params["tbl"][4]) ^ ((int(params["tbl"][8]) << 16) & 0xFFFFFFFF)
    fill = hidden + (hidden >> 16)
    fill = (fill + (fill >> 8)) & 0xFF
    state = [fill * 0x01010101] * N
    state[0], state[1] = seed & 0xFFFFFFFF, hidden
    for i in range(1, N):
        prev = state[i - 1]
        state[i] ^= (1812433253 * (prev ^ (prev >> 30)) + i) & 0xFFFFFFFF
    return state


def block_words(params: dict, mask: int, state: np.ndarray, count: int):
    """(`count` tempered words, the state after them) of one block: x[k + N] from x[k], x[k + 1]
    and x[k + pos], computed N - pos at a time (the words each step reads are already there)."""
    pos, sh1, sh2 = params["pos"], np.uint32(params["sh1"]), np.uint32(params["sh2"])
    x = np.empty(N + count, np.uint32)
    x[:N] = state
    out = np.empty(count, np.uint32)
    step = N - pos
    for k in range(0, count, step):
        m = min(step, count - k)
        a = (x[k:k + m] & np.uint32(mask)) ^ x[k + 1:k + 1 + m]
        a ^= a << sh1
        y = a ^ (x[k + pos:k + pos + m] >> sh2)
        r = y ^ params["tbl"][y & 15]
        x[k + N:k + N + m] = r
        t = x[k + pos - 1:k + pos - 1 + m]
        t = t ^ (t >> np.uint32(16))
        t ^= t >> np.uint32(8)
        out[k:k + m] = r ^ params["tmp_tbl"][t & 15]
    return out, x[count:]


class Engine:
    word = "bits"

    def __init__(self, seed: int, ordering: int):
        self.seed = seed
        self.blocks = LEGACY_BLOCKS if ordering == Ordering.PSEUDO_LEGACY else BLOCKS
        self.layout = Layout(streams=self.blocks, group=BLOCK_RESULTS)
        self._sets = parameter_sets()
        self._states, self._row = None, None

    def _start(self, step: int):
        if self._row == step:
            return self._states
        if self._sets is None:
            states = [np.random.MT19937(np.random.SeedSequence([self.seed & 0xFFFFFFFF, self.seed >> 32, b]))
                      for b in range(self.blocks)]
            for s in states:
                s.random_raw(step)
            return states
        folded = (self.seed ^ (self.seed >> 32)) & 0xFFFFFFFF
        mask = self._sets[0]["mask"]
        states = []
        for b in range(self.blocks):
            state = np.array(init_state(self._sets[b], folded + b + 1), np.uint32)
            if step:
                state = block_words(self._sets[b], mask, state, step)[1]
            states.append(state)
        return states

    def _block(self, b: int, state, count: int):
        if self._sets is None:
            return state.random_raw(count).astype(np.uint32), state
        return block_words(self._sets[b], self._sets[0]["mask"], state, count)

    def words(self, start: int, count: int, group: int = 1) -> np.ndarray:
        # a block's 256 results already hold every unit (groups of 1, 2 or 4 words) whole
        first, last, _ = self.layout.steps(start, count)
        states = self._start(first)
        made = [self._block(b, states[b], last - first) for b in range(self.blocks)]
        self._states, self._row = [state for _, state in made], last
        block = np.stack([words for words, _ in made], axis=-1)
        return self.layout.gather(block, start, count)
