"""racecheck: shared- and global-memory hazards between threads of a block with no barrier
between them.

Under ANYCUDA_SANITIZE=racecheck (`anycuda run --sanitize=racecheck`) a kernel is compiled
checked as for memcheck (memcheck.py: every access is bounds-tested first, and the kernel runs
on the general path, one thread at a time up to its next barrier or collective), and each
access that lands in the block's shared window (a .shared one, or a generic one whose address
is there) is also compared with a shadow of the window:

  - each shared byte has an entry (abi.RACE_SHADOW_ENTRY bytes, eight u32): the last write
    (the writer's barrier count + 1, its __syncwarp count, its linear thread index with bit 16
    set for an atomic, the access's site) and the last read (the same, bit 17 of the thread
    field set when a second thread read the byte in the same barrier interval);
  - each thread counts the block barriers (bar.sync, bar.red, bar.arrive) and the
    bar.warp.sync (__syncwarp) it passed, in the shadow's header. Two accesses are in the same
    barrier interval when they were made at the same barrier count: nothing orders them.

A write by thread T to a byte another thread U wrote (write-after-write) or read
(write-after-read) in the same interval, or a read of a byte U wrote (read-after-write), is a
hazard, unless both accesses are atomics (atomics do not race with atomics). Threads of one
warp are ordered only by __syncwarp: CUDA gives no lockstep guarantee since independent thread
scheduling, so a hazard inside a warp with no __syncwarp between is reported too, but as a
warning (code written for lockstep warps), and one between warps as an error, as
compute-sanitizer grades them. Each access reports at most one hazard of each kind (the first
byte that has it), into the launch's record of failed checks; the launch goes on (a race is
not a fault) and the runtime groups the entries by the two accesses' sites
(runtime/racereport.py).

The shadow lies after the block's shared window in its workspace slot (compiler/cpu/launch.py
makes the slot larger): RACE_SHADOW_HEADER bytes (the block's tag, then each thread's two
counts), then the entries. It is cleared at the first instrumented access of each block (the
tag, the launch's number and the block's index, differs), so its cost is one memset of
(entry size x shared bytes) per block.

Global memory (a .global access, or a generic one outside the shared, local, parameter and
constant windows) is shadowed the same way, byte by byte, in a hash table after the shared
entries (abi.RACE_GLOBAL_ENTRIES entries: the block's tag, the byte's address, the eight
fields), which is never cleared: an entry whose tag or address is not this block's byte is
taken for empty and made this byte's. The same rules find the same three hazards between
threads of the block; a hazard there is reported `at __global__` with the byte's address.

Limits: a barrier with a thread count (bar.sync a, b) counts for the threads that pass it as if
it were the whole block's, and bar.arrive counts where the thread arrives, so hazards between
producers and consumers of named barriers can be missed; of the threads that read a byte in
one interval the entry keeps the last, so a write by a reader is compared with one other
reader. In global memory only threads of one block are compared (the blocks of a launch
are not ordered by barriers at all, and anycuda runs them one after another on a worker:
their accesses are not tracked against each other), and the table's sets have two ways: where
a third word of the block meets two in one set, one of them forgets its accesses, so a hazard
can be missed, never invented.
"""
from __future__ import annotations

from llvmlite import ir

from ...ptx import ir as pir
from .. import abi
from . import memcheck
from ..irutil import declare, field_ptr, for_range, i32, i64, internal_function, load_field
from ..types import I1, I32, I64, PTR

I8 = ir.IntType(8)

READ, WRITE, ATOMIC = 0, 1, 2
KINDS = {"read": READ, "write": WRITE, "atomic": ATOMIC}
# a hazard's `what` in the record of failed checks: RACE + its kind, + INTRA_WARP when the two
# threads are of one warp (a warning), + GLOBAL for a byte of global memory
RACE, INTRA_WARP, GLOBAL = 16, 4, 8
RAW, WAW, WAR = 0, 1, 2
HAZARD_NAMES = {RAW: "RAW", WAW: "WAW", WAR: "WAR"}

