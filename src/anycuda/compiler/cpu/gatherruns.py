"""The vectoriser's gathers and scatters tested at run time for addresses that turn out
consecutive, or (gathers) all the same.

LLVM's loop vectoriser makes a gather of every load whose address it cannot prove
consecutive from one thread to the next: `i / C` and `i % C` of a flat index (llm.c's
`out[i] = wte[tokens[i / C] * C + i % C] + ...`), an index loaded from memory, a row chosen
by a parameter. At run time most such vectors of addresses are still one run: a warp's 16
or 32 threads lie inside one row of C channels, so `tokens[i / C]` is one address and the
row's elements follow each other. A gather costs a load per lane (on a Zen 4 a 16-lane
`vpgatherdd` takes ~8x a vector load); the test costs a subtraction and a comparison of the
address vector. So each gather and scatter in a loop of one block (the vector body) becomes:
one vector load or store where the lanes' addresses step by the element's size (a masked
one where the vectoriser's mask is not a constant: what the lanes off address is then not
touched, as in the gather), one element loaded and broadcast where every lane has the same
address and some lane is on, and the gather or scatter as it was otherwise.

Run by maskedaccesses.rewrite, in the same pass over the text (a split body is no longer a
loop of one block).
"""
from __future__ import annotations

import re

from .textrewrite import ELEMENT_BYTES, arguments, suffixed

_GATHER = re.compile(r"^(\s*)(%[-\w.$]+|%\"[^\"]*\") = (?:tail )?call <(\d+) x (\w+)> @llvm\.masked\.gather\.[\w.]+"
                     r"\((.*)\)(?:, !.*)?$")
_SCATTER = re.compile(r"^(\s*)(?:tail )?call void @llvm\.masked\.scatter\.[\w.]+\((.*)\)(?:, !.*)?$")
_ALIGN = re.compile(r"\balign (\d+)\b")
_BYTES = {**ELEMENT_BYTES, "ptr": 8}
_MANGLED = {"float": "f32", "double": "f64", "half": "f16", "bfloat": "bf16", "ptr": "p0"}


def split_gather(line: str, k: int):
    """The lines that replace gather `line` (the k-th split), ending in the label of the block
    that goes on after it: a vector load where its addresses are one run, one element
    broadcast where they are one address and some lane is on, the gather otherwise, joined by
    a phi of its name. None where the line is no gather this handles."""
    gather = _GATHER.match(line)
    if gather is None or gather.group(4) not in _BYTES:
        return None
    indent, name, lanes, element = gather.group(1), gather.group(2), int(gather.group(3)), gather.group(4)
    args = arguments(gather.group(5))
    addresses = _addresses(args, 0, lanes)
    if len(args) != 3 or addresses is None:
        return None
    (pointers, align), mask, passthru = addresses, args[1], args[2].split(" ", 3)[-1]
    vec, names = f"<{lanes} x {element}>", _Names("ag", k)
    whole = _whole_mask(mask, lanes)
    run, one, gathered = (suffixed(name, f".anycuda.{what}") for what in ("run", "one", "gathered"))
    lines = _offsets_from_first(indent, names, pointers, lanes)
    lines += _all_lanes(indent, names.at("run"), f"icmp eq <{lanes} x i64> {names.v('offsets')}, "
                        f"{_steps(lanes, _BYTES[element])}", lanes)
    lines += [f"{indent}br i1 {names.v('run')}, label %{names.label('run')}, label %{names.label('alike')}",
              f"{names.label('run')}:",
              f"{indent}{run} = " + (f"load {vec}, ptr {names.v('first')}{align}" if whole else
                                     f"call {vec} @llvm.masked.load.v{lanes}{_mangled(element)}.p0(ptr{align and ' ' + align[2:]}"
                                     f" {names.v('first')}, {mask}, {vec} {passthru})"),
              f"{indent}br label %{names.label('join')}",
              f"{names.label('alike')}:"]
    lines += _all_lanes(indent, names.at("same"), f"icmp eq <{lanes} x i64> {names.v('offsets')}, zeroinitializer",
                        lanes)
    if not whole:
        lines += [f"{indent}{names.v('on')} = bitcast {mask} to i{lanes}",
                  f"{indent}{names.v('some')} = icmp ne i{lanes} {names.v('on')}, 0",
                  f"{indent}{names.v('same.some')} = and i1 {names.v('same')}, {names.v('some')}"]
    same = names.v("same" if whole else "same.some")
    lines += [f"{indent}br i1 {same}, label %{names.label('one')}, label %{names.label('gather')}",
              f"{names.label('one')}:",
              f"{indent}{names.v('element')} = load {element}, ptr {names.v('first')}{align}",
              f"{indent}{names.v('head')} = insertelement {vec} poison, {element} {names.v('element')}, i64 0",
              f"{indent}{one if whole else names.v('splat')} = shufflevector {vec} {names.v('head')}, {vec} poison, "
              f"<{lanes} x i32> zeroinitializer"]
    if not whole:
        lines.append(f"{indent}{one} = select {mask}, {vec} {names.v('splat')}, {vec} {passthru}")
    lines += [f"{indent}br label %{names.label('join')}",
              f"{names.label('gather')}:",
              line.replace(f"{name} = ", f"{gathered} = ", 1),
              f"{indent}br label %{names.label('join')}",
              f"{names.label('join')}:",
              f"{indent}{name} = phi {vec} [ {run}, %{names.label('run')} ], [ {one}, %{names.label('one')} ], "
              f"[ {gathered}, %{names.label('gather')} ]"]
    return lines, names.label("join")


