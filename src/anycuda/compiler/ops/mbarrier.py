"""mbarrier objects (PTX ISA 9.7.13.15): init, inval, arrive, arrive_drop, expect_tx,
complete_tx, test_wait, try_wait, pending_count, and the wait a failed test becomes.

The object. An mbarrier is a 64-bit word in shared memory, opaque to the program, that holds
the four counts of the ISA's model: its current phase, the arrivals still pending in it, the
arrivals each phase expects, and the transaction count (tx-count, bytes of asynchronous
copies still to land). Here (WORD: field -> (first bit, bits)) pending and expected take 20
bits (the ISA's largest count is 2^20 - 1), tx-count 21 (it may go as low as -(2^20 - 1)),
the phase its last 3 bits (mod 8). A phase completes when an operation leaves pending at
zero and tx-count at zero: the phase advances, pending becomes expected again and tx-count
zero. The state token arrive returns is the word before its arrival: pending_count reads the
pending count from it and test_wait compares its phase with the current one (a token is
valid only for the current or the previous phase, which 3 bits of phase tell apart with room
to spare).

No atomics: a block's threads run on one CPU thread (simt/blockfunction.py), one after the
other between their stops, and the vector paths do not take these instructions
(compiler/vector/*: no allow-list names them), so a plain load and store of the word is
each operation at once. For the same reason program order is all the ordering the .release,
.acquire and .relaxed semantics ask, and .cta and .cluster scopes are the same (a cluster is
one CTA on anycuda: lowering/function.py, SPECIAL_ALIASES).

Waiting. nvcc's cuda::barrier::wait and cuda::pipeline spin in a loop of try_wait (test_wait
before sm_90) until the phase completes. On the CPU the thread that spins would spin for
ever: the threads that must arrive belong to its block and run on the same CPU thread, after
it. So in a kernel each test is followed by a wait that lets them run (with_waits):

    test p, [a], x  ;  @p bra DONE  ;  anycuda.mbarrier_wait [a]  ;  test p, [a], x  ;  DONE:

The wait is a suspension site (analysis/suspensions.py, kind `mbar_wait`): the thread stops
with the object's address and the word its test saw, and the scheduler runs it again when
that word changes or when nothing else of its block can run (simt/mbarrierwaits.py). The
second test then answers as the ISA's would after that time: true when the phase completed,
else false (try_wait's time limit ran out; test_wait never blocks, and how long a test takes
is not observable), and the program's loop tests again. This is the least invasive change:
the test stays an ordinary instruction, the wait is one more site like a barrier, and a
thread that passes its test at once never stops. A device function that tests an mbarrier is
inlined into its kernel as one holding a barrier (suspensions.has_suspensions); one that
cannot be (recursion) is refused at the test.

Errors: an object outside the block's shared memory or not 8-byte aligned ends the launch
with CUDA_ERROR_ILLEGAL_ADDRESS, as an access there would.
"""
from __future__ import annotations

import dataclasses

from llvmlite import ir

from ...ptx import ir as pir
from ...ptx.errors import UnsupportedPtx
from .. import abi
from ..analysis.suspensions import MBARRIER_TESTS, MBARRIER_WAIT
from ..irutil import field_ptr, i64
from ..types import I32, I64, space_of
from .table import handles

WORD = {"pending": (0, 20), "expected": (20, 20), "tx": (40, 21), "phase": (61, 3)}
MAX_COUNT = (1 << 20) - 1

# what each opcode's handler lowers: memory orderings, scopes, spaces and the type
_SPACES = "shared shared::cta shared::cluster"
_ARRIVE = f"release relaxed cta cluster {_SPACES} expect_tx b64"
_TX = f"relaxed cta cluster {_SPACES} b64"
_TEST = f"acquire relaxed cta cluster {_SPACES} parity b64"
# (their operand counts: table.OPERAND_COUNTS)


# ---------------------------------------------------------------- the word

def field(b, word, name):
    """One count of the object `word` (i64), tx-count signed."""
    first, bits = WORD[name]
    v = b.and_(b.lshr(word, i64(first)), i64((1 << bits) - 1))
    if name == "tx":
        v = b.ashr(b.shl(v, i64(64 - bits)), i64(64 - bits))
    return v