ACCESS = "anycuda.racecheck.access"
ACCESS_GLOBAL = "anycuda.racecheck.access_global"
FRESH = "anycuda.racecheck.fresh"
HAZARD = "anycuda.racecheck.hazard"

# an entry's u32 fields
W_EPOCH, W_WARPS, W_TID, W_SITE, R_EPOCH, R_WARPS, R_TID, R_SITE = range(8)
ATOMIC_BIT, SEVERAL_BIT = 1 << 16, 1 << 17
COUNTS = 64            # the header's per-thread counts start here (the tag before them)


def is_race(what: int) -> bool:
    return what >= RACE


def hazard_of(what: int) -> tuple:
    """(RAW, WAW or WAR, whether the two threads are of one warp, whether the byte is global
    memory) of an entry's `what`."""
    flags = what - RACE
    return flags % INTRA_WARP, bool(flags & INTRA_WARP), bool(flags & GLOBAL)


def _thread_linear(f):
    return f.fn.args[6] if f.is_kernel else f.ctx_field("linear")


def _up64(b, n):
    return b.and_(b.add(n, i64(63)), i64(~63))


def _block_tag(f):
    """i64 that no other block of any launch has: the launch's number and the block's index."""
    b = f.b
    cta = [f.special(pir.SpecialReg("ctaid", c)) for c in "xyz"]
    grid = [f.special(pir.SpecialReg("nctaid", c)) for c in "xy"]
    block = b.zext(b.add(cta[0], b.mul(grid[0], b.add(cta[1], b.mul(grid[1], cta[2])))), I64)
    return b.add(b.shl(f.launch_field("grid_id", I64), i64(40)), b.add(block, i64(1)))


def _shared_shadow_bytes(f):
    """i64: the header and the shared entries (the global table follows, 64-byte aligned)."""
    total = f.b.zext(f.launch_field("shared_total", I32), I64)
    return f.b.add(i64(abi.RACE_SHADOW_HEADER), f.b.mul(total, i64(abi.RACE_SHADOW_ENTRY)))


def _shadow(f):
    """i8* of the block's shadow (after its shared window), cleared when the block is new."""
    b = f.b
    total = b.zext(f.launch_field("shared_total", I32), I64)
    shadow = b.inttoptr(b.add(f.shared_base(), _up64(b, total)), PTR)
    b.call(_fresh_fn(b.module), [shadow, _block_tag(f), _shared_shadow_bytes(f)])
    return shadow


def _counts(b, shadow, t):
    """i32* of thread t's two counts (block barriers, __syncwarp) in the shadow's header."""
    return b.bitcast(b.gep(shadow, [b.add(i64(COUNTS), b.mul(b.zext(t, I64), i64(8)))]), I32.as_pointer())


def count_barrier(f, warp: bool) -> None:
    """In a racechecked kernel: the thread passes a block barrier (or, `warp`, a __syncwarp)."""
    if f.mc.tool != "racecheck":
        return
    b = f.b
    slot = b.gep(_counts(b, _shadow(f), _thread_linear(f)), [i32(int(warp))])
    b.store(b.add(b.load(slot), i32(1)), slot)


def track(f, a, size, kind: str, space: str, site: int) -> None:
    """In a racechecked kernel: compare the access of i64 `size` bytes at i64 address `a`
    (in bounds: memcheck.check tested it) with the shadow of shared or of global memory."""
    b = f.b
    if space == "global":
        _track(f, a, size, kind, site, False)
    elif space in ("shared", ""):
        lo, hi = f.space_windows("shared")[0]
        if space == "shared":
            _track(f, b.sub(a, lo), size, kind, site, True)
            return
        # (where the access's first byte lies decides)
        with b.if_else(memcheck.in_windows(b, a, 1, [(lo, hi)])) as (shared, other):
            with shared:
                _track(f, b.sub(a, lo), size, kind, site, True)
            with other:
                # thread-private (.local, a frame) and read-only windows are no global memory
                private = [w for space in ("local", "param", "const") for w in f.space_windows(space)]
                with b.if_then(b.not_(memcheck.in_windows(b, a, 1, private))):
                    _track(f, a, size, kind, site, False)


