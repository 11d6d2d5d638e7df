"""The vectoriser's gathers and scatters tested at run time for addresses that turn out
consecutive, or (gathers) all the same.

LLVM's loop vectoriser makes a gather of every load whose address it cannot prove
consecutive from one thread to the next: `i / C` and `i % C` of a flat index (llm.c's
`out[i] = wte[tokens[i / C] * C + i % C] + ...`), an index loaded from memory, a row chosen
by a parameter. At run time most such vectors of addresses are still one run: a warp's 16
or 32 threads lie inside one row of C channels, so `tokens[i / C]` is one address and the
row's elements follow each other. A gather costs a load per lane (on a Zen 4 a 16-lane
`vgatherdps` takes several times a vector load). So each gather and scatter in a loop of one
block (the vector body) becomes: a look at its first and last lanes' addresses, as scalars
made from the indices (_AddressChain); where they are a run's span apart (or, for a gather,
equal), a test of every lane; then one vector load or store where the lanes' addresses step
by the element's size (a masked one where the vectoriser's mask is not a constant: what the
lanes off address is then not touched, as in the gather), one element loaded and broadcast
where every lane has the same address and some lane is on, and the gather or scatter as it
was otherwise, its addresses made in its own block so that it keeps its 32-bit indices.

Measured on a Zen 4 (benchmarks/NOTES.md, "Gathers tested for runs"), the rewrite against
none in one process: embedding_flat 1.5x faster; a naive transpose read a column at a time
(lanes a row apart: never a run) 7% slower, random gathers 3%.

Run by maskedaccesses.rewrite, in the same pass over the text (a split body is no longer a
loop of one block).
"""
from __future__ import annotations

import re

from .textrewrite import ELEMENT_BYTES, LABEL, VALUE, align_suffix, arguments, suffixed

_GATHER = re.compile(r"^(\s*)(" + VALUE + r") = (?:tail )?call <(\d+) x (\w+)> @llvm\.masked\.gather\.[\w.]+"
                     r"\((.*)\)(?:, !.*)?$")
_SCATTER = re.compile(r"^(\s*)(?:tail )?call void @llvm\.masked\.scatter\.[\w.]+\((.*)\)(?:, !.*)?$")
# what a gather's address vector is made again of in its block: the GEP, then its index's
# scaling and extension from 32 bits
_MADE_OF = {"getelementptr": ("shl", "mul", "sext", "zext"), "shl": ("sext", "zext"), "mul": ("sext", "zext")}
_SPLAT = re.compile(r"splat \((i\d+) (-?\d+)\)")
_DEFINITION = re.compile(r"^\s*(" + VALUE + r") = (.*)$")
_BYTES = {**ELEMENT_BYTES, "ptr": 8}
_MANGLED = {"float": "f32", "double": "f64", "half": "f16", "bfloat": "bf16", "ptr": "p0"}


def split_gather(line: str, k: int, before: list = ()):
    """The lines that replace gather `line` (the k-th split), ending in the label of the block
    that goes on after it: a vector load where its addresses are one run, one element
    broadcast where they are one address and some lane is on, the gather otherwise, joined by
    a phi of its name (`before`: the function's lines before it). None where the line is no
    gather this handles."""
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
    chain = _AddressChain(pointers, before, lanes)
    lines = _run_tests(indent, names, chain, _BYTES[element], "gather")
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
              *_in_own_block(line.replace(f"{name} = ", f"{gathered} = ", 1), chain, names),
              f"{indent}br label %{names.label('join')}",
              f"{names.label('join')}:",
              f"{indent}{name} = phi {vec} [ {run}, %{names.label('run')} ], [ {one}, %{names.label('one')} ], "
              f"[ {gathered}, %{names.label('gather')} ]"]
    return lines, names.label("join")


