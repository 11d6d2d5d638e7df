"""Small llvmlite conveniences: counted loops, field access at byte offsets, intrinsics."""
from __future__ import annotations

import functools
import gc
import os
from contextlib import contextmanager

from llvmlite import ir

from . import abi
from .types import I1, I32, I64, llvm_width


def collection_paused(fn):
    """`fn` with Python's cyclic garbage collector paused while it runs. Building LLVM IR makes
    hundreds of thousands of llvmlite objects that all stay alive until the module is
    printed, and each collection of the older generations walks all of them again: the
    collector took half of a large kernel's lowering time. Garbage made meanwhile is
    collected once the collector runs again (a caller that paused it itself keeps it so)."""
    @functools.wraps(fn)
    def paused(*args, **kwargs):
        was = gc.isenabled()
        gc.disable()
        try:
            return fn(*args, **kwargs)
        finally:
            if was:
                gc.enable()
    return paused


@functools.lru_cache(maxsize=4096)
def vector_constant(elem: ir.Type, values: tuple) -> ir.Constant:
    """The constant vector of `values` (Python numbers) of element type `elem`, made once: llvmlite
    wraps every element of a vector constant in an object of its own, and the vector code
    asks for the same lane patterns (0, 1, 2, ...; lane ^ 2^k) thousands of times in a large
    kernel. A constant has no parent, so one object may be used anywhere."""
    return ir.Constant(ir.VectorType(elem, len(values)), list(values))


def masked_gather(b: ir.IRBuilder, addrs: ir.Value, elem: ir.Type, align: int, mask: ir.Value) -> ir.Value:
    """The elements of type `elem` at i64 vector `addrs` where `mask` holds (the others
    undefined; none read): one llvm.masked.gather."""
    if narrow_gathers_as_words(elem):
        return _narrow_gather(b, addrs, elem, mask)
    lanes = addrs.type.count
    vec = ir.VectorType(elem, lanes)
    ptrs = b.inttoptr(addrs, ir.VectorType(elem.as_pointer(), lanes))
    fn = declare(b.module, f"llvm.masked.gather.v{lanes}{intrinsic_suffix(elem)}.v{lanes}p0", vec,
                 [ptrs.type, ir.IntType(32), mask.type, vec])
    return b.call(fn, [ptrs, ir.Constant(ir.IntType(32), align), mask, ir.Constant(vec, None)])


def _narrow_gather(b: ir.IRBuilder, addrs: ir.Value, elem: ir.IntType, mask: ir.Value) -> ir.Value:
    """A gather of bytes or 16-bit elements as one of the 32-bit words holding them, each
    shifted down: x86 gathers nothing narrower than 32 bits, and LLVM made such a gather a
    branch, an address taken out of the vector and an insert per lane (cub's radix ranking
    keeps its digit counters in u16: a fifth of a radix sort's time)."""
    starts, shifts = words_holding(b, addrs, elem.width)
    words = masked_gather(b, starts, I32, 1, mask)
    return b.trunc(b.lshr(words, shifts), ir.VectorType(elem, addrs.type.count))


def words_holding(b: ir.IRBuilder, addrs: ir.Value, bits: int):
    """For narrow elements (`bits` 8 or 16) at i64 vector `addrs`: where the 32-bit word
    holding each starts, and how far up (in bits, i32) the element lies in it. The word is
    the element's aligned one, or for a 16-bit element that crosses one, the word ending
    with it: always within the element's own pages, so reading it faults nowhere reading
    the element would not."""
    lanes = addrs.type.count
    starts = b.and_(addrs, vector_constant(I64, (-4,) * lanes))
    if bits == 16:
        three = vector_constant(I64, (3,) * lanes)
        crossing = b.icmp_unsigned("==", b.and_(addrs, three), three)
        starts = b.select(crossing, b.sub(addrs, vector_constant(I64, (1,) * lanes)), starts)
    shifts = b.shl(b.trunc(b.sub(addrs, starts), ir.VectorType(I32, lanes)), vector_constant(I32, (3,) * lanes))
    return starts, shifts


