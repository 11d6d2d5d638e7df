"""anycuda's cuRAND against results of NVIDIA's own library published by NVIDIA: the sample
outputs of the cuRAND host examples in NVIDIA's CUDALibrarySamples repository
(cuRAND/Host/<generator>/README.md; every example: seed 1234, offset 0, the ordering named below,
normals with mean 1 and deviation 2, Poisson lambda 10), printed with six decimals, and the first
words of XORWOW for seed 0 posted on NVIDIA's developer forum. Those READMEs repeat some outputs
from one generator's page on another's (MTGP32's uniforms are MRG32k3a's, MT19937's normals are
XORWOW's); only outputs that belong to their example are used.
"""
import ctypes

import numpy as np
import pytest

import anycuda as ac
from anycuda.libraries.curand import generator as generators
from anycuda.libraries.curand.kinds import Ordering, RngType


def run(rng_type, method, count, *args, ordering=None, dtype=np.float32, seed=1234):
    gen = generators.Generator(rng_type)
    if gen.rng_type < 200:
        gen.set_seed(seed)
    if ordering is not None:
        gen.set_ordering(ordering)
    mem = ac.Memory(count * np.dtype(dtype).itemsize)
    getattr(gen, method)(mem.ptr, count, *args)
    ac.synchronize()
    return np.frombuffer((ctypes.c_char * (count * np.dtype(dtype).itemsize)).from_address(mem.ptr), dtype).copy()


def values(text):
    return np.array([float(v) for v in text.split()])


BEST, DEFAULT = Ordering.PSEUDO_BEST, Ordering.PSEUDO_DEFAULT
UNIFORM = [
    (RngType.PSEUDO_XORWOW, BEST, "0.145468 0.820181 0.550399 0.294830 0.914733 0.868979 0.321921 0.782857 "
                                  "0.011302 0.285450"),
    (RngType.PSEUDO_MRG32K3A, BEST, "0.786752 0.152112 0.934182 0.986567 0.988028 0.304493 0.926525 0.432048 "
                                    "0.346986 0.840585"),
    (RngType.PSEUDO_PHILOX4_32_10, BEST, "0.127208 0.853469 0.265649 0.796055 0.816736 0.324165 0.781055 "
                                         "0.058918 0.543999 0.923496 0.441505 0.258264"),
    (RngType.QUASI_SOBOL32, None, "0.000000 0.500000 0.750000 0.250000 0.375000 0.875000 0.625000 0.125000 "
                                  "0.187500 0.687500 0.937500 0.437500"),
    (RngType.QUASI_SOBOL64, None, "0.000000 0.500000 0.750000 0.250000 0.375000 0.875000 0.625000 0.125000 "
                                  "0.187500 0.687500"),
]
NORMAL = [
    (RngType.PSEUDO_XORWOW, BEST, "2.561947 -2.603156 0.438303 2.127093 -1.022666 1.828079 3.916651 -0.124273 "
                                  "0.702847 0.209629"),
    (RngType.PSEUDO_MRG32K3A, BEST, "0.278692 -0.182563 -2.437073 -0.803224 1.687799 1.267587 1.275932 1.179040 "
                                    "0.875920 1.284532"),
    (RngType.PSEUDO_PHILOX4_32_10, BEST, "-2.232981 3.458311 -2.121081 1.929243 2.136910 0.428207 1.508686 "
                                         "2.310768 -0.020449 2.956819 3.553997 0.867263"),
    (RngType.QUASI_SOBOL32, None, "-11.675915 1.000000 2.348979 -0.348979 0.362721 3.300699 1.637279 -1.300699 "
                                  "-0.774293 1.977553 4.068241 0.685379"),
    (RngType.QUASI_SOBOL64, None, "-11.675915 1.000000 2.348979 -0.348979 0.362721 3.300699 1.637279 -1.300699 "
                                  "-0.774293 1.977553"),
]


def test_xorwow_seed_0_words_from_nvidia_forum():
    # "XORWOW Generator Understanding in CURAND": curandGenerate, seed 0, default ordering
    out = run(RngType.PSEUDO_XORWOW, "generate", 10, dtype=np.uint32, seed=0)
    assert list(out) == [3179217846, 3955638199, 167591721, 4161663997, 3973448494, 1917059131, 2866113984,
                         472148682, 2019573489, 2204150021]


@pytest.mark.parametrize("rng_type,ordering,text", UNIFORM)
def test_uniform(rng_type, ordering, text):
    expected = values(text)
    got = run(rng_type, "generate_uniform", len(expected), ordering=ordering)
    np.testing.assert_allclose(got, expected, atol=5.1e-7)


@pytest.mark.parametrize("rng_type,ordering,text", NORMAL)
def test_normal(rng_type, ordering, text):
    expected = values(text)
    got = run(rng_type, "generate_normal", len(expected), 1.0, 2.0, ordering=ordering)
    np.testing.assert_allclose(got, expected, atol=2e-6)        # the GPU's logf/sinf are not IEEE-exact


def test_sobol32_log_normal_and_poisson():
    expected = values("0.000008 2.718282 10.474874 0.705408 1.437235 27.131590 5.141160 0.272341 0.461030 "
                      "7.225041 58.454060 1.984523")
    got = run(RngType.QUASI_SOBOL32, "generate_log_normal", 12, 1.0, 2.0)
    np.testing.assert_allclose(got, expected, rtol=2e-6, atol=5.1e-7)
    got = run(RngType.QUASI_SOBOL32, "generate_poisson", 12, 10.0, dtype=np.uint32)
    assert list(got) == [0, 10, 12, 8, 9, 14, 11, 6, 7, 11, 15, 9]


def test_mt19937_uniform():
    # the first eight are words 0, 113, 170, 283, 340, 397, 510 and 567 of init_genrand(1234)'s
    # sequence (lanes 0-7 of generator 0), the next four generator 1's, 2^2048 words further on
    expected = values("0.191519 0.068085 0.149834 0.657769 0.593411 0.759158 0.658873 0.109174 0.434190 "
                      "0.135581 0.658952 0.996097")
    np.testing.assert_allclose(run(RngType.PSEUDO_MT19937, "generate_uniform", 12, ordering=DEFAULT), expected,
                               atol=5.1e-7)


def test_philox_poisson():
    # NVIDIA's square-histogram table method on one word per result (distributions.square_histogram)
    got = run(RngType.PSEUDO_PHILOX4_32_10, "generate_poisson", 12, 10.0, ordering=BEST, dtype=np.uint32)
    assert list(got) == [15, 7, 12, 8, 7, 12, 8, 17, 10, 6, 11, 12]


def test_scrambled_sobol32_uniform():
    # scrambled direction vectors and constants from seed-0 XORWOW words (sobol.py)
    expected = values("0.882941 0.046950 0.332641 0.731132 0.554493 0.390621 0.229930 0.831301 0.755963 0.185704")
    np.testing.assert_allclose(run(RngType.QUASI_SCRAMBLED_SOBOL32, "generate_uniform", 10), expected, atol=5.1e-7)
