"""The error every library raises to hand its own status back to the C caller (the shim turns
it into the function's result): the status, as the library's enumeration names it, and why."""
from __future__ import annotations


class LibraryError(Exception):
    prefix = ""           # how the library's status names start in its header
    codes = None          # the library's status enumeration

    def __init__(self, status, message: str = ""):
        self.status = self.codes(status)
        self.message = message
        name = self.prefix + self.status.name
        super().__init__(f"{name}: {message}" if message else name)


def requirer(error: type):
    """require(condition, status, message) raising `error` when the condition fails."""
    def require(condition: bool, status, message: str) -> None:
        if not condition:
            raise error(status, message)
    return require
