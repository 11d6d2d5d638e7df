"""Threads that spin until another thread of their block writes a word: a wait in the loop.

    L:  ld.volatile.shared.u32 %r, [flag];      (or atom.cas %r, [lock], 0, 1;)
        setp.eq.u32 %p, %r, 0;
        @%p bra L;

On a GPU the warp that sets the flag runs beside the one that spins (independent thread
scheduling, Volta on). anycuda runs a block's threads one after another between their
suspensions, so the spinning thread never let the others run: the launch hung (a flag set by
warp 1 and awaited by warp 0, in the rounds and in a block program alike). Such a loop gets a
wait before its back branch, taken only when the thread goes round: the thread stops
watching the aligned 8-byte word that holds what it read, and the block function runs it
again when that word changes or when nothing else of the block can run, as it does a thread
after a failed mbarrier test (simt/mbarrierwaits.py). A spin on the block's shared memory
that no thread can end (a flag never set) is then a deadlock the launch reports, where a GPU
would hang; a spin on global or mapped memory, which the host or another block may write
at any time, spins on (letting its block's other threads run between its tests).

A spin loop here: code from its label to its back branch, entered at its label or (as nvcc
writes a loop it unrolled) at a label inside, whose branches inside go forward within it
(`if (flag != 0) break;` is a branch over the way out) or leave it (forward or backward past
it, `ret`, `exit`: a spin that counts its tests and gives up, `while (flag == 0) if (++n >
limit) return;`), and one of whose tests (a branch's guard) is computed in the loop from a
read that every turn makes at an address computed in that turn, a read another thread may
change between turns (through a device function too: those that make such reads are inlined
into their kernels, lowering/inline.py, and a value returned through a `.param` variable
counts as computed from the read):
- a load marked volatile, relaxed or acquire (or .cv: not cached), which a compiler may not
  hoist out of the loop, as it may a plain load;
- an atomic whose operands do not change in the loop (a test-and-set `atomicCAS(&lock, 0,
  1)` or `atomicExch(&lock, 1)`): a compare-and-swap loop that updates a value
  (`assumed = old`) retries with what it read and ends by itself, and keeps no wait.
A loop with more than one way out may end by itself (its count runs out) while the word it
reads stays the same: its wait is never called a deadlock, as a word outside the block's
shared memory is not.
Block programs leave a kernel with such a loop to the rounds (blockprograms.check_takes).
"""
from __future__ import annotations

from ...ptx import ir as pir
from ..analysis.dataflow import defs_uses
from ..analysis.memory import memory_address
from ..analysis.suspensions import SPIN_WAIT
from ..irutil import i64
from ..simt import mbarrierwaits
from ..types import I64

_FRESH_LOADS = frozenset(("volatile", "relaxed", "acquire", "cv"))
_SPACES = ("global", "shared", "local")       # the spaces a wait's address names (else generic)
_ENDS = "ends"              # a wait's mark: its loop has another way out (never a deadlock)


def spin_loops(body: list) -> dict:
    """{position of a spin loop's back branch: position of the read it waits on} (the module
    docstring). O(n + loops * their length)."""
    labels = {st.name: pos for pos, st in enumerate(body) if isinstance(st, pir.Label)}
    sources = _branch_sources(body)
    found = {}
    for back, st in enumerate(body):
        head = _back_branch_head(st, labels, back)
        if head is None or not _forward_inside(body, head, back, labels, sources):
            continue
        read = _awaited_read(body, head, back, labels, sources)
        if read is not None:
            found[back] = read
    return found


def _branch_sources(body) -> dict:
    """{label: positions of the branches to it}; a label a branch table names is reached from
    position -1 (anywhere)."""
    sources = {}
    for pos, st in enumerate(body):
        if isinstance(st, pir.BranchTargets):
            for name in st.targets:
                sources.setdefault(name, []).append(-1)
        elif _target(st) is not None:
            sources.setdefault(_target(st), []).append(pos)
    return sources


