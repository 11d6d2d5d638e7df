"""Concurrency stress campaign: many host threads drive anycuda's driver API at once.

Threads and their streams:
* `own` (8 by default): each with two streams of its own, created by it;
* `per-thread`: the per-thread default stream, named by its handle (CU_STREAM_PER_THREAD);
* `ptsz`: stream 0 inside api.call_with_per_thread_default, as the _ptsz/_ptds entry points
  that `nvcc --default-stream per-thread` programs call run it (blocking copies included);
* `legacy`: stream 0, the legacy default stream, which orders itself with every blocking stream.

Each round of a thread draws its sizes and operations from its own random generator:
allocations (cuMemAlloc or cuMemAllocAsync), asynchronous or blocking copies in, memsets of a
random range, kernel launches (axpy, each counting its updates with an atomic; one round in ten
captured into a graph that is then launched, except on the legacy stream), a host
function that reads the device memory when its stream reaches it (it must see what the
launches before it wrote), events recorded, stream and event queries, a second stream that
waits for an event before copying, copies out into poisoned buffers, one of several kinds of
synchronisation, frees (cuMemFree or cuMemFreeAsync). Every result is compared with the
serial result computed by numpy; at the end each thread's atomic counter must equal the
updates its launches made (no lost update).

A watchdog reports a deadlock (a thread without progress for --watchdog seconds) with the
stacks of all threads and exits with status 3 instead of hanging. `--inject-deadlock` adds a
host function that never returns, to show that the watchdog works.

Usage: python scripts/stress.py --minutes M [--own 8 --per-thread 2 --ptsz 2 --legacy 1]
       [--watchdog 120] [--seed S]
Prints the figures (rounds, launches, copies, ... failures) and exits 0 when no check failed.
"""
from __future__ import annotations

import argparse
import ctypes
import faulthandler
import os
import sys
import threading
import time
from collections import Counter

import numpy as np

SOURCE = r"""
extern "C" __global__ void axpy(const int *x, int *y, int a, int n, unsigned long long *total) {
  int i = blockIdx.x * blockDim.x + threadIdx.x;
  if (i < n) {
    y[i] = a * x[i] + y[i];
    atomicAdd(total, 1ull);
  }
}
"""

NOT_READY = 600                     # CUDA_ERROR_NOT_READY
HOST_FN = ctypes.CFUNCTYPE(None, ctypes.c_void_p)


class Campaign:
    """What every thread shares: the kernel, the deadline, the figures and the failures."""

    def __init__(self, api, ctx, axpy, deadline: float):
        self.api, self.ctx, self.axpy, self.deadline = api, ctx, axpy, deadline
        self.figures = Counter()
        self.failures = []
        self.progress = {}              # thread name -> time of its last finished step
        self.lock = threading.Lock()

    def count(self, **figures):
        with self.lock:
            self.figures.update(figures)

    def fail(self, who: str, what: str):
        with self.lock:
            self.failures.append(f"{who}: {what}")


