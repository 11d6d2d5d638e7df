"""Compute-bound idioms of the benchmark suite, in the spellings people write them: the
all-pairs n-body read straight from global memory (suite.py's `nbody` stages tiles in
shared memory), Monte Carlo estimates of pi with curand_kernel.h (XORWOW states kept in
device memory between launches; Philox started inside the kernel from seed, thread and
offset), and a 5x5 2-D convolution with its filter in `__constant__` memory, read straight
from global memory and through a shared-memory tile with a halo
(kernels/cuda/idioms_compute.cu; C references in kernels/idioms.c; PoCL versions in
kernels/idioms_more.cl, with curand's two generators written out in OpenCL C).

The Monte Carlo kernels' random numbers are curand's and the C loops' are the same
generators written in C, seeded otherwise: their counts are checked against pi, to six
standard deviations of the binomial count, not against each other. So are PoCL's, whose
XORWOW states the host seeds as the C loop's are (curand_init's skip-ahead has no OpenCL
counterpart here); its Philox streams are curand's placement of seed, thread and offset.
"""
from __future__ import annotations

import ctypes
import math

import numpy as np

import suite
from suite import Bench, _close, cdiv, p, variants


class NBodyNaive(suite.NBody):
    """suite.NBody's accelerations, every thread reading all bodies from global memory."""
    sim = Bench.sim
    name = kernel = "nbody_naive"
    cu = "idioms_compute.cu"
    block = (256,)

    def anycuda(self, g):
        k = g.fn(self.cu, self.kernel)
        pos, acc = g.ac.asarray(self.pos), g.ac.asarray(np.full((self.n, 4), np.nan, np.float32))
        args = (pos, acc, np.int32(self.n), self.EPS2)

        def run():
            k((cdiv(self.n, self.threads),), (self.threads,), args)
            g.sync()
        return run, acc.get

    def pocl(self, cl):
        pos, acc = cl.buffer(self.pos), cl.buffer(np.full((self.n, 4), np.nan, np.float32))
        args = (pos, acc, np.int32(self.n), self.EPS2)
        size = (cdiv(self.n, self.threads) * self.threads,)

        def run():
            cl.launch("idiom_nbody_naive", size, (self.threads,), *args)
            cl.finish()
        return run, lambda: cl.read(acc, (self.n, 4), np.float32)


class MonteCarloPi(Bench):
    """threads x samples points of the unit square; the count inside the quarter circle."""
    cu, unit = "idioms_compute.cu", None
    sizes = {"full": dict(threads=1 << 16, samples=512), "quick": dict(threads=4096, samples=64)}
    block = (256,)
    SEED = 20261129

    def setup(self, threads, samples):
        self.threads, self.samples = threads, samples
        self.points = threads * samples
        self.work = self.points

    def rate(self, seconds):
        return f"{self.points / seconds / 1e6:.1f} Mpoints/s"

    def check(self, hits):
        hits, q = int(hits), math.pi / 4
        sd = math.sqrt(self.points * q * (1 - q))
        if not abs(hits - self.points * q) <= 6 * sd:
            raise AssertionError(f"{self.name}: {hits} of {self.points} points inside the quarter circle "
                                 f"(pi estimated {4 * hits / self.points:.5f}), more than 6 standard deviations "
                                 f"from {self.points * q:.0f}")

    def counting(self, g, launch):
        """run() zeroes the device count, launches, synchronises; result() reads the count."""
        hits = g.ac.zeros(1, np.uint64)
        zero = np.zeros(1, np.uint64)

        def run():
            hits.set(zero)
            launch(hits)
            g.sync()
        return run, lambda: hits.get()[0]

    def pocl_counting(self, cl, args):
        """counting() for PoCL: `args(hits)` gives each launch its arguments (Philox: the next offset)."""
        hits, zero = cl.buffer(np.zeros(1, np.uint64)), np.zeros(1, np.uint64)
        name, size = f"idiom_{self.kernel}", (cdiv(self.threads, 256) * 256,)

        def run():
            cl.copy_in(hits, zero)
            cl.launch(name, size, self.block, *args(hits))
            cl.finish()
        return run, lambda: cl.read(hits, 1, np.uint64)[0]