def _track(f, at, size, kind: str, site: int, shared: bool) -> None:
    """The access at `at` (an offset in the shared window, or a global address) against its
    shadow."""
    b = f.b
    shadow = _shadow(f)
    t = _thread_linear(f)
    counts = _counts(b, shadow, t)
    tids = [f.special(pir.SpecialReg("tid", c)) for c in "xyz"]
    ctas = [f.special(pir.SpecialReg("ctaid", c)) for c in "xyz"]
    args = [f.launch_ptr(), shadow, at, b.trunc(size, I32), i32(KINDS[kind]), i32(site), t,
            b.load(counts), b.load(b.gep(counts, [i32(1)]))] + tids + ctas
    if shared:
        b.call(_access_fn(b.module), args)
    else:
        table = b.gep(shadow, [_up64(b, _shared_shadow_bytes(f))])
        b.call(_global_access_fn(b.module), args[:1] + [table] + args[2:] + [_block_tag(f)])


def _made_once(name: str, function_type: ir.FunctionType):
    def made(emit):
        return lambda module: internal_function(module, name, function_type, emit)
    return made


@_made_once(FRESH, ir.FunctionType(ir.VoidType(), [PTR, I64, I64]))
def _fresh_fn(fn):
    """void fresh(i8* shadow, i64 tag, i64 size): a new block's shadow is cleared and tagged."""
    shadow, tag, size = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    slot = b.bitcast(shadow, I64.as_pointer())
    with b.if_then(b.icmp_unsigned("!=", b.load(slot), tag), likely=False):
        memset = declare(b.module, "llvm.memset.p0i8.i64", ir.VoidType(), [PTR, I8, I64, I1])
        b.call(memset, [shadow, ir.Constant(I8, 0), size, ir.Constant(I1, 0)])
        b.store(tag, slot)
    b.ret_void()


ACCESS_TYPE = ir.FunctionType(ir.VoidType(), [PTR, PTR, I64, I32, I32, I32, I32, I32, I32] + [I32] * 6)


@_made_once(ACCESS, ACCESS_TYPE)
def _access_fn(fn):
    """void access(i8* launch, i8* shadow, i64 offset, i32 size, i32 kind, i32 site, i32 t,
    i32 barriers, i32 warp syncs, i32 tid x y z, i32 ctaid x y z): the hazards of thread t's
    access of `size` bytes at `offset` in the shared window, reported (the first byte of each
    kind), then the access written into the bytes' entries."""
    def entry_of(b, at, shadow):
        offset = b.add(i64(abi.RACE_SHADOW_HEADER), b.mul(at, i64(abi.RACE_SHADOW_ENTRY)))
        return b.bitcast(b.gep(shadow, [offset]), I32.as_pointer())
    _emit_access(fn, entry_of, 0)


