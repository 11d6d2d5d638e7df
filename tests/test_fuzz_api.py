"""Fuzzed sequences of driver API calls, misuse included: memory freed twice or never
allocated, streams, events and contexts destroyed and then used, NULL and made-up handles,
work in the wrong context. Each call either succeeds or fails with a CudaError and a message;
never another exception, a hang or a crash. Where a call succeeds its effect is checked: the
bytes copied into live memory come back.
"""
from __future__ import annotations

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

import fuzz_harness as fh

BOGUS = [0, 1, 0x10, 0xDEAD0, 2**63, 2**64 - 1]


class ApiMisuse(RuleBasedStateMachine):
    """Handles are drawn from everything ever made (live or not) and from made-up values."""

    @initialize()
    def start(self):
        from anycuda.driver import api
        api.cuInit(0)
        self.primary = api.cuDevicePrimaryCtxRetain(0)
        api.cuDevicePrimaryCtxReset(0)
        api.cuCtxSetCurrent(self.primary)
        self.made = {"ptr": [], "stream": [], "event": [], "ctx": [self.primary]}
        self.contents = {}          # live pointer -> the bytes last copied in

    def call(self, fn, *args):
        from anycuda.runtime.errors import CudaError
        return fh.allowed_outcome(lambda: fn(*args), (CudaError,), (fn.__name__, args))

    def any_of(self, kind, data):
        """A handle made before (live or not) or a made-up one, drawn by position so that the
        draws stay the same when a replay makes different handle values."""
        options = self.made[kind] + BOGUS
        return options[data.draw(st.integers(0, 63)) % len(options)]

    @rule(size=st.sampled_from([0, 1, 8, 4096, 2**40, 2**64, -1]))
    def alloc(self, size):
        from anycuda.driver import api
        ptr = self.call(api.cuMemAlloc, size)
        if isinstance(ptr, int):
            self.made["ptr"].append(ptr)

    @rule(data=st.data(), offset=st.sampled_from([0, 0, 1, 4096]))
    def free(self, data, offset):
        from anycuda.driver import api
        ptr = self.any_of("ptr", data) + offset
        if self.call(api.cuMemFree, ptr) is None:
            self.contents.pop(ptr, None)

    @rule(data=st.data(), n=st.sampled_from([0, 1, 8, 4097]))
    def copy_in_and_back(self, data, n):
        from anycuda.driver import api
        ptr = self.any_of("ptr", data)
        sent = np.random.default_rng(ptr % 2**32 + n).integers(0, 256, n, dtype=np.uint8)
        if self.call(api.cuMemcpy, ptr, sent.ctypes.data, n) is not None or n == 0:
            return
        back = np.full(n, 0xCD, dtype=np.uint8)
        self.call(api.cuMemcpy, back.ctypes.data, ptr, n)
        assert (back == sent).all(), f"copy to 0x{ptr:x} and back changed the bytes"

    @rule(data=st.data(), value=st.integers(0, 255), n=st.sampled_from([0, 1, 4096, 2**40]))
    def memset(self, data, value, n):
        from anycuda.driver import api
        self.call(api.cuMemsetD8, self.any_of("ptr", data), value, n)

    @rule(flags=st.sampled_from([0, 1, 2**31]))
    def stream_create(self, flags):
        from anycuda.driver import api
        s = self.call(api.cuStreamCreate, flags)
        if isinstance(s, int):
            self.made["stream"].append(s)

    @rule(data=st.data(), action=st.sampled_from(["destroy", "sync", "query", "ctx"]))
    def stream_use(self, data, action):
        from anycuda.driver import api
        fn = {"destroy": api.cuStreamDestroy, "sync": api.cuStreamSynchronize, "query": api.cuStreamQuery,
              "ctx": api.cuStreamGetCtx}[action]
        self.call(fn, self.any_of("stream", data))

    @rule()
    def event_create(self):
        from anycuda.driver import api
        e = self.call(api.cuEventCreate, 0)
        if isinstance(e, int):
            self.made["event"].append(e)

    @rule(data=st.data(), action=st.sampled_from(["record", "query", "sync", "destroy", "wait", "elapsed"]))
    def event_use(self, data, action):
        from anycuda.driver import api
        event = self.any_of("event", data)
        stream = self.any_of("stream", data)
        calls = {"record": (api.cuEventRecord, event, stream), "query": (api.cuEventQuery, event),
                 "sync": (api.cuEventSynchronize, event), "destroy": (api.cuEventDestroy, event),
                 "wait": (api.cuStreamWaitEvent, stream, event),
                 "elapsed": (api.cuEventElapsedTime, event, self.any_of("event", data))}
        self.call(*calls[action])

    @rule()
    def context_create(self):
        from anycuda.driver import api
        ctx = self.call(api.cuCtxCreate, 0, 0)
        if isinstance(ctx, int):
            self.made["ctx"].append(ctx)

    @rule(data=st.data(), action=st.sampled_from(["set", "set", "destroy", "push", "pop", "sync"]))
    def context_use(self, data, action):
        from anycuda.driver import api
        ctx = self.any_of("ctx", data)
        calls = {"set": (api.cuCtxSetCurrent, ctx), "destroy": (api.cuCtxDestroy, ctx),
                 "push": (api.cuCtxPushCurrent, ctx), "pop": (api.cuCtxPopCurrent,),
                 "sync": (api.cuCtxSynchronize,)}
        self.call(*calls[action])

    @rule(data=st.data(), attribute=st.sampled_from([0, 1, 2, 3, 4, 9, 99]))
    def pointer_attribute(self, data, attribute):
        from anycuda.driver import api
        self.call(api.cuPointerGetAttribute, attribute, self.any_of("ptr", data))

    def teardown(self):
        from anycuda.driver import api
        api.cuCtxSetCurrent(self.primary)
        api.cuDevicePrimaryCtxReset(0)


def fuzz_api():
    from hypothesis.stateful import run_state_machine_as_test
    run_state_machine_as_test(ApiMisuse, settings=fh.fuzz_settings(default=60, stateful_step_count=30))


def test_fuzz_api():
    fh.run_in_child("test_fuzz_api", "fuzz_api")
