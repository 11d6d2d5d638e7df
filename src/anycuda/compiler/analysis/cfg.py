"""The control-flow graph of a function body: basic blocks, cut after branches, exits and
suspensions and before labels, with their successors (build_cfg) and predecessors, and the
strongly connected components of a graph (loops; recursion among device functions). Each is
O(n) in the body's instructions plus its edges.
"""
from __future__ import annotations

from dataclasses import dataclass, field

from ...ptx import ir
from .suspensions import is_suspension


def ends_block(inst: ir.Instruction) -> bool:
    return inst.opcode in ("bra", "brx", "ret", "exit", "trap") or is_suspension(inst)


def branch_target(st, labels: dict):
    """The position (of `labels`: name -> position) a direct `bra` goes to, else None."""
    if isinstance(st, ir.Instruction) and st.opcode == "bra" and st.operands and isinstance(st.operands[0], ir.Sym):
        return labels.get(st.operands[0].name)
    return None


def back_edges(body: list, labels: dict) -> list:
    """[(position of a loop's label, position of a branch back to it)] for every backward
    branch of `body`, in body order."""
    return [(target, pos) for pos, st in enumerate(body)
            if (target := branch_target(st, labels)) is not None and target <= pos]


def back_branches(body: list, labels: dict) -> dict:
    """{position of a loop's label: position of its back branch} (the last one of a label
    that has several)."""
    return dict(back_edges(body, labels))


@dataclass
class Block:
    index: int
    start: int                      # index in the instruction list
    instructions: list = field(default_factory=list)     # (position, Instruction)
    labels: list = field(default_factory=list)
    succs: list = field(default_factory=list)
    live_in: set = field(default_factory=set)
    live_out: set = field(default_factory=set)


def strongly_connected_components(nodes, successors):
    """The strongly connected components of the graph over `nodes` (hashable) with edges
    `successors(node)`, each a list, every component yielded after the components it reaches
    (Tarjan's algorithm, iterative: O(nodes + edges))."""
    index, low, on_stack, stack = {}, {}, set(), []
    for root in nodes:
        if root in index:
            continue
        index[root] = low[root] = len(index)
        stack.append(root)
        on_stack.add(root)
        work = [(root, iter(successors(root)))]
        while work:
            node, edges = work[-1]
            nxt = next(edges, None)
            if nxt is not None:
                if nxt not in index:
                    index[nxt] = low[nxt] = len(index)
                    stack.append(nxt)
                    on_stack.add(nxt)
                    work.append((nxt, iter(successors(nxt))))
                elif nxt in on_stack:
                    low[node] = min(low[node], index[nxt])
                continue
            work.pop()
            if work:
                parent = work[-1][0]
                low[parent] = min(low[parent], low[node])
            if low[node] == index[node]:
                component = []
                while True:
                    x = stack.pop()
                    on_stack.discard(x)
                    component.append(x)
                    if x == node:
                        break
                yield component


def build_cfg(body: list, branch_targets: dict) -> list:
    """Basic blocks of a flat function body. Labels start blocks; branches, returns and
    suspensions end them. O(n)."""
    blocks = [Block(0, 0)]
    label_block = {}
    for pos, st in enumerate(body):
        cur = blocks[-1]
        if isinstance(st, ir.Label):
            if cur.instructions:
                cur = Block(len(blocks), pos)
                blocks.append(cur)
            cur.labels.append(st.name)
            label_block[st.name] = cur.index
        elif isinstance(st, ir.Instruction):
            cur.instructions.append((pos, st))
            if ends_block(st):
                blocks.append(Block(len(blocks), pos + 1))
    for b in blocks:
        last = b.instructions[-1][1] if b.instructions else None
        fall = b.index + 1 if b.index + 1 < len(blocks) else None
        if last is None or not ends_block(last) or is_suspension(last):
            succ = [fall]
        elif last.opcode == "bra":
            target = label_block.get(last.operands[0].name) if isinstance(last.operands[0], ir.Sym) else None
            succ = [target] + ([fall] if last.guard is not None else [])
        elif last.opcode == "brx":
            names = branch_targets.get(last.operands[1].name, ()) if len(last.operands) > 1 else ()
            succ = [label_block.get(n) for n in names]
            if last.guard is not None:
                succ.append(fall)
        else:  # ret / exit / trap
            succ = [fall] if last.guard is not None else []
        b.succs = sorted({s for s in succ if s is not None})
    return blocks


def predecessors(blocks: list) -> dict:
    """{block index: indices of the blocks that branch or fall into it}. O(blocks + edges)."""
    preds = {b.index: [] for b in blocks}
    for b in blocks:
        for x in b.succs:
            preds[x].append(b.index)
    return preds