@_made_once(ACCESS_GLOBAL, ir.FunctionType(ir.VoidType(), ACCESS_TYPE.args + (I64,)))
def _global_access_fn(fn):
    """void access_global(i8* launch, i8* table, i64 address, ..., i64 tag): as `access`
    (same arguments, then the block's tag) for `size` bytes of global memory at `address`,
    each byte's entry in the hash table `table`, taken for this byte's (and emptied) where it
    holds another block's or another byte's."""
    tag = fn.args[-1]

    def entry_of(b, at, table):
        # the eight bytes of an aligned 8-byte word share a run of eight entries (one or two
        # cache lines for a whole access, rather than a line per byte); the words are hashed
        # to a set of WAYS runs, so that a few words of one block meeting in a set (a thread's
        # racy word and the word it stores its result to) keep their accesses
        hashed = b.mul(b.lshr(at, i64(3)), i64(WORD_HASH - (1 << 64)))
        first = b.shl(b.lshr(hashed, i64(64 - SET_BITS)), i64(_log2(WAYS)))
        slots, matches, live = [], [], []
        for way in range(WAYS):
            index = b.or_(b.shl(b.or_(first, i64(way)), i64(3)), b.and_(at, i64(7)))
            slot = b.bitcast(b.gep(table, [b.mul(index, i64(abi.RACE_GLOBAL_ENTRY))]), I64.as_pointer())
            mine = b.icmp_unsigned("==", b.load(slot), tag)
            slots.append(slot)
            live.append(mine)
            matches.append(b.and_(mine, b.icmp_unsigned("==", b.load(b.gep(slot, [i64(1)])), at)))
        # this byte's entry where a way holds it; else the first way another block left (or
        # nobody), else the last way, whose byte is forgotten
        slot = slots[-1]
        for way in reversed(range(WAYS - 1)):
            slot = b.select(b.not_(live[way]), slots[way], slot)
        for way in reversed(range(WAYS)):
            slot = b.select(matches[way], slots[way], slot)
        found = matches[0]
        for match in matches[1:]:
            found = b.or_(found, match)
        fields = b.bitcast(b.gep(slot, [i64(2)]), I32.as_pointer())
        with b.if_then(b.not_(found), likely=False):
            b.store(tag, slot)
            b.store(at, b.gep(slot, [i64(1)]))
            for k in range(8):
                b.store(i32(0), b.gep(fields, [i32(k)]))
        return fields
    _emit_access(fn, entry_of, GLOBAL)


def _log2(n: int) -> int:
    return n.bit_length() - 1


