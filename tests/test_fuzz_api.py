"""Fuzzed sequences of driver API calls, misuse included: memory freed twice or never
allocated, streams, events and contexts destroyed and then used, NULL and made-up handles,
work in the wrong context; asynchronous copies, stream-ordered allocation, stream capture,
graphs launched after what they use was freed, modules unloaded under their functions, and
launches into any made pointer. Each call either succeeds or fails with a CudaError and a message;
never another exception, a hang or a crash. Where a call succeeds its effect is checked: the
bytes copied into live memory come back.

The calls and their arguments' choices are data (ACTIONS), run by two drivers: hypothesis's
state machine (fuzz_api: shrinks a failing sequence, but draws ~30 sequences a second) and a
plain seeded one (fuzz_api_plain: each sequence from its own random generator, hundreds a
second, for campaigns of a million; a failure names the seed and sequence number,
which `replay` runs again).
"""
from __future__ import annotations

from pathlib import Path

import numpy as np
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, rule

import fuzz_harness as fh

BOGUS = [0, 1, 0x10, 0xDEAD0, 2**63, 2**64 - 1]
VECTOR_ADD = Path(__file__).resolve().parent.parent / "src" / "anycuda" / "examples" / "vector_add.ptx"
PICK = 64               # a handle argument: a position, read by ApiMisuse.pick

# action -> the choices of each of its arguments (PICK: a handle's position)
ACTIONS = {
    "alloc": ([0, 1, 8, 4096, 2**40, 2**64, -1],),
    "free": (PICK, [0, 0, 1, 4096]),
    "copy_in_and_back": (PICK, [0, 1, 8, 4097]),
    "memset": (PICK, list(range(256)), [0, 1, 4096, 2**40]),
    "stream_create": ([0, 1, 2**31],),
    "stream_use": (PICK, ["destroy", "sync", "query", "ctx"]),
    "event_create": (),
    "event_use": (PICK, PICK, PICK, ["record", "query", "sync", "destroy", "wait", "elapsed"]),
    "context_create": (),
    "context_use": (PICK, ["set", "set", "destroy", "push", "pop", "sync"]),
    "pointer_attribute": (PICK, [0, 1, 2, 3, 4, 9, 99]),
    # asynchronous work (each action waits for its stream at its end, so that a copy checked
    # by copy_in_and_back is never raced by work still queued), capture and graphs, modules
    "copy_async": (PICK, PICK, [0, 8, 4097], ["to", "from"]),
    "alloc_async": ([0, 256, 4096, 2**40], PICK),
    "free_async": (PICK, PICK),
    "capture": (PICK, ["begin", "begin_global", "end"]),
    "graph_use": (PICK, PICK, PICK, ["instantiate", "launch", "destroy", "destroy_exec"]),
    "module_use": (PICK, ["load", "load", "unload", "function"]),
    "launch": (PICK, PICK, PICK, [0, 1, 64]),
    "graph_cycle": (PICK, PICK, ["launch_twice", "free_then_launch", "destroy_graph_then_launch"]),
}
MAX_STEPS = 40