def split_scatter(line: str, k: int):
    """The lines that replace scatter `line` (the k-th split): a vector store where its
    addresses are one run, the scatter otherwise. None where the line is no scatter this
    handles."""
    scatter = _SCATTER.match(line)
    if scatter is None:
        return None
    indent, args = scatter.group(1), arguments(scatter.group(2))
    if len(args) != 3 or not args[0].startswith("<"):
        return None
    value = args[0]
    lanes, element = value[1:].split(" x ", 1)[0], value.split(" x ", 1)[1].split(">", 1)[0]
    addresses = _addresses(args, 1, int(lanes)) if lanes.isdigit() else None
    if addresses is None or element not in _BYTES:
        return None
    lanes, (pointers, align), mask, names = int(lanes), addresses, args[2], _Names("as", k)
    lines = _offsets_from_first(indent, names, pointers, lanes)
    lines += _all_lanes(indent, names.at("run"), f"icmp eq <{lanes} x i64> {names.v('offsets')}, "
                        f"{_steps(lanes, _BYTES[element])}", lanes)
    store = (f"store {value}, ptr {names.v('first')}{align}" if _whole_mask(mask, lanes) else
             f"call void @llvm.masked.store.v{lanes}{_mangled(element)}.p0({value}, ptr{align and ' ' + align[2:]}"
             f" {names.v('first')}, {mask})")
    return [*lines,
            f"{indent}br i1 {names.v('run')}, label %{names.label('run')}, label %{names.label('scatter')}",
            f"{names.label('run')}:",
            f"{indent}{store}",
            f"{indent}br label %{names.label('join')}",
            f"{names.label('scatter')}:",
            line,
            f"{indent}br label %{names.label('join')}",
            f"{names.label('join')}:"], names.label("join")


class _Names:
    """The new values and blocks of the k-th split: `%anycuda.<kind>.<k>.<what>`."""

    def __init__(self, kind: str, k: int):
        self.prefix = f"anycuda.{kind}.{k}"

    def at(self, what: str) -> str:
        return f"{self.prefix}.{what}"

    def v(self, what: str) -> str:
        return f"%{self.at(what)}"

    def label(self, what: str) -> str:
        return f"{self.prefix}.{what}.block"


def _addresses(args: list, at: int, lanes: int):
    """(the address vector's value, its `, align N` or "") of argument `at`, or None where it is
    no named <lanes x ptr> value."""
    if len(args) <= at or not args[at].startswith(f"<{lanes} x ptr> "):
        return None
    value = args[at].split()[-1]
    if not value.startswith("%"):
        return None
    align = _ALIGN.search(args[at])
    return value, f", align {align.group(1)}" if align else ""


def _offsets_from_first(indent: str, names: _Names, pointers: str, lanes: int) -> list:
    """Lines computing `first` (lane 0's address) and `offsets` (each lane's address less it),
    from the addresses frozen: a lane that is off may hold poison (its index loaded by a
    masked load), and a branch on poison is undefined; frozen, it is some fixed address, and
    the lanes that are on keep theirs, so a run found is their run."""
    wide = f"<{lanes} x i64>"
    return [f"{indent}{names.v('frozen')} = freeze <{lanes} x ptr> {pointers}",
            f"{indent}{names.v('first')} = extractelement <{lanes} x ptr> {names.v('frozen')}, i64 0",
            f"{indent}{names.v('at')} = ptrtoint <{lanes} x ptr> {names.v('frozen')} to {wide}",
            f"{indent}{names.v('at0')} = ptrtoint ptr {names.v('first')} to i64",
            f"{indent}{names.v('at0.head')} = insertelement {wide} poison, i64 {names.v('at0')}, i64 0",
            f"{indent}{names.v('at0.all')} = shufflevector {wide} {names.v('at0.head')}, {wide} poison, "
            f"<{lanes} x i32> zeroinitializer",
            f"{indent}{names.v('offsets')} = sub {wide} {names.v('at')}, {names.v('at0.all')}"]


def _all_lanes(indent: str, what: str, comparison: str, lanes: int) -> list:
    """Lines making i1 `%what` true where every lane of the vector comparison holds."""
    return [f"{indent}%{what}.lanes = {comparison}",
            f"{indent}%{what}.bits = bitcast <{lanes} x i1> %{what}.lanes to i{lanes}",
            f"{indent}%{what} = icmp eq i{lanes} %{what}.bits, -1"]


def _steps(lanes: int, size: int) -> str:
    return "<" + ", ".join(f"i64 {lane * size}" for lane in range(lanes)) + ">"


def _whole_mask(mask: str, lanes: int) -> bool:
    """Whether a mask argument is the constant with every lane on."""
    value = mask[len(f"<{lanes} x i1> "):].strip()
    return value == "splat (i1 true)" or value == "<" + ", ".join(["i1 true"] * lanes) + ">"


def _mangled(element: str) -> str:
    return _MANGLED.get(element, element)
