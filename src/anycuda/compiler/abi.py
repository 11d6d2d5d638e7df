"""The binary interface between generated code and the runtime.

A launch is described by one `Launch` record (filled by the runtime, read by generated
code). Each thread of a running block owns a frame: a fixed header (its `ThreadCtx`:
indices, scheduling state and the operand slots of the collective it waits at), the
registers it keeps while suspended, and its `.local` memory. Offsets are fixed here and
used by both sides; the runtime mirrors `LAUNCH_FIELDS` as a ctypes Structure.
"""
from __future__ import annotations

# Launch record: (name, byte offset, C type)
LAUNCH_FIELDS = [
    ("grid_x", 0, "u32"), ("grid_y", 4, "u32"), ("grid_z", 8, "u32"),
    ("block_x", 12, "u32"), ("block_y", 16, "u32"), ("block_z", 20, "u32"),
    ("nblocks", 24, "u64"),
    ("next_block", 32, "u64"),        # work counter, advanced atomically by the workers
    ("params", 40, "u64"),            # address of the kernel parameter buffer
    ("dyn_shared", 48, "u32"),
    ("shared_total", 52, "u32"),      # static + dynamic shared bytes of one block (the static part
                                      # rounded up to 16: where the dynamic part starts)
    ("error", 56, "u32"),             # first error wins (LAUNCH_ERR_*); 0 while healthy
    ("num_workers", 60, "u32"),       # 0: libgomp's default
    ("err_block", 64, "u64"),         # linear block index of the failing thread
    ("err_thread", 72, "u64"),        # linear thread index in its block
    ("err_info", 80, "u64"),          # extra: site or instruction index
    ("vprintf_hook", 88, "u64"),      # i32 (i8* ctx, i8* fmt, i8* args)
    ("assert_hook", 96, "u64"),       # void (i8* ctx, i8* msg, i8* file, i32 line, i8* func)
    ("fault_key", 104, "u64"),        # pthread key under which a worker registers its FaultTrap
    ("chunk", 112, "u64"),            # blocks a worker takes from the counter at a time
    ("grid_workspace", 120, "u64"),   # a cooperative launch's GRID_WS (%envreg1/2); 0 otherwise
    ("all_workers", 128, "u32"),      # num_workers once optimised code takes over from quick code
    ("stream_stores", 132, "u32"),    # nonzero: stores may bypass the caches (compiler/cpu/streamstores.py)
    ("backwards", 136, "u32"),        # nonzero: the counter's chunks are handed out last first
    ("caller_cpu", 140, "s32"),       # the launching thread's CPU (compiler/cpu/placement.py); -1: unknown
    ("grid_id", 144, "u64"),          # %gridid: the launch's number in this process
    ("multiprocessors", 152, "u32"),  # %nsmid: the device's multiprocessor count (its share of the workers)
    ("explicit_cluster", 156, "u32"), # %is_explicit_cluster: launched with a (1x1x1) cluster shape
    # a checked launch (compiler/ops/memcheck.py): the live allocations as sorted [start, end)
    # pairs of u64, how many, the record its failed checks are written to (CHECK_LOG), and
    # the record of what its threads allocated with malloc (CHECK_HEAP)
    ("check_table", 160, "u64"), ("check_count", 168, "u64"), ("check_log", 176, "u64"),
    ("check_heap", 184, "u64"),
    # an initcheck launch (compiler/ops/initcheck.py): the tracked allocations as sorted
    # [start, end, shadow] triples of u64 (runtime/shadow.py), and how many
    ("shadow_table", 192, "u64"), ("shadow_count", 200, "u64"),
    ("worker_memory", 208, "u64"),    # i8* (i64 bytes): a worker's workspace (compiler/cpu/workermemory.py)
    # u64 per worker (by its number in the team): its pthread_t while it runs blocks, where
    # the launch has a time limit (runtime/watchdog.py); 0: no limit
    ("watch_threads", 216, "u64"),
    # void (Launch*) of the code that takes over the launch in flight (optimised code from the
    # compile server, or a block program for its block shape: runtime/program.py); 0 until
    # then. A worker that finds it set takes no more blocks, and the launch function runs the
    # blocks left through it, with all_workers workers (not in a cooperative launch, whose
    # blocks must all run at once)
    ("handoff", 224, "u64"),
]

# A kernel's static shared memory, at most what ptxas allows (ptxas: "uses too much shared data
# (..., 0xc000 max)"); more is dynamic shared memory, asked for at launch.
STATIC_SHARED_BYTES = 0xC000
LAUNCH_SIZE = 232
LAUNCH = {name: off for name, off, _ in LAUNCH_FIELDS}