class Worker:
    """One host thread's rounds on its kind of stream."""

    def __init__(self, campaign: Campaign, kind: str, index: int, seed: int):
        self.c, self.api = campaign, campaign.api
        self.kind, self.name = kind, f"{kind}-{index}"
        self.rng = np.random.default_rng(seed)
        self.seen = {}                  # host function tag -> the value it read
        self.pending = {}               # host function tag -> the array it reads
        self.host_fn = HOST_FN(self._host_function)
        self.host_fn_address = ctypes.cast(self.host_fn, ctypes.c_void_p).value

    # ---------------------------------------------------------------- streams of this kind

    def _streams(self):
        api = self.api
        if self.kind == "own":
            return api.cuStreamCreate(0), api.cuStreamCreate(1)        # blocking, non-blocking
        if self.kind == "per-thread":
            return api.CU_STREAM_PER_THREAD, api.cuStreamCreate(1)
        return 0, api.cuStreamCreate(1)                                 # ptsz, legacy: stream 0

    def run(self):
        api = self.api
        try:
            api.cuCtxSetCurrent(self.c.ctx)
            if self.kind == "ptsz":
                api.call_with_per_thread_default(self._rounds)
            else:
                self._rounds()
        except Exception as e:          # noqa: BLE001 -- an error is a failure of the campaign, not a hang
            import traceback
            self.c.fail(self.name, f"{type(e).__name__}: {e}\n{traceback.format_exc()}")
        self.c.progress[self.name] = float("inf")          # finished

    def _rounds(self):
        api = self.api
        main, side = self._streams()
        self.total = api.cuMemAlloc(8)
        api.cuMemsetD8(self.total, 0, 8)
        self.updates = 0
        rounds = 0
        while time.monotonic() < self.c.deadline or rounds == 0:
            if not self._round(main, side, rounds):
                break
            rounds += 1
            self.c.progress[self.name] = time.monotonic()
        api.cuStreamSynchronize(main)
        counted = np.zeros(1, np.uint64)
        api.cuMemcpy(counted.ctypes.data, self.total, 8)
        if int(counted[0]) != self.updates:
            self.c.fail(self.name, f"{int(counted[0])} updates counted, {self.updates} made (lost updates)")
        api.cuMemFree(self.total)
        for s in (main, side):
            if s not in (0, api.CU_STREAM_PER_THREAD):
                api.cuStreamDestroy(s)
        self.c.count(rounds=rounds)

    def _host_function(self, tag):
        """Run by the stream: note the first int of the array the round launched into."""
        dy = self.pending[tag]
        self.seen[tag] = ctypes.c_int.from_address(dy).value

    # ---------------------------------------------------------------- one round

    def _round(self, main: int, side: int, r: int) -> bool:
        api, rng = self.api, self.rng
        n = int(rng.integers(1, 4097))
        nbytes = 4 * n
        x = rng.integers(-1000, 1000, n, dtype=np.int32)
        y = rng.integers(-1000, 1000, n, dtype=np.int32)
        stream_alloc = rng.random() < 0.3
        dx, dy, dz = ((api.cuMemAllocAsync(nbytes, main) if stream_alloc else api.cuMemAlloc(nbytes))
                      for _ in range(3))
        self.c.count(allocations=3)
        if rng.random() < 0.3 or self.kind == "ptsz" and rng.random() < 0.5:
            api.cuMemcpy(dx, x.ctypes.data, nbytes)          # blocking (the _ptds kind under ptsz)
            api.cuMemcpy(dy, y.ctypes.data, nbytes)
        else:
            api.cuMemcpyAsync(dx, x.ctypes.data, nbytes, main)
            api.cuMemcpyAsync(dy, y.ctypes.data, nbytes, main)
        want = y.copy()
        lo, hi = sorted(int(v) for v in rng.integers(0, n + 1, 2))
        value = int(rng.integers(-5, 5))
        api.cuMemsetAsync(dy + 4 * lo, value & 0xFFFFFFFF, hi - lo, 4, main)
        want[lo:hi] = value
        self.c.count(copies=2, memsets=1)
        captured = self.kind != "legacy" and rng.random() < 0.1     # the legacy stream cannot be captured
        if captured:
            api.cuStreamBeginCapture(main)
        for a in rng.integers(-50, 50, int(rng.integers(1, 5)), dtype=np.int32):
            a_and_n = (int(a) & 0xFFFFFFFF) | (n << 32)          # int a, int n share one 8-byte slot
            params = np.array([dx, dy, a_and_n, self.total], np.uint64)
            api.cuLaunchKernel(self.c.axpy, ((n + 127) // 128, 1, 1), (128, 1, 1), 0, main, params.tobytes())
            want = (a * x + want).astype(np.int32)
            self.updates += n
            self.c.count(launches=1)
        if captured:                                 # the launches run once, as the graph
            graph = api.cuStreamEndCapture(main)
            runnable = api.cuGraphInstantiate(graph)
            api.cuGraphLaunch(runnable, main)
            api.cuGraphExecDestroy(runnable)         # a launched graph keeps its work
            api.cuGraphDestroy(graph)
            self.c.count(graphs=1)
        tag = r + 1                              # the host function's argument: never NULL
        self.pending[tag] = dy
        api.cuLaunchHostFunc(main, self.host_fn_address, tag)
        event = api.cuEventCreate(0)
        api.cuEventRecord(event, main)
        self.c.count(host_functions=1, events=1)
        for query in (lambda: api.cuStreamQuery(main), lambda: api.cuEventQuery(event)):
            try:
                query()
            except Exception as e:              # noqa: BLE001 -- NOT_READY is the only allowed answer
                if getattr(e, "code", None) != NOT_READY:
                    self.c.fail(self.name, f"round {r}: query raised {e}")
                    return False
            self.c.count(queries=1)
        api.cuStreamWaitEvent(side, event)       # the side stream copies once the launches are done
        api.cuMemcpyAsync(dz, dy, nbytes, side)
        got = np.full(n, 0x7EADBEEF, np.int32)   # poisoned
        copied = np.full(n, 0x7EADBEEF, np.int32)
        api.cuMemcpyAsync(got.ctypes.data, dy, nbytes, main)
        api.cuMemcpyAsync(copied.ctypes.data, dz, nbytes, side)
        self.c.count(copies=3)
        how = int(rng.integers(0, 4))
        if how == 0:
            api.cuStreamSynchronize(main)
            api.cuStreamSynchronize(side)
        elif how == 1:
            done = api.cuEventCreate(0)
            api.cuEventRecord(done, side)          # side waited for main's launches only
            api.cuEventSynchronize(done)
            api.cuStreamSynchronize(main)
            api.cuEventDestroy(done)
        elif how == 2:
            while True:                            # poll until both streams are idle
                try:
                    api.cuStreamQuery(main)
                    api.cuStreamQuery(side)
                    break
                except Exception as e:             # noqa: BLE001
                    if getattr(e, "code", None) != NOT_READY:
                        raise
                    time.sleep(0.0005)
        else:
            api.cuCtxSynchronize()                 # everybody's work: the heaviest wait
        self.c.count(synchronisations=1)
        api.cuEventDestroy(event)
        ok = True
        if not (got == want).all():
            self.c.fail(self.name, f"round {r}: result wrong at {int(np.argmax(got != want))} (n {n})")
            ok = False
        if not (copied == want).all():
            self.c.fail(self.name, f"round {r}: side stream's copy wrong at {int(np.argmax(copied != want))}")
            ok = False
        if self.seen.pop(tag, None) != int(want[0]):
            self.c.fail(self.name, f"round {r}: host function ran out of order")
            ok = False
        del self.pending[tag]
        for p in (dx, dy, dz):
            if stream_alloc:
                api.cuMemFreeAsync(p, main)
            else:
                api.cuMemFree(p)
        if stream_alloc:
            api.cuStreamSynchronize(main)
        return ok


def _stacks() -> str:
    """Every Python thread's stack (host threads and the streams' workers)."""
    import traceback
    names = {t.ident: t.name for t in threading.enumerate()}
    out = []
    for ident, frame in sys._current_frames().items():
        out.append(f"--- thread {names.get(ident, ident)}\n" + "".join(traceback.format_stack(frame)))
    return "\n".join(out)


def watch(campaign: Campaign, threads: list, watchdog: float) -> bool:
    """Wait for the threads; False (after printing every stack) when one made no progress for
    `watchdog` seconds."""
    while any(t.is_alive() for t in threads):
        time.sleep(0.5)
        now = time.monotonic()
        stuck = [name for name, last in campaign.progress.items() if now - last > watchdog]
        if stuck:
            print(f"DEADLOCK: no progress for {watchdog:g} s in {', '.join(sorted(stuck))}", flush=True)
            print(_stacks(), flush=True)
            return False
    return True


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--minutes", type=float, default=1.0)
    p.add_argument("--own", type=int, default=8)
    p.add_argument("--per-thread", type=int, default=2)
    p.add_argument("--ptsz", type=int, default=2)
    p.add_argument("--legacy", type=int, default=1)
    p.add_argument("--watchdog", type=float, default=120.0, help="seconds without progress that mean deadlock")
    p.add_argument("--seed", type=int, default=None)
    p.add_argument("--inject-deadlock", action="store_true", help="a host function that never returns")
    args = p.parse_args(argv)

    import anycuda as ac
    from anycuda.driver import api
    faulthandler.enable()
    api.cuInit(0)
    ctx = api.cuDevicePrimaryCtxRetain(0)
    api.cuCtxSetCurrent(ctx)
    module = api.cuModuleLoadData(ac.compile(SOURCE).encode())
    axpy = api.cuModuleGetFunction(module, "axpy")
    seed = args.seed if args.seed is not None else int(np.random.SeedSequence().entropy % (1 << 63))
    print(f"seed {seed}", flush=True)
    start = time.monotonic()
    campaign = Campaign(api, ctx, axpy, start + 60 * args.minutes)
    kinds = ["own"] * args.own + ["per-thread"] * args.per_thread + ["ptsz"] * args.ptsz + ["legacy"] * args.legacy
    seeds = np.random.SeedSequence(seed).generate_state(len(kinds))
    workers = [Worker(campaign, kind, kinds[:i].count(kind), int(s)) for i, (kind, s) in enumerate(zip(kinds, seeds))]
    threads = [threading.Thread(target=w.run, name=w.name, daemon=True) for w in workers]
    for w in workers:
        campaign.progress[w.name] = start
    if args.inject_deadlock:
        never = threading.Event()
        blocker = HOST_FN(lambda _: never.wait())
        stream = api.cuStreamCreate(1)
        api.cuLaunchHostFunc(stream, ctypes.cast(blocker, ctypes.c_void_p).value, 0)
        def wait_forever():
            api.cuCtxSetCurrent(ctx)
            api.cuStreamSynchronize(stream)
        threads.append(threading.Thread(target=wait_forever, name="injected", daemon=True))
        campaign.progress["injected"] = start
    for t in threads:
        t.start()
    alive = watch(campaign, threads, args.watchdog)
    elapsed = time.monotonic() - start
    f = campaign.figures
    print(f"threads {len(threads)} ({', '.join(f'{k} {kinds.count(k)}' for k in dict.fromkeys(kinds))}), "
          f"{elapsed:.1f} s", flush=True)
    print(" ".join(f"{k} {f[k]}" for k in ("rounds", "launches", "graphs", "copies", "memsets", "host_functions",
                                         "events", "queries", "synchronisations", "allocations")), flush=True)
    print(f"failures {len(campaign.failures)}", flush=True)
    for line in campaign.failures[:20]:
        print("  " + line, flush=True)
    if not alive:
        os._exit(3)                     # the stuck threads cannot be joined
    return 1 if campaign.failures else 0


if __name__ == "__main__":
    sys.exit(main())
