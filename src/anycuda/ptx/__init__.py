"""PTX front end: lexer, parser and the typed IR of a module."""
from .errors import PtxError, UnsupportedPtx, UnsupportedVersion
from .parser import parse

__all__ = ["PtxError", "UnsupportedPtx", "UnsupportedVersion", "parse"]