LAUNCH_ERR_TRAP = 1
LAUNCH_ERR_ASSERT = 2
LAUNCH_ERR_ILLEGAL_ADDRESS = 3
LAUNCH_ERR_UNSUPPORTED = 4
LAUNCH_ERR_OUT_OF_MEMORY = 5
LAUNCH_ERR_BARRIER_DEADLOCK = 6   # a block's threads wait at barriers that can never complete
LAUNCH_ERR_GRID_DEADLOCK = 7      # blocks wait at a grid barrier that the others never reach
LAUNCH_ERR_MBARRIER_DEADLOCK = 8  # a block's threads wait for mbarrier phases that can never complete
LAUNCH_ERR_MISALIGNED = 9         # a checked access was not aligned to its size (compiler/ops/memcheck.py)
LAUNCH_ERR_TIMEOUT = 10           # the launch ran past its time limit and was stopped (runtime/watchdog.py)

# A checked launch's record of failed checks: u64 how many failed (all of them), u64 how many
# entries it holds room for, then one entry of CHECK_ENTRY_BYTES per failure while there is
# room, its fields at these offsets (u64 address; the rest u32)
CHECK_LOG_HEADER = 16
CHECK_ENTRY = {"address": 0, "size": 8, "site": 12, "what": 16,
               "tid_x": 20, "tid_y": 24, "tid_z": 28, "ctaid_x": 32, "ctaid_y": 36, "ctaid_z": 40,
               "other": 44}         # (a racecheck hazard's earlier access: compiler/ops/racecheck.py)
CHECK_ENTRY_BYTES = 48
CHECK_OUT_OF_BOUNDS, CHECK_MISALIGNED = 1, 2       # an entry's `what`
CHECK_UNINITIALISED = 3                            # initcheck's: a read of bytes never written
# synccheck's (compiler/simt/synccheck.py): a barrier reached by part of a block or of a warp,
# a barrier that can never complete, a lane outside its own member mask, lanes at one warp
# collective with different masks, a lane the mask names that does not take part, warps giving
# one barrier different thread counts
SYNC_BLOCK_DIVERGENT, SYNC_WARP_DIVERGENT, SYNC_BAD_COUNT = 8, 9, 10
SYNC_NOT_IN_MASK, SYNC_MASKS_DIFFER, SYNC_LANE_MISSING = 11, 12, 13
SYNC_COUNT_DIFFERS = 14
SYNC_KINDS = range(SYNC_BLOCK_DIVERGENT, SYNC_COUNT_DIFFERS + 1)
# A checked launch's record of device-side malloc: u64 how many blocks, u64 room for how many,
# then each block's [start, end) as two u64
CHECK_HEAP_HEADER = 16

# The grid workspace of a cooperative launch, zeroed for each launch. Its first 8 bytes are
# what CUDA's cooperative groups read (cooperative_groups/details/driver_abi.h: u32 size,
# u32 barrier word); after them, what the waiting code keeps for the watchdog (compiler/
# gridsync.py): the barrier word last seen, when it was first seen, and how long it may stay.
GRID_WS = {"size": 0, "barrier": 4, "seen": 8, "since_ns": 16, "timeout_ns": 24}
GRID_WS_BYTES = 32

# A worker's FaultTrap: a sigjmp_buf the fault handler jumps back to, then what it saw.
FAULT_ADDR = 400              # u64: the faulting address; the sigjmp_buf before it (glibc: 200 B on x86-64, 312 on AArch64)
FAULT_BLOCK = 408             # u64: the block the worker was running
FAULT_FRAME = 416             # i8*: that block's frame, in a kernel without sites (its thread index)
FAULT_LAUNCH = 424            # u64: the launch record the worker runs (a watchdog's stop names it)
FAULT_HELD = 432              # u64: nonzero while the worker is in code a stop must not jump out of
FAULT_TRAP_BYTES = 448

# Thread frame header (byte offsets). All i32 unless noted.
CTX = {
    "tid_x": 0, "tid_y": 4, "tid_z": 8,
    "ntid_x": 12, "ntid_y": 16, "ntid_z": 20,
    "ctaid_x": 24, "ctaid_y": 28, "ctaid_z": 32,
    "nctaid_x": 36, "nctaid_y": 40, "nctaid_z": 44,
    "linear": 48,            # linear thread index in the block
    "exit_flag": 52,         # set by a device function that executed exit/trap
    "shared_base": 56,       # i64: address of the block's shared memory
    "launch": 64,            # i64: address of the Launch record
    "resume": 72,            # where the thread continues (0: start; k: after site k)
    "state": 76,             # THREAD_*
    "worker": 80,            # index of the worker thread running the block (%smid)
    # operand and result slots of the collective a thread waits at (at a barrier: op_b is
    # its id, op_c the warps it expects, 0 for the whole block)
    "op_a": 88,              # i64
    "op_b": 96, "op_c": 100, "op_mask": 104, "op_pred": 108,
    "res": 112,              # i64
    "res_pred": 120,
}
FRAME_HEADER = 128
MAX_BLOCK_THREADS = 1024     # the runtime refuses larger blocks (runtime/program.py)
# A racechecked block's shadow of its shared memory, after its shared window (compiler/ops/
# racecheck.py): a header (the block's u64 tag, then from byte 64 each thread's two u32 counts),
# then an entry per shared byte
RACE_SHADOW_HEADER = 64 + 8 * MAX_BLOCK_THREADS
RACE_SHADOW_ENTRY = 32
# ... and after those (64-byte aligned) its shadow of global memory: a hash table of
# RACE_GLOBAL_ENTRIES entries, each the block's u64 tag, a byte's u64 address, then the eight
# u32 fields of a shared entry
RACE_GLOBAL_ENTRIES = 1 << 14
RACE_GLOBAL_ENTRY = 48
RACE_GLOBAL_BYTES = RACE_GLOBAL_ENTRIES * RACE_GLOBAL_ENTRY

