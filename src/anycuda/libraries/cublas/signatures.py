"""The C side of every cuBLAS function anycuda implements: its name and the kinds of its
parameters, as data (no imports: the library's build reads it before numpy is installed).

Kinds: h handle, p pointer, e enumeration (C int), i int (int64_t in a `_64` variant), L int64_t
(strides), z size_t; by value (the legacy API's scalars and characters): f float, d double,
C cuComplex, Z cuDoubleComplex, c char. A family is spelled once with the type letters cuBLAS names it with;
`functions.py` pairs each family with the Python that answers it.
"""
from __future__ import annotations

# (C name with {L} for the letters, kinds, family, letters)
FAMILIES = [
    ("cublas{L}axpy_v2", "hippipi", "axpy", ("S", "D", "C", "Z")),
    ("cublas{L}scal_v2", "hippi", "scal", ("S", "D", "C", "Z", "Cs", "Zd")),
    ("cublas{L}copy_v2", "hipipi", "copy", ("S", "D", "C", "Z")),
    ("cublas{L}swap_v2", "hipipi", "swap", ("S", "D", "C", "Z")),
    ("cublas{L}rot_v2", "hipipipp", "rot", ("S", "D", "Cs", "Zd")),
    ("cublas{L}_v2", "hipipip", "dot", ("Sdot", "Ddot", "Cdotu", "Cdotc", "Zdotu", "Zdotc")),
    ("cublas{L}nrm2_v2", "hipip", "nrm2", ("S", "D", "Sc", "Dz")),
    ("cublas{L}asum_v2", "hipip", "asum", ("S", "D", "Sc", "Dz")),
    ("cublasI{L}amax_v2", "hipip", "amax", ("s", "d", "c", "z")),
    ("cublasI{L}amin_v2", "hipip", "amin", ("s", "d", "c", "z")),
    ("cublas{L}gemv_v2", "heiippipippi", "gemv", ("S", "D", "C", "Z")),
    ("cublas{L}_v2", "hiippipipi", "ger", ("Sger", "Dger", "Cgeru", "Cgerc", "Zgeru", "Zgerc")),
    ("cublas{L}symv_v2", "heippipippi", "symv", ("S", "D", "C", "Z")),
    ("cublas{L}trmv_v2", "heeeipipi", "trmv", ("S", "D", "C", "Z")),
    ("cublas{L}trsv_v2", "heeeipipi", "trsv", ("S", "D", "C", "Z")),
    ("cublas{L}gemm_v2", "heeiiippipippi", "gemm", ("S", "D", "C", "Z")),
    ("cublas{L}gemmBatched", "heeiiippipippii", "gemmBatched", ("S", "D", "C", "Z")),
    ("cublas{L}gemmStridedBatched", "heeiiippiLpiLppiLi", "gemmStridedBatched", ("S", "D", "C", "Z")),
    ("cublas{L}symm_v2", "heeiippipippi", "symm", ("S", "D", "C", "Z")),
    ("cublas{L}syrk_v2", "heeiippippi", "syrk", ("S", "D", "C", "Z")),
    ("cublas{L}syr2k_v2", "heeiippipippi", "syr2k", ("S", "D", "C", "Z")),
    ("cublas{L}trsm_v2", "heeeeiippipi", "trsm", ("S", "D", "C", "Z")),
    ("cublas{L}trmm_v2", "heeeeiippipipi", "trmm", ("S", "D", "C", "Z")),
    ("cublas{L}geam", "heeiippippipi", "geam", ("S", "D", "C", "Z")),
    ("cublas{L}dgmm", "heiipipipi", "dgmm", ("S", "D", "C", "Z")),
    ("cublas{L}trsmBatched", "heeeeiippipii", "trsmBatched", ("S", "D", "C", "Z")),
    ("cublas{L}trttp", "heipip", "trttp", ("S", "D", "C", "Z")),
    ("cublas{L}tpttr", "heippi", "tpttr", ("S", "D", "C", "Z")),
    ("cublas{L}getrfBatched", "hipippi", "getrfBatched", ("S", "D", "C", "Z")),
    ("cublas{L}getriBatched", "hipippipi", "getriBatched", ("S", "D", "C", "Z")),
    ("cublas{L}getrsBatched", "heiipippipi", "getrsBatched", ("S", "D", "C", "Z")),
    ("cublas{L}matinvBatched", "hipipipi", "matinvBatched", ("S", "D", "C", "Z")),
    ("cublas{L}geqrfBatched", "hiipippi", "geqrfBatched", ("S", "D", "C", "Z")),
    ("cublas{L}gelsBatched", "heiiipipippi", "gelsBatched", ("S", "D", "C", "Z")),
    ("cublas{L}rotg_v2", "hpppp", "rotg", ("S", "D", "C", "Z")),
    ("cublas{L}rotm_v2", "hipipip", "rotm", ("S", "D")),
    ("cublas{L}rotmg_v2", "hppppp", "rotmg", ("S", "D")),
    ("cublas{L}rot_v2", "hipipipp", "complexRot", ("C", "Z")),
    ("cublas{L}gemvBatched", "heiippipippii", "gemvBatched", ("S", "D", "C", "Z", "HSH", "HSS", "TST", "TSS")),
    ("cublas{L}gemvStridedBatched", "heiippiLpiLppiLi", "gemvStridedBatched",
     ("S", "D", "C", "Z", "HSH", "HSS", "TST", "TSS")),
    # the 3M forms of complex gemm are gemm here (3M is how a GPU saves multiplications)
    ("cublas{L}gemm3m", "heeiiippipippi", "gemm", ("C", "Z")),
    ("cublas{L}gemm3mBatched", "heeiiippipippii", "gemmBatched", ("C",)),
    ("cublas{L}gemm3mStridedBatched", "heeiiippiLpiLppiLi", "gemmStridedBatched", ("C",)),
    # rank updates CBLAS lacks (rank_k.py)
    ("cublas{L}syrkx", "heeiippipippi", "syrkx", ("S", "D", "C", "Z")),
    ("cublas{L}herkx", "heeiippipippi", "herkx", ("C", "Z")),
    ("cublas{L}syr_v2", "heippipi", "complexSyr", ("C", "Z")),
    ("cublas{L}syr2_v2", "heippipipi", "complexSyr2", ("C", "Z")),
    # transa, transb, m, n, k, alpha, Aarray, lda, Barray, ldb, beta, Carray, ldc (arrays), group_count, group_size
    ("cublas{L}gemmGroupedBatched", "h" + "p" * 13 + "ip", "gemmGroupedBatched", ("S", "D")),
]

