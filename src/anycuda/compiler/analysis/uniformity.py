"""What every thread of a block computes alike: block-uniform registers, whether control flow
is the same in every thread, the registers whose value less their thread-linear form is
uniform, and registers that hold one constant. These let a uniform round keep one value for
the block instead of one per thread.
"""
from __future__ import annotations

from ...ptx import ir
from .affine import thread_linear_forms
from .dataflow import defs_uses, definitions_of, loads_kernel_param, readers_of
from .suspensions import is_suspension

# Pure integer instructions through which a value computed from block-uniform operands stays
# block-uniform.
UNIFORM_OPCODES = frozenset(("mov", "add", "sub", "mul", "mad", "shl", "shr", "and", "or", "xor",
                              "not", "cvt", "cvta", "min", "max", "div", "rem", "neg", "abs"))
UNIFORM_SPECIAL = frozenset(("ntid", "nctaid", "ctaid", "nsmid"))


def _alike_registers(body: list, kernel_params, opcodes, specials) -> set:
    """Registers each of whose definitions is an unguarded instruction of `opcodes` that reads
    only immediates, symbols, special registers of `specials` and registers of the set, or
    `ld.param` of a kernel parameter (a fixpoint from every register down). O(n): each
    register's definitions are read again only when one they read is taken out."""
    params = set(kernel_params)
    defs = definitions_of(body)

    def alike(st, uniform):
        """st computes its register from what `uniform` and `specials` allow."""
        if st.guard is not None or "cc" in st.mods or not st.operands or not isinstance(st.operands[0], ir.Reg):
            return False
        if st.opcode == "ld":
            return loads_kernel_param(st, params)
        if st.opcode not in opcodes:
            return False
        for op in st.operands[1:]:
            if isinstance(op, ir.Reg):
                if op.name not in uniform:
                    return False
            elif isinstance(op, ir.SpecialReg):
                if op.name not in specials:
                    return False
            elif not isinstance(op, (ir.Imm, ir.Sym)):
                return False
        return True
    # the greatest such set: a worklist takes out the registers with a definition that reads
    # one taken out, looking again only at the readers of each one taken out
    uniform = set(defs)
    readers = readers_of(defs)
    todo = sorted(uniform)
    while todo:
        r = todo.pop()
        if r in uniform and not all(alike(st, uniform) for st in defs[r]):
            uniform.discard(r)
            todo.extend(x for x in readers.get(r, ()) if x in uniform)
    return uniform


def block_uniform_registers(body: list, kernel_params) -> set:
    """Integer registers that every thread of a block computes alike: each of their
    definitions is an unguarded pure integer instruction of immediates, symbols, kernel
    parameters, %ntid/%nctaid/%ctaid and other such registers (a tile loop's counter, a row
    offset). Control flow is not looked at: a thread that skips an update leaves the
    register different from the others', which is why the scheduler checks the values
    before relying on them (rounds.affine_spills), unless control_uniform holds."""
    return _alike_registers(body, kernel_params, UNIFORM_OPCODES, UNIFORM_SPECIAL)


def control_uniform(body: list, kernel_params) -> bool:
    """Whether every thread of a block takes the same path through the body, so that at each
    site the registers of block_uniform_registers hold one value in all of them: every branch,
    return, exit and suspension is unguarded or guarded by a predicate that every thread
    computes alike (a setp of block-uniform values), and there is no indirect branch and no
    call (a device function may exit). A trap may still stop one thread: it fails the launch."""
    uniform = _alike_registers(body, kernel_params, UNIFORM_OPCODES | {"setp"}, UNIFORM_SPECIAL)
    for st in body:
        if not isinstance(st, ir.Instruction):
            continue
        if st.opcode in ("brx", "call"):
            return False
        steers = st.opcode in ("bra", "ret", "exit") or is_suspension(st)
        if steers and st.guard is not None and st.guard.reg.name not in uniform:
            return False
    return True


def uniform_remainders(body: list, kernel_params, forms=None) -> set:
    """Registers of `forms` (thread_linear_forms, or a part of it the caller has; computed
    when not given) whose value less their form is the same in every thread where
    control_uniform holds: computed through the forms' own exact steps (mov, add, sub,
    mul.lo, mad.lo, shl) from %tid and what block_uniform_registers allows. (The forms take
    %laneid or a loaded value as a remainder too: those differ by thread.)"""
    if forms is None:
        forms = thread_linear_forms(body, kernel_params)
    alike = _alike_registers(body, kernel_params, frozenset(("mov", "add", "sub", "mul", "mad", "shl")),
                             UNIFORM_SPECIAL | {"tid"})
    return alike & set(forms)


def constant_registers(body: list) -> dict:
    """{register: int} for the registers whose only definition is an unguarded `mov` of an
    integer immediate: wherever such a register is read after its definition it holds that
    value. nvcc puts the constant operands of `shfl.sync` (lane offset, clamp, member mask)
    in such registers; knowing them at compile time lets the scheduler resolve a shuffle as a
    fixed permutation of the warp's lanes."""
    moved = moved_once(body, lambda op: isinstance(op, ir.Imm) and isinstance(op.value, int) and not op.is_float)
    return {r: op.value for r, op in moved.items()}


def moved_once(body: list, accepts) -> dict:
    """{register: operand} for the registers whose only definition is an unguarded `mov` of
    an operand that `accepts`."""
    defs, moved = {}, {}
    for st in body:
        if not isinstance(st, ir.Instruction):
            continue
        for r in defs_uses(st)[0]:
            defs[r] = defs.get(r, 0) + 1
        ops = st.operands
        if (st.opcode == "mov" and st.guard is None and len(ops) == 2 and isinstance(ops[0], ir.Reg)
                and accepts(ops[1])):
            moved[ops[0].name] = ops[1]
    return {r: op for r, op in moved.items() if defs.get(r) == 1}