# WAIT_BAR: reached a barrier, its warp not yet counted there; BAR_ARRIVED: its warp counted,
# waiting for the barrier to complete
THREAD_RUN, THREAD_WAIT_WARP, THREAD_WAIT_BAR, THREAD_EXITED, THREAD_BAR_ARRIVED = 0, 1, 2, 3, 4
# an mbarrier test failed: the thread waits until the mbarrier changes or nothing else of its
# block can run (simt/mbarrierwaits.py); op_a is the object's address, res the word it saw
THREAD_WAIT_MBAR = 5

# The 16 named barriers of a block, each 4 i32 in a table the block function owns:
# warps arrived, warps expected (0: every warp with a non-exited thread), threads arrived,
# how many of them had a true predicate (bar.red)
NUM_BARRIERS = 16
BAR_ARRIVED, BAR_EXPECTED, BAR_THREADS, BAR_POPC = 0, 1, 2, 3
BAR_FIELDS = 4

# step() return values besides a site number (>= 1)
STEP_EXIT = 0
STEP_TRAP = -1
# what a region function (compiler/vector/warpregions.py) answers: it ran the warp until each lane
# stopped; it did not run (the threads run one by one); it gave way to the block's next warp
# at a grid-stride loop's back edge, its state in its turn area (it resumes from there)
REGION_RAN, REGION_NOT_RUN, REGION_TURNED = 0, 1, 2

# how a worker calls a block function (blockfunction.emit_block_function): the first block in
# its workspace (the frames get set up), a later one, or the same block again after it gave
# way; and what the block function answers: done, failed, or gave way (its warps wait
# between turns of a grid-stride loop in the workspace, and the worker runs other blocks)
BLOCK_LATER, BLOCK_FIRST, BLOCK_RESUMED = 0, 1, 2
BLOCK_DONE, BLOCK_FAILED, BLOCK_GAVE_WAY = 0, -1, 1

# step()'s resume argument `site + AFFINE_RESUME`: resume at `site` with the loop's induction
# register rebuilt from the block header rather than reloaded (FunctionLowering._reload)
AFFINE_RESUME = 1 << 20

# step()'s last arguments, after the thread index and the scalar parameters (see
# FunctionLowering.step_arg): i8* header, i8* spill arrays, i64 thread count, i64 induction
STEP_TAIL = ("header", "spill", "threads", "induction")


def step_tail_index(name: str) -> int:
    """The (negative) position of one of STEP_TAIL among step()'s arguments."""
    return STEP_TAIL.index(name) - len(STEP_TAIL)

# Kinds of suspension sites (the per-kernel site table holds one per site)
SITE_KINDS = [
    "bar_sync", "bar_red_popc", "bar_red_and", "bar_red_or",
    "shfl_up", "shfl_down", "shfl_bfly", "shfl_idx",
    "vote_all", "vote_any", "vote_uni", "vote_ballot",
    "match_any_b32", "match_any_b64", "match_all_b32", "match_all_b64",
    "redux_add", "redux_min_u32", "redux_min_s32", "redux_max_u32", "redux_max_s32",
    "redux_and", "redux_or", "redux_xor",
    "activemask", "warp_sync", "bar_arrive",
    "yield",          # waits for nothing: the thread may go on at once (a grid-stride loop's back edge)
    "mbar_wait",      # after a failed mbarrier test (THREAD_WAIT_MBAR)
    "matrix",         # mma, wmma.mma, ldmatrix, stmatrix, movmatrix: op_a its resolver, op_b its area (compiler/ops/matrix.py)
    "warp_step",      # before a volatile access: the lanes that come there go on together (compiler/ops/warpsteps.py)
]
SITE = {name: i for i, name in enumerate(SITE_KINDS)}
BLOCK_SITE_KINDS = {SITE[k] for k in ("bar_sync", "bar_red_popc", "bar_red_and", "bar_red_or", "bar_arrive")}