class ApiMisuse:
    """Handles are drawn from everything ever made (live or not) and from made-up values, by
    position, so that the draws stay the same when a replay makes different handle values."""

    def __init__(self, label=None):
        from anycuda.driver import api
        self.label = label          # (seed, index) of a plain sequence, else None
        api.cuInit(0)
        self.primary = api.cuDevicePrimaryCtxRetain(0)
        api.cuDevicePrimaryCtxReset(0)
        api.cuCtxSetCurrent(self.primary)
        self.made = {"ptr": [], "stream": [], "event": [], "ctx": [self.primary], "graph": [], "exec": [],
                     "module": [], "function": []}
        self.contents = {}          # live pointer -> the bytes last copied in
        self.host = np.zeros(8192, dtype=np.uint8)     # the host side of asynchronous copies

    def call(self, fn, *args):
        """fn(*args), allowed to fail with a CudaError. Recorded for a crash report, but in a
        labelled (plain) sequence, which `replay` recorded whole."""
        from anycuda.runtime.errors import CudaError
        data = (fn.__name__, args) if self.label is None else None
        return fh.allowed_outcome(lambda: fn(*args), (CudaError,), data)

    def pick(self, kind, position):
        """A handle made before (three positions in four, where there is one) or a bogus one,
        so that calls that need several made handles (a launch: a function, a pointer, a
        stream) get them often enough."""
        made = self.made[kind]
        if made and position < PICK * 3 // 4:
            return made[position % len(made)]
        return BOGUS[position % len(BOGUS)]

    def keep(self, kind, handle):
        if isinstance(handle, int):
            self.made[kind].append(handle)

    def alloc(self, size):
        from anycuda.driver import api
        self.keep("ptr", self.call(api.cuMemAlloc, size))

    def free(self, at, offset):
        from anycuda.driver import api
        ptr = self.pick("ptr", at) + offset
        if self.call(api.cuMemFree, ptr) is None:
            self.contents.pop(ptr, None)

    def copy_in_and_back(self, at, n):
        from anycuda.driver import api
        ptr = self.pick("ptr", at)
        sent = np.random.default_rng(ptr % 2**32 + n).integers(0, 256, n, dtype=np.uint8)
        if self.call(api.cuMemcpy, ptr, sent.ctypes.data, n) is not None or n == 0:
            return
        back = np.full(n, 0xCD, dtype=np.uint8)
        self.call(api.cuMemcpy, back.ctypes.data, ptr, n)
        assert (back == sent).all(), f"copy to 0x{ptr:x} and back changed the bytes"

    def memset(self, at, value, n):
        from anycuda.driver import api
        self.call(api.cuMemsetD8, self.pick("ptr", at), value, n)

    def stream_create(self, flags):
        from anycuda.driver import api
        self.keep("stream", self.call(api.cuStreamCreate, flags))

    def stream_use(self, at, action):
        from anycuda.driver import api
        fn = {"destroy": api.cuStreamDestroy, "sync": api.cuStreamSynchronize, "query": api.cuStreamQuery,
              "ctx": api.cuStreamGetCtx}[action]
        self.call(fn, self.pick("stream", at))

    def event_create(self):
        from anycuda.driver import api
        self.keep("event", self.call(api.cuEventCreate, 0))

    def event_use(self, at, stream_at, other_at, action):
        from anycuda.driver import api
        event, stream = self.pick("event", at), self.pick("stream", stream_at)
        calls = {"record": (api.cuEventRecord, event, stream), "query": (api.cuEventQuery, event),
                 "sync": (api.cuEventSynchronize, event), "destroy": (api.cuEventDestroy, event),
                 "wait": (api.cuStreamWaitEvent, stream, event),
                 "elapsed": (api.cuEventElapsedTime, event, self.pick("event", other_at))}
        self.call(*calls[action])

    def context_create(self):
        from anycuda.driver import api
        self.keep("ctx", self.call(api.cuCtxCreate, 0, 0))

    def context_use(self, at, action):
        from anycuda.driver import api
        ctx = self.pick("ctx", at)
        calls = {"set": (api.cuCtxSetCurrent, ctx), "destroy": (api.cuCtxDestroy, ctx),
                 "push": (api.cuCtxPushCurrent, ctx), "pop": (api.cuCtxPopCurrent,),
                 "sync": (api.cuCtxSynchronize,)}
        self.call(*calls[action])

    def pointer_attribute(self, at, attribute):
        from anycuda.driver import api
        self.call(api.cuPointerGetAttribute, attribute, self.pick("ptr", at))

    def settle(self, stream):
        """Wait for `stream` (its asynchronous work, and errors, before the next action)."""
        from anycuda.driver import api
        self.call(api.cuStreamSynchronize, stream)

    def copy_async(self, at, stream_at, n, direction):
        from anycuda.driver import api
        ptr, stream = self.pick("ptr", at), self.pick("stream", stream_at)
        dst, src = (ptr, self.host.ctypes.data) if direction == "to" else (self.host.ctypes.data, ptr)
        self.call(api.cuMemcpyAsync, dst, src, n, stream)
        self.settle(stream)

    def alloc_async(self, size, stream_at):
        from anycuda.driver import api
        stream = self.pick("stream", stream_at)
        self.keep("ptr", self.call(api.cuMemAllocAsync, size, stream))
        self.settle(stream)

    def free_async(self, at, stream_at):
        from anycuda.driver import api
        stream = self.pick("stream", stream_at)
        self.call(api.cuMemFreeAsync, self.pick("ptr", at), stream)
        self.settle(stream)

    def capture(self, stream_at, action):
        from anycuda.driver import api
        stream = self.pick("stream", stream_at)
        if action == "end":
            self.keep("graph", self.call(api.cuStreamEndCapture, stream))
        else:
            self.call(api.cuStreamBeginCapture, stream, 0 if action == "begin_global" else 2)

    def graph_use(self, graph_at, exec_at, stream_at, action):
        from anycuda.driver import api
        graph, exec_, stream = self.pick("graph", graph_at), self.pick("exec", exec_at), self.pick("stream", stream_at)
        if action == "instantiate":
            self.keep("exec", self.call(api.cuGraphInstantiate, graph))
        elif action == "launch":
            self.call(api.cuGraphLaunch, exec_, stream)
            self.settle(stream)
        elif action == "destroy":
            self.call(api.cuGraphDestroy, graph)
        else:
            self.call(api.cuGraphExecDestroy, exec_)

    def module_use(self, at, action):
        from anycuda.driver import api
        if action == "load":
            self.keep("module", self.call(api.cuModuleLoadData, VECTOR_ADD.read_bytes()))
        elif action == "unload":
            self.call(api.cuModuleUnload, self.pick("module", at))
        else:
            self.keep("function", self.call(api.cuModuleGetFunction, self.pick("module", at), "vector_add"))

    def launch(self, function_at, ptr_at, stream_at, n):
        """vector_add of n elements into a made pointer (64: 256 bytes, the smallest slot an
        allocation gets), waited for: a fault is a sticky CudaError."""
        import struct
        from anycuda.driver import api
        ptr, stream = self.pick("ptr", ptr_at), self.pick("stream", stream_at)
        params = struct.pack("<QQQI", ptr, ptr, ptr, n)
        self.call(api.cuLaunchKernel, self.pick("function", function_at), (1, 1, 1), (64, 1, 1), 0, stream, params)
        self.settle(stream)

    def graph_cycle(self, stream_at, ptr_at, order):
        """A copy into a made pointer captured on a made stream, instantiated and launched: twice,
        after the pointer is freed (the replay then copies into freed memory: an error), or
        after the graph is destroyed (the exec stands alone)."""
        from anycuda.driver import api
        stream, ptr = self.pick("stream", stream_at), self.pick("ptr", ptr_at)
        if self.call(api.cuStreamBeginCapture, stream, 2) is not None:
            return
        self.call(api.cuMemcpyAsync, ptr, self.host.ctypes.data, 8, stream)
        graph = self.call(api.cuStreamEndCapture, stream)
        self.keep("graph", graph)
        exec_ = self.call(api.cuGraphInstantiate, graph)
        self.keep("exec", exec_)
        if order == "free_then_launch":
            self.call(api.cuMemFree, ptr)
        elif order == "destroy_graph_then_launch":
            self.call(api.cuGraphDestroy, graph)
        for _ in range(2 if order == "launch_twice" else 1):
            self.call(api.cuGraphLaunch, exec_, stream)
        self.settle(stream)

    def teardown(self):
        """The graphs and contexts made destroyed (with what was made in them), the primary one
        reset. (Graphs belong to no context: left alive, thousands of them made each reset
        scan a longer handle table, and a campaign slowed from ~1,200 to ~800 sequences a second.)"""
        from anycuda.driver import api
        from anycuda.runtime.errors import CudaError
        for graph in self.made["graph"]:
            try:
                api.cuGraphDestroy(graph)
            except CudaError:           # destroyed by the sequence already
                pass
        for ctx in self.made["ctx"][1:]:
            try:
                api.cuCtxDestroy(ctx)
            except CudaError:           # destroyed by the sequence already
                pass
        api.cuCtxSetCurrent(self.primary)
        api.cuDevicePrimaryCtxReset(0)


