"""The C side of every cuFFT function anycuda implements, as data (no imports: the library's
build reads it before numpy is installed). Kinds as in cublas/signatures.py; a cufftHandle is
a C int (e)."""
from __future__ import annotations

_MANY = "ppeepeeee"          # n, inembed, istride, idist, onembed, ostride, odist, type, batch
_MANY64 = "ppLLpLLeL"        # the same with long long sizes

FUNCTIONS = {
    "cufftCreate": "p", "cufftDestroy": "e",
    "cufftPlan1d": "peee", "cufftPlan2d": "peee", "cufftPlan3d": "peeee", "cufftPlanMany": "pe" + _MANY,
    "cufftMakePlan1d": "eeeep", "cufftMakePlan2d": "eeeep", "cufftMakePlan3d": "eeeeep",
    "cufftMakePlanMany": "ee" + _MANY + "p", "cufftMakePlanMany64": "ee" + _MANY64 + "p",
    "cufftGetSizeMany64": "ee" + _MANY64 + "p",
    "cufftEstimate1d": "eeep", "cufftEstimate2d": "eeep", "cufftEstimate3d": "eeeep",
    "cufftEstimateMany": "e" + _MANY + "p",
    "cufftGetSize1d": "eeeep", "cufftGetSize2d": "eeeep", "cufftGetSize3d": "eeeeep",
    "cufftGetSizeMany": "ee" + _MANY + "p", "cufftGetSize": "ep",
    "cufftSetWorkArea": "ep", "cufftSetAutoAllocation": "ee",
    "cufftExecC2C": "eppe", "cufftExecZ2Z": "eppe", "cufftExecR2C": "epp", "cufftExecD2Z": "epp",
    "cufftExecC2R": "epp", "cufftExecZ2D": "epp",
    "cufftSetStream": "ep", "cufftGetVersion": "p", "cufftGetProperty": "ep",
    "cufftSetPlanPropertyInt64": "eeL", "cufftGetPlanPropertyInt64": "eep", "cufftResetPlanProperty": "ee",
}

VALUED = {}


def c_signatures() -> dict:
    """C name -> (C result type, kinds) of everything anycuda's libcufft implements."""
    return {name: ("int", kinds) for name, kinds in FUNCTIONS.items()}
