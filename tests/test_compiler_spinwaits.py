"""Threads that spin on a word another thread of their block writes (ops/spinwaits.py): the
launch ends, with what a GPU computes, instead of hanging; a spin nothing can end is a
launch failure that says so. Each such launch runs in a process of its own with a time limit,
so that a regression shows as a failure, not as a hung test run.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys

import numpy as np
import pytest

import anycuda as ac
from anycuda.compiler.ops import spinwaits
from anycuda.ptx import parse
from anycuda.runtime.errors import CUresult

SOURCE = r"""
// thread `setter` stores in[blockIdx.x] into `value` and then sets `flag`, which starts at 0
#define FLAG_SET_BY(setter)                                                        \
    __shared__ volatile int flag;                                                  \
    __shared__ int value;                                                          \
    int t = threadIdx.x;                                                           \
    if (t == 0) flag = 0;                                                          \
    __syncthreads();                                                               \
    if (t == (setter)) { value = in[blockIdx.x]; __threadfence_block(); flag = 1; }

// warp 1 sets a flag that warp 0 waits for, in shared memory: no barrier between them
extern "C" __global__ void flag_between_warps(const int* in, int* out) {
    FLAG_SET_BY(32);
    if (t == 0) { while (flag == 0) ; out[blockIdx.x] = value * 2; }
}

// the same with a pause in the loop (nvcc rotates it: nanosleep, the load, the test)
extern "C" __global__ void sleepy_flag(const int* in, int* out) {
    FLAG_SET_BY(blockDim.x - 1);
    if (t == 0) {
        while (true) {
            if (flag != 0) break;
            __nanosleep(32);
        }
        out[blockIdx.x] = value * 2;
    }
}

// the classic lock: every thread takes it with atomicCAS, adds its index, gives it back
extern "C" __global__ void spin_lock_sum(int* out) {
    __shared__ int lock, total;
    int t = threadIdx.x;
    if (t == 0) { lock = 0; total = 0; }
    __syncthreads();
    while (atomicCAS(&lock, 0, 1) != 0) ;
    total += t;
    __threadfence_block();
    atomicExch(&lock, 0);
    __syncthreads();
    if (t == 0) out[blockIdx.x] = total;
}

// a spin that counts its tests and would give up (a branch inside the loop: its way out)
extern "C" __global__ void counted_flag(const int* in, int* out) {
    FLAG_SET_BY(blockDim.x - 1);
    if (t == 0) {
        long long spins = 0;
        while (flag == 0) {
            if (++spins > (1LL << 40)) { out[blockIdx.x] = -1; return; }
        }
        out[blockIdx.x] = value * 2;
    }
}

// the same where no thread sets the flag: the count runs out (more tests than the rounds a
// block may stall before its spin is called a deadlock), as on a GPU
extern "C" __global__ void gives_up(int* out) {
    __shared__ volatile int flag;
    if (threadIdx.x == 0) flag = 0;
    __syncthreads();
    if (threadIdx.x == 0) {
        int spins = 0;
        while (flag == 0) {
            if (++spins > 200000) { out[0] = spins; return; }
        }
        out[0] = -1;
    }
}

// the flag read by a function kept a call, and awaited in one
__device__ __noinline__ int read_flag(volatile int* f) { return *f; }
__device__ __noinline__ void wait_for(volatile int* f) { while (*f == 0) ; }

extern "C" __global__ void flag_read_by_a_call(const int* in, int* out) {
    FLAG_SET_BY(33);
    if (t == 0) { while (read_flag(&flag) == 0) ; out[blockIdx.x] = value * 2; }
}

extern "C" __global__ void flag_awaited_in_a_call(const int* in, int* out) {
    FLAG_SET_BY(33);
    if (t == 0) { wait_for(&flag); out[blockIdx.x] = value * 2; }
}

// a flag in global memory, set by the block's last thread
extern "C" __global__ void global_flag(volatile int* flag, int* out) {
    int t = threadIdx.x;
    if (t == blockDim.x - 1) *flag = 5;
    if (t == 0) { while (*flag == 0) ; out[0] = *flag; }
}

// a flag in shared memory no thread sets (one in global memory the host or another block
// could still set: that spins on, as on a GPU)
extern "C" __global__ void never_set(int* out) {
    __shared__ volatile int flag;
    if (threadIdx.x == 0) flag = 0;
    __syncthreads();
    if (threadIdx.x == 0) { while (flag == 0) ; out[0] = 1; }
}

// a compare-and-swap loop that updates a value (atomicAdd on doubles as older code writes
// it): it ends by itself and keeps no wait
extern "C" __global__ void cas_add(double* total, const double* in, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    unsigned long long* p = (unsigned long long*)total;
    unsigned long long old = *p, assumed;
    do {
        assumed = old;
        old = atomicCAS(p, assumed, __double_as_longlong(in[i] + __longlong_as_double(assumed)));
    } while (assumed != old);
}

