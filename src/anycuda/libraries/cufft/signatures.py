"""The C side of every cuFFT function anycuda implements, as data (no imports: the library's
build reads it before numpy is installed). Kinds as in cublas/signatures.py; a cufftHandle is
a C int (e)."""
from __future__ import annotations

_MANY = "ppeepeeee"          # n, inembed, istride, idist, onembed, ostride, odist, type, batch
_MANY64 = "ppLLpLLeL"        # the same with long long sizes
_XT_MANY = "ppLLepLLeLpe"    # n, inembed, istride, idist, inputtype, onembed, ostride, odist, outputtype, batch,
#                              workSize, executiontype

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
    # cufftXt.h: descriptors are pointers, cudaDataType and the Xt enumerations C ints
    "cufftXtSetGPUs": "eep", "cufftXtMakePlanMany": "ee" + _XT_MANY, "cufftXtGetSizeMany": "ee" + _XT_MANY,
    "cufftXtMalloc": "epe", "cufftXtFree": "p", "cufftXtMemcpy": "eppe", "cufftXtExec": "eppe",
    "cufftXtExecDescriptor": "eppe", "cufftXtExecDescriptorC2C": "eppe", "cufftXtExecDescriptorZ2Z": "eppe",
    "cufftXtExecDescriptorR2C": "epp", "cufftXtExecDescriptorD2Z": "epp", "cufftXtExecDescriptorC2R": "epp",
    "cufftXtExecDescriptorZ2D": "epp", "cufftXtSetWorkArea": "ep", "cufftXtSetWorkAreaPolicy": "eep",
    "cufftXtSetCallback": "epep", "cufftXtSetJITCallback": "eppzep", "cufftXtSetCallbackSharedSize": "eez",
    "cufftXtClearCallback": "ee",
}

VALUED = {}


def c_signatures() -> dict:
    """C name -> (C result type, kinds) of everything anycuda's libcufft implements."""
    return {name: ("int", kinds) for name, kinds in FUNCTIONS.items()}
