"""The C side of every cuRAND function anycuda implements, as data (no imports: the library's
build reads it before numpy is installed). Kinds as in cublas/signatures.py, plus U for an
unsigned long long (seeds, offsets), f and d for float and double scalars passed by value."""
from __future__ import annotations

FUNCTIONS = {
    "curandCreateGenerator": "pe", "curandCreateGeneratorHost": "pe", "curandDestroyGenerator": "h",
    "curandSetPseudoRandomGeneratorSeed": "hU", "curandSetGeneratorOffset": "hU",
    "curandSetGeneratorOrdering": "he", "curandSetQuasiRandomGeneratorDimensions": "he",
    "curandSetStream": "hp", "curandGenerateSeeds": "h",
    "curandGenerate": "hpz", "curandGenerateLongLong": "hpz",
    "curandGenerateUniform": "hpz", "curandGenerateUniformDouble": "hpz",
    "curandGenerateNormal": "hpzff", "curandGenerateNormalDouble": "hpzdd",
    "curandGenerateLogNormal": "hpzff", "curandGenerateLogNormalDouble": "hpzdd",
    "curandGeneratePoisson": "hpzd",
    "curandGetVersion": "p", "curandGetProperty": "ep",
}

VALUED = {}


def c_signatures() -> dict:
    """C name -> (C result type, kinds) of everything anycuda's libcurand implements."""
    return {name: ("int", kinds) for name, kinds in FUNCTIONS.items()}