def narrow_gathers_as_words(elem: ir.Type) -> bool:
    """Whether a gather of `elem` is made as one of 32-bit words (_narrow_gather)."""
    return isinstance(elem, ir.IntType) and elem.width in (8, 16) and _host_gathers_fast()


@functools.lru_cache(maxsize=1)
def _host_gathers_fast() -> bool:
    """Whether this CPU gathers 32-bit elements in one instruction (AVX2 and later)."""
    from llvmlite import binding as llvm
    return bool(llvm.get_host_cpu_features().get("avx2", False))


def masked_load(b: ir.IRBuilder, address: ir.Value, vec: ir.VectorType, align: int, mask: ir.Value) -> ir.Value:
    """The elements of vector type `vec` from i64 `address` where `mask` holds (the others
    undefined): one llvm.masked.load, skipped where no lane is on (_where_some_lane). Where
    masked loads are slow (masked_loads_slow) and the span lies in one page, a plain load:
    some lane on reads in that page, so the page is there wherever that lane's own read
    would find it, and what the others read is thrown away."""
    fn = declare(b.module, f"llvm.masked.load.v{vec.count}{intrinsic_suffix(vec.element)}.p0", vec,
                 [vec.as_pointer(), I32, mask.type, vec])
    ptr = b.inttoptr(address, vec.as_pointer())

    def masked():
        return b.call(fn, [ptr, ir.Constant(I32, align), mask, ir.Constant(vec, None)])

    def load():
        if isinstance(mask, ir.Constant) or not masked_loads_slow():
            return masked()
        nbytes = vec.count * llvm_width(vec.element) // 8
        one_page = b.icmp_unsigned("==", b.lshr(address, ir.Constant(I64, 12)),
                                   b.lshr(b.add(address, ir.Constant(I64, nbytes - 1)), ir.Constant(I64, 12)))
        return either(b, one_page, lambda: b.load(ptr, align=align), masked)
    return _where_some_lane(b, mask, load, ir.Constant(vec, None))


def masked_store(b: ir.IRBuilder, value: ir.Value, address: ir.Value, align: int, mask: ir.Value) -> None:
    """Vector `value`'s elements to i64 `address` where `mask` holds: one llvm.masked.store
    (or, for a constant mask where masked stores are slow, a plain store per lane), skipped
    where no lane is on (_where_some_lane)."""
    ptr = b.inttoptr(address, value.type.as_pointer())
    _where_some_lane(b, mask, lambda: _masked_store_call(b, value, ptr, align, mask), None)


def _masked_store_call(b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, align: int, mask: ir.Value) -> None:
    vec = value.type
    lanes = _constant_lanes(mask)
    if lanes is not None and masked_stores_slow():
        # a fixed mask (every k-th element of an interleaved access): a plain store per lane
        # costs less there than the masked stores' several (scan_blelloch's out[2t], out[2t+1])
        first = b.bitcast(ptr, vec.element.as_pointer())
        for lane in lanes:
            b.store(b.extract_element(value, i32(lane)), b.gep(first, [i32(lane)]), align=align)
        return
    chunk = STORE_CHUNK_BYTES * 8 // llvm_width(vec.element)
    if masked_stores_slow() and vec.count > chunk and vec.count % chunk == 0:
        _chunked_masked_store(b, value, ptr, align, mask, chunk)
        return
    fn = declare(b.module, f"llvm.masked.store.v{vec.count}{intrinsic_suffix(vec.element)}.p0", ir.VoidType(),
                 [vec, vec.as_pointer(), I32, mask.type])
    b.call(fn, [value, ptr, ir.Constant(I32, align), mask])


STORE_CHUNK_BYTES = 32          # AVX's vector: one vmaskmovps