def pack(b, pending, expected, tx, phase):
    """The word holding these counts (each i64, kept to its field's bits)."""
    word = i64(0)
    for name, v in (("pending", pending), ("expected", expected), ("tx", tx), ("phase", phase)):
        first, bits = WORD[name]
        word = b.or_(word, b.shl(b.and_(v, i64((1 << bits) - 1)), i64(first)))
    return word


def update(b, word, arrivals=None, drop=False, tx_add=None):
    """The word after `arrivals` (i64) arrive (and leave every later phase, `drop`) and
    tx-count grows by `tx_add` (i64, negative for completed bytes); the phase completes when
    nothing is left pending."""
    pending, expected = field(b, word, "pending"), field(b, word, "expected")
    tx, phase = field(b, word, "tx"), field(b, word, "phase")
    if arrivals is not None:
        # more arrivals than are pending is undefined in the ISA: here they leave none pending
        pending = b.sub(pending, b.select(b.icmp_unsigned(">", arrivals, pending), pending, arrivals))
        if drop:
            expected = b.sub(expected, b.select(b.icmp_unsigned(">", arrivals, expected), expected, arrivals))
    if tx_add is not None:
        tx = b.add(tx, tx_add)
    done = b.and_(b.icmp_unsigned("==", pending, i64(0)), b.icmp_signed("==", tx, i64(0)))
    return b.select(done, pack(b, expected, expected, i64(0), b.add(phase, i64(1))),
                    pack(b, pending, expected, tx, phase))


def object_pointer(f, inst, op):
    """i64* of the mbarrier object that memory operand `op` names: a .shared address is an
    offset in the block's shared window, a generic one must lie in it; an object outside it
    or misaligned ends the launch (CUDA_ERROR_ILLEGAL_ADDRESS)."""
    b = f.b
    p = f.address(op, "shared" if space_of(inst) == "shared" else "")
    a = b.ptrtoint(p, I64)
    lo, hi = f.space_windows("shared")[0]
    bad = b.or_(b.icmp_unsigned("<", a, lo), b.icmp_unsigned(">", b.add(a, i64(8)), hi))
    bad = b.or_(bad, b.icmp_unsigned("!=", b.and_(a, i64(7)), i64(0)))
    with b.if_then(bad, likely=False):
        b.store(a, field_ptr(b, f.launch_ptr(), abi.LAUNCH["err_info"], I64))
        f.emit_trap(abi.LAUNCH_ERR_ILLEGAL_ADDRESS)
    return b.bitcast(p, I64.as_pointer())


def arrive_on(f, ptr, arrivals, drop=False, tx_add=None):
    """One arrive-on operation of `arrivals` (i64) on the object at `ptr`; returns the word
    before it (the state token)."""
    b = f.b
    old = b.load(ptr, align=8)
    b.store(update(b, old, arrivals, drop, tx_add), ptr, align=8)
    return old


def _count(f, op):
    """An i64 count operand (u32)."""
    return f.b.zext(f.read(op, "u32"), I64)


# ---------------------------------------------------------------- the instructions

@handles("mbarrier.init", mods=f"{_SPACES} b64")
def init(f, inst):
    b = f.b
    ptr = object_pointer(f, inst, inst.operands[0])
    count = b.and_(_count(f, inst.operands[1]), i64(MAX_COUNT))
    b.store(pack(b, count, count, i64(0), i64(0)), ptr, align=8)


@handles("mbarrier.inval", mods=f"{_SPACES} b64")
def inval(f, inst):
    """The object's memory may be used for other data after this: nothing to undo."""
    object_pointer(f, inst, inst.operands[0])


@handles("mbarrier.expect_tx", "mbarrier.complete_tx", mods=_TX)
def transaction(f, inst):
    """tx-count grows by the expected bytes, or falls by the bytes that completed."""
    b = f.b
    ptr = object_pointer(f, inst, inst.operands[0])
    n = _count(f, inst.operands[1])
    if inst.opcode == "mbarrier.complete_tx":
        n = b.neg(n)
    b.store(update(b, b.load(ptr, align=8), tx_add=n), ptr, align=8)