# cublasXt (xt.py): host-memory level 3, sizes as size_t, no `_64` variants; family "xt<routine>"
_XT_KINDS = {
    "gemm": "heezzzppzpzppz", "symm": "heezzppzpzppz", "hemm": "heezzppzpzppz", "syrk": "heezzppzppz",
    "herk": "heezzppzppz", "syr2k": "heezzppzpzppz", "her2k": "heezzppzpzppz", "syrkx": "heezzppzpzppz",
    "herkx": "heezzppzpzppz", "trsm": "heeeezzppzpz", "trmm": "heeeezzppzpzpz", "spmm": "heezzpppzppz",
}
_XT_LETTERS = {"herk": "CZ", "her2k": "CZ", "hemm": "CZ", "herkx": "CZ"}
FAMILIES += [(f"cublasXt{{L}}{routine}", kinds, "xt" + routine, tuple(_XT_LETTERS.get(routine, "SDCZ")))
             for routine, kinds in _XT_KINDS.items()]

# families NVIDIA's header declares without `_64` variants (nothing in them is a size or count
# that 64 bits would widen, or they stayed 32-bit)
NARROW_ONLY = {"trttp", "tpttr", "getrfBatched", "getriBatched", "getrsBatched", "matinvBatched", "geqrfBatched",
               "gelsBatched", "rotg", "rotmg", "cublasRotgEx", "cublasRotmgEx", *("xt" + r for r in _XT_KINDS)}

# routines passed through to CBLAS (passthrough.py): family -> (argument roles, letters); the
# kinds follow from the roles
PASSTHROUGH = {
    "hemm": ("sunnaplplapl", "CZ"), "herk": ("utnnrplrpl", "CZ"), "her2k": ("utnnaplplrpl", "CZ"),
    "hemv": ("unaplpiapi", "CZ"), "her": ("unrpipl", "CZ"), "her2": ("unapipipl", "CZ"),
    "hbmv": ("unnaplpiapi", "CZ"), "hpmv": ("unappiapi", "CZ"), "hpr": ("unrpip", "CZ"), "hpr2": ("unapipip", "CZ"),
    "syr": ("unapipl", "SD"), "syr2": ("unapipipl", "SD"), "sbmv": ("unnaplpiapi", "SD"),
    "spmv": ("unappiapi", "SD"), "spr": ("unapip", "SD"), "spr2": ("unapipip", "SD"),
    "gbmv": ("tnnnnaplpiapi", "SDCZ"), "tbmv": ("utdnnplpi", "SDCZ"), "tbsv": ("utdnnplpi", "SDCZ"),
    "tpmv": ("utdnppi", "SDCZ"), "tpsv": ("utdnppi", "SDCZ"),
}


