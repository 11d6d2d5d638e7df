"""The objects a library hands to C as numbers (cuBLAS handles, cuFFT plans, cuRAND
generators): numbered from a library-chosen start, never an address, so that a stale or made-up
number is an error the library names (`missing`), not memory read."""
from __future__ import annotations

import itertools
import threading


class Registry:
    def __init__(self, first: int, step: int, missing):
        self._objects = {}
        self._numbers = itertools.count(first, step)
        self._lock = threading.Lock()
        self._missing = missing            # number -> the exception for a number not handed out

    def add(self, obj) -> int:
        with self._lock:
            number = next(self._numbers)
            self._objects[number] = obj
        return number

    def get(self, number: int):
        obj = self._objects.get(number)
        if obj is None:
            raise self._missing(number)
        return obj

    def remove(self, number: int) -> None:
        with self._lock:
            if self._objects.pop(number, None) is None:
                raise self._missing(number)
