"""Native code for a worker's memory: its blocks' frames and shared-memory windows, in a
mapping of the worker thread's own that ends at an inaccessible guard.

A worker's workspace came from aligned_alloc, in the process's heap: a kernel that indexed
its shared memory past the block's window (`extern __shared__` launched with too few
dynamic bytes, say) wrote over the allocator's records, and the process died later in
free ("double free or corruption"). Here the workspace ends where a GUARD-byte inaccessible
region begins, longer than any 32-bit shared-memory offset reaches: such a write faults, and the fault handler (faults.py) makes it the launch's
CUDA_ERROR_ILLEGAL_ADDRESS, as a GPU reports an out-of-range shared access.

`anycuda.worker_memory(bytes)` returns `bytes` of workspace, 64-byte aligned, ending at the
guard, or null where the mapping fails. Each thread keeps its mapping under a pthread key
(KEY, set by the runtime) for its later launches and makes a larger one only when a launch
needs more; the key's destructor, `anycuda.worker_memory_release`, unmaps it when the thread
ends. `anycuda.worker_memory(0)`, at a worker's end, gives back a mapping of more than KEPT
bytes (as malloc gives large blocks back to the system: a launch of big frames would
otherwise hold its pages on every worker thread for the process's life). A mapping starts with a header: its size, where its guard starts, and how many bytes
it holds before the guard (past the header).
"""
from __future__ import annotations

from llvmlite import ir

from ..irutil import declare, i32, i64
from ..types import I32, I64, PTR

GET = "anycuda.worker_memory"
RELEASE = "anycuda.worker_memory_release"
KEY = "anycuda.worker_memory_key"
GUARD = (4 << 30) + (64 << 10)  # inaccessible address space after a workspace: past any 32-bit
                                # shared-memory offset from a window in it (a 1 MiB guard was
                                # jumped by 4 KiB strides of 1,024 threads, fuzz_shared_window)
GRANULE = 1 << 16               # a mapping's usable size is a multiple of this
HEADER = 64
KEPT = 4 << 20                  # a thread keeps a mapping of at most this many bytes between launches
_SIZE, _END, _CAPACITY = 0, 8, 16       # the header's fields (u64)
_PROT_RW, _PROT_NONE = 3, 0
_MAP_PRIVATE_ANONYMOUS_NORESERVE = 0x02 | 0x20 | 0x4000       # Linux, x86-64 and AArch64 alike


def build_module() -> ir.Module:
    mod = ir.Module(name="anycuda_worker_memory")
    key = ir.GlobalVariable(mod, I64, name=KEY)
    key.initializer = i64(0)
    _emit_get(mod, key)
    _emit_release(mod)
    return mod


def _field(b, header, offset):
    return b.bitcast(b.gep(header, [i64(offset)]), I64.as_pointer())


def _emit_get(mod, key):
    getspecific = declare(mod, "pthread_getspecific", PTR, [I32])
    setspecific = declare(mod, "pthread_setspecific", I32, [I32, PTR])
    mmap = declare(mod, "mmap", PTR, [PTR, I64, I32, I32, I32, I64])
    mprotect = declare(mod, "mprotect", I32, [PTR, I64, I32])
    munmap = declare(mod, "munmap", I32, [PTR, I64])
    fn = ir.Function(mod, ir.FunctionType(PTR, [I64]), name=GET)
    (nbytes,) = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    k = b.trunc(b.load(key), I32)
    held = b.call(getspecific, [k])
    fresh = fn.append_basic_block("fresh")
    some = b.icmp_unsigned("!=", b.ptrtoint(held, I64), i64(0))
    with b.if_then(b.icmp_unsigned("==", nbytes, i64(0))):
        # the worker's end: a large mapping goes back (its header read only where there is one)
        with b.if_then(some):
            with b.if_then(b.icmp_unsigned(">", b.load(_field(b, held, _SIZE)), i64(KEPT + GUARD))):
                _give_back(b, held, k, munmap, setspecific)
        b.ret(ir.Constant(PTR, None))
    with b.if_then(some):
        big_enough = fn.append_basic_block("big.enough")
        smaller = fn.append_basic_block("smaller")
        b.cbranch(b.icmp_unsigned("<=", nbytes, b.load(_field(b, held, _CAPACITY))), big_enough, smaller)
        b.position_at_end(big_enough)
        b.ret(b.gep(held, [b.sub(b.load(_field(b, held, _END)), nbytes)]))
        b.position_at_end(smaller)
        _give_back(b, held, k, munmap, setspecific)
    b.branch(fresh)
    b.position_at_end(fresh)
    area = b.and_(b.add(nbytes, i64(HEADER + GRANULE - 1)), i64(~(GRANULE - 1)))
    total = b.add(area, i64(GUARD))
    # reserved inaccessible, the workspace opened afterwards: the system charges the open part
    # only (the guard is address space, not memory)
    p = b.call(mmap, [ir.Constant(PTR, None), total, i32(_PROT_NONE), i32(_MAP_PRIVATE_ANONYMOUS_NORESERVE),
                      i32(-1), i64(0)])
    failed = b.icmp_unsigned("==", b.ptrtoint(p, I64), i64(-1))
    with b.if_then(failed, likely=False):
        b.ret(ir.Constant(PTR, None))
    refused = b.icmp_signed("!=", b.call(mprotect, [p, area, i32(_PROT_RW)]), i32(0))
    with b.if_then(refused, likely=False):
        b.call(munmap, [p, total])
        b.ret(ir.Constant(PTR, None))
    b.store(total, _field(b, p, _SIZE))
    b.store(area, _field(b, p, _END))
    b.store(b.sub(area, i64(HEADER)), _field(b, p, _CAPACITY))
    b.call(setspecific, [k, p])
    b.ret(b.gep(p, [b.sub(area, nbytes)]))


def _give_back(b, held, k, munmap, setspecific):
    """The thread's mapping `held` unmapped and its key cleared."""
    b.call(munmap, [held, b.load(_field(b, held, _SIZE))])
    b.call(setspecific, [k, ir.Constant(PTR, None)])


def _emit_release(mod):
    munmap = declare(mod, "munmap", I32, [PTR, I64])
    fn = ir.Function(mod, ir.FunctionType(ir.VoidType(), [PTR]), name=RELEASE)
    (held,) = fn.args
    b = ir.IRBuilder(fn.append_basic_block("entry"))
    with b.if_then(b.icmp_unsigned("!=", b.ptrtoint(held, I64), i64(0))):
        b.call(munmap, [held, b.load(_field(b, held, _SIZE))])
    b.ret_void()