// a loop reading plain (not volatile) memory: a compiler may hoist that load; no wait
extern "C" __global__ void plain_walk(const int* next, int* out, int n) {
    int i = blockIdx.x * blockDim.x + threadIdx.x;
    if (i >= n) return;
    int k = i, steps = 0;
    while (next[k] >= 0 && steps < n) { k = next[k]; steps++; }
    out[i] = steps;
}
"""

LIMIT_S = 300

# Each scenario runs in a process of its own under a time limit: a regression is a hung launch,
# whose threads would keep the test run from ending. The script prints the scenario's result.
SCENARIO = r"""
import json, sys
import numpy as np
import anycuda as ac
from anycuda.runtime.errors import CudaError
source, kernel, threads, seed = sys.stdin.read(), sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
k = ac.RawModule(code=source, name="spinwaits.cu").get_function(kernel)
rng = np.random.default_rng(seed)
try:
    if kernel in ("flag_between_warps", "sleepy_flag", "counted_flag", "flag_read_by_a_call", "flag_awaited_in_a_call"):
        x = rng.integers(-1000, 1000, 3).astype(np.int32)
        out = ac.asarray(np.full(3, -7, np.int32))
        k((3,), (threads,), (ac.asarray(x), out))
        print(json.dumps({"got": out.get().tolist(), "want": (2 * x).tolist()}))
    elif kernel == "never_set":
        k((1,), (threads,), (ac.asarray(np.zeros(1, np.int32)),))
        ac.asarray(np.zeros(1, np.int32)).get()
        print(json.dumps({"got": "ended"}))
    elif kernel == "gives_up":
        out = ac.asarray(np.zeros(1, np.int32))
        k((1,), (threads,), (out,))
        print(json.dumps({"got": out.get().tolist(), "want": [200001]}))
    elif kernel == "spin_lock_sum":
        out = ac.asarray(np.full(2, -7, np.int32))
        k((2,), (threads,), (out,))
        print(json.dumps({"got": out.get().tolist(), "want": [threads * (threads - 1) // 2] * 2}))
    else:
        flag, out = ac.asarray(np.zeros(1, np.int32)), ac.asarray(np.zeros(1, np.int32))
        k((1,), (threads,), (flag, out))
        print(json.dumps({"got": out.get().tolist(), "want": [5]}))
except CudaError as e:
    print(json.dumps({"error": str(e), "code": int(e.code)}))
"""


@pytest.fixture
def module(compile_cuda):
    """The kernels in this process (and a skip where no CUDA compiler is there)."""
    return compile_cuda(SOURCE, name="spinwaits.cu")


def _scenario(kernel, threads, jit="optimised", seed=0) -> dict:
    env = {**os.environ, "ANYCUDA_JIT": jit}
    try:
        r = subprocess.run([sys.executable, "-c", SCENARIO, kernel, str(threads), str(seed)], input=SOURCE,
                           capture_output=True, text=True, env=env, timeout=LIMIT_S)
    except subprocess.TimeoutExpired:
        pytest.fail(f"{kernel}: the launch did not end within {LIMIT_S} s")
    assert r.returncode == 0, r.stderr[-2000:]
    return json.loads(r.stdout.strip().splitlines()[-1])


@pytest.mark.parametrize("jit", ["optimised", "quick"])
@pytest.mark.parametrize("threads", [64, 256])
def test_a_flag_between_warps(module, jit, threads):
    got = _scenario("flag_between_warps", threads, jit, seed=threads)
    assert got.get("got") == got["want"], got


def test_a_flag_awaited_with_pauses(module):
    got = _scenario("sleepy_flag", 128, seed=5)
    assert got.get("got") == got["want"], got


@pytest.mark.parametrize("jit", ["optimised", "quick"])
def test_a_flag_awaited_by_a_counting_loop(module, jit):
    got = _scenario("counted_flag", 96, jit, seed=7)
    assert got.get("got") == got["want"], got


@pytest.mark.parametrize("kernel", ["flag_read_by_a_call", "flag_awaited_in_a_call"])
def test_a_flag_read_in_a_function_kept_a_call(module, kernel):
    body = parse(ac.compile(SOURCE, name="spinwaits.cu"), "spinwaits.cu").function(kernel).body
    assert any(getattr(st, "opcode", None) == "call" for st in body)        # (nvcc kept the call)
    got = _scenario(kernel, 64, seed=11)
    assert got.get("got") == got["want"], got


def test_a_counting_spin_nothing_ends_gives_up(module):
    got = _scenario("gives_up", 64)
    assert got.get("got") == got["want"], got


@pytest.mark.parametrize("threads", [32, 128, 256])
def test_a_spin_lock(module, threads):
    got = _scenario("spin_lock_sum", threads)
    assert got.get("got") == got["want"], got


def test_a_flag_in_global_memory(module):
    got = _scenario("global_flag", 96)
    assert got.get("got") == got["want"], got


def test_a_spin_nothing_ends_fails_the_launch(module):
    got = _scenario("never_set", 64)
    assert got.get("code") == int(CUresult.CUDA_ERROR_LAUNCH_FAILED), got
    assert "spin that never ends" in got["error"]


def test_loops_that_end_by_themselves_keep_no_wait(module, rng):
    ptx = ac.compile(SOURCE, name="spinwaits.cu")
    functions = {f.name: f for f in parse(ptx, "spinwaits.cu").functions}
    assert spinwaits.spin_loops(functions["flag_between_warps"].body)
    assert spinwaits.spin_loops(functions["spin_lock_sum"].body)
    assert spinwaits.spin_loops(functions["sleepy_flag"].body)
    assert spinwaits.spin_loops(functions["counted_flag"].body)
    assert spinwaits.spin_loops(functions["gives_up"].body)
    assert not spinwaits.spin_loops(functions["cas_add"].body)
    assert not spinwaits.spin_loops(functions["plain_walk"].body)
    n = 1000
    x = rng.standard_normal(n)
    total = ac.asarray(np.zeros(1))
    module.get_function("cas_add")(((n + 127) // 128,), (128,), (total, ac.asarray(x), np.int32(n)))
    assert total.get()[0] == pytest.approx(x.sum(), rel=1e-12, abs=1e-9)