def _chunked_masked_store(b: ir.IRBuilder, value: ir.Value, ptr: ir.Value, align: int, mask: ir.Value,
                          chunk: int) -> None:
    """A masked store of a vector wider than the CPU's, where masked stores are slow, as its
    parts of `chunk` lanes: a plain store where every lane of a part is on, none where none
    is, a masked store of the part otherwise. LLVM splits the wide store into such parts
    anyway, each a vmaskmovps (~5.5 ns on a Zen 1 against ~0.5 for a plain one), whatever
    its lanes: a warp's half (bitonic sort's partners 16 apart), a lane's part (`if (lane ==
    0)`) or a tail's whole parts were as slow as the lanes all on."""
    vec = value.type
    part = ir.VectorType(vec.element, chunk)
    part_mask = ir.VectorType(I1, chunk)
    bits = ir.IntType(chunk)
    fn = declare(b.module, f"llvm.masked.store.v{chunk}{intrinsic_suffix(vec.element)}.p0", ir.VoidType(),
                 [part, part.as_pointer(), I32, part_mask])
    first = b.bitcast(ptr, vec.element.as_pointer())
    for start in range(0, vec.count, chunk):
        pick = ir.Constant(ir.VectorType(I32, chunk), [start + k for k in range(chunk)])
        m = b.shuffle_vector(mask, ir.Constant(mask.type, None), pick)
        v = b.shuffle_vector(value, ir.Constant(vec, None), pick)
        at = b.bitcast(b.gep(first, [i32(start)]), part.as_pointer())
        on = b.bitcast(m, bits)
        with b.if_then(b.icmp_unsigned("!=", on, ir.Constant(bits, 0))):
            every = b.icmp_unsigned("==", on, ir.Constant(bits, (1 << chunk) - 1))
            with b.if_else(every) as (whole, some):
                with whole:
                    b.store(v, at, align=align)
                with some:
                    b.call(fn, [v, at, ir.Constant(I32, align), m])


def _constant_lanes(mask: ir.Value):
    """The lanes a constant <n x i1> mask holds, or None where it is not a constant."""
    if not isinstance(mask, ir.Constant) or not isinstance(mask.constant, (list, tuple)):
        return None
    return [i for i, bit in enumerate(mask.constant) if (bit.constant if isinstance(bit, ir.Constant) else bit)]


def private_store(b: ir.IRBuilder, value: ir.Value, address: ir.Value, align: int, mask: ir.Value,
                  inside: ir.Value) -> None:
    """masked_store to memory no other CPU thread writes meanwhile (a block's shared memory,
    which only the worker running the block touches): where i1 `inside` says the whole span
    lies in that memory and the CPU's masked stores are slow (masked_stores_slow), a plain
    load of the span, a select and a plain store, which give the lanes off the mask their own
    values back; else one masked store. Skipped where no lane is on."""
    if not masked_stores_slow():
        return masked_store(b, value, address, align, mask)
    ptr = b.inttoptr(address, value.type.as_pointer())

    def blended():
        b.store(b.select(mask, value, volatile_load(b, ptr, align)), ptr, align=align)

    def store():
        either(b, inside, blended, lambda: _masked_store_call(b, value, ptr, align, mask))
    _where_some_lane(b, mask, store, None)


def span_inside(b: ir.IRBuilder, address: ir.Value, nbytes, lo: ir.Value, hi: ir.Value) -> ir.Value:
    """i1: the `nbytes` (an int or an i64) from i64 `address` lie in [lo, hi). Measured as the
    room left below `hi`, not by `address + nbytes`, which wraps past 2**64 to a small number."""
    within = b.and_(b.icmp_unsigned(">=", address, lo), b.icmp_unsigned("<=", address, hi))
    n = i64(nbytes) if isinstance(nbytes, int) else nbytes
    return b.and_(within, b.icmp_unsigned(">=", b.sub(hi, address), n))


class _VolatileLoad(ir.instructions.LoadInstr):
    def descr(self, buf):
        super().descr(buf)
        buf[-1] = buf[-1].replace("load ", "load volatile ", 1)


def volatile_load(b: ir.IRBuilder, ptr: ir.Value, align: int) -> ir.Value:
    """A load LLVM keeps as it is (llvmlite's builder makes no volatile loads). Used where a
    plain load must not be folded away: LLVM's x86 back end turns `store (select m, v, load
    p), p` back into the masked store that private_store avoids."""
    load = _VolatileLoad(b.block, ptr)
    load.align = align
    b._insert(load)
    return load


def masked_loads_slow() -> bool:
    """Whether this CPU's vector loads under a mask cost several plain ones: AVX's vmaskmovps
    on AMD's before Zen 4, as its stores (a C loop on a Zen 1: 5-8 ns for a 32-byte load
    whose lines are in L1, 0.45 for a plain one). ANYCUDA_MASKED_LOADS=plain (slow) or
    =masked chooses either way (tests, comparisons)."""
    return _asked_or_host("ANYCUDA_MASKED_LOADS", "plain")


