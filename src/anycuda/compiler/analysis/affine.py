"""Thread-linear forms: registers every definition of which computes k * %tid.<axis> (scaled by
block or grid dimensions or kernel parameters) plus something else, so that a thread can save
the register less its form at a site and add the form back on resume.
"""
from __future__ import annotations

from ...ptx import ir
from .dataflow import definitions_of, loads_kernel_param, readers_of

# A register's thread-linear form: {(axis, factor): k}, read as the sum over the terms of
# k * factor * %tid.<axis>, where factor is a kernel parameter's name, a block or grid
# dimension ("%ntid.x", "%nctaid.y") or None (1). The form
# is all this analysis knows of a value; what the value holds beside it is not tracked.
_INT32 = frozenset(("s32", "u32", "b32"))
_CONFLICT = "conflict"           # definitions with different forms
_FACTOR_SPECIAL = frozenset(("ntid", "nctaid"))     # block-uniform sizes a form may scale by


def _add_forms(f, g, sign=1):
    out = dict(f)
    for term, k in g.items():
        out[term] = out.get(term, 0) + sign * k
    return {t: k for t, k in out.items() if k % (1 << 32)}


def linear_terms(form):
    """The terms of a thread-linear form (thread_linear_forms) in a fixed order: (axis,
    factor, k), k as a signed 32-bit multiplier."""
    for (axis, factor), k in sorted(form.items(), key=lambda t: (t[0][0], t[0][1] or "")):
        yield axis, factor, (k + 2 ** 31) % 2 ** 32 - 2 ** 31


def thread_linear_forms(body: list, kernel_params) -> dict:
    """{register: its thread-linear form} for the 32-bit integer registers that every
    definition computes as k * %tid.x + ... plus something else (a row start, a tile offset):
    nvcc's indices such as `row * n + t + threadIdx.x`, stepped by a tile loop.

    Saving such a register at a site as value - form (compiler/lowering/function.py) and adding the form
    back on resume is exact whatever the analysis says, since each thread uses its own index
    both times; the form only matters for speed. When what is left is the same in every
    thread, a uniform round rebuilds the register from one value, and the vectoriser sees
    the accesses it addresses as contiguous rather than gathered.

    Factors are integer immediates, kernel parameters (a register whose one definition is
    `ld.param` of a 32-bit kernel parameter) and the block's and grid's dimensions (one
    `mov` from %ntid or %nctaid); the forms combine through mov, add, sub,
    mul.lo, mad.lo, shl by an immediate and selp of two values of one form. A register with
    another definition, or with definitions that disagree, has no form.

    O(n * T) for forms of T terms (at most 3 axes times the factors a kernel scales by):
    each register's definitions are read again only when a form they read has changed,
    which happens at most twice per register."""
    params = set(kernel_params)
    defs = definitions_of(body)
    factor_of = {}                # register -> the kernel parameter or block dimension it holds
    for r, sts in defs.items():
        st = sts[0]
        if len(sts) != 1 or st.guard is not None or not _INT32 & set(st.mods):
            continue
        if loads_kernel_param(st, params) and st.operands[1].offset == 0:
            factor_of[r] = st.operands[1].base.name
        elif (st.opcode == "mov" and isinstance(st.operands[1], ir.SpecialReg)
              and st.operands[1].name in _FACTOR_SPECIAL and st.operands[1].component in ("x", "y", "z")):
            factor_of[r] = f"%{st.operands[1].name}.{st.operands[1].component}"
    forms = {}                    # register -> form, _CONFLICT, or absent (not known yet)

    def operand(op):
        """The form of an operand, None while unknown, _CONFLICT when it has none."""
        if isinstance(op, ir.Reg):
            return forms.get(op.name)
        if isinstance(op, ir.SpecialReg) and op.name == "tid" and op.component in ("x", "y", "z"):
            return {(op.component, None): 1}
        if isinstance(op, (ir.Imm, ir.SpecialReg, ir.Sym)):
            return {}
        return _CONFLICT

    def scaled(f, op):
        """f times the value of `op`: an immediate, a kernel parameter or a dimension."""
        if isinstance(op, ir.Imm) and isinstance(op.value, int) and not op.is_float:
            return {t: k * op.value for t, k in f.items() if (k * op.value) % (1 << 32)}
        if isinstance(op, ir.Reg) and op.name in factor_of and all(fac is None for _, fac in f):
            return {(axis, factor_of[op.name]): k for (axis, _), k in f.items()}
        return _CONFLICT if f else {}

    def product(a, b):
        fa, fb = operand(a), operand(b)
        if fa is None or fb is None:
            return None
        if _CONFLICT in (fa, fb) or (fa and fb):
            return _CONFLICT
        return scaled(fa, b) if fa else scaled(fb, a)

    def form_of(st):
        """The form of what instruction st writes; None while an operand's is unknown."""
        ops = st.operands
        if "cc" in st.mods or not _INT32 & set(st.mods) or not isinstance(ops[0], ir.Reg):
            return _CONFLICT
        if st.opcode == "ld":
            return {} if loads_kernel_param(st, params) else _CONFLICT
        if st.opcode == "mov" and len(ops) == 2:
            return operand(ops[1])
        if st.opcode in ("add", "sub") and len(ops) == 3 and "sat" not in st.mods:
            fa, fb = operand(ops[1]), operand(ops[2])
            if fa is None or fb is None:
                return None
            if _CONFLICT in (fa, fb):
                return _CONFLICT
            return _add_forms(fa, fb, 1 if st.opcode == "add" else -1)
        if st.opcode == "selp" and len(ops) == 4:
            fa, fb = operand(ops[1]), operand(ops[2])
            if fa is None or fb is None:
                return fa if fb is None else fb
            return fa if fa == fb else _CONFLICT
        if st.opcode == "mul" and len(ops) == 3 and "lo" in st.mods:
            return product(ops[1], ops[2])
        if st.opcode == "mad" and len(ops) == 4 and "lo" in st.mods:
            f, fc = product(ops[1], ops[2]), operand(ops[3])
            if f is None or fc is None:
                return None
            return _CONFLICT if _CONFLICT in (f, fc) else _add_forms(f, fc)
        if st.opcode == "shl" and len(ops) == 3 and isinstance(ops[2], ir.Imm) and isinstance(ops[2].value, int):
            f = operand(ops[1])
            if f is None or f == _CONFLICT:
                return f
            return scaled(f, ir.Imm(1 << (ops[2].value & 31)))
        return _CONFLICT

    # a worklist: forms only go from unknown to known to _CONFLICT, and each form_of is
    # monotone in its operands', so the registers whose definitions read a register whose
    # form changed are all that need looking at again (the answer is the one fixpoint)
    readers = readers_of(defs)
    todo, queued = list(defs)[::-1], set(defs)
    while todo:
        r = todo.pop()
        queued.discard(r)
        if forms.get(r) == _CONFLICT:
            continue
        seen = [f for f in map(form_of, defs[r]) if f is not None]
        if not seen:
            continue
        new = seen[0] if all(f == seen[0] for f in seen) else _CONFLICT
        if new != forms.get(r):
            forms[r] = new
            for x in readers.get(r, ()):
                if x not in queued:
                    queued.add(x)
                    todo.append(x)
    # a definition whose form is still unknown reads something with none (a float register
    # moved into an integer one): its register has none either
    return {r: f for r, f in forms.items()
            if f and f != _CONFLICT and all(form_of(st) is not None for st in defs[r])}
