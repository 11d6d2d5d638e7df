"""The C side of every cuBLASLt function anycuda implements, as data (no imports: the
library's build reads it before numpy is installed). Kinds as in cublas/signatures.py, and
U for uint64_t (a layout's rows and columns)."""
from __future__ import annotations

_ATTRIBUTES = {"Create": "p", "Destroy": "p", "SetAttribute": "pepz", "GetAttribute": "pepzp"}

FUNCTIONS = {
    "cublasLtCreate": "p", "cublasLtDestroy": "h", "cublasLtGetProperty": "ep",
    "cublasLtMatmulDescCreate": "pee", "cublasLtMatmulDescInit_internal": "pzee",
    "cublasLtMatrixLayoutCreate": "peUUL", "cublasLtMatrixLayoutInit_internal": "pzeUUL",
    "cublasLtMatmulPreferenceCreate": "p", "cublasLtMatmulPreferenceInit_internal": "pz",
    "cublasLtMatrixTransformDescCreate": "pe", "cublasLtMatrixTransformDescInit_internal": "pze",
    "cublasLtMatmul": "h" + "p" * 13 + "zp",
    "cublasLtMatmulAlgoGetHeuristic": "hppppppepp",
    "cublasLtMatmulAlgoGetIds": "heeeeeeepp",
    "cublasLtMatmulAlgoInit": "heeeeeeep",
    "cublasLtMatmulAlgoCheck": "hppppppp",
    "cublasLtMatmulAlgoGetHeuristicForStream": "hppppppeppp",
    "cublasLtMatmulAlgoCheckForStream": "hpppppppp",
    "cublasLtMatmulAlgoCapGetAttribute": "pepzp",
    "cublasLtMatmulAlgoConfigSetAttribute": "pepz",
    "cublasLtMatmulAlgoConfigGetAttribute": "pepzp",
    "cublasLtMatrixTransform": "h" + "p" * 10,
    "cublasLtLoggerSetCallback": "p", "cublasLtLoggerSetFile": "p", "cublasLtLoggerOpenFile": "p",
    "cublasLtLoggerSetLevel": "e", "cublasLtLoggerSetMask": "e", "cublasLtLoggerForceDisable": "",
    "cublasLtHeuristicsCacheGetCapacity": "p", "cublasLtHeuristicsCacheSetCapacity": "z",
}
for _kind in ("MatmulDesc", "MatrixLayout", "MatmulPreference", "MatrixTransformDesc"):
    for _verb, _kinds in _ATTRIBUTES.items():
        FUNCTIONS.setdefault(f"cublasLt{_kind}{_verb}", _kinds)

VALUED = {
    "cublasLtGetStatusName": ("e", "const char *"),
    "cublasLtGetStatusString": ("e", "const char *"),
    "cublasLtGetVersion": ("", "size_t"),
    "cublasLtGetCudartVersion": ("", "size_t"),
    "cublasLtDisableCpuInstructionsSetMask": ("e", "unsigned int"),
}


def c_signatures() -> dict:
    """C name -> (C result type, kinds) of everything anycuda's libcublasLt implements."""
    table = {name: ("int", kinds) for name, kinds in FUNCTIONS.items()}
    table.update({name: (result, kinds) for name, (kinds, result) in VALUED.items()})
    return table