def masked_stores_slow() -> bool:
    """Whether this CPU's vector stores under a mask cost several plain ones: AMD's before Zen 4
    make AVX's vmaskmovps in microcode, ~7 ns for 32 bytes on Zen 3 where a load, a blend and a
    store take ~1.5 (a C loop; such stores took a quarter of a shared-memory tree reduction's
    block program there); without AVX (NEON, SSE) LLVM makes a branch per lane. AVX-512's
    masked stores, and Intel's AVX ones, cost about what plain ones do.
    ANYCUDA_MASKED_STORES=blend (slow) or =masked chooses either way (tests, comparisons)."""
    return _asked_or_host("ANYCUDA_MASKED_STORES", "blend")


def _asked_or_host(variable: str, slow: str) -> bool:
    """Whether masked accesses are to be treated as slow: as environment `variable` asks (`slow`
    or "masked"), else as this CPU's masked stores are (_host_masked_stores_slow)."""
    asked = os.environ.get(variable, "").strip().lower()
    if asked in (slow, "masked"):
        return asked == slow
    return _host_masked_stores_slow()


@functools.lru_cache(maxsize=1)
def _host_masked_stores_slow() -> bool:
    from llvmlite import binding as llvm
    features = llvm.get_host_cpu_features()
    if features.get("avx512f", False):
        return False
    if features.get("avx", False):
        return llvm.get_host_cpu_name().startswith(("znver", "bdver", "btver"))
    return True


def _where_some_lane(b: ir.IRBuilder, mask: ir.Value, access, otherwise):
    """access() where some lane of `mask` is on, else `otherwise`. A masked load or store
    whose lanes are all off still looks at its span's pages: where one is not present (a
    page never touched, the guard after a worker's memory) or, for a store, not writable,
    the CPU takes a microcode assist of ~110 ns (Zen 4, a C loop of vmovdqu32 with mask 0)
    where it would take 0.6. A block program's warps that a branch leaves idle did that on
    every such access: scan_hillis_steele's steps 64 and 256 elements back from a window
    that follows an untouched page, 96 -> 18 ms on one worker. (Gathers and scatters look at
    their lanes' addresses only: 5 ns with mask 0 whatever the page.)"""
    if isinstance(mask, ir.Constant):
        return access()
    return either(b, some_lane(b, mask), access, lambda: otherwise)


def some_lane(b: ir.IRBuilder, mask: ir.Value) -> ir.Value:
    """i1: some lane of the <lanes x i1> `mask` is on."""
    bits = b.bitcast(mask, ir.IntType(mask.type.count))
    return b.icmp_unsigned("!=", bits, ir.Constant(bits.type, 0))


def either(b: ir.IRBuilder, cond: ir.Value, then, otherwise):
    """then() where i1 `cond` holds, else otherwise(), each made when called: the value they
    give (a phi of the two), or None where `then` gives none (a store)."""
    with b.if_else(cond) as (yes, no):
        with yes:
            x = then()
            then_block = b.block
        with no:
            y = otherwise()
            else_block = b.block
    if x is None:
        return None
    phi = b.phi(x.type)
    phi.add_incoming(x, then_block)
    phi.add_incoming(y, else_block)
    return phi


# ANYCUDA_PERF_MAP=stretches: a marker instruction, `nopl MARK_BASE+n(%rax)` (0F 1F 80 and the
# 32-bit displacement), at the start of each stretch n of a block program, which the perf map
# (compiler/build/perfmap.py) names as a function of its own: where a kernel's time goes,
# stretch by stretch, in `perf report`
MARK_BASE = 0x7770000
MARK_OPCODE = b"\x0f\x1f\x80"


def stretch_marks() -> bool:
    return os.environ.get("ANYCUDA_PERF_MAP", "").strip().lower() == "stretches"