def _target(st):
    """The label a `bra` names, else None."""
    if isinstance(st, pir.Instruction) and st.opcode == "bra" and st.operands and isinstance(st.operands[0], pir.Sym):
        return st.operands[0].name
    return None


def _back_branch_head(st, labels, pos):
    """The position of the label `st` (at `pos`) branches back to, where it is such a branch."""
    head = labels.get(_target(st))
    return head if head is not None and head < pos else None


def _forward_inside(body, head, back, labels, sources) -> bool:
    """The branches inside the loop head..back go forward within it or leave it, and so do
    those to its labels from inside (the others enter it)."""
    for pos in range(head + 1, back):
        st = body[pos]
        if isinstance(st, pir.BranchTargets) or isinstance(st, pir.Instruction) and st.opcode in ("brx", "call"):
            return False
        if isinstance(st, pir.Label) and any(pos < q <= back for q in sources.get(st.name, ())):
            return False
        if isinstance(st, pir.Instruction) and st.opcode == "bra":
            target = labels.get(_target(st))
            if target is None or head <= target <= pos:
                return False
    return True


def _leaves(st, head, back, labels) -> bool:
    """Whether `st` (inside head..back) is a way out of the loop."""
    if not isinstance(st, pir.Instruction):
        return False
    if st.opcode in ("ret", "exit"):
        return True
    target = labels.get(_target(st))
    return target is not None and not head < target < back


def _ways_out(body, head, back, labels) -> int:
    """How many ways the loop head..back has out: its branches out, returns and exits, and a
    guarded back branch's fall-through."""
    return sum(_leaves(st, head, back, labels) for st in body[head + 1:back]) + (body[back].guard is not None)


def _awaited_read(body, head, back, labels, sources):
    """The position of the read in head..back that a branch's guard in the loop is computed
    from, that every turn makes (no branch before it jumps past it, no entry lies after it)
    and that another thread may change between turns, its address intact at the back branch;
    else None."""
    written, tests, skipped = {}, set(), set()
    for pos in range(head + 1, back + 1):
        st = body[pos]
        if isinstance(st, pir.Label) and any(not head < q < back for q in sources.get(st.name, ())):
            skipped.update(range(head + 1, pos))            # an entry: a first turn starts here
        if not isinstance(st, pir.Instruction):
            continue
        for r in defs_uses(st)[0]:
            written.setdefault(r, []).append(pos)
        if st.opcode in ("bra", "ret", "exit") and st.guard is not None:
            tests.add(st.guard.reg.name)
        target = labels.get(_target(st))
        if pos < back and target is not None and pos < target < back:
            skipped.update(range(pos + 1, target))
    wanted, found = tests, None
    for pos in range(back - 1, head, -1):           # what the tests are computed from, backwards
        st = body[pos]
        if not isinstance(st, pir.Instruction):
            continue
        defs, uses = _flow(st)
        if not wanted & set(defs):
            continue
        wanted |= set(uses)
        if (found is None and st.guard is None and pos not in skipped and _fresh_read(st, written, body)
                and _address_kept(st, pos, back, written)):
            found = pos
    return found


def _flow(st) -> tuple:
    """(defs, uses) of `st`, with a .param variable as a name of its own ("param:name"): a
    value read in an inlined function comes back to the loop's test through its return
    variable (st.param in the callee, ld.param after the call)."""
    defs, uses = defs_uses(st)
    if st.opcode in ("ld", "st") and "param" in st.mods:
        addr = memory_address(st)
        base = addr.base if isinstance(addr, pir.Addr) else addr
        if isinstance(base, pir.Sym):
            if st.opcode == "ld":
                uses = [*uses, "param:" + base.name]
            else:
                defs = [*defs, "param:" + base.name]
    return defs, uses