def _kinds(roles: str) -> str:
    return "h" + "".join("e" if r in "utds" else "i" if r in "nli" else "p" for r in roles)


FAMILIES += [(f"cublas{{L}}{family}_v2", _kinds(roles), family, tuple(letters))
             for family, (roles, letters) in PASSTHROUGH.items()]

SINGLES = {
    "cublasGemmEx": "heeiiippeipeippeiee",
    "cublasGemmBatchedEx": "heeiiippeipeippeiiee",
    "cublasGemmStridedBatchedEx": "heeiiippeiLpeiLppeiLiee",
    "cublasSgemmEx": "heeiiippeipeippei",
    "cublasCgemmEx": "heeiiippeipeippei",
    "cublasCgemm3mEx": "heeiiippeipeippei",
    "cublasCsyrkEx": "heeiippeippei", "cublasCsyrk3mEx": "heeiippeippei",
    "cublasCherkEx": "heeiippeippei", "cublasCherk3mEx": "heeiippeippei",
    "cublasHgemm": "heeiiippipippi",
    "cublasHgemmBatched": "heeiiippipippii",
    "cublasHgemmStridedBatched": "heeiiippiLpiLppiLi",
    # the level-1 Ex routines (level1_ex.py): each vector and scalar followed by its cudaDataType
    "cublasAxpyEx": "hipepeipeie", "cublasScalEx": "hipepeie",
    "cublasDotEx": "hipeipeipee", "cublasDotcEx": "hipeipeipee",
    "cublasNrm2Ex": "hipeipee", "cublasAsumEx": "hipeipee",
    "cublasIamaxEx": "hipeip", "cublasIaminEx": "hipeip",
    "cublasCopyEx": "hipeipei", "cublasSwapEx": "hipeipei",
    "cublasRotEx": "hipeipeippee", "cublasRotmEx": "hipeipeipee",
    "cublasRotgEx": "hppeppee", "cublasRotmgEx": "hpepepepepee",
    # ... the per-group arrays as in gemmGroupedBatched, each pointer array followed by its type, then computeType
    "cublasGemmGroupedBatchedEx": "h" + "p" * 6 + "pep" + "pep" + "p" + "pep" + "ip" + "e",
}