# the global shadow's hash: a word's address times WORD_HASH (Fibonacci hashing), whose top
# SET_BITS bits choose its set of WAYS runs of eight entries
WORD_HASH = 0x9E3779B97F4A7C15
WAYS = 2
SET_BITS = _log2(abi.RACE_GLOBAL_ENTRIES // 8 // WAYS)


def _emit_access(fn, entry_of, space_flag: int):
    """The body of an access function: for each byte of the access, its entry (`entry_of(b,
    at, shadow)`: i32* of the eight fields), the hazards it shows against this access, each
    kind reported once (`space_flag` added to the report's `what`), then the access recorded."""
    fn.attributes.add("noinline")
    launch, shadow, offset, size, kind, site, t, bars, warps = fn.args[:9]
    indices = list(fn.args[9:15])
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    reported = [b.alloca(I1, name=f"reported.{HAZARD_NAMES[h]}") for h in (RAW, WAW, WAR)]
    for slot in reported:
        b.store(ir.Constant(I1, 0), slot)
    epoch = b.add(bars, i32(1))
    is_read, is_atomic = (b.icmp_unsigned("==", kind, i32(k)) for k in (READ, ATOMIC))
    with for_range(b, i32(0), size, "byte") as i:
        at = b.add(offset, b.zext(i, I64))
        e = entry_of(b, at, shadow)
        field = lambda k: b.gep(e, [i32(k)])  # noqa: E731
        v = {k: b.load(field(k)) for k in range(8)}

        def raced(epoch_k, warps_k, tid_k, others):
            """i1: the recorded access is in this interval, by another thread (or several,
            `others`), not ordered by a __syncwarp, and not an atomic meeting an atomic; and
            i1: the threads are of one warp."""
            other = b.and_(v[tid_k], i32(0xFFFF))
            same_warp = b.icmp_unsigned("==", b.lshr(other, i32(5)), b.lshr(t, i32(5)))
            unordered = b.or_(b.not_(same_warp), b.icmp_unsigned("==", v[warps_k], warps))
            both_atomic = b.and_(is_atomic, b.icmp_unsigned("!=", b.and_(v[tid_k], i32(ATOMIC_BIT)), i32(0)))
            someone = b.icmp_unsigned("!=", other, t)
            if others:
                someone = b.or_(someone, b.icmp_unsigned("!=", b.and_(v[tid_k], i32(SEVERAL_BIT)), i32(0)))
            hit = b.and_(b.and_(b.icmp_unsigned("==", v[epoch_k], epoch), someone),
                         b.and_(unordered, b.not_(both_atomic)))
            return hit, same_warp, other

        def report(hazard, hit_warp_other, earlier_site, when):
            hit, same_warp, other = hit_warp_other
            slot = reported[hazard]
            with b.if_then(b.and_(b.and_(when, hit), b.not_(b.load(slot))), likely=False):
                b.store(ir.Constant(I1, 1), slot)
                what = b.add(i32(RACE + hazard + space_flag), b.select(same_warp, i32(INTRA_WARP), i32(0)))
                b.call(_hazard_fn(b.module), [launch, at, other, site, earlier_site, what] + indices)

        writes = b.not_(is_read)
        # an entry no access of this interval touched holds no hazard: the comparisons only
        # where one did (most accesses of a barrier-separated kernel skip them)
        touched = b.or_(b.icmp_unsigned("==", v[W_EPOCH], epoch), b.icmp_unsigned("==", v[R_EPOCH], epoch))
        with b.if_then(touched, likely=False):
            report(RAW, raced(W_EPOCH, W_WARPS, W_TID, False), v[W_SITE], is_read)
            report(WAW, raced(W_EPOCH, W_WARPS, W_TID, False), v[W_SITE], writes)
            report(WAR, raced(R_EPOCH, R_WARPS, R_TID, True), v[R_SITE], writes)
        me = b.or_(t, b.select(is_atomic, i32(ATOMIC_BIT), i32(0)))
        with b.if_then(b.not_(b.icmp_unsigned("==", kind, i32(WRITE)))):
            # a second reader in the interval marks the entry as read by several threads
            again = b.icmp_unsigned("==", v[R_EPOCH], epoch)
            other_reader = b.and_(again, b.icmp_unsigned("!=", b.and_(v[R_TID], i32(0xFFFF)), t))
            several = b.and_(v[R_TID], i32(SEVERAL_BIT))
            several = b.select(again, b.or_(several, b.select(other_reader, i32(SEVERAL_BIT), i32(0))), i32(0))
            for k, value in ((R_EPOCH, epoch), (R_WARPS, warps), (R_TID, b.or_(me, several)), (R_SITE, site)):
                b.store(value, field(k))
        with b.if_then(writes):
            for k, value in ((W_EPOCH, epoch), (W_WARPS, warps), (W_TID, me), (W_SITE, site)):
                b.store(value, field(k))
    b.ret_void()


@_made_once(HAZARD, ir.FunctionType(ir.VoidType(), [PTR, I64, I32, I32, I32, I32] + [I32] * 6))
def _hazard_fn(fn):
    """void hazard(i8* launch, i64 offset, i32 other thread, i32 site, i32 earlier site,
    i32 what, i32 tid x y z, i32 ctaid x y z): one entry in the launch's record of failed
    checks (abi.CHECK_ENTRY: `size` holds the other thread, `other` the earlier access's
    site). The launch does not fail."""
    fn.attributes.add("noinline")
    fn.attributes.add("cold")
    launch, offset, other, site, earlier, what = fn.args[:6]
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    log = b.inttoptr(load_field(b, launch, abi.LAUNCH["check_log"], I64), PTR)
    with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(log, I64), i64(0))):
        index = b.atomic_rmw("add", b.bitcast(log, I64.as_pointer()), i64(1), "monotonic")
        with b.if_then(b.icmp_unsigned("<", index, load_field(b, log, 8, I64))):
            entry = b.gep(log, [b.add(i64(abi.CHECK_LOG_HEADER), b.mul(index, i64(abi.CHECK_ENTRY_BYTES)))])
            values = [("address", offset), ("size", other), ("site", site), ("what", what), ("other", earlier)] + \
                list(zip(("tid_x", "tid_y", "tid_z", "ctaid_x", "ctaid_y", "ctaid_z"), fn.args[6:]))
            for name, v in values:
                b.store(v, field_ptr(b, entry, abi.CHECK_ENTRY[name], v.type))
    b.ret_void()


memcheck.AFTER_BOUNDS["racecheck"] = track