def reads_fresh(body: list) -> bool:
    """Whether a function makes a read another thread may change (a volatile, relaxed, acquire
    or .cv load, an atomic): lowering/inline.py inlines it into its kernels, so that a spin
    written around a call to it, or inside it, is seen here."""
    return any(isinstance(st, pir.Instruction) and (st.opcode == "atom" or _fresh_load(st)) for st in body)


def _fresh_load(st) -> bool:
    """A load a compiler may not hoist out of a loop (volatile, relaxed, acquire, .cv)."""
    return st.opcode in ("ld", "ldu") and bool(_FRESH_LOADS & set(st.mods))


def _fresh_read(st, written, body) -> bool:
    if st.opcode in ("ld", "ldu"):
        return _fresh_load(st)
    if st.opcode == "atom":
        return not any(_varies(op, written, body) for op in st.operands[2:])
    return False


def _varies(op, written, body) -> bool:
    """Whether operand `op` may differ from turn to turn: a register the loop writes other
    than with a constant (nvcc sets a lock's 0 and 1 inside the loop: `mov.u32 %r4, 0`)."""
    return isinstance(op, pir.Reg) and any(
        not (body[p].opcode == "mov" and isinstance(body[p].operands[1], pir.Imm)) for p in written.get(op.name, ()))


def _address_kept(st, pos, back, written) -> bool:
    """The registers of `st`'s address are not written after it in the loop."""
    addr = memory_address(st)
    base = addr.base if isinstance(addr, pir.Addr) else addr
    if isinstance(base, pir.Sym):
        return True
    return isinstance(base, pir.Reg) and all(p <= pos for p in written.get(base.name, ()) if p < back)


def with_waits(body: list) -> list:
    """`body` with a wait before each spin loop's back branch: `@p bra L` becomes `@!p bra LEFT;
    wait [address]; bra L; LEFT:`, an unguarded `bra L` `wait [address]; bra L`; the wait is
    marked `ends` where the loop has another way out. O(n) beyond spin_loops."""
    spins = spin_loops(body)
    if not spins:
        return body
    labels = {st.name: pos for pos, st in enumerate(body) if isinstance(st, pir.Label)}
    out = []
    for pos, st in enumerate(body):
        read = spins.get(pos)
        if read is None:
            out.append(st)
            continue
        watched = body[read]
        left = f"$anycuda_spin_left{pos}"
        mods = tuple(m for m in watched.mods if m in _SPACES)
        if _ways_out(body, _back_branch_head(st, labels, pos), pos, labels) > 1:
            mods += (_ENDS,)
        if st.guard is not None:
            out.append(pir.Instruction("bra", (), (pir.Sym(left),), st.loc,
                                       guard=pir.Guard(st.guard.reg, not st.guard.negated), text=st.text))
        out += [pir.Instruction(SPIN_WAIT, mods, (memory_address(watched),), st.loc, text=st.text),
                pir.Instruction("bra", (), st.operands, st.loc, text=st.text)]
        if st.guard is not None:
            out.append(pir.Label(left, st.loc))
    return out


def wait(f, inst):
    """The wait: the thread stops with the aligned 8-byte word that holds what its loop read
    (its address and value), for simt/mbarrierwaits.py, which runs it again when the word
    changes. The read was made this turn at this address, so the word lies in mapped memory
    (an aligned word never crosses a page, nor the end of a shared window, 64-byte aligned)."""
    b = f.b
    space = next((m for m in inst.mods if m in _SPACES), "")     # (with_waits gives the wait the read's space)
    p = f.address(inst.operands[0], space)
    word = b.and_(b.ptrtoint(p, I64), i64(~7))
    # (a word the host or another block may write, or a loop that can end by itself: never a
    # deadlock; generic addresses too)
    tagged = word if space == "shared" and _ENDS not in inst.mods else b.or_(word, i64(mbarrierwaits.OUTSIDE))
    f.suspend("mbar_wait", {"op_a": tagged, "res": b.load(b.inttoptr(word, I64.as_pointer()), align=8)}, None)