# ---- hypothesis's driver: a rule per action, its arguments drawn from ACTIONS' choices

class ApiMisuseMachine(RuleBasedStateMachine):
    @initialize()
    def start(self):
        self.api = ApiMisuse()

    def teardown(self):
        self.api.teardown()


def _rule(name, choices):
    strategies = {f"a{i}": st.integers(0, PICK - 1) if c == PICK else st.sampled_from(c)
                  for i, c in enumerate(choices)}

    def apply(self, **drawn):
        getattr(self.api, name)(*(drawn[f"a{i}"] for i in range(len(choices))))
    apply.__name__ = name
    return rule(**strategies)(apply)


for _name, _choices in ACTIONS.items():
    setattr(ApiMisuseMachine, _name, _rule(_name, _choices))


def fuzz_api():
    from hypothesis.stateful import run_state_machine_as_test
    run_state_machine_as_test(ApiMisuseMachine, settings=fh.fuzz_settings(default=60, stateful_step_count=MAX_STEPS))


def test_fuzz_api():
    fh.run_in_child("test_fuzz_api", "fuzz_api")


# ---- the plain driver: sequence i of a seed from its own generator

def sequence(seed: int, index: int) -> list:
    """[(action, arguments)] of sequence `index` of `seed`: 1 to MAX_STEPS steps."""
    d = fh.plain_draws(seed, index)
    names = list(ACTIONS)
    steps = []
    for _ in range(d.number(1, MAX_STEPS)):
        name = d.pick(names)
        args = tuple(d.number(0, PICK - 1) if c == PICK else d.pick(c) for c in ACTIONS[name])
        steps.append((name, args))
    return steps


def replay(seed: int, index: int) -> None:
    """Run sequence `index` of `seed` (what a failure of fuzz_api_plain names)."""
    api = ApiMisuse(label=(seed, index))
    try:
        for name, args in sequence(seed, index):
            getattr(api, name)(*args)
    finally:
        api.teardown()


def fuzz_api_plain():
    fh.plain_run("test_fuzz_api.replay({seed}, {index})", replay, default=200)


def test_fuzz_api_plain():
    fh.run_in_child("test_fuzz_api", "fuzz_api_plain")