@handles("mbarrier.arrive", "mbarrier.arrive_drop", mods=_ARRIVE)
def arrive(f, inst):
    """`state, [a]{, count}`; with .expect_tx, `state, [a], txCount`: tx-count grows by
    txCount, then one arrival."""
    ops = inst.operands
    ptr = object_pointer(f, inst, ops[1])
    tx = None
    arrivals = i64(1)
    if "expect_tx" in inst.mods:
        if len(ops) != 3:
            raise f.error(f"'{inst.opcode}.expect_tx' takes a tx count")
        tx = _count(f, ops[2])
    elif len(ops) == 3:
        arrivals = _count(f, ops[2])
    old = arrive_on(f, ptr, arrivals, drop=inst.opcode == "mbarrier.arrive_drop", tx_add=tx)
    f.write(ops[0], old, "b64")


def _completed(f, inst, word):
    """i1: the phase that the test's third operand names has completed in `word`."""
    b = f.b
    phase = field(b, word, "phase")
    if "parity" in inst.mods:
        parity = b.zext(b.and_(f.read(inst.operands[2], "u32"), ir.Constant(I32, 1)), I64)
        return b.icmp_unsigned("!=", b.and_(phase, i64(1)), parity)
    token = f.read(inst.operands[2], "b64")
    return b.icmp_unsigned("!=", field(b, token, "phase"), phase)


@handles("mbarrier.test_wait", "mbarrier.try_wait", mods=_TEST)
def test(f, inst):
    """waitComplete: whether the phase of the state token (or of parity phaseParity) has
    completed; try_wait's suspend-time hint changes nothing here. In a kernel a wait follows
    a test that fails (with_waits)."""
    if not f.is_kernel:
        raise f.error(f"{inst.opcode} inside a device function that was not inlined is not supported",
                      UnsupportedPtx)
    b = f.b
    word = b.load(object_pointer(f, inst, inst.operands[1]), align=8)
    f.write(inst.operands[0], _completed(f, inst, word), "pred")


@handles("mbarrier.pending_count", mods="b64")
def pending_count(f, inst):
    """The pending arrivals of the phase a state token was taken in, before its arrival."""
    b = f.b
    f.write(inst.operands[0], b.trunc(field(b, f.read(inst.operands[1], "b64"), "pending"), I32), "u32")


def wait(f, inst):
    """The wait after a failed test (with_waits): the thread stops with its object's address
    and the word it saw, for simt/mbarrierwaits.py. It has no PTX spelling, and so no entry
    in the handler table: the lowering calls it as it makes a yield's site."""
    ptr = object_pointer(f, inst, inst.operands[0])
    b = f.b
    f.suspend("mbar_wait", {"op_a": b.ptrtoint(ptr, I64), "res": b.load(ptr, align=8)}, None)



# ---------------------------------------------------------------- the waits of a kernel

def with_waits(body: list) -> list:
    """`body` with a wait after each mbarrier test whose result is a register (module
    docstring): `test; @p bra DONE; wait; test; DONE:`, inside `@!g bra DONE` for a guarded
    test. O(n)."""
    if not any(isinstance(st, pir.Instruction) and st.opcode in MBARRIER_TESTS for st in body):
        return body
    out = []
    for pos, st in enumerate(body):
        if not (isinstance(st, pir.Instruction) and st.opcode in MBARRIER_TESTS and len(st.operands) >= 2
                and isinstance(st.operands[0], pir.Reg)):
            out.append(st)
            continue
        done = pir.Sym(f"$anycuda_mbarrier_tested{pos}")
        bra = lambda guard: pir.Instruction("bra", (), (done,), st.loc, guard=guard, text=st.text)
        # two instructions, not one twice: analyses may key on an instruction's identity
        test_ = lambda: dataclasses.replace(st, guard=None)
        if st.guard is not None:
            out.append(bra(pir.Guard(st.guard.reg, not st.guard.negated)))
        spaces = tuple(m for m in st.mods if m in _SPACES.split())
        wait_ = pir.Instruction(MBARRIER_WAIT, spaces, (st.operands[1],), st.loc, text=st.text)
        out += [test_(), bra(pir.Guard(st.operands[0])), wait_, test_(), pir.Label(done.name, st.loc)]
    return out

