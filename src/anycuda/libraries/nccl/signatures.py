"""The C side of every NCCL function anycuda implements: its name and the kinds of its
parameters, as data (no imports: the library's build reads it before numpy is installed).

Kinds: h handle (ncclComm_t), p pointer (buffers, out-parameters, cudaStream_t), e enumeration
(ncclDataType_t, ncclRedOp_t...), i int (ranks, counts of ranks, colors), z size_t (element
counts), I ncclUniqueId (128 bytes passed by value).
"""
from __future__ import annotations

FUNCTIONS = {
    "ncclGetVersion": "p",
    "ncclGetUniqueId": "p",
    "ncclCommInitRank": "piIi",
    "ncclCommInitRankConfig": "piIip",
    "ncclCommInitAll": "pip",
    "ncclCommSplit": "hiipp",
    "ncclCommFinalize": "h",
    "ncclCommDestroy": "h",
    "ncclCommAbort": "h",
    "ncclCommCount": "hp",
    "ncclCommCuDevice": "hp",
    "ncclCommUserRank": "hp",
    "ncclCommGetAsyncError": "hp",
    "ncclMemAlloc": "pz",
    "ncclMemFree": "p",
    "ncclCommRegister": "hpzp",
    "ncclCommDeregister": "hp",
    "ncclRedOpCreatePreMulSum": "ppeeh",
    "ncclRedOpDestroy": "eh",
    "ncclAllReduce": "ppzeehp",
    "ncclBroadcast": "ppzeihp",
    "ncclBcast": "pzeihp",
    "ncclReduce": "ppzeeihp",
    "ncclAllGather": "ppzehp",
    "ncclReduceScatter": "ppzeehp",
    "ncclAlltoAll": "ppzehp",
    "ncclGather": "ppzeihp",
    "ncclScatter": "ppzeihp",
    "ncclSend": "pzeihp",
    "ncclRecv": "pzeihp",
    "ncclGroupStart": "",
    "ncclGroupEnd": "",
}

# the functions whose result is not a status: kinds, C result
VALUED = {
    "ncclGetErrorString": ("e", "const char *"),
    "ncclGetLastError": ("h", "const char *"),
}


def c_signatures() -> dict:
    """C name -> (C result type, kinds) of everything anycuda's libnccl implements."""
    table = {name: ("int", kinds) for name, kinds in FUNCTIONS.items()}
    table.update({name: (result, kinds) for name, (kinds, result) in VALUED.items()})
    return table