def mark_stretch(b: ir.IRBuilder, n: int) -> None:
    """Where stretch_marks(): the marker of stretch n here (a no-op the CPU skips)."""
    if stretch_marks():
        b.asm(ir.FunctionType(ir.VoidType(), []), f"nopl {MARK_BASE + n}(%rax)", "", [], True)


# A loop's round that steps this many bytes or more (a grid's row, a plane) reaches a new page
# each round: no hardware prefetcher follows it, and ahead of the loop's last round lies past its
# array, often where no page is (block programs' and warp regions' round prefetches)
FAR_STEP = 4096


def steps_far(b: ir.IRBuilder, step: ir.Value) -> ir.Value:
    """i1: |i64 step| >= FAR_STEP."""
    return b.icmp_unsigned(">=", b.add(step, ir.Constant(I64, FAR_STEP - 1)), ir.Constant(I64, 2 * FAR_STEP - 1))


def prefetch_into_l2(b: ir.IRBuilder, address: ir.Value, offsets, write=False) -> None:
    """A data prefetch into L2 (locality 2) of each byte offset in `offsets` from i64 `address`.
    Into L1 (locality 3), each prefetch held one of the core's few L1 miss buffers for a DRAM
    latency: reduce 4.3 -> 3.4 ms with L2 (a C model of its warps' grid-stride loop: 4.1 ->
    3.2 ms)."""
    ptr = ir.IntType(8).as_pointer()
    fn = declare(b.module, "llvm.prefetch.p0", ir.VoidType(), [ptr, I32, I32, I32])
    for offset in offsets:
        b.call(fn, [b.inttoptr(b.add(address, ir.Constant(I64, offset)), ptr), ir.Constant(I32, int(write)),
                    ir.Constant(I32, 2), ir.Constant(I32, 1)])


def declare(module: ir.Module, name: str, ret: ir.Type, args: list, var_arg=False) -> ir.Function:
    """The function `name` in `module`, declared on first use."""
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, ir.FunctionType(ret, args, var_arg=var_arg), name=name)
    return fn


def in_memory(b: ir.IRBuilder, ptr: ir.Value) -> ir.Value:
    """`ptr`, a stack array that LLVM must keep in memory: its address goes into an empty asm
    statement, so SROA does not make it a vector. (A warp's matrices of 256-512 elements
    written element by element at constant places became chains of as many insertelements,
    and instcombine took 7 s over one product, warp_product's m32n8k16.) Costs no instruction."""
    asm = ir.InlineAsm(ir.FunctionType(ir.VoidType(), [ptr.type]), "", "r,~{memory}", side_effect=True)
    b.call(asm, [ptr])
    return ptr


def internal_function(module: ir.Module, name: str, function_type: ir.FunctionType, emit) -> ir.Function:
    """The internal function `name` of `module`, its body emitted by `emit(fn)` at first use."""
    fn = module.globals.get(name)
    if fn is None:
        fn = ir.Function(module, function_type, name=name)
        fn.linkage = "internal"
        emit(fn)
    return fn


def intrinsic_suffix(elem: ir.Type) -> str:
    """The suffix that names an overloaded LLVM intrinsic's element type: i32, f32, f64..."""
    return f"i{elem.width}" if isinstance(elem, ir.IntType) else {"float": "f32", "double": "f64"}[str(elem)]


def intrinsic(b: ir.IRBuilder, name: str, ret: ir.Type, args: list) -> ir.Value:
    fn = declare(b.module, name, ret, [a.type for a in args])
    return b.call(fn, args)


@contextmanager
def for_range(b: ir.IRBuilder, start: ir.Value, stop: ir.Value, name="i"):
    """`for (i = start; i < stop; i++)` (signed compare); yields i inside the body."""
    with _counted_loop(b, start, stop, name, None) as (i, _):
        yield i


@contextmanager
def for_range_counting(b: ir.IRBuilder, start: ir.Value, stop: ir.Value, count_from: ir.Value, name="i"):
    """for_range with a second counter that starts at `count_from` and steps by one with i;
    yields (i, counter). A counter that is a loop phi is a vector induction to the vectoriser,
    where count_from + i computed in the body becomes eight scalars gathered into a vector."""
    with _counted_loop(b, start, stop, name, count_from) as (i, c):
        yield i, c