class MonteCarloXorwow(MonteCarloPi):
    name = kernel = "mc_pi_xorwow"

    def anycuda(self, g):
        setup, k = g.fn(self.cu, "mc_setup_xorwow"), g.fn(self.cu, self.kernel)
        states = g.ac.empty(48 * self.threads, np.uint8)        # curandState: 48 bytes
        grid = (cdiv(self.threads, 256),)
        setup(grid, self.block, (states, np.uint64(self.SEED)))
        return self.counting(g, lambda hits: k(grid, self.block, (states, hits, np.int32(self.samples))))

    def c(self, lib):
        lib.mc_pi_xorwow.restype = ctypes.c_ulonglong
        states = self.rng.integers(1, 2**32, (self.threads, 6), dtype=np.uint64).astype(np.uint32)
        box = [0]

        def run():
            box[0] = lib.mc_pi_xorwow(p(states), self.threads, self.samples)
        return run, lambda: box[0]

    def pocl(self, cl):
        states = cl.buffer(self.rng.integers(1, 2**32, (self.threads, 6), dtype=np.uint64).astype(np.uint32))
        return self.pocl_counting(cl, lambda hits: (states, hits, np.int32(self.samples)))


class MonteCarloPhilox(MonteCarloPi):
    name = kernel = "mc_pi_philox"

    def offsets(self):
        """Each run draws fresh numbers: the offset moves on by the 32-bit values a thread used."""
        run = 0
        while True:
            yield np.uint64(2 * self.samples * run)
            run += 1

    def anycuda(self, g):
        k = g.fn(self.cu, self.kernel)
        grid, offsets = (cdiv(self.threads, 256),), self.offsets()
        return self.counting(g, lambda hits: k(grid, self.block, (np.uint64(self.SEED), next(offsets), hits,
                                                                  np.int32(self.samples))))

    def c(self, lib):
        lib.mc_pi_philox.restype = ctypes.c_ulonglong
        offsets, box = self.offsets(), [0]

        def run():
            box[0] = lib.mc_pi_philox(ctypes.c_ulonglong(self.SEED), ctypes.c_ulonglong(int(next(offsets))),
                                      self.threads, self.samples)
        return run, lambda: box[0]

    def pocl(self, cl):
        offsets = self.offsets()
        return self.pocl_counting(cl, lambda hits: (np.uint64(self.SEED), next(offsets), hits, np.int32(self.samples)))


class Conv2d(Bench):
    """A 5x5 convolution of a w x h float image, zero outside it, the filter in constant memory."""
    cu, unit = "idioms_compute.cu", "GB/s"
    sizes = {"full": dict(w=4096, h=4096), "quick": dict(w=333, h=197)}
    block = (16, 16)

    def setup(self, w, h):
        self.w, self.h = w, h
        self.img = self.rng.random((h, w), dtype=np.float32)
        self.mask = (self.rng.standard_normal(25) / 5).astype(np.float32)
        padded = np.pad(self.img.astype(np.float64), 2)
        self.ref = sum(float(self.mask[dy * 5 + dx]) * padded[dy:dy + h, dx:dx + w]
                       for dy in range(5) for dx in range(5))
        self.work = 8 * w * h

    def check(self, out):
        _close(out, self.ref, 1e-5, 1e-5, self.name)

    def anycuda(self, g):
        k = g.fn(self.cu, self.kernel)
        g.modules[(self.cu, ())].get_global("mask").copy_from_host(self.mask)
        img, out = g.ac.asarray(self.img), g.ac.asarray(np.full((self.h, self.w), np.nan, np.float32))
        grid = (cdiv(self.w, 16), cdiv(self.h, 16))
        args = (img, out, np.int32(self.w), np.int32(self.h))

        def run():
            k(grid, self.block, args)
            g.sync()
        return run, out.get

    def pocl(self, cl):
        img, mask = cl.buffer(self.img), cl.buffer(self.mask)
        out = cl.buffer(np.full((self.h, self.w), np.nan, np.float32))
        args = (img, out, np.int32(self.w), np.int32(self.h), mask)
        size = (cdiv(self.w, 16) * 16, cdiv(self.h, 16) * 16)

        def run():
            cl.launch(f"idiom_{self.kernel}", size, self.block, *args)
            cl.finish()
        return run, lambda: cl.read(out, (self.h, self.w), np.float32)

    def c(self, lib):
        out = np.full((self.h, self.w), np.nan, np.float32)
        return (lambda: lib.conv2d_5x5(p(self.img), p(out), self.w, self.h, p(self.mask))), (lambda: out)


BENCHMARKS = [NBodyNaive, MonteCarloXorwow, MonteCarloPhilox, *variants(Conv2d, conv2d_global={}, conv2d_tiled={})]