def split_scatter(line: str, k: int, before: list = ()):
    """The lines that replace scatter `line` (the k-th split; `before`: the function's lines
    before it): a vector store where its addresses are one run, the scatter otherwise. None
    where the line is no scatter this handles."""
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
    chain = _AddressChain(pointers, before, lanes)
    lines = _run_tests(indent, names, chain, _BYTES[element], "scatter")
    store = (f"store {value}, ptr {names.v('first')}{align}" if _whole_mask(mask, lanes) else
             f"call void @llvm.masked.store.v{lanes}{_mangled(element)}.p0({value}, ptr{align and ' ' + align[2:]}"
             f" {names.v('first')}, {mask})")
    return [*lines,
            f"{indent}br i1 {names.v('run')}, label %{names.label('run')}, label %{names.label('scatter')}",
            f"{names.label('run')}:",
            f"{indent}{store}",
            f"{indent}br label %{names.label('join')}",
            f"{names.label('scatter')}:",
            *_in_own_block(line, chain, names),
            f"{indent}br label %{names.label('join')}",
            f"{names.label('join')}:"], names.label("join")


class _AddressChain:
    """How a gather's or scatter's address vector is made in the loop's block: a vector GEP of a
    scalar base, its index's scaling and its extension from 32 bits (outermost first; empty
    where it is not so made).

    x86's gathers take a base and 32-bit indices; LLVM forms them only from a GEP in the
    gather's own block, and from one in another it made 64-bit addresses, two gathers where
    there was one. So the chain is made again in each block that uses the addresses (the
    test's, the gather's), and the two lanes the first test looks at are made as scalars:
    the test of a transpose's column (its lanes a row apart, never a run) then costs a few
    scalar instructions, where with the vector made in the loop's block it took 1.2x the
    transpose's time."""

    def __init__(self, pointers: str, before: list, lanes: int):
        self.pointers, self.lanes = pointers, lanes
        defined = _block_definitions(before)
        self.chain, value, kinds = [], pointers, ("getelementptr",)
        while kinds:
            text = defined.get(value)
            if text is None or not text.startswith(kinds):
                break
            self.chain.append((value, text))
            value = _index_operand(text, lanes)
            kinds = _MADE_OF.get(text.split()[0], ()) if value is not None else ()
        self.innermost = value

    def remade(self, indent: str, names: "_Names", tag: str):
        """(lines making the vector again, its new name); no lines and the vector's own name
        where there is no chain."""
        if not self.chain:
            return [], self.pointers
        renamed = {old: names.v(f"{tag}{depth}") for depth, (old, _) in enumerate(self.chain)}
        return ([f"{indent}{renamed[old]} = {_renaming(text, renamed)}" for old, text in reversed(self.chain)],
                renamed[self.pointers])

    def lane(self, indent: str, names: "_Names", tag: str, lane: int):
        """(lines making lane `lane`'s address as a scalar, its name): from the chain's innermost
        operand where every link has scalar form, else extracted from the vector."""
        inner_type = self._innermost_type()
        scalar = [(old, re.sub(r"<%d x (\w+)>" % self.lanes, r"\1", _SPLAT.sub(r"\2", text))) for old, text in self.chain]
        if inner_type is None or any("<" in text for _, text in scalar):
            return ([f"{indent}{names.v(tag)} = extractelement <{self.lanes} x ptr> {self.pointers}, i64 {lane}"],
                    names.v(tag))
        renamed = {old: names.v(f"{tag}.{depth}") for depth, (old, _) in enumerate(self.chain)}
        renamed[self.innermost] = names.v(f"{tag}.lane")
        lines = [f"{indent}{names.v(tag + '.lane')} = extractelement <{self.lanes} x {inner_type}> {self.innermost}, "
                 f"i64 {lane}"]
        lines += [f"{indent}{renamed[old]} = {_renaming(text, renamed)}" for old, text in reversed(scalar)]
        return lines, renamed[self.pointers]

    def _innermost_type(self):
        """The element type of the chain's innermost operand (an extension's source), or None."""
        text = self.chain[-1][1] if self.chain else ""
        extension = re.match(r"^[sz]ext <%d x (i\d+)> " % self.lanes, text)
        return extension.group(1) if extension else None


def _block_definitions(before: list) -> dict:
    """{value: its definition's text after ` = `} of the lines of the loop's block that `before`
    ends in, through the blocks the splits before it made (their labels are anycuda's: a
    second gather's addresses are often made before the first gather)."""
    defined = {}
    for text in reversed(before):
        if (LABEL.match(text) and not text.startswith("anycuda.")) or text.startswith("define "):
            break
        definition = _DEFINITION.match(text)
        if definition:
            defined.setdefault(definition.group(1), definition.group(2))
    return defined