def upper_bound(b: ir.IRBuilder, records: ir.Value, count: ir.Value, key: ir.Value, stride: int) -> ir.Value:
    """How many of the `count` records at i64* `records` (each `stride` u64, sorted by their
    first) start at or before `key`, found by bisection; the builder is left after the search."""
    entry = b.block
    loop, probe, done = (b.append_basic_block(n) for n in ("bisect", "bisect.probe", "bisect.done"))
    b.branch(loop)
    # invariant: every record before `lo` starts at or before `key`; none from `hi` on does
    b.position_at_end(loop)
    lo, hi = b.phi(I64, "lo"), b.phi(I64, "hi")
    lo.add_incoming(i64(0), entry)
    hi.add_incoming(count, entry)
    b.cbranch(b.icmp_unsigned("<", lo, hi), probe, done)
    b.position_at_end(probe)
    mid = b.lshr(b.add(lo, hi), i64(1))
    starts_before = b.icmp_unsigned("<=", b.load(b.gep(records, [b.mul(mid, i64(stride))])), key)
    lo.add_incoming(b.select(starts_before, b.add(mid, i64(1)), lo), probe)
    hi.add_incoming(b.select(starts_before, hi, mid), probe)
    b.branch(loop)
    b.position_at_end(done)
    return lo


def _loop_blocks(b, name, suffixes):
    """(the block before, head, body, end) of a new loop, the builder at the head's start."""
    pre = b.block
    head, body, end = (b.append_basic_block(name + suffix) for suffix in suffixes)
    b.branch(head)
    b.position_at_end(head)
    return pre, head, body, end


@contextmanager
def _counted_loop(b, start, stop, name, count_from):
    pre, head, body, end = _loop_blocks(b, name, (".head", ".body", ".end"))
    counters = [b.phi(start.type, name=name)]
    if count_from is not None:
        counters.append(b.phi(count_from.type, name=name + ".count"))
    for phi, first in zip(counters, (start, count_from)):
        phi.add_incoming(first, pre)
    b.cbranch(b.icmp_signed("<", counters[0], stop), body, end)
    b.position_at_end(body)
    yield counters[0], (counters[1] if count_from is not None else None)
    latch = b.block
    for phi in counters:
        phi.add_incoming(b.add(phi, ir.Constant(phi.type, 1)), latch)
    b.branch(head)
    b.position_at_end(end)


@contextmanager
def for_each_set_bit(b: ir.IRBuilder, bits: ir.Value, name="bit"):
    """A loop over the set bits of the integer `bits`, lowest first; yields the bit's index
    (an i32): the few lanes of a sparse mask, each once, with no test for the others."""
    pre, head, body, end = _loop_blocks(b, name, (".next", ".do", ".done"))
    left = b.phi(bits.type, name=name + ".left")
    left.add_incoming(bits, pre)
    b.cbranch(b.icmp_unsigned("!=", left, ir.Constant(bits.type, 0)), body, end)
    b.position_at_end(body)
    index = intrinsic(b, f"llvm.cttz.i{bits.type.width}", bits.type, [left, ir.Constant(I1, 1)])
    yield b.zext(index, I32) if bits.type.width < 32 else b.trunc(index, I32) if bits.type.width > 32 else index
    left.add_incoming(b.and_(left, b.sub(left, ir.Constant(bits.type, 1))), b.block)
    set_loop_hints(b.module, b.branch(head), {"llvm.loop.unroll.disable": None})
    b.position_at_end(end)


@contextmanager
def at_function_start(b: ir.IRBuilder):
    """The builder at the start of its function's entry block, then back where it was: for
    stack slots and values made once per call, not once per loop iteration."""
    entry = b.function.entry_basic_block
    with b.goto_block(entry):
        b.position_at_start(entry)
        yield


def split_index(b: ir.IRBuilder, linear: ir.Value, nx: ir.Value, ny: ir.Value) -> tuple:
    """(x, y, z) of an x-fastest linear index in a box nx wide and ny high: a thread's in its
    block, a block's in its grid. Integers, or vectors of them alike."""
    row = b.udiv(linear, nx)
    return b.urem(linear, nx), b.urem(row, ny), b.udiv(row, ny)