# the legacy API of cublas.h: no handle, scalars by value, results returned, errors kept for
# cublasGetError (legacy.py). Each routine is its v2 routine (the same name with `_v2`) on the
# legacy context. Roles of its arguments: t operation, u fill mode, s side, d diagonal (each a
# char: 'N', 'T', 'C', 'U', 'L', 'R'); n an int; p a pointer; a a scalar of the routine's type,
# r one of its real type (by value). Results: "" none, "T" the routine's type, "R" its real
# type, "I" an int. The type is the letters' first, as for the v2 families.
_SDCZ, _SD, _CZ = ("S", "D", "C", "Z"), ("S", "D"), ("C", "Z")
LEGACY = [
    ("cublas{L}nrm2", "npn", "R", ("S", "D", "Sc", "Dz")),
    ("cublas{L}asum", "npn", "R", ("S", "D", "Sc", "Dz")),
    ("cublas{L}", "npnpn", "T", ("Sdot", "Ddot", "Cdotu", "Cdotc", "Zdotu", "Zdotc")),
    ("cublasI{L}amax", "npn", "I", ("s", "d", "c", "z")),
    ("cublasI{L}amin", "npn", "I", ("s", "d", "c", "z")),
    ("cublas{L}scal", "napn", "", _SDCZ),
    ("cublas{L}scal", "nrpn", "", ("Cs", "Zd")),
    ("cublas{L}axpy", "napnpn", "", _SDCZ),
    ("cublas{L}copy", "npnpn", "", _SDCZ),
    ("cublas{L}swap", "npnpn", "", _SDCZ),
    ("cublas{L}rot", "npnpnrr", "", ("S", "D", "Cs", "Zd")),
    ("cublas{L}rot", "npnpnra", "", _CZ),
    ("cublas{L}rotg", "pppp", "", _SD),
    ("cublas{L}rotg", "papp", "", _CZ),
    ("cublas{L}rotm", "npnpnp", "", _SD),
    ("cublas{L}rotmg", "ppppp", "", _SD),
    ("cublas{L}gemv", "tnnapnpnapn", "", _SDCZ),
    ("cublas{L}gbmv", "tnnnnapnpnapn", "", _SDCZ),
    ("cublas{L}trmv", "utdnpnpn", "", _SDCZ),
    ("cublas{L}trsv", "utdnpnpn", "", _SDCZ),
    ("cublas{L}tbmv", "utdnnpnpn", "", _SDCZ),
    ("cublas{L}tbsv", "utdnnpnpn", "", _SDCZ),
    ("cublas{L}tpmv", "utdnppn", "", _SDCZ),
    ("cublas{L}tpsv", "utdnppn", "", _SDCZ),
    ("cublas{L}symv", "unapnpnapn", "", _SD),
    ("cublas{L}hemv", "unapnpnapn", "", _CZ),
    ("cublas{L}sbmv", "unnapnpnapn", "", _SD),
    ("cublas{L}hbmv", "unnapnpnapn", "", _CZ),
    ("cublas{L}spmv", "unappnapn", "", _SD),
    ("cublas{L}hpmv", "unappnapn", "", _CZ),
    ("cublas{L}", "nnapnpnpn", "", ("Sger", "Dger", "Cgeru", "Cgerc", "Zgeru", "Zgerc")),
    ("cublas{L}syr", "unapnpn", "", _SD),
    ("cublas{L}her", "unrpnpn", "", _CZ),
    ("cublas{L}spr", "unapnp", "", _SD),
    ("cublas{L}hpr", "unrpnp", "", _CZ),
    ("cublas{L}syr2", "unapnpnpn", "", _SD),
    ("cublas{L}her2", "unapnpnpn", "", _CZ),
    ("cublas{L}spr2", "unapnpnp", "", _SD),
    ("cublas{L}hpr2", "unapnpnp", "", _CZ),
    ("cublas{L}gemm", "ttnnnapnpnapn", "", _SDCZ),
    ("cublas{L}syrk", "utnnapnapn", "", _SDCZ),
    ("cublas{L}herk", "utnnrpnrpn", "", _CZ),
    ("cublas{L}syr2k", "utnnapnpnapn", "", _SDCZ),
    ("cublas{L}her2k", "utnnapnpnrpn", "", _CZ),
    ("cublas{L}symm", "sunnapnpnapn", "", _SDCZ),
    ("cublas{L}hemm", "sunnapnpnapn", "", _CZ),
    ("cublas{L}trsm", "sutdnnapnpn", "", _SDCZ),
    ("cublas{L}trmm", "sutdnnapnpn", "", _SDCZ),
]

# legacy roles and results as C kinds and types, by the routine's type letter
_REAL_LETTER = {"S": "S", "D": "D", "C": "S", "Z": "D"}
_BY_VALUE = {"S": "f", "D": "d", "C": "C", "Z": "Z"}          # kinds: float, double, cuComplex, cuDoubleComplex
_C_TYPE = {"S": "float", "D": "double", "C": "cuComplex", "Z": "cuDoubleComplex"}


def legacy_members():
    """(C name, roles, result code, type letter) of every legacy routine."""
    for pattern, roles, result, letters in LEGACY:
        for letter in letters:
            yield pattern.replace("{L}", letter), roles, result, letter[0].upper()


def _legacy_kinds(roles: str, letter: str) -> str:
    real = _REAL_LETTER[letter]
    by_role = {"t": "c", "u": "c", "s": "c", "d": "c", "n": "i", "p": "p", "a": _BY_VALUE[letter],
               "r": _BY_VALUE[real]}
    return "".join(by_role[r] for r in roles)


def _legacy_result(result: str, letter: str) -> str:
    return {"": "void", "T": _C_TYPE[letter], "R": _C_TYPE[_REAL_LETTER[letter]], "I": "int"}[result]


