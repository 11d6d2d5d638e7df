"""cuBLAS handles: the stream a handle's calls are queued on, its pointer mode (where scalars
and results live), math and atomics modes, and the workspace a program gives it.

A handle is a number handed to C (never an address): a destroyed or unknown one is refused
with CUBLAS_STATUS_NOT_INITIALIZED, as NVIDIA's library answers a handle it does not know.
"""
from __future__ import annotations

from ..registry import Registry
from .status import CublasError, Status, require

POINTER_MODE_HOST, POINTER_MODE_DEVICE = 0, 1
_MATH_MODES = {0, 1, 2, 3}                  # default, tensor-op (deprecated), pedantic, TF32
_DISALLOW_REDUCED_PRECISION = 16


class Handle:
    def __init__(self):
        self.stream = 0                     # the CUstream handle calls are queued on
        self.pointer_mode = POINTER_MODE_HOST
        self.math_mode = 0
        self.atomics_mode = 0
        self.workspace = (0, 0)             # (address, bytes) given by cublasSetWorkspace
        self.sm_count_target = 0
        self.emulation = 0
        # FP64 emulation settings (cublasSet/GetEmulation*, ...FixedPointEmulation*): kept and
        # answered, with cuBLAS's defaults; they change nothing here (anycuda computes in the
        # type itself, what emulation approximates)
        self.emulation_strategy = 0         # CUBLAS_EMULATION_STRATEGY_DEFAULT
        self.emulation_special_values = 0xFFFF   # CUDA_EMULATION_SPECIAL_VALUES_SUPPORT_DEFAULT
        self.mantissa_control = 0           # CUDA_EMULATION_MANTISSA_CONTROL_DYNAMIC
        self.max_mantissa_bits = 0          # 0: the default
        self.mantissa_bit_offset = 0


_handles = Registry(0x5B1A5000, 16, lambda hid: CublasError(Status.NOT_INITIALIZED,
                                                             f"0x{hid:x} is not a live cuBLAS handle"))


def create() -> int:
    return _handles.add(Handle())


def get(hid: int) -> Handle:
    return _handles.get(hid)


def destroy(hid: int) -> None:
    _handles.remove(hid)


def set_stream(hid: int, stream: int) -> None:
    get(hid).stream = stream


def set_pointer_mode(hid: int, mode: int) -> None:
    require(mode in (POINTER_MODE_HOST, POINTER_MODE_DEVICE), f"pointer mode {mode}")
    get(hid).pointer_mode = mode


def set_math_mode(hid: int, mode: int) -> None:
    require((mode & ~_DISALLOW_REDUCED_PRECISION) in _MATH_MODES, f"math mode {mode}")
    get(hid).math_mode = mode


def set_atomics_mode(hid: int, mode: int) -> None:
    require(mode in (0, 1), f"atomics mode {mode}")
    get(hid).atomics_mode = mode


def set_workspace(hid: int, address: int, size: int) -> None:
    require(size >= 0 and (address or not size), "a workspace of bytes at a null address")
    require(address % 256 == 0, "the workspace must be 256-byte aligned")
    get(hid).workspace = (address, size)


def set_sm_count_target(hid: int, count: int) -> None:
    require(count >= 0, f"SM count target {count}")
    get(hid).sm_count_target = count


def set_emulation_strategy(hid: int, strategy: int) -> None:
    require(strategy in (0, 1, 2), f"emulation strategy {strategy}")
    get(hid).emulation_strategy = strategy


def set_emulation_special_values(hid: int, mask: int) -> None:
    get(hid).emulation_special_values = mask


def set_mantissa_control(hid: int, control: int) -> None:
    require(control in (0, 1), f"mantissa control {control}")
    get(hid).mantissa_control = control


def set_max_mantissa_bits(hid: int, count: int) -> None:
    require(count >= 0, f"mantissa bit count {count}")
    get(hid).max_mantissa_bits = count


def set_mantissa_bit_offset(hid: int, offset: int) -> None:
    get(hid).mantissa_bit_offset = offset
