"""Loaded modules and kernel launches on the CPU device.

`load_program(ptx)` indexes a PTX module (ptx/index.py); `Program.kernel(name)` gives a
`KernelImage`, compiled at its first use (compiler/pipeline.py), whose `launch` runs a whole
grid on the native worker pool and turns device faults (trap, assert, unsupported code) into
CudaError, like a GPU launch does.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import functools
import itertools
import os
import sys
import threading
import time

from ..compiler import CompiledKernel, CompiledVariables, abi, compile_kernel, compile_variables, pipeline
from ..compiler.build import tiers
from ..compiler.build.jit import LoadedObject
from ..compiler.vector import blockprograms
from ..ptx.errors import PtxError
from ..ptx.index import ModuleIndex
from .errors import CudaError, CUresult, LaunchConfigurationError
from .device import free_memory, last_level_cache_bytes, worker_count
from . import watchdog
from .faults import fault_key, keep_handler, worker_memory_hook
from . import initcheck, memory, profile, progress, sanitizer, specialisation, stream as stream_module, syncreport
from .printf import format_device_printf, write_device_text

_CTYPES = {"u32": ctypes.c_uint32, "s32": ctypes.c_int32, "u64": ctypes.c_uint64}


class Launch(ctypes.Structure):
    _fields_ = [(name, _CTYPES[t]) for name, _, t in abi.LAUNCH_FIELDS]


assert ctypes.sizeof(Launch) == abi.LAUNCH_SIZE
for _name, _off, _ in abi.LAUNCH_FIELDS:
    assert getattr(Launch, _name).offset == _off, _name

MAX_THREADS_PER_BLOCK = 1024
# a kernel declared with one of these is launched as a cluster (%is_explicit_cluster)
_CLUSTER_DIRECTIVES = frozenset(("explicitcluster", "reqnctapercluster"))
_grid_ids = itertools.count(1)       # %gridid: launches numbered in the order they start
_UNASKED = object()                   # a block shape whose block program was never asked for
# what a launch of a kernel built for a sanitizer tool is handed (KernelInfo.check_tool)
_CHECKED_LAUNCHES = {"memcheck": sanitizer.CheckedLaunch, "initcheck": initcheck.ShadowedLaunch,
                     "racecheck": sanitizer.CheckedLaunch, "synccheck": syncreport.SyncCheckedLaunch}
MAX_BLOCK_DIMS = (1024, 1024, 64)
MAX_GRID_DIMS = (2 ** 31 - 1, 65535, 65535)
DEFAULT_SHARED_PER_BLOCK = 48 * 1024
MAX_SHARED_PER_BLOCK_OPTIN = 99 * 1024


# ---------------------------------------------------------------- device-side printf and assert

class _DeviceOutput:
    """Text printed by running kernels, in the order the threads printed it."""

    def __init__(self):
        self.lock = threading.Lock()
        self.lines = []
        self.assertions = []

    def take(self):
        with self.lock:
            text, self.lines = "".join(self.lines), []
            asserts, self.assertions = self.assertions, []
        return text, asserts


_output = _DeviceOutput()


def _ctx_ints(ctx, names):
    return [ctypes.c_uint32.from_address(ctx + abi.CTX[n]).value for n in names]


@ctypes.CFUNCTYPE(ctypes.c_int, ctypes.c_void_p, ctypes.c_void_p, ctypes.c_void_p)
def _vprintf_hook(ctx, fmt, args):
    try:
        text = format_device_printf(ctypes.string_at(fmt), args or 0)
    except Exception as e:  # a bad format must not kill the process
        text = f"<anycuda: cannot format device printf: {e}>\n"
    with _output.lock:
        _output.lines.append(text)
    return len(text)


@ctypes.CFUNCTYPE(None, ctypes.c_void_p, ctypes.c_char_p, ctypes.c_char_p, ctypes.c_int, ctypes.c_char_p)
def _assert_hook(ctx, msg, file, line, func):
    block = _ctx_ints(ctx, ("ctaid_x", "ctaid_y", "ctaid_z"))
    thread = _ctx_ints(ctx, ("tid_x", "tid_y", "tid_z"))
    dec = lambda s: s.decode("utf-8", "replace") if s else "?"
    text = (f"{dec(file)}:{line}: {dec(func)}: block: [{','.join(map(str, block))}], "
            f"thread: [{','.join(map(str, thread))}] Assertion `{dec(msg)}` failed.\n")
    with _output.lock:
        _output.lines.append(text)
        _output.assertions.append(text.strip())


_VPRINTF_ADDR = ctypes.cast(_vprintf_hook, ctypes.c_void_p).value
_ASSERT_ADDR = ctypes.cast(_assert_hook, ctypes.c_void_p).value


def flush_device_output(stream=None):
    """Write what kernels printed to stdout (CUDA flushes at synchronisation points)."""
    if not _output.lines and not _output.assertions:     # (every synchronisation asks)
        return
    text, _ = _output.take()
    if text:
        write_device_text(text, stream or sys.stdout)


stream_module.sync_hooks.append(flush_device_output)


# ---------------------------------------------------------------- cooperative launches

DEFAULT_GRID_SYNC_TIMEOUT = 30.0


def grid_sync_timeout() -> float:
    """Seconds a grid barrier may go without an arrival before the launch fails as a
    deadlock (ANYCUDA_GRID_SYNC_TIMEOUT, default 30)."""
    env, value = watchdog.env_seconds("ANYCUDA_GRID_SYNC_TIMEOUT")
    if not env:
        return DEFAULT_GRID_SYNC_TIMEOUT
    if value is None or not value > 0:
        raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE,
                        f"ANYCUDA_GRID_SYNC_TIMEOUT={env!r}: expected a positive number of seconds")
    return value


def streams_output(nbytes: int, footprint: int = 0) -> bool:
    """Whether a launch whose threads store at least `nbytes` into buffers the kernel does not
    read (analysis.streaming_store_bytes) lets those stores bypass the caches (compiler/
    streamstores.py): where that is more than the last-level cache holds, or the buffers its
    pointer parameters point into (`footprint` bytes, what it may read and write) are, what it
    stores would not stay there for a later kernel anyway.
    ANYCUDA_STREAM_STORES=1 asks for it in every launch, 0 in none."""
    choice = os.environ.get("ANYCUDA_STREAM_STORES", "").strip()
    if choice in ("0", "1"):
        return choice == "1"
    return max(nbytes, footprint) > last_level_cache_bytes()


# the orders a launch's blocks are handed out in (block_order)
FORWARD, BACKWARD, ALTERNATE = "forward", "backward", "alternate"
_last_sweep = [0]        # 1: the last alternating launch ran backwards


def block_order(footprint: int) -> str:
    """The order to hand out the blocks of a kernel whose blocks may run in any order
    (analysis.any_block_order), by the bytes its parameters point into: a launch touching
    more than the last-level cache holds alternates with the launch before it, so that it
    starts where that one ended, among the lines still in the cache (a kernel launched
    again on the same data, or one reading what the last one wrote; saxpy 2.5% faster on
    2^25 floats, benchmarks/NOTES.md). Smaller launches keep the order of block indices.
    ANYCUDA_BLOCK_ORDER=forward keeps it in every launch; =backward reverses every launch
    that may be (to show that nothing depends on the order)."""
    choice = os.environ.get("ANYCUDA_BLOCK_ORDER", "").strip().lower()
    if choice in (FORWARD, BACKWARD):
        return choice
    return ALTERNATE if footprint > last_level_cache_bytes() else FORWARD


def _alternate_sweep() -> int:
    """1 (backwards) where the last alternating launch ran forwards, else 0."""
    _last_sweep[0] ^= 1
    return _last_sweep[0]


def pointed_bytes(params: bytes, offsets) -> int:
    """The bytes of the distinct device allocations that the 8-byte parameters at `offsets`
    of a parameter buffer point into (values that are no device address count nothing)."""
    held = {}
    for off in offsets:
        a = memory.lookup(int.from_bytes(params[off:off + 8], "little"))
        if a is not None:
            held[a.ptr] = a.size
    return sum(held.values())


def _grid_workspace():
    """A zeroed grid workspace (abi.GRID_WS) for one cooperative launch."""
    ws = (ctypes.c_uint64 * (abi.GRID_WS_BYTES // 8))()
    ctypes.c_uint32.from_buffer(ws, abi.GRID_WS["size"]).value = abi.GRID_WS_BYTES
    ctypes.c_uint64.from_buffer(ws, abi.GRID_WS["timeout_ns"]).value = int(grid_sync_timeout() * 1e9)
    return ws


@functools.lru_cache(maxsize=1)
def _libgomp():
    return ctypes.CDLL(ctypes.util.find_library("gomp") or "libgomp.so.1")   # loaded already (compiler/build/jit.py)


def _run_launch(entry, L, cooperative: bool) -> None:
    keep_handler()
    if cooperative:
        _run_cooperative(entry, L)
    else:
        entry(ctypes.addressof(L))


def _run_cooperative(entry, L, helper: bool = False) -> None:
    """Run a cooperative launch with a libgomp team of one thread per block. libgomp gives a
    smaller team to a launch made inside the host program's own OpenMP parallel region
    (nested: one thread), under OMP_DYNAMIC (at most the free CPUs) or past OMP_THREAD_LIMIT;
    blocks left without a thread would never reach the grid barrier."""
    omp = _libgomp()
    limit = omp.omp_get_thread_limit()
    if 0 < limit < L.nblocks:
        raise CudaError(CUresult.CUDA_ERROR_COOPERATIVE_LAUNCH_TOO_LARGE,
                        f"a cooperative launch of {L.nblocks} blocks runs each on its own thread, and "
                        f"OMP_THREAD_LIMIT allows {limit}")
    if not helper and omp.omp_get_active_level() > 0:
        failed = []

        def run():
            try:
                _run_cooperative(entry, L, helper=True)
            except BaseException as e:     # noqa: BLE001 - handed to the launching thread
                failed.append(e)
        t = threading.Thread(target=run, name="anycuda-cooperative-launch")
        t.start()
        t.join()
        if failed:
            raise failed[0]
        return
    dynamic = omp.omp_get_dynamic()
    if dynamic:
        omp.omp_set_dynamic(0)
    try:
        entry(ctypes.addressof(L))
    finally:
        if dynamic:
            omp.omp_set_dynamic(dynamic)


@functools.lru_cache(maxsize=1)
def _launch_template() -> Launch:
    """A launch record holding what every launch of this process shares (the printf and
    assert hooks, the fault handler's key); each launch starts from a copy of it."""
    t = Launch()
    t.vprintf_hook = _VPRINTF_ADDR
    t.assert_hook = _ASSERT_ADDR
    t.fault_key = fault_key()
    t.worker_memory = worker_memory_hook()
    t.caller_cpu = -1          # (the launch function notes it; a worker run otherwise moves nowhere)
    return t


# ---------------------------------------------------------------- programs and kernels

class KernelImage:
    """One kernel of a loaded module. Made when a program looks the kernel up; compiled and
    linked at its first use (a launch, or a question about its parameters or resources:
    `_LOADED_ON_USE`), as CUDA's lazy loading does."""

    _LOADED_ON_USE = frozenset(("info", "params", "param_size", "param_spans", "static_shared", "_max_threads",
                                "_pointer_offsets", "_required_block", "_jit", "_externals"))

    def __init__(self, program: "Program", name: str):
        self.program = program
        self.name = name
        self._records = {}       # (grid, block, shared_mem, workers, quick, cluster) -> a checked launch record
        self._max_dynamic_shared = None     # set by cuFuncSetAttribute, else what static_shared leaves
        self._entry = None
        self._programs = {}      # block shape -> launch function of its block program, or None (none can have one)
        self._buffer_choices = {}      # parameter bytes -> _choices_by_buffers' answer
        self._quick = []         # quick objects, still linked after the switch (tiers.py)
        self._block_objects = []       # the kernel's block programs, linked
        self._programs_pending = set()  # block shapes whose block programs the compile server is making
        self.optimising = False  # while its optimised code is made, quick launches leave a core to the compile
        self._optimised = None   # that code on its way (tiers.OptimisedCode), queued at need where block programs may run all
        # launches running now: id(record) -> [record, block shape, what runs it ("quick",
        # "optimised" or "program")], which code linked meanwhile may take over (_hand_over).
        # No lock: launching threads only add and remove their own (each atomic under the
        # GIL), and _hand_over reads a copy; a record it sets after its launch ended is unread.
        self._in_flight = {}
        self._variants = _UNASKED      # specialisation.Variants of its index parameters, or None

    def __getattr__(self, attr):
        if attr in KernelImage._LOADED_ON_USE:
            self._load()
            return object.__getattribute__(self, attr)
        raise AttributeError(attr)

    def _load(self):
        """Compile (or take from the cache) and link this kernel, once: host threads may
        launch it at once (a second link would drop the object the first one runs)."""
        with self.program.code.lock:
            if "info" not in self.__dict__:
                self._link()

    def _link(self):
        compiled = self.program.compiled_kernel(self.name)
        optimised = compiled.optimised      # read first: it is cleared once object_code is optimised
        info = compiled.info
        self.params = info.params
        self.param_size = info.param_size
        self.param_spans = tuple((p.offset, p.size) for p in info.params)     # (what a launch copies)
        self.static_shared = info.static_shared
        self._max_threads = self._thread_limit(info)
        # where its stores may stream or its blocks may run last first, the 8-byte parameters
        # whose buffers decide it per launch
        self._pointer_offsets = [p.offset for p in info.params if p.size == 8 and p.count == 1] \
            if info.stream_bytes or info.any_block_order else []
        reqntid = info.directives.get("reqntid")
        self._required_block = tuple(reqntid) + (1,) * (3 - len(reqntid)) if reqntid else None
        self._externals = self.program.variable_symbols(compiled.externals)
        # (a kernel block programs may run is linked when a launch first needs its own code)
        self._jit = LoadedObject(compiled.object_code, self._externals) \
            if info.error is None and not compiled.object_later else None
        self.info = info
        if optimised is not None and info.error is None:
            self._await_optimised(optimised)

    def _await_optimised(self, optimised) -> None:
        """Run the quick code until `optimised` arrives (_switch_to_optimised)."""
        self.optimising, self._optimised = True, optimised
        optimised.subscribe(self._switch_to_optimised)

    def _wants_own_code(self) -> None:
        """A launch runs the kernel's own code, not a block program's, and no block program
        is on its way for its shape: queue its optimised code if it waits to be asked for
        (pipeline._optimised_job's `later`)."""
        job = self._optimised
        if job is not None and not job.queued:
            job.queue()

    def _switch_to_optimised(self, object_code):
        """Link the optimised object and send the kernel's launches there: later launches
        through its launch function, blocks not yet taken by a launch in flight through the
        quick workers' handoff slot (compiler/build/tiers.py). The quick code stays linked."""
        if object_code is None:
            self.optimising = False
            return
        optimised = LoadedObject(object_code, self._externals)
        self._quick.append(self._jit)
        self._jit = optimised
        self._entry = None
        self.optimising = False
        self._hand_over(optimised.address(self.info.export), "optimised", lambda kind, shape: kind == "quick")

    def _hand_over(self, launch_function: int, kind: str, takes) -> None:
        """Have the code whose launch function is at `launch_function` take over the launches
        in flight that `takes(what runs it, block shape)` names: their workers take no more
        blocks, and their launch function passes the rest on (compiler/cpu/launch.py)."""
        for flight in list(self._in_flight.values()):
            if takes(flight[2], flight[1]):
                flight[0].handoff = launch_function
                flight[2] = kind

    @property
    def max_dynamic_shared_size(self) -> int:
        if self._max_dynamic_shared is None:
            return DEFAULT_SHARED_PER_BLOCK - self.static_shared
        return self._max_dynamic_shared

    @max_dynamic_shared_size.setter
    def max_dynamic_shared_size(self, value: int):
        self._max_dynamic_shared = value
        self._records.clear()        # they were checked against the old limit

    def _check_runnable(self):
        if self.info.error is not None:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_PTX, f"kernel {self.name} cannot run: {self.info.error}")

    def _function(self):
        """The kernel's own launch function, its object made and linked at the first need."""
        self._check_runnable()
        if self._entry is None:
            with self.program.code.lock:
                if self._jit is None:
                    code, optimised = self.program.kernel_object(self.name)
                    self._jit = LoadedObject(code, self._externals)
                    if optimised is not None:       # (tiered: quick code, made now)
                        self._await_optimised(optimised)
            addr = self._jit.address(self.info.export)
            self._entry = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(addr)
        return self._entry

    def _block_program(self, block: tuple):
        """The launch function of this kernel's block program for blocks of shape `block`
        (compiler/vector/blockprograms.py), or None: not taken, or still being compiled.
        Asked once a shape (launch reads `_programs` first)."""
        if block in self._programs:
            return self._programs[block]
        self._programs[block] = None
        if not blockprograms.supported_shape(block) or not pipeline.block_programs_enabled():
            return None
        self._programs_pending.add(block)

        def link(code):
            # (pending until `_programs` has the answer: a launch in between that found neither
            # would queue the kernel's optimised code for nothing)
            if code is None:          # none for this shape: its launches run the kernel's own code
                self._programs_pending.discard(block)
                self._wants_own_code()
            else:
                obj = LoadedObject(code, self._externals)
                self._block_objects.append(obj)
                address = obj.address(blockprograms.EXPORT)
                self._programs[block] = ctypes.CFUNCTYPE(None, ctypes.c_void_p)(address)
                self._programs_pending.discard(block)
                # a long first launch of this shape goes on in the block program
                self._hand_over(address, "program", lambda kind, shape: kind != "program" and shape == block)
        if profile.ENABLED:
            link = profile.timed_block_program(self.program.source_name, self.name, block, link)
        unit = self.program.index.kernel_unit(self.name)
        shape = "x".join(map(str, block))
        with progress.waiting_for(f"the block program of {self.name} for blocks of {shape}", "optimised code"):
            pipeline.compile_block_program(unit, self.program.source_name, self.name, block, link)
        return self._programs[block]

    @staticmethod
    def _thread_limit(info) -> int:
        """The most threads per block this kernel takes: .maxntid's count, at most the device's."""
        limit = MAX_THREADS_PER_BLOCK
        maxntid = info.directives.get("maxntid")
        if maxntid:
            limit = 1
            for v in maxntid:
                limit *= v
        return min(limit, MAX_THREADS_PER_BLOCK)

    @property
    def max_threads_per_block(self) -> int:
        """What cuFuncGetAttribute reports: .reqntid's count, else .maxntid's, at most the device's."""
        if self._required_block is not None:
            bx, by, bz = self._required_block
            return min(bx * by * bz, MAX_THREADS_PER_BLOCK)
        return self._max_threads

    def check_config(self, grid, block, shared_mem):
        """LaunchConfigurationError (CUDA_ERROR_INVALID_VALUE) for a grid or block past the
        device's limits or the kernel's directives, or too much dynamic shared memory. The
        common case is one comparison chain: each launch pays for it."""
        gx, gy, gz = grid
        bx, by, bz = block
        if (0 < gx <= MAX_GRID_DIMS[0] and 0 < gy <= MAX_GRID_DIMS[1] and 0 < gz <= MAX_GRID_DIMS[2]
                and 0 < bx and 0 < by and 0 < bz and bx * by * bz <= self._max_threads
                and bx <= MAX_BLOCK_DIMS[0] and by <= MAX_BLOCK_DIMS[1] and bz <= MAX_BLOCK_DIMS[2]
                and 0 <= shared_mem <= self.max_dynamic_shared_size
                and (self._required_block is None or self._required_block == (bx, by, bz))):
            return
        self._explain_bad_config(tuple(grid), tuple(block), shared_mem)

    def _explain_bad_config(self, grid, block, shared_mem):
        if any(int(d) < 1 for d in grid + block):
            raise LaunchConfigurationError(f"grid {grid} and block {block} must be positive")
        if any(g > m for g, m in zip(grid, MAX_GRID_DIMS)):
            raise LaunchConfigurationError(f"grid {grid} exceeds the maximum {MAX_GRID_DIMS}")
        nthreads = block[0] * block[1] * block[2]
        if nthreads > MAX_THREADS_PER_BLOCK or any(b > m for b, m in zip(block, MAX_BLOCK_DIMS)):
            raise LaunchConfigurationError(f"block {block} exceeds the maximum of {MAX_THREADS_PER_BLOCK} "
                                           f"threads (dims {MAX_BLOCK_DIMS})")
        if self._required_block is not None and self._required_block != block:
            raise LaunchConfigurationError(f"kernel {self.name} requires block {self._required_block}")
        if nthreads > self._max_threads:
            raise LaunchConfigurationError(f"kernel {self.name} allows at most {self._max_threads} threads per block")
        raise LaunchConfigurationError(f"{shared_mem} bytes of dynamic shared memory requested; "
                                       f"kernel {self.name} may use at most {self.max_dynamic_shared_size}")

    def prepare(self, grid, block, shared_mem: int = 0, num_workers: int = 0, cluster: bool = False) -> bytes:
        """The checked launch record of a configuration under the kernel's limits as they are
        now: a launch queued on a stream runs with those of the moment it was queued, as on a
        GPU, whatever cuFuncSetAttribute changes meanwhile. Raises what check_config raises."""
        if type(grid) is not tuple or type(block) is not tuple:
            grid, block = tuple(int(v) for v in grid), tuple(int(v) for v in block)
        self._check_runnable()       # a kernel that cannot run fails its launch call, not its stream
        record = self._record(grid, block, shared_mem, num_workers or worker_count(), self.optimising, cluster)
        if self.info.check_tool:     # a checked launch's reports name the host code that queued it
            record = sanitizer.queued_record(record)
        return record

    def launch(self, grid, block, params: bytes, shared_mem: int = 0, num_workers: int = 0,
               cooperative: bool = False, cluster: bool = False, record: bytes = None):
        """Run the grid on `num_workers` workers (the device's multiprocessors; 0: all). A
        cooperative launch gets a grid workspace (what grid.sync() needs) and runs every block
        on its own thread, so that all of them run at once; the caller keeps the grid within
        what can be co-resident (driver/launches.py). `cluster`: launched with an explicit cluster
        shape (1x1x1, the only one the driver takes). `record`: prepare's answer, when the
        launch was prepared as it was queued."""
        if type(grid) is not tuple or type(block) is not tuple:
            grid, block = tuple(int(v) for v in grid), tuple(int(v) for v in block)
        self._check_runnable()
        if record is None:
            record = self.prepare(grid, block, shared_mem, num_workers, cluster)
        program = None if cooperative else self._programs.get(block, _UNASKED)
        if program is _UNASKED:
            program = self._block_program(block)
        on_its_way = not cooperative and block in self._programs_pending
        if program is None and not cooperative and not on_its_way:
            program = self._programs.get(block)     # (linked between the two reads)
        entry = program or self._function()
        if program is None and not on_its_way:
            self._wants_own_code()
        kind = "program" if program is not None else ("quick" if self.optimising else "optimised")
        if len(params) < self.param_size:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_VALUE,
                            f"kernel {self.name} takes {self.param_size} bytes of parameters, got {len(params)}")
        if type(params) is not bytes:
            params = bytes(params)
        variants = None
        if program is None and not cooperative:
            variants = self._variants
            if variants is _UNASKED:
                variants = self._variants = specialisation.variants_of(self)
            if variants is not None:
                special, values = variants.entry(params)
                if special is not None:
                    entry, kind, variants = special, "specialised", None
        pbuf = (ctypes.c_char * (len(params) or 1)).from_buffer_copy(params or b"\0")
        L = Launch.from_buffer_copy(record)
        L.params = ctypes.addressof(pbuf)
        L.grid_id = next(_grid_ids)
        if self._pointer_offsets:
            streams, order = self._choices_by_buffers(params)
            L.stream_stores |= streams
            if order != FORWARD and not cooperative:
                L.backwards = _alternate_sweep() if order == ALTERNATE else 1
        # a kernel compiled checked (compiler/ops/memcheck.py) reads the table and writes its
        # failures where the launch record says, whatever the environment says now
        checked_launch = _CHECKED_LAUNCHES.get(self.info.check_tool)
        checked = checked_launch(L) if checked_launch else None
        if checked is not None:
            checked.host_frames = getattr(record, "host_frames", None)
        if profile.ENABLED:
            strategy = self._strategy(entry, block, cooperative, kind)
            start = profile.now()
        if cooperative:
            ws = _grid_workspace()
            L.grid_workspace = ctypes.addressof(ws)
            if checked is not None:
                checked.allow(L, L.grid_workspace, ctypes.sizeof(ws))
            L.num_workers = L.nblocks
            L.chunk = 1
        limit = watchdog.launch_timeout()
        began = time.perf_counter() if variants is not None else 0.0
        self._in_flight[id(L)] = [L, block, kind]        # (inline: a context manager cost 1 us a launch)
        try:
            if limit:
                with watchdog.watching(L, limit):
                    _run_launch(entry, L, cooperative)
            else:
                watchdog.running.enter((self.name, grid, block))
                try:
                    _run_launch(entry, L, cooperative)
                finally:
                    watchdog.running.leave()
        finally:
            del self._in_flight[id(L)]
        if variants is not None and not L.error:
            variants.ran(values, time.perf_counter() - began)
        if profile.ENABLED:
            profile.record_launch(self.program.source_name, self.name, profile.now() - start, L.nblocks, strategy)
        if checked is not None:
            checked.keep_heap()
            if isinstance(checked, initcheck.ShadowedLaunch):     # reports that fail nothing
                checked.report(self.name, self.info.check_sites, self.program.source_name)
            if self.info.check_tool == "racecheck":
                checked.report_races(self.name, self.info.check_sites, self.program.source_name, L)
            if self.info.check_tool == "synccheck":
                checked.report(self.name, self.info.check_sites, self.info.sync_sites, self.program.source_name, L)
        if L.error:
            self._raise_fault(L, checked)

    def _strategy(self, entry, block, cooperative: bool, kind: str) -> str:
        """How a launch ran its blocks, for the profile: "launch function" is the kernel's own
        (profile.launch_function_kind tells its kind at exit)."""
        if cooperative:
            return "cooperative (a thread per block)"
        if kind == "specialised":
            return f"{profile.LAUNCH_FUNCTION}{profile.SPECIALISED}"
        if entry is not self._entry:        # (a block program is optimised code, whatever the tier)
            return f"block program for block shape {tuple(block)}"
        tier = "quick code, " if self.optimising or tiers.mode() == tiers.QUICK else ""
        # (a block of whole warps runs them a warp at a time: blockfunction)
        regions = profile.in_warp_regions(self._jit, self.info.export) \
            if self._jit is not None and block[0] * block[1] * block[2] % 32 == 0 else ""
        if self.info.bands and block[1] * block[2] > 1:
            return f"{tier}{profile.LAUNCH_FUNCTION}{profile.IN_BANDS}{regions}"
        return f"{tier}{profile.LAUNCH_FUNCTION}{regions}"

    def _choices_by_buffers(self, params: bytes) -> tuple:
        """(whether the stores may stream, the block order) by the size of the buffers the
        parameters point into (streams_output, block_order): a store loop's bytes count once
        per thread, and layernorm, which writes 25 MB in rows of 768 floats from 262144
        threads, counted as 1 MB. Kept per parameter buffer: looking up six pointers took 7 us,
        most of a launch (an answer kept after its buffers were freed and others allocated
        there costs speed, never results)."""
        choice = self._buffer_choices.get(params)
        if choice is None:
            if len(self._buffer_choices) >= 256:
                self._buffer_choices.clear()
            footprint = pointed_bytes(params, self._pointer_offsets)
            streams = int(bool(self.info.stream_bytes) and streams_output(0, footprint))
            order = block_order(footprint) if self.info.any_block_order else FORWARD
            choice = self._buffer_choices[params] = (streams, order)
        return choice

    def _record(self, grid, block, shared_mem, workers, quick=False, cluster=False) -> bytes:
        """The launch record of a configuration, checked and filled in but for the parameters
        and the grid's number. Kept per configuration: a program launching the same shape again
        pays a dictionary lookup instead of the checks and a dozen ctypes field stores (launch
        overhead). A quick launch (`quick`: the optimised code is being made) runs one worker fewer."""
        key = (grid, block, shared_mem, workers, quick, cluster)
        record = self._records.get(key)
        if record is None:
            self.check_config(grid, block, shared_mem)
            L = Launch.from_buffer_copy(_launch_template())     # the hooks and the fault key
            L.grid_x, L.grid_y, L.grid_z = grid
            L.block_x, L.block_y, L.block_z = block
            nblocks = L.nblocks = grid[0] * grid[1] * grid[2]
            L.dyn_shared = shared_mem
            L.shared_total = (self.static_shared + 15) // 16 * 16 + shared_mem
            # no more workers than blocks: a small grid leaves the other workers asleep rather
            # than waking them for nothing (the launch would wait for them to be scheduled)
            L.all_workers = min(workers, nblocks)
            L.multiprocessors = workers
            L.explicit_cluster = int(cluster or not _CLUSTER_DIRECTIVES.isdisjoint(self.info.directives))
            L.num_workers = min(max(1, workers - 1) if quick else workers, nblocks)
            L.chunk = max(1, min(1024, nblocks // (L.num_workers * 16)))
            L.stream_stores = int(streams_output(nblocks * block[0] * block[1] * block[2] * self.info.stream_bytes))
            record = bytes(L)
            if len(self._records) >= 256:    # a program sweeping shapes keeps only recent ones
                self._records.clear()
            self._records[key] = record
        return record

    def _raise_fault(self, L, checked=None):
        text, asserts = _output.take()
        if text:
            write_device_text(text, sys.stdout)
        if checked is not None and checked.failures():
            raise sanitizer.report_launch(self.name, self.info.check_sites, checked, self.program.source_name, L,
                                          self.program.variable_ranges())
        thread = "" if L.err_thread == 2 ** 64 - 1 else f", thread {L.err_thread}"
        where = f"kernel {self.name}, block {L.err_block}{thread}"
        if L.error == abi.LAUNCH_ERR_TIMEOUT:
            running = f" (block {L.err_block}{thread} was running)" if L.err_info else ""
            raise CudaError(CUresult.CUDA_ERROR_LAUNCH_TIMEOUT,
                            f"kernel {self.name}: the launch ran longer than ANYCUDA_LAUNCH_TIMEOUT="
                            f"{watchdog.launch_timeout():g} s and was stopped{running}")
        if L.error == abi.LAUNCH_ERR_ASSERT:
            raise CudaError(CUresult.CUDA_ERROR_ASSERT, f"{where}: " + "; ".join(asserts[:3]))
        if L.error == abi.LAUNCH_ERR_ILLEGAL_ADDRESS:
            raise CudaError(CUresult.CUDA_ERROR_ILLEGAL_ADDRESS,
                            f"{where}: invalid memory access at address 0x{L.err_info:x}")
        if L.error == abi.LAUNCH_ERR_TRAP:
            raise CudaError(CUresult.CUDA_ERROR_LAUNCH_FAILED, f"{where}: trap")
        if L.error == abi.LAUNCH_ERR_OUT_OF_MEMORY:
            raise CudaError(CUresult.CUDA_ERROR_LAUNCH_OUT_OF_RESOURCES, f"{where}: out of host memory")
        if L.error == abi.LAUNCH_ERR_UNSUPPORTED:
            errs = "; ".join(str(e) for e in self.program.compiled_kernel(self.name).function_errors.values())
            raise CudaError(CUresult.CUDA_ERROR_LAUNCH_FAILED, f"{where}: called code that cannot run: {errs}")
        if L.error == abi.LAUNCH_ERR_BARRIER_DEADLOCK:
            # a GPU would hang here; the thread named is the first of those left waiting
            raise CudaError(CUresult.CUDA_ERROR_LAUNCH_FAILED,
                            f"{where}: barrier deadlock: threads wait at barriers that can never complete "
                            "(a thread count that the warps still running cannot reach, or lanes of one warp "
                            "at different barriers)")
        if L.error == abi.LAUNCH_ERR_MBARRIER_DEADLOCK:
            raise CudaError(CUresult.CUDA_ERROR_LAUNCH_FAILED,
                            f"{where}: mbarrier deadlock, or a spin that never ends: threads wait for "
                            "mbarrier phases that can never complete (their pending arrivals or transaction "
                            "bytes come from no thread still running), or spin on a word no thread still "
                            "running will change; a GPU would hang here")
        if L.error == abi.LAUNCH_ERR_GRID_DEADLOCK:
            raise CudaError(CUresult.CUDA_ERROR_LAUNCH_FAILED,
                            f"{where}: grid barrier deadlock: blocks waited {grid_sync_timeout():g} s at a grid "
                            "barrier (cooperative groups' grid.sync()) that other blocks never reached (they "
                            "exited before it or wait elsewhere); a GPU would hang here "
                            "(ANYCUDA_GRID_SYNC_TIMEOUT sets the wait in seconds)")
        raise CudaError(CUresult.CUDA_ERROR_LAUNCH_FAILED, f"{where}: error {L.error}")


def _kept_when_it_arrives(compiled: CompiledKernel) -> None:
    """Have the optimised object of `compiled` replace its quick code when it arrives: the
    module's instances linked later link that."""
    def arrived(object_code):
        if object_code is not None:
            compiled.object_code, compiled.optimised = object_code, None
    compiled.optimised.subscribe(arrived)


def _tier_waited_for() -> str:
    """What a launch waits for when a kernel is compiled: quick code unless ANYCUDA_JIT=optimised."""
    return "optimised code" if tiers.mode() == tiers.OPTIMISED else "quick code"


def loading_mode() -> str:
    """CUDA_MODULE_LOADING, as CUDA reads it: LAZY (the default) compiles a kernel at its
    first use; EAGER compiles every kernel of a module when it is loaded, and a kernel that
    does not parse fails the load."""
    mode = os.environ.get("CUDA_MODULE_LOADING", "").strip().upper() or "LAZY"
    return mode if mode in ("LAZY", "EAGER") else "LAZY"


class _ModuleCode:
    """What every instance of a loaded module shares: its index, its kernels as they are
    compiled (name -> CompiledKernel, or the PtxError its unit gave), its variables' object."""

    def __init__(self, index: ModuleIndex, source_name: str, unavailable: dict = None):
        self.index, self.source_name = index, source_name
        self.unavailable = dict(unavailable or {})      # kernel held as machine code only -> why
        self.names = list(index.kernels) + [n for n in self.unavailable if not index.has_kernel(n)]
        self.kernels = {}
        self.variables = None
        self.lock = threading.RLock()


def _check_room_for(variables: CompiledVariables, source_name: str) -> None:
    """CUDA_ERROR_OUT_OF_MEMORY where a module's variables take more than the memory there is
    (a GPU's load fails so): linking them would abort the process in LLVM's loader."""
    need = sum(size for _, size in variables.symbols.values())
    have = free_memory()
    if need > have:
        raise CudaError(CUresult.CUDA_ERROR_OUT_OF_MEMORY, f"the variables of {source_name} take {need:,} bytes; "
                                                           f"{have:,} are free")


class Program:
    """A loaded PTX module (compiler/pipeline.py): its index at once; each kernel compiled
    and linked at its first use; its variables defined once per instance."""

    def __init__(self, ptx_text: str, source_name: str = "<ptx>", code: _ModuleCode = None, unavailable: dict = None):
        """`unavailable`: kernels the module holds as machine code only (name -> why), which
        can be looked up but fail to launch with CUDA_ERROR_NO_BINARY_FOR_GPU."""
        self.code = code or _ModuleCode(ModuleIndex(ptx_text, source_name), source_name, unavailable)
        self.index, self.source_name = self.code.index, self.code.source_name
        self._kernels = {}
        self._variables = None       # (its linked object, {symbol: address}) for this instance
        if code is None and loading_mode() == "EAGER":
            for name in self.index.kernels:
                error = self._compile(name)
                if isinstance(error, PtxError):
                    raise error

    def _compile(self, name):
        code = self.code
        with code.lock:
            compiled = code.kernels.get(name)
            if compiled is None:
                try:
                    with progress.waiting_for(f"kernel {name} of {self.source_name}", _tier_waited_for()):
                        compiled = self._timed_compile(name) if profile.ENABLED else \
                            compile_kernel(self.index.kernel_unit(name), name, self.source_name)
                except PtxError as e:
                    compiled = e
                code.kernels[name] = compiled
                if isinstance(compiled, CompiledKernel) and compiled.optimised is not None:
                    _kept_when_it_arrives(compiled)
        return compiled

    def _timed_compile(self, name: str) -> CompiledKernel:
        """compile_kernel, its time kept for the profile. Tiered, a kernel compiled here has its
        optimised code on the way; one without came from the disk cache (or, with no Python
        interpreter to run the compile server, was optimised here: the cache is then unknown)."""
        unit = self.index.kernel_unit(name)
        start = profile.now()
        compiled = compile_kernel(unit, name, self.source_name)
        elapsed = profile.now() - start
        mode = tiers.mode()
        optimised = getattr(compiled, "optimised", None)
        cached = optimised is None if mode == tiers.TIERED and tiers._interpreter() is not None else None
        tier = "optimised" if mode == tiers.OPTIMISED or cached else "quick"
        profile.record_compile(self.source_name, name, start, elapsed, tier, cached, optimised, unit)
        return compiled

    def compiled_kernel(self, name: str) -> CompiledKernel:
        """Kernel `name` compiled (at its first use); CudaError (CUDA_ERROR_INVALID_PTX) where
        its PTX does not parse, CUDA_ERROR_NO_BINARY_FOR_GPU where the module has none."""
        if name in self.code.unavailable and not self.index.has_kernel(name):
            raise CudaError(CUresult.CUDA_ERROR_NO_BINARY_FOR_GPU,
                            f"kernel {name} cannot run: {self.code.unavailable[name]}")
        compiled = self._compile(name)
        if isinstance(compiled, PtxError):
            raise CudaError(CUresult.CUDA_ERROR_INVALID_PTX, f"kernel {name} cannot run: {compiled}")
        return compiled

    def kernel_object(self, name: str) -> tuple:
        """(object, its optimised code on the way or None) of kernel `name`, made now where
        compile_kernel left it for later (pipeline.kernel_object: tiered, quick code and a
        job to queue at need); the caller holds `code.lock`."""
        compiled = self.code.kernels[name]
        if compiled.object_later:
            with progress.waiting_for(f"kernel {name} of {self.source_name}", _tier_waited_for()):
                start = profile.now()
                pipeline.kernel_object(self.index.kernel_unit(name), compiled, self.source_name)
            if profile.ENABLED:
                tier = "quick" if compiled.optimised is not None else "optimised"
                profile.add_compile_time(self.source_name, name, profile.now() - start, tier)
                if compiled.optimised is not None:
                    profile.optimised_on_its_way(self.source_name, name, start, compiled.optimised)
            if compiled.optimised is not None:
                _kept_when_it_arrives(compiled)
        return compiled.object_code, compiled.optimised

    def instance(self) -> "Program":
        """The same code linked once more, with `__device__` and `__constant__` variables of its
        own (freshly initialised): each device of a multi-GPU program has its own copy of a
        module's variables, as each GPU does."""
        return Program("", code=self.code)

    def kernel_names(self):
        return list(self.code.names)

    def has_kernel(self, name: str) -> bool:
        return self.index.has_kernel(name) or name in self.code.unavailable

    def kernel(self, name: str) -> KernelImage:
        image = self._kernels.get(name)
        if image is None:
            if not self.has_kernel(name):
                raise KeyError(name)
            image = self._kernels[name] = KernelImage(self, name)
            if loading_mode() == "EAGER":
                image.info          # noqa: B018 - compiled and linked now
        return image

    def _linked_variables(self) -> dict:
        """{symbol: address} of this instance's variables, defined at the first need."""
        if self._variables is None:
            code = self.code
            with code.lock:
                if code.variables is None:
                    unit = self.index.variables_unit()
                    with progress.waiting_for(f"the variables of {self.source_name}", "quick code"):
                        code.variables = compile_variables(unit, self.source_name) if unit else CompiledVariables()
            compiled = code.variables
            _check_room_for(compiled, self.source_name)
            obj = LoadedObject(compiled.object_code) if compiled.symbols else None
            self._variables = (obj, {sym: obj.address(sym) for sym, _ in compiled.symbols.values()})
            if sanitizer.tool():          # a checked kernel may access them
                sanitizer.add_variables((self._variables[1][sym], size) for sym, size in compiled.symbols.values())
        return self._variables[1]

    def variable_symbols(self, externals) -> dict:
        """{symbol: address} of the variables a kernel's object declares (`externals`)."""
        if not externals:
            return {}
        addresses = self._linked_variables()
        missing = [e for e in externals if e not in addresses]
        if missing:
            raise CudaError(CUresult.CUDA_ERROR_INVALID_PTX, f"a kernel of {self.source_name} uses variables "
                            f"the module does not define: {', '.join(missing)}")
        return {e: addresses[e] for e in externals}

    def variable_ranges(self) -> list:
        """Every module variable as a memory.Allocation of kind "module" (as get_global gives
        them): what a sanitizer report may name as the nearest allocation."""
        addresses = self._linked_variables()
        return [memory.Allocation(addresses[symbol], nbytes, self, "module")
                for symbol, nbytes in self.code.variables.symbols.values() if symbol in addresses]

    def global_address(self, name: str):
        """(address, size in bytes) of module variable `name`; KeyError if there is none."""
        addresses = self._linked_variables()
        symbol, nbytes = self.code.variables.symbols[name]   # KeyError for unknown names
        return addresses[symbol], nbytes


def load_program(ptx_text: str, source_name: str = "<ptx>", unavailable: dict = None) -> Program:
    return Program(ptx_text, source_name, unavailable=unavailable)