def _index_operand(text: str, lanes: int):
    """The vector operand a GEP indexes by (its only index), or a shift's, multiplication's or
    extension's first: None where it has none of that form."""
    if text.startswith("getelementptr"):
        parts = arguments(text[len("getelementptr"):])
        if len(parts) != 3 or not parts[1].startswith("ptr ") or not parts[2].startswith(f"<{lanes} x i"):
            return None
        value = parts[2].split()[-1]
    else:
        value = arguments(text.split(">", 1)[1])[0].split()[0] if ">" in text else None
    return value if value and value.startswith("%") else None


def _renaming(text: str, renamed: dict) -> str:
    for old, new in renamed.items():
        text = re.sub(r"(?<![-\w.$%\"])" + re.escape(old) + r"(?![-\w.$\"])", new, text)
    return text


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
    return value, align_suffix(args[at])


def _run_tests(indent: str, names: _Names, chain: _AddressChain, size: int, otherwise: str) -> list:
    """Lines testing the addresses for a run, ending with i1 `run` in the test's block: the
    look at two lanes (for a gather, whether they could also be alike), which goes to block
    `otherwise` where they could not, then every lane's offset from the first."""
    lines = _ends_could_be(indent, names, chain, size, alike=otherwise == "gather")
    lines += [f"{indent}br i1 {names.v('could')}, label %{names.label('test')}, label %{names.label(otherwise)}",
              f"{names.label('test')}:"]
    lines += _offsets_from_first(indent, names, chain)
    return lines + _all_lanes(indent, names.at("run"), f"icmp eq <{chain.lanes} x i64> {names.v('offsets')}, "
                              f"{_steps(chain.lanes, size)}", chain.lanes)


def _in_own_block(line: str, chain: _AddressChain, names: _Names) -> list:
    """The gather or scatter `line` with its address vector made again in its block."""
    made, pointers = chain.remade(line[:len(line) - len(line.lstrip())], names, "address")
    return made + [_renaming(line, {chain.pointers: pointers})]


def _ends_could_be(indent: str, names: _Names, chain: _AddressChain, size: int, alike: bool) -> list:
    """Lines making i1 `could` true where the first and last lanes' addresses are as far apart
    as a run's (or, `alike`, the same): the test of every lane follows only then, so that a
    gather whose lanes step by a row fails on two scalars (_AddressChain)."""
    span = (chain.lanes - 1) * size
    lines = []
    for end, lane in (("end0", 0), ("end1", chain.lanes - 1)):
        made, address = chain.lane(indent, names, end, lane)
        lines += made + [f"{indent}{names.v(end + '.at')} = ptrtoint ptr {address} to i64"]
    lines += [f"{indent}{names.v('span.poison')} = sub i64 {names.v('end1.at')}, {names.v('end0.at')}",
              f"{indent}{names.v('span')} = freeze i64 {names.v('span.poison')}",
              f"{indent}{names.v('could' if not alike else 'could.run')} = icmp eq i64 {names.v('span')}, {span}"]
    if alike:
        lines += [f"{indent}{names.v('could.one')} = icmp eq i64 {names.v('span')}, 0",
                  f"{indent}{names.v('could')} = or i1 {names.v('could.run')}, {names.v('could.one')}"]
    return lines


def _offsets_from_first(indent: str, names: _Names, chain: _AddressChain) -> list:
    """Lines computing `first` (lane 0's address) and `offsets` (each lane's address less it),
    from the addresses frozen: a lane that is off may hold poison (its index loaded by a
    masked load), and a branch on poison is undefined; frozen, it is some fixed address, and
    the lanes that are on keep theirs, so a run found is their run."""
    lanes, wide = chain.lanes, f"<{chain.lanes} x i64>"
    made, pointers = chain.remade(indent, names, "tested")
    return made + [f"{indent}{names.v('frozen')} = freeze <{lanes} x ptr> {pointers}",
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