# handles, modes, copies: no `_64` variants
ADMIN = {
    "cublasCreate_v2": "p", "cublasDestroy_v2": "h", "cublasGetVersion_v2": "hp", "cublasGetProperty": "ep",
    "cublasSetStream_v2": "hp", "cublasGetStream_v2": "hp",
    "cublasSetPointerMode_v2": "he", "cublasGetPointerMode_v2": "hp",
    "cublasSetMathMode": "he", "cublasGetMathMode": "hp", "cublasSetAtomicsMode": "he", "cublasGetAtomicsMode": "hp",
    "cublasSetSmCountTarget": "hi", "cublasGetSmCountTarget": "hp", "cublasSetWorkspace_v2": "hpz",
    "cublasSetEmulationStrategy": "he", "cublasGetEmulationStrategy": "hp",
    "cublasSetEmulationSpecialValuesSupport": "he", "cublasGetEmulationSpecialValuesSupport": "hp",
    "cublasSetFixedPointEmulationMantissaControl": "he", "cublasGetFixedPointEmulationMantissaControl": "hp",
    "cublasSetFixedPointEmulationMaxMantissaBitCount": "hi", "cublasGetFixedPointEmulationMaxMantissaBitCount": "hp",
    "cublasSetFixedPointEmulationMantissaBitOffset": "hi", "cublasGetFixedPointEmulationMantissaBitOffset": "hp",
    "cublasLoggerConfigure": "iiip", "cublasSetLoggerCallback": "p", "cublasGetLoggerCallback": "p",
    "cublasSetVector": "iipipi", "cublasGetVector": "iipipi", "cublasSetMatrix": "iiipipi", "cublasGetMatrix": "iiipipi",
    "cublasSetVectorAsync": "iipipip", "cublasGetVectorAsync": "iipipip",
    "cublasSetMatrixAsync": "iiipipip", "cublasGetMatrixAsync": "iiipipip",
    # the legacy API's helpers, which return a status
    "cublasInit": "", "cublasShutdown": "", "cublasGetVersion": "p", "cublasAlloc": "iip", "cublasFree": "p",
    "cublasSetKernelStream": "p",
    # not in cuBLAS's headers; NVIDIA's cuSOLVER 12.4 (CUDA 13) imports it from libcublas.so.13 and
    # will not load without it. Its arguments are not documented: taken as none, a no-op
    "cublasSetEnvironmentMode": "",
    # cublasXt's handles and settings (xt.py)
    "cublasXtCreate": "p", "cublasXtDestroy": "h", "cublasXtDeviceSelect": "hip", "cublasXtGetNumBoards": "ipp",
    "cublasXtMaxBoards": "p", "cublasXtSetBlockDim": "hi", "cublasXtGetBlockDim": "hp",
    "cublasXtSetPinningMemMode": "he", "cublasXtGetPinningMemMode": "hp", "cublasXtSetCpuRoutine": "heep",
    "cublasXtSetCpuRatio": "heef",
}

# the copies that also come as `_64` forms (64-bit sizes and increments: "i" is int64_t there)
WIDE_COPIES = ("cublasSetVector", "cublasGetVector", "cublasSetMatrix", "cublasGetMatrix", "cublasSetVectorAsync",
               "cublasGetVectorAsync", "cublasSetMatrixAsync", "cublasGetMatrixAsync")
ADMIN.update({name + "_64": ADMIN[name] for name in WIDE_COPIES})

# functions whose result is not a status: name -> (kinds, C result type)
VALUED = {
    "cublasGetStatusName": ("e", "const char *"),
    "cublasGetStatusString": ("e", "const char *"),
    "cublasGetCudartVersion": ("", "size_t"),
    "cublasGetError": ("", "int"),
    "cublasXerbla": ("pi", "void"),
}
VALUED.update({name: (_legacy_kinds(roles, letter), _legacy_result(result, letter))
               for name, roles, result, letter in legacy_members()})


def members():
    """(C name, kinds, family, letters) of every family member, `_64` variants included."""
    for pattern, kinds, family, letters in FAMILIES:
        for letter in letters:
            name = pattern.replace("{L}", letter)
            yield name, kinds, family, letter
            if family not in NARROW_ONLY:
                yield name + "_64", kinds, family, letter
    for name, kinds in SINGLES.items():
        yield name, kinds, name, ""
        if name not in NARROW_ONLY:
            yield name + "_64", kinds, name, ""


def c_signatures() -> dict:
    """C name -> (C result type, kinds) of everything anycuda's libcublas implements."""
    table = {name: ("int", kinds) for name, kinds, _, _ in members()}
    table.update({name: ("int", kinds) for name, kinds in ADMIN.items()})
    table.update({name: (result, kinds) for name, (kinds, result) in VALUED.items()})
    return table