def field_ptr(b: ir.IRBuilder, base: ir.Value, offset, typ: ir.Type) -> ir.Value:
    """Pointer to a `typ` at `base + offset` bytes (base is an i8*)."""
    if isinstance(offset, int):
        offset = ir.Constant(I64, offset)
    p = b.gep(base, [offset])
    return b.bitcast(p, typ.as_pointer())


def load_field(b, base, offset, typ):
    return b.load(field_ptr(b, base, offset, typ))


# Every value dynamic_shared_start can take is below this: the static part rounded up to 16
_DYNAMIC_SHARED_START_MASK = (1 << (abi.STATIC_SHARED_BYTES + 15).bit_length()) - 1


def dynamic_shared_start(b, total, dyn) -> ir.Value:
    """i64: where a block's dynamic shared memory starts in its window, from the launch's
    shared_total and dyn_shared (i32): their difference, masked to the bits it can have. The
    mask changes nothing at run time; it tells LLVM the start is small, so that a lane's
    32-bit shared address made from it (`sdata + 4 * tid`) cannot wrap, and the checks for
    a wrap and the gathers behind them fold away (a shared tree reduction over `extern
    __shared__` memory: half its block program was those)."""
    start = b.sub(b.zext(total, I64), b.zext(dyn, I64))
    return b.and_(start, ir.Constant(I64, _DYNAMIC_SHARED_START_MASK))


def load_invariant(b, ptr, align=None):
    """A load from memory that stays as it is while the code runs (a launch record's shape,
    its parameters): LLVM may hoist it out of loops whose stores it cannot tell apart from
    that memory."""
    v = b.load(ptr, align=align)
    v.set_metadata("invariant.load", b.module.add_metadata([]))
    return v


def load_invariant_field(b, base, offset, typ):
    return load_invariant(b, field_ptr(b, base, offset, typ))


def store_field(b, base, offset, value):
    b.store(value, field_ptr(b, base, offset, value.type))


class _AccessGroup(ir.values.MDValue):
    """A distinct empty metadata node: an LLVM access group (llvmlite spells only uniqued
    nodes, and an access group must be distinct)."""

    def descr(self, buf):
        buf += ("distinct !{}", "\n")


def thread_parallel_group(module: ir.Module) -> ir.MDValue:
    """The module's access group of the memory accesses that one thread of a block makes
    and no other thread of the block depends on between two of its stops: the kernel's own
    loads and stores (CUDA orders threads only at barriers, atomics and fences; a data race
    may see any order, and a vector of threads running one instruction together is what a
    warp does) and a thread's own slots in the per-thread arrays. A loop over a block's
    threads that names the group (rounds.each_thread) tells the vectoriser that those
    accesses carry no dependence from one thread to the next, which it could not prove for
    gathered or data-dependent addresses; accesses outside the group keep it from assuming
    anything."""
    group = getattr(module, "_anycuda_thread_group", None)
    if group is None:
        group = _AccessGroup(module, [], name=str(len(module.metadata)))
        module._anycuda_thread_group = group
    return group


def in_thread_group(module: ir.Module, access: ir.Instruction) -> ir.Instruction:
    """Put a load or store into the module's thread_parallel_group; returns it."""
    access.set_metadata("llvm.access.group", thread_parallel_group(module))
    return access


def alias_scopes(module: ir.Module, name: str) -> ir.MDValue:
    """The module's alias-scope list of one scope `name` (in a domain of its own), for
    `!alias.scope` and `!noalias` metadata: made once per module and name."""
    made = module.__dict__.setdefault("_anycuda_alias_scopes", {})
    if name not in made:
        domain = module.add_metadata([name + " domain"])
        made[name] = module.add_metadata([module.add_metadata([name, domain])])
    return made[name]


# the alias scope of a block's frame header (lowering/function.py, BLOCK_FIELDS): written by the
# code that runs a block before its threads run, never reached through the kernel's own pointers
HEADER_SCOPE = "anycuda.header"


def in_header_scope(module: ir.Module, load: ir.Instruction) -> ir.Instruction:
    """Mark a load of a frame header field; returns it."""
    load.set_metadata("alias.scope", alias_scopes(module, HEADER_SCOPE))
    return load


