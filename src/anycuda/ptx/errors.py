"""Errors raised for PTX that anycuda cannot accept, always with a position."""
from __future__ import annotations


class PtxError(Exception):
    """Malformed or unsupported PTX.

    `str(err)` reads `name:line:col: message` followed by the offending source line, so
    a user sees where the problem is without opening the file. A parser that finds several
    problems raises one PtxError whose `errors` lists all of them (each a PtxError).
    """

    def __init__(self, message: str, line: int = 0, col: int = 0,
                 source_name: str = "<ptx>", source_line: str = "", errors=None):
        self.message = message
        self.line = line
        self.col = col
        self.source_name = source_name
        self.source_line = source_line
        self.errors = list(errors) if errors else [self]
        super().__init__(self._render())

    def __reduce__(self):
        errors = self.errors if len(self.errors) > 1 else None
        return (self.__class__, (self.message, self.line, self.col, self.source_name,
                                 self.source_line, errors))

    def _render(self) -> str:
        head = f"{self.source_name}:{self.line}:{self.col}: {self.message}"
        if self.source_line:
            head += f"\n    {self.source_line.strip()}"
        if len(self.errors) > 1:
            head += f"\n({len(self.errors) - 1} more problem(s)):\n" + "\n".join(
                f"{e.source_name}:{e.line}:{e.col}: {e.message}" for e in self.errors[1:])
        return head


class UnsupportedPtx(PtxError):
    """Well-formed PTX that anycuda does not implement yet (textures, mma, ...)."""


class UnsupportedVersion(PtxError):
    """A `.version` newer than the PTX ISA anycuda reads: the driver API answers
    CUDA_ERROR_UNSUPPORTED_PTX_VERSION, as NVIDIA's driver does for PTX from a newer toolkit."""
