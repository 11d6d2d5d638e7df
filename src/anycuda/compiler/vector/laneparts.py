"""Which lanes a mask of a block program holds, as the parts of the branches that made it.

A branch `@p bra L` splits the lanes here, m, into m & p (to L) and m & !p (going on); where
they meet again, their union is m once more, however many branches the lanes took on the
way (an if-else, the guards of nvcc's unrolled loops: three branches to one label). As LLVM
values the union is an `or` of `and`s, which the program cannot tell from any other mask, so
a write after it is a select and registers lose their shapes. Parts records each mask as a
set of cells, a cell being all lanes (ALL), a mask met without a history (a loop's phi, what
a stretch resumed), or one side of a split of a cell; a union whose cells make up whole cells
again is the mask those were split from, the very same value (None for all lanes).
"""
from __future__ import annotations

from .blockops import is_empty, or_masks

ALL = ("all",)


class Parts:
    """The cells of the masks of one block program (see the module docstring)."""

    def __init__(self):
        self._cells = {}                  # id(mask) -> frozenset of cells
        self._masks = {frozenset([ALL]): None}     # cells -> the first mask of them
        self._alive = []                  # the masks recorded (their ids stay theirs)

    def cells(self, mask) -> frozenset:
        if mask is None:
            return frozenset([ALL])
        if is_empty(mask):
            return frozenset()
        known = self._cells.get(id(mask))
        if known is None:
            known = frozenset([("mask", id(mask))])
            self._record(mask, known)
        return known

    def split(self, mask, taken, rest, key):
        """`mask` split by the predicate value `key` into `taken` (where it holds) and `rest`."""
        cells = self.cells(mask)
        self._record(taken, frozenset((c, id(key), 1) for c in cells))
        self._record(rest, frozenset((c, id(key), 0) for c in cells))

    def alias(self, mask, same):
        """`mask` holds the lanes of `same` (a phi whose other way ran for no lane)."""
        self._record(mask, self.cells(same))

    def chosen(self, mask, key, ran, skipped):
        """`mask` holds the lanes of `ran` where the warp ran a part behind the test `key`
        (an i1 alike in its lanes: a uniform branch), else those of `skipped`: each cell on
        the side of the choice it comes from. Lanes a divergent branch inside the part sent
        to a label then make up, with those that went on, what they were before the test."""
        self._record(mask, _whole({(c, id(key), 1) for c in self.cells(ran)} |
                                  {(c, id(key), 0) for c in self.cells(skipped)}))

    def union(self, b, a, c):
        """The lanes of masks a and c: where their cells make up a mask met before, that mask."""
        cells = _whole(self.cells(a) | self.cells(c))
        if cells in self._masks:
            return self._masks[cells]
        joined = or_masks(b, a, c)
        self._record(joined, cells)
        return joined

    def _record(self, mask, cells):
        if mask is None or is_empty(mask) or id(mask) in self._cells:
            return
        self._cells[id(mask)] = cells
        self._masks.setdefault(cells, mask)
        self._alive.append(mask)


def _whole(cells) -> frozenset:
    """`cells` with each pair of the two sides of one split made the cell it split, and the
    cells on one side of one split joined first (a cell's sides are lanes too: (x on the
    side) | (y on the side) is (x | y) on the side), so that parts split inside a part
    rejoin it."""
    cells = set(cells)
    joined = True
    while joined:
        joined = False
        for c in list(cells):
            if len(c) == 3 and c in cells and (c[0], c[1], 1 - c[2]) in cells:
                cells -= {c, (c[0], c[1], 1 - c[2])}
                cells.add(c[0])
                joined = True
        sides = {}
        for c in cells:
            if len(c) == 3:
                sides.setdefault(c[1:], set()).add(c[0])
        for side, inner in sides.items():
            if len(inner) > 1 and (whole := _whole(inner)) != inner:
                cells -= {(x, *side) for x in inner}
                cells |= {(x, *side) for x in whole}
                joined = True
    return frozenset(cells)
