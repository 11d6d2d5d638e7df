"""A worker that starts on its launching thread's CPU moves off it (compiler/cpu/placement.py).
The move itself is tested here on a thread of this process; whether Linux put a woken
worker there in the first place cannot be arranged by a test."""
import ctypes
import os
import threading

import numpy as np
import pytest
from llvmlite import ir

import anycuda as ac
from anycuda.compiler.cpu import placement
from anycuda.compiler.build import jit
from anycuda.compiler.types import I32
from conformance import poison

libc = ctypes.CDLL(None)
two_cpus = pytest.mark.skipif(len(os.sched_getaffinity(0)) < 2, reason="a move needs a second CPU to go to")


@pytest.fixture(scope="module")
def move_off():
    module = ir.Module(name="placement_test")
    fn = ir.Function(module, ir.FunctionType(ir.VoidType(), [I32]), name="move_off")
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    b.call(placement.emit_move_off_cpu(module), [fn.args[0]])
    b.ret_void()
    obj = jit.LoadedObject(jit.compile_to_object(str(module), "placement_test"))
    call = ctypes.CFUNCTYPE(None, ctypes.c_int32)(obj.address("move_off"))
    call.keep = obj
    return call


def on_a_thread(body):
    """body() run on a new thread (whose affinity it may change), its result."""
    out = {}
    t = threading.Thread(target=lambda: out.setdefault("r", body()))
    t.start()
    t.join()
    return out["r"]


@two_cpus
def test_a_thread_leaves_its_cpu_and_keeps_the_cpus_it_may_use(move_off):
    def body():
        allowed = os.sched_getaffinity(0)
        for _ in range(3):          # (the scheduler may move a thread back between two calls)
            here = libc.sched_getcpu()
            move_off(here)
            there = libc.sched_getcpu()
            if there != here:
                break
        return here, there, allowed, os.sched_getaffinity(0)
    here, there, allowed, after = on_a_thread(body)
    assert there != here and there in allowed
    assert after == allowed


@pytest.mark.parametrize("case", ["only that cpu", "cpu beyond the set"])
def test_a_thread_with_nowhere_to_go_stays(move_off, case):
    def body():
        here = libc.sched_getcpu()
        if case == "only that cpu":
            os.sched_setaffinity(0, {here})
            target = here
        else:
            target = 5000
        before = os.sched_getaffinity(0)
        move_off(target)
        return before, os.sched_getaffinity(0), libc.sched_getcpu(), here
    before, after, now, here = on_a_thread(body)
    assert after == before
    if case == "only that cpu":
        assert now == here


def test_launches_note_their_cpu_and_run(rng):
    """Every launch goes through the noting and the check; its results stay right on one
    worker and on all of them."""
    m = ac.RawModule(code=r'''
    extern "C" __global__ void twice(const float* a, float* b, int n) {
        int i = blockIdx.x * blockDim.x + threadIdx.x;
        if (i < n) b[i] = 2.0f * a[i];
    }''')
    n = 100_003
    a = rng.standard_normal(n).astype(np.float32)
    out = poison(n, np.float32)
    for _ in range(3):
        m.get_function("twice")(((n + 255) // 256,), (256,), (ac.asarray(a), out, np.int32(n)))
        np.testing.assert_array_equal(out.get(), 2.0 * a)
