"""Inline device functions that contain barriers or warp collectives into their kernels, and
those that make a read other threads may change (ops/spinwaits.py: a spin inside them, or
around a call to them, waits there for the word to change, which it can only do in the kernel)
or a volatile access (ops/warpsteps.py: a warp takes those in step, waiting in the kernel).

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
import weakref

from ...ptx import ir as pir
from ..analysis.cfg import strongly_connected_components
from ..analysis.suspensions import has_suspensions
from ..ops.spinwaits import reads_fresh
from ..ops.warpsteps import makes_volatile_access

def functions_with_sites(module: pir.Module) -> set:
    """Names of device functions that reach a barrier or collective or make a read other
    threads may change, directly or through calls, and are not recursive. O(n) in the
    module's instructions (a search backwards along the call edges from the functions that
    suspend themselves, and the call graph's strongly connected components for recursion);
    found once per module (_sites_of), not once per kernel that a module's lowering inlines
    into."""
    bodies = {f.name: f for f in module.functions if f.body is not None and not f.is_kernel}
    direct = {name for name, f in bodies.items()
              if has_suspensions(f.body) or reads_fresh(f.body) or makes_volatile_access(f.body)}
    calls = {name: {s.operands[1].name for s in f.body
                    if isinstance(s, pir.Instruction) and s.opcode == "call" and isinstance(s.operands[1], pir.Sym)}
             for name, f in bodies.items()}
    callers = {}
    for name, callees in calls.items():
        for c in callees:
            callers.setdefault(c, set()).add(name)
    result, todo = set(direct), sorted(direct)
    while todo:
        for caller in callers.get(todo.pop(), ()):
            if caller not in result:
                result.add(caller)
                todo.append(caller)
    return result - _recursive(calls)


def _recursive(calls: dict) -> set:
    """Functions that can reach themselves through calls (never inlined): those of a strongly
    connected component of more than one function, or calling themselves. O(functions + calls)."""
    out = set()
    for component in strongly_connected_components(calls, lambda f: sorted(calls.get(f, ()))):
        if len(component) > 1 or component[0] in calls.get(component[0], ()):
            out.update(component)
    return out


_sites_cache = {}       # id(module) -> (weak reference to it, its functions list, their count, functions_with_sites)


def _sites_of(module: pir.Module) -> set:
    """functions_with_sites(module), kept while the module lives and its function list is the
    same: a module's lowering asks once per kernel."""
    key = id(module)
    hit = _sites_cache.get(key)
    if hit is not None and hit[0]() is module and hit[1] is module.functions and hit[2] == len(module.functions):
        return hit[3]
    found = functions_with_sites(module)
    _sites_cache[key] = (weakref.ref(module, lambda _, key=key: _sites_cache.pop(key, None)),
                         module.functions, len(module.functions), found)
    return found


def inline_suspending_calls(module: pir.Module, fn: pir.Function, max_depth: int = 16) -> pir.Function:
    """A copy of kernel `fn` whose calls to suspending functions are inlined."""
    targets = _sites_of(module)
    if not targets:
        return fn
    bodies = {f.name: f for f in module.functions if f.body is not None}
    body = list(fn.body)
    tags = itertools.count()        # per kernel: its code must not depend on what the process compiled before
    for _ in range(max_depth):
        new_body, changed = [], False
        for st in body:
            callee = _inlinable_call(st, targets, bodies)
            if callee is None:
                new_body.append(st)
                continue
            new_body.extend(_expand(st, callee, f"$i{next(tags)}"))
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


def _expand(call: pir.Instruction, callee: pir.Function, tag: str) -> list:
    """The callee's body, renamed with `tag`, in place of `call`."""
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
