"""The C side of every cuRAND function anycuda implements: its name and the kinds of its
parameters, as data (no imports: the library's build reads it before numpy is installed).

Kinds: h handle (curandGenerator_t, curandDiscreteDistribution_t), p pointer, e enumeration
or unsigned int, U unsigned long long (seeds, offsets), z size_t (counts), f float, d double.
cuRAND passes means, deviations and lambdas by value, so f and d are kinds cuBLAS never needed.
"""
from __future__ import annotations

FUNCTIONS = {
    "curandCreateGenerator": "pe",
    "curandCreateGeneratorHost": "pe",
    "curandDestroyGenerator": "h",
    "curandGetVersion": "p",
    "curandGetProperty": "ep",
    "curandSetStream": "hp",
    "curandSetPseudoRandomGeneratorSeed": "hU",
    "curandSetGeneratorOffset": "hU",
    "curandSetGeneratorOrdering": "he",
    "curandSetQuasiRandomGeneratorDimensions": "he",
    "curandGenerate": "hpz",
    "curandGenerateLongLong": "hpz",
    "curandGenerateUniform": "hpz",
    "curandGenerateUniformDouble": "hpz",
    "curandGenerateNormal": "hpzff",
    "curandGenerateNormalDouble": "hpzdd",
    "curandGenerateLogNormal": "hpzff",
    "curandGenerateLogNormalDouble": "hpzdd",
    "curandGeneratePoisson": "hpzd",
    "curandGeneratePoissonMethod": "hpzde",
    "curandGenerateBinomial": "hpzed",
    "curandGenerateBinomialMethod": "hpzede",
    "curandCreatePoissonDistribution": "dp",
    "curandDestroyDistribution": "h",
    "curandGenerateSeeds": "h",
    "curandGetDirectionVectors32": "pe",
    "curandGetDirectionVectors64": "pe",
    "curandGetScrambleConstants32": "p",
    "curandGetScrambleConstants64": "p",
}


VALUED = {}          # every function of cuRAND answers a status


def c_signatures() -> dict:
    """C name -> (C result type, kinds) of everything anycuda's libcurand implements."""
    return {name: ("int", kinds) for name, kinds in FUNCTIONS.items()}
