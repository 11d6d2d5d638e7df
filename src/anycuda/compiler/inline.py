"""Inline device functions that contain barriers or warp collectives into their kernels.

A thread suspends at such a site and resumes later from the kernel's step function, which
can only resume inside its own body. nvcc inlines almost every device function, but
`__noinline__` functions and debug (-G) builds keep calls; a call that reaches a site is
therefore replaced by a copy of the callee's body, with its registers, labels and local
declarations renamed and its `.param` symbols bound to the caller's argument buffers.
Recursive functions that reach a site cannot be inlined and stay calls (the lowering then
reports them).
"""
from __future__ import annotations

import dataclasses
import itertools

from ..ptx import ir as pir
from .analysis import has_suspensions

_counter = itertools.count()


def functions_with_sites(module: pir.Module) -> set:
    """Names of device functions that reach a barrier or collective, directly or through calls."""
    bodies = {f.name: f for f in module.functions if f.body is not None and not f.is_kernel}
    direct = {name for name, f in bodies.items() if has_suspensions(f.body)}
    calls = {name: {s.operands[1].name for s in f.body
                    if isinstance(s, pir.Instruction) and s.opcode == "call" and isinstance(s.operands[1], pir.Sym)}
             for name, f in bodies.items()}
    result = set(direct)
    changed = True
    while changed:
        changed = False
        for name, callees in calls.items():
            if name not in result and callees & result:
                result.add(name)
                changed = True
    return result - _recursive(calls)


def _recursive(calls: dict) -> set:
    """Functions that can reach themselves through calls (never inlined)."""
    out = set()
    for start in calls:
        seen, todo = set(), list(calls[start])
        while todo:
            n = todo.pop()
            if n == start:
                out.add(start)
                break
            if n not in seen:
                seen.add(n)
                todo.extend(calls.get(n, ()))
    return out


def inline_suspending_calls(module: pir.Module, fn: pir.Function, max_depth: int = 16) -> pir.Function:
    """A copy of kernel `fn` whose calls to suspending functions are inlined."""
    targets = functions_with_sites(module)
    if not targets:
        return fn
    bodies = {f.name: f for f in module.functions if f.body is not None}
    body = list(fn.body)
    for _ in range(max_depth):
        new_body, changed = [], False
        for st in body:
            callee = _inlinable_call(st, targets, bodies)
            if callee is None:
                new_body.append(st)
                continue
            new_body.extend(_expand(st, callee))
            changed = True
        body = new_body
        if not changed:
            break
    return dataclasses.replace(fn, body=body)


def _inlinable_call(st, targets, bodies):
    if not (isinstance(st, pir.Instruction) and st.opcode == "call" and isinstance(st.operands[1], pir.Sym)):
        return None
    name = st.operands[1].name
    return bodies.get(name) if name in targets else None


def _expand(call: pir.Instruction, callee: pir.Function) -> list:
    """The callee's body, renamed, in place of `call`."""
    tag = f"$i{next(_counter)}"
    rets, args = call.operands[0].items, call.operands[2].items
    binding = {}
    for decl, actual in zip(list(callee.rets) + list(callee.params), list(rets) + list(args)):
        if not isinstance(actual, pir.Sym):
            raise ValueError("inlining needs .param symbols as call arguments")
        binding[decl.name] = actual.name
    local = {}
    for st in callee.body:
        if isinstance(st, pir.VarDecl) and st.space != "shared":
            local[st.name] = st.name + tag
        elif isinstance(st, pir.Label):
            local[st.name] = st.name + tag
        elif isinstance(st, (pir.Prototype, pir.BranchTargets)):
            local[st.name] = st.name + tag
    rename = {**local, **binding}
    end = pir.Label("$ret" + tag, call.loc)
    out = []
    for st in callee.body:
        if isinstance(st, pir.VarDecl):
            out.append(dataclasses.replace(st, name=rename.get(st.name, st.name)) if st.space != "shared" else st)
        elif isinstance(st, pir.Label):
            out.append(dataclasses.replace(st, name=rename[st.name]))
        elif isinstance(st, pir.Prototype):
            out.append(dataclasses.replace(st, name=rename[st.name]))
        elif isinstance(st, pir.BranchTargets):
            out.append(dataclasses.replace(st, name=rename[st.name],
                                           targets=tuple(rename.get(t, t) for t in st.targets)))
        elif isinstance(st, pir.Instruction):
            if st.opcode == "ret":
                out.append(dataclasses.replace(st, opcode="bra", mods=("uni",) if st.guard is None else (),
                                               operands=(pir.Sym(end.name),),
                                               guard=_rename_guard(st.guard, rename)))
            else:
                out.append(dataclasses.replace(st, operands=tuple(_rename(o, rename) for o in st.operands),
                                               guard=_rename_guard(st.guard, rename)))
        else:
            out.append(st)
    out.append(end)
    if call.guard is not None:
        skip = pir.Label("$skip" + tag, call.loc)
        g = call.guard
        jump = pir.Instruction("bra", (), (pir.Sym(skip.name),), call.loc,
                               guard=pir.Guard(g.reg, not g.negated), text=call.text)
        out = [jump] + out + [skip]
    return out


def _rename_guard(g, rename):
    if g is None:
        return None
    return pir.Guard(pir.Reg(rename.get(g.reg.name, g.reg.name)), g.negated)


def _rename(op, rename):
    if isinstance(op, pir.Reg):
        return pir.Reg(rename.get(op.name, op.name))
    if isinstance(op, pir.Sym):
        return pir.Sym(rename.get(op.name, op.name))
    if isinstance(op, pir.Addr):
        return pir.Addr(_rename(op.base, rename) if op.base is not None else None, op.offset)
    if isinstance(op, pir.Vec):
        return pir.Vec(tuple(_rename(i, rename) for i in op.items))
    if isinstance(op, pir.ParamList):
        return pir.ParamList(tuple(_rename(i, rename) for i in op.items))
    if isinstance(op, pir.Not):
        return pir.Not(_rename(op.operand, rename))
    if isinstance(op, pir.Pair):
        return pir.Pair(_rename(op.first, rename), _rename(op.second, rename))
    return op