def apart_from_header(module: ir.Module, access: ir.Instruction) -> ir.Instruction:
    """Mark a load or store of the kernel's memory as never touching a frame header, so
    that header loads may leave loops that store to memory; returns it. Said by metadata
    rather than a noalias argument of the step function: inlined into a loop over threads,
    a noalias argument leaves a noalias.scope.decl call in the loop's body, which no access
    group covers, and the vectoriser then tests addresses at run time in every row of a
    block's threads (a 5x5 convolution of 16 x 16 blocks spent a third of its time there)."""
    access.set_metadata("noalias", alias_scopes(module, HEADER_SCOPE))
    return access


def i32(v) -> ir.Constant:
    return ir.Constant(I32, v)


def i64(v) -> ir.Constant:
    return ir.Constant(I64, v)


def set_loop_hints(module: ir.Module, latch: ir.Instruction, hints: dict) -> None:
    """Attach `!llvm.loop` hints to a loop's back-edge branch, e.g.
    {"llvm.loop.unroll.disable": None, "llvm.loop.vectorize.enable": False}: a loop ID is a
    metadata node whose first operand is itself (llvmlite cannot spell that, so the node's
    operands are set after it exists)."""
    props = []
    for key, value in hints.items():
        ops = [ir.MetaDataString(module, key)]
        if isinstance(value, bool):
            ops.append(ir.Constant(ir.IntType(1), int(value)))
        elif isinstance(value, ir.values.MDValue):
            ops.append(value)
        elif value is not None:
            ops.append(ir.Constant(I32, value))
        props.append(module.add_metadata(ops))
    loop_id = module.add_metadata([ir.MetaDataString(module, f"anycuda.loop.{len(module.metadata)}")])
    loop_id.operands = (loop_id, *props)
    latch.set_metadata("llvm.loop", loop_id)


def register_address(b: ir.IRBuilder, value: ir.Value, offset: int) -> ir.Value:
    """The i64 address (or vector of them) of the memory operand `[reg+offset]` whose register
    holds `value`: the sum is taken in the register's own width and then zero-extended, as a
    GPU does. A 32-bit address wraps at 2^32: nvcc keeps `tile - 8` in a register and reads
    `[r+8]` (an unrolled loop's shared-memory window); widened before the add, that read went
    4 GB past the window."""
    count = getattr(value.type, "count", None)
    elem = value.type.element if count else value.type
    if not isinstance(elem, ir.IntType):
        value = convert_bits(b, value, ir.IntType(llvm_width(elem)))
        elem = ir.IntType(llvm_width(elem))
    if offset:
        step = ir.Constant(elem, offset & ((1 << elem.width) - 1))
        value = b.add(value, ir.Constant(value.type, [step] * count) if count else step)
    return convert_bits(b, value, I64)


def convert_bits(b: ir.IRBuilder, v: ir.Value, to: ir.Type, signed=False) -> ir.Value:
    """Reinterpret or resize a register value as PTX's typed moves allow: same width is a
    bitcast; a narrower integer view truncates; a wider one extends (sign or zero). `to` is
    a scalar type; a vector (a warp's lanes, compiler/vector/warpruns.py) converts lane by lane."""
    count = getattr(v.type, "count", None)
    like = (lambda t: ir.VectorType(t, count)) if count else (lambda t: t)
    frm = v.type.element if count else v.type
    if frm == to:
        return v
    if frm == I1:
        return b.zext(v, like(to)) if isinstance(to, ir.IntType) else convert_bits(b, b.zext(v, like(I32)), to)
    if to == I1:
        iv = convert_bits(b, v, ir.IntType(llvm_width(frm)))
        return b.icmp_unsigned("!=", iv, ir.Constant(iv.type, None if count else 0))
    fw, tw = llvm_width(frm), llvm_width(to)
    if not isinstance(frm, ir.IntType):
        v = b.bitcast(v, like(ir.IntType(fw)))
    if fw > tw:
        v = b.trunc(v, like(ir.IntType(tw)))
    elif fw < tw:
        v = (b.sext if signed else b.zext)(v, like(ir.IntType(tw)))
    if not isinstance(to, ir.IntType):
        v = b.bitcast(v, like(to))
    return v
