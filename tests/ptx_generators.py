"""Generated PTX kernels of any size, with a numpy model of what they compute.

`random_kernel(n, seed)` gives a kernel of about n instructions: deep nests of counted
loops (constant, block-uniform and per-thread trip counts, tested at the top or the bottom,
some with a `break`), if/else diamonds and one-sided ifs, predicated instructions, guarded
early exits, grid-stride loops, loops with barriers and a shared-memory exchange, warp
shuffles, loads from and stores to parameter buffers, integer and float arithmetic.
`small_loops_kernel(loops, seed)` gives a flat run of small loops (the issue's "3,000
instructions, 125 small loops").

Both return a GeneratedKernel: its PTX text and `expected(inp, finp, n, grid, block)`, the
output buffer the kernel leaves, computed by a masked numpy model of the same program tree
(every thread of the grid at once, one lane per thread). Barriers and shuffles are placed
only where every thread of a block runs them together (no per-thread branch, loop or early
exit around or before them), as CUDA requires; per-thread early exits come after the last
barrier.

The kernel: `gen(.u64 inp, .u64 finp, .u64 out, .u32 n)`; inp holds IN_WORDS u32 words,
finp IN_WORDS f32 values, out SLOTS u32 words per thread of the grid (thread gid's at
out[gid * SLOTS:]). Floats stay within +-8192 (each update halves what it had), so every
f32 operation is exact or rounded the same way by numpy and by the CPU.
"""
from __future__ import annotations

import random
import struct
from dataclasses import dataclass

import numpy as np

IN_WORDS = 4096                  # inp and finp length (a power of two: indices are masked)
SLOTS = 16                       # output words per thread
INT_ACCS = 8                     # %ra0..: integer accumulators, stored at the end
FLOAT_ACCS = 4                   # %fa0..: float accumulators
HEADER = ".version 8.0\n.target sm_80\n.address_size 64\n\n"


def _f32(x: float) -> str:
    return "0f%08X" % struct.unpack("<I", struct.pack("<f", x))[0]


# ------------------------------------------------------------------ the program tree
# Each node is a tuple whose first item names its kind; registers are PTX names.
#   ("int", op, d, a, b[, c])   op: add sub mul.lo xor and or shl shr min max mad.lo
#   ("guarded", p, negated, op, d, a, b)   an integer op under a predicate
#   ("setp", cmp, p, a, b)
#   ("fupd", fd, fs, r)         fd = fd * 0.5 + fs * 0.25 + float(r & 1023)
#   ("f2i", d, f)               d ^= cvt.rzi.s32(f)
#   ("load", d, idx)            d = inp[idx & mask] (+ d)
#   ("fload", fd, idx)          fd = fd * 0.5 + finp[idx & mask]
#   ("store", slot, r)          out[gid * SLOTS + slot] = r
#   ("if", p, negated, then, else)
#   ("loop", c, trip, body, top_test, brk)   trip: an immediate or a register; brk: (p, negated) or None
#   ("stride", i, acc, body)    for (i = gid; i < n; i += ntid * nctaid) acc += inp[i & mask]; body
#   ("barrier_loop", c, trip, r)   trip times: s[tid] = r; bar; r += s[(tid + 1) % ntid]; bar
#   ("shfl", d, r, k)           d = shfl.bfly(r, k) (whole warps)
#   ("exit", p, negated)        the threads where p (or !p) holds leave


@dataclass
class GeneratedKernel:
    ptx: str
    tree: list
    instructions: int
    name: str = "gen"

    def expected(self, inp, finp, n, grid: int, block: int, out=None) -> np.ndarray:
        """The out buffer after a launch of grid x block threads (1-D), given its contents
        before (`out`, poison for instance)."""
        return _Model(self, inp, finp, n, grid, block, out).run()

    def check_launch(self, grid: int, block: int, rng, n: int = None) -> None:
        """Launch the kernel through anycuda on fresh random inputs and a poisoned output
        (n: the threads that work, random when None) and compare each word with the model."""
        import anycuda as ac
        inp = rng.integers(0, 2 ** 32, IN_WORDS, dtype=np.uint32)
        finp = rng.random(IN_WORDS, dtype=np.float32)
        n = int(rng.integers(1, 3 * grid * block)) if n is None else n
        before = np.full(grid * block * SLOTS, 0xCDCDCDCD, np.uint32)
        want = self.expected(inp, finp, n, grid, block, before)
        f = ac.RawModule(ptx=self.ptx, name=f"{self.name}.ptx").get_function(self.name)
        out = ac.asarray(before)
        f((grid,), (block,), (ac.asarray(inp), ac.asarray(finp), out, np.uint32(n)))
        wrong = np.nonzero(out.get() != want)[0]
        assert not len(wrong), (f"{self.name}: {len(wrong)} words differ (grid {grid}, block {block}, n {n}), first "
                                f"threads {sorted(set(wrong[:20] // SLOTS))}, slots {sorted(set(wrong[:20] % SLOTS))}")


def _operand(x) -> str:
    return str(x) if isinstance(x, int) else x


class _Generator:
    """Builds a random program tree, counting the instructions it will emit (size)."""

    def __init__(self, seed: int, uniform_branches: float = 0.0):
        self.rnd = random.Random(seed)
        self.uniform_branches = uniform_branches      # the share of conditions alike in every thread
        self.count = 0
        self.next = {"r": 1, "f": 1, "rd": 1, "p": 1}
        self.int_accs = [f"%ra{i}" for i in range(INT_ACCS)]
        self.float_accs = [f"%fa{i}" for i in range(FLOAT_ACCS)]

    def reg(self, kind: str) -> str:
        n = self.next[kind]
        self.next[kind] += 1
        return f"%{kind}{n}"

    def add(self, out: list, node) -> None:
        out.append(node)
        self.count += _own_size(node)

    def acc(self) -> str:
        return self.rnd.choice(self.int_accs)

    def facc(self) -> str:
        return self.rnd.choice(self.float_accs)

    def straight(self, k: int, loads=True) -> list:
        """About k instructions of straight-line arithmetic."""
        out, rnd = [], self.rnd
        start = self.count
        while self.count - start < k:
            roll = rnd.random()
            d, a, b = self.acc(), self.acc(), self.acc()
            if roll < 0.40:
                op = rnd.choice(("add", "sub", "mul.lo", "xor", "and", "or", "min", "max"))
                src = b if rnd.random() < 0.7 else rnd.randrange(1, 1 << 16)
                self.add(out, ("int", op, d, a, src))
            elif roll < 0.50:
                self.add(out, ("int", rnd.choice(("shl", "shr")), d, a, rnd.randrange(1, 13)))
            elif roll < 0.58:
                self.add(out, ("int", "mad.lo", d, a, rnd.randrange(3, 99), b))
            elif roll < 0.70:
                self.add(out, ("fupd", self.facc(), self.facc(), a))
            elif roll < 0.75:
                self.add(out, ("f2i", d, self.facc()))
            elif roll < 0.85 and loads:
                self.add(out, ("load", d, a))
            elif roll < 0.90 and loads:
                self.add(out, ("fload", self.facc(), a))
            elif roll < 0.95:
                p = self.reg("p")
                self.add(out, ("setp", rnd.choice(("lt", "ge", "ne")), p, a, rnd.randrange(1 << 16)))
                self.add(out, ("guarded", p, rnd.random() < 0.5, "add", d, d, b))
            else:
                self.add(out, ("store", rnd.randrange(INT_ACCS, SLOTS), a))
        return out

    def condition(self, out: list) -> str:
        """A predicate of the threads' own accumulators, or one alike in every thread (n
        against a number in its range: a whole warp, the whole block, skips one way)."""
        p = self.reg("p")
        if self.uniform_branches and self.rnd.random() < self.uniform_branches:
            self.add(out, ("setp", self.rnd.choice(("lt", "ge")), p, "%rn", self.rnd.randrange(1, 1200)))
            return p
        src = self.rnd.randrange(1 << 32) if self.rnd.random() < 0.5 else self.acc()
        self.add(out, ("setp", self.rnd.choice(("lt", "ge", "ne", "eq")), p, self.acc(), src))
        return p

    def block(self, budget: int, depth: int, uniform: bool, barriers: bool, exits: bool = False) -> list:
        """A sequence of about `budget` instructions. `uniform`: every thread of the block
        runs it together, so barriers and shuffles may go here if `barriers` (none may
        come after a per-thread early exit or inside a loop a thread may leave early);
        `exits`: per-thread early exits may go here (no barrier comes later)."""
        out = []
        start = self.count
        while self.count - start < budget:
            left = budget - (self.count - start)
            roll = self.rnd.random()
            if depth <= 0 or left < 12:
                out += self.straight(min(left, self.rnd.randrange(3, 9)))
            elif roll < 0.30:
                out += self.straight(self.rnd.randrange(3, 12))
            elif roll < 0.55:
                self.make_if(out, left, depth, barriers, exits)
            elif roll < 0.80:
                self.make_loop(out, left, depth, uniform, barriers, exits)
            elif roll < 0.86:
                self.make_stride(out)
            elif roll < 0.93 and uniform and barriers:
                self.make_barrier_loop(out)
            elif roll < 0.96 and uniform and barriers:
                self.add(out, ("shfl", self.acc(), self.acc(), 1 << self.rnd.randrange(5)))
            elif exits:
                p = self.condition(out)
                self.add(out, ("exit", p, self.rnd.random() < 0.5))
        return out

    def make_if(self, out, left, depth, barriers, exits=False) -> None:
        """`@p bra SKIP; then; [bra END; SKIP: else; END:]` (p or !p)."""
        p = self.condition(out)
        size = self.rnd.randrange(6, max(7, min(left, 400)))
        two_sided = self.rnd.random() < 0.6
        node = ["if", p, self.rnd.random() < 0.5, [], None]
        self.add(out, node)
        node[3] = self.block(size // 2 if two_sided else size, depth - 1, False, barriers, exits)
        if two_sided:
            node[4] = self.block(size // 2, depth - 1, False, barriers, exits)
            self.count += 1

    def make_loop(self, out, left, depth, uniform, barriers, exits=False) -> None:
        rnd = self.rnd
        kind = rnd.random()
        if kind < 0.4:
            trip, per_thread = rnd.randrange(1, 4), False
        else:
            trip = self.reg("r")         # from n (the same in every thread) or from an accumulator
            per_thread = kind >= 0.6
            self.add(out, ("int", "and", trip, self.acc() if per_thread else "%rn", 1))
            self.add(out, ("int", "add", trip, trip, 1))
        inner_uniform = uniform and not per_thread
        node = ["loop", self.reg("r"), trip, [], rnd.random() < 0.4, self.reg("p")]
        self.add(out, node)
        size = rnd.randrange(8, max(9, min(left, 500)))
        body = node[3] = self.block(size, depth - 1, inner_uniform, barriers and inner_uniform, exits)
        if rnd.random() < 0.25 and not (barriers and inner_uniform):     # no barrier after a break
            p = self.condition(body)
            self.add(body, ("break", p, rnd.random() < 0.5))
            body += self.straight(rnd.randrange(2, 6))

    def make_stride(self, out) -> None:
        node = ["stride", self.reg("r"), self.acc(), [], self.reg("p"), self.reg("r"), self.reg("rd")]
        self.add(out, node)
        node[3] = self.straight(self.rnd.randrange(2, 8), loads=False)

    def make_barrier_loop(self, out) -> None:
        self.add(out, ("barrier_loop", self.reg("r"), self.rnd.randrange(1, 4), self.acc(), self.reg("p"),
                       self.reg("r")))

    def prologue_size(self):
        self.count += _PROLOGUE + 2 * INT_ACCS + 2 * FLOAT_ACCS

    def epilogue(self) -> list:
        out = [("store", i, a) for i, a in enumerate(self.int_accs)]
        for i, f in enumerate(self.float_accs):
            t = self.reg("r")
            out += [("fbits", t, f), ("store", INT_ACCS + i, t)]
        for node in out:
            self.count += _own_size(node)
        return out


_PROLOGUE = 24          # instructions of _Emitter.prologue before the accumulators
_SIZES = {"int": 1, "guarded": 1, "setp": 1, "fupd": 5, "f2i": 2, "load": 5, "fload": 5, "store": 2,
          "shfl": 1, "exit": 1, "break": 1, "fbits": 1, "if": 1, "stride": 11, "barrier_loop": 9}


def _own_size(node) -> int:
    """Instructions a node emits besides those of the nodes it holds."""
    if node[0] == "loop":
        return 5 if node[4] else 4          # mov, add, setp, @p bra, and a bra back when tested at the top
    return _SIZES[node[0]]


class _Emitter:
    """PTX text of a program tree."""

    def __init__(self, regs: dict):
        self.lines = []
        self.count = 0
        self.label_no = 0
        self.loop_ends = []
        self.regs = regs

    def label(self, stem: str) -> str:
        self.label_no += 1
        return f"$L_{stem}{self.label_no}"

    def inst(self, text: str):
        self.lines.append("    " + text + ";")
        self.count += 1

    def put_label(self, name: str):
        self.lines.append(name + ":")

    def temp(self, kind: str) -> str:
        n = self.regs[kind]
        self.regs[kind] += 1
        return f"%{kind}{n}"

    def seq(self, nodes):
        for node in nodes:
            self.node(node)

    def node(self, node):
        kind = node[0]
        inst = self.inst
        if kind == "int":
            op, d, a, *srcs = node[1:]
            ty = "u32" if op in ("add", "sub", "mul.lo", "min", "max", "shr", "mad.lo") else "b32"
            inst(f"{op}.{ty} {d}, {_operand(a)}, {', '.join(_operand(s) for s in srcs)}")
        elif kind == "guarded":
            p, negated, op, d, a, src = node[1:]
            inst(f"@{'!' if negated else ''}{p} {op}.u32 {d}, {_operand(a)}, {_operand(src)}")
        elif kind == "setp":
            cmp, p, a, src = node[1:]
            inst(f"setp.{cmp}.u32 {p}, {a}, {_operand(src)}")
        elif kind == "fupd":
            fd, fs, r = node[1:]
            t, f1, f2 = self.temp("r"), self.temp("f"), self.temp("f")
            inst(f"and.b32 {t}, {r}, 1023")
            inst(f"cvt.rn.f32.u32 {f1}, {t}")
            inst(f"mul.rn.f32 {f2}, {fs}, {_f32(0.25)}")
            inst(f"fma.rn.f32 {fd}, {fd}, {_f32(0.5)}, {f2}")
            inst(f"add.rn.f32 {fd}, {fd}, {f1}")
        elif kind == "f2i":
            d, f = node[1:]
            t = self.temp("r")
            inst(f"cvt.rzi.s32.f32 {t}, {f}")
            inst(f"xor.b32 {d}, {d}, {t}")
        elif kind in ("load", "fload"):
            d, idx = node[1:]
            t, rd = self.temp("r"), self.temp("rd")
            inst(f"and.b32 {t}, {idx}, {IN_WORDS - 1}")
            inst(f"mul.wide.u32 {rd}, {t}, 4")
            if kind == "load":
                inst(f"add.s64 {rd}, %rdin, {rd}")
                inst(f"ld.global.u32 {t}, [{rd}]")
                inst(f"add.u32 {d}, {d}, {t}")
            else:
                f = self.temp("f")
                inst(f"add.s64 {rd}, %rdfin, {rd}")
                inst(f"ld.global.f32 {f}, [{rd}]")
                inst(f"fma.rn.f32 {d}, {d}, {_f32(0.5)}, {f}")
        elif kind == "store":
            slot, r = node[1:]
            rd = self.temp("rd")
            inst(f"add.s64 {rd}, %rdme, {4 * slot}")
            inst(f"st.global.u32 [{rd}], {r}")
        elif kind == "fbits":
            inst(f"mov.b32 {node[1]}, {node[2]}")
        elif kind == "shfl":
            d, r, k = node[1:]
            inst(f"shfl.sync.bfly.b32 {d}, {r}, {k}, 31, -1")
        elif kind == "exit":
            p, negated = node[1:]
            inst(f"@{'!' if negated else ''}{p} ret")
        elif kind == "break":
            p, negated = node[1:]
            inst(f"@{'!' if negated else ''}{p} bra {self.loop_ends[-1]}")
        elif kind == "if":
            p, negated, then, else_ = node[1:]
            skip = self.label("skip")
            inst(f"@{'!' if negated else ''}{p} bra {skip}")
            self.seq(then)
            if else_ is None:
                self.put_label(skip)
            else:
                end = self.label("end")
                inst(f"bra {end}")
                self.put_label(skip)
                self.seq(else_)
                self.put_label(end)
        elif kind == "loop":
            c, trip, body, top_test, p = node[1:]
            head, end = self.label("loop"), self.label("done")
            inst(f"mov.u32 {c}, 0")
            self.put_label(head)
            if top_test:
                inst(f"setp.ge.u32 {p}, {c}, {_operand(trip)}")
                inst(f"@{p} bra {end}")
            self.loop_ends.append(end)
            self.seq(body)
            self.loop_ends.pop()
            inst(f"add.u32 {c}, {c}, 1")
            if top_test:
                inst(f"bra {head}")
            else:
                inst(f"setp.lt.u32 {p}, {c}, {_operand(trip)}")
                inst(f"@{p} bra {head}")
            self.put_label(end)
        elif kind == "stride":
            # for (i = gid; i < n; i += ntid * nctaid) { acc += inp[i & mask]; body }
            i, acc, body, p, t, rd = node[1:]
            head, end = self.label("stride"), self.label("strided")
            inst(f"mov.u32 {i}, %rgid")
            inst(f"setp.ge.u32 {p}, {i}, %rn")
            inst(f"@{p} bra {end}")
            self.put_label(head)
            inst(f"and.b32 {t}, {i}, {IN_WORDS - 1}")
            inst(f"mul.wide.u32 {rd}, {t}, 4")
            inst(f"add.s64 {rd}, %rdin, {rd}")
            inst(f"ld.global.u32 {t}, [{rd}]")
            inst(f"add.u32 {acc}, {acc}, {t}")
            self.seq(body)
            inst(f"add.u32 {i}, {i}, %rstride")
            inst(f"setp.lt.u32 {p}, {i}, %rn")
            inst(f"@{p} bra {head}")
            self.put_label(end)
        elif kind == "barrier_loop":
            # trip times: s[tid] = r; bar.sync; r += s[(tid + 1) % ntid]; bar.sync
            c, trip, r, p, t = node[1:]
            head = self.label("bar")
            inst(f"mov.u32 {c}, 0")
            self.put_label(head)
            inst(f"st.shared.u32 [%rsme], {r}")
            inst("bar.sync 0")
            inst(f"ld.shared.u32 {t}, [%rsnext]")
            inst(f"add.u32 {r}, {r}, {t}")
            inst("bar.sync 0")
            inst(f"add.u32 {c}, {c}, 1")
            inst(f"setp.lt.u32 {p}, {c}, {trip}")
            inst(f"@{p} bra {head}")
        else:
            raise ValueError(kind)

    def prologue(self):
        for text in ("ld.param.u64 %rdin, [inp]", "ld.param.u64 %rdfin, [finp]", "ld.param.u64 %rdout, [out]",
                     "ld.param.u32 %rn, [n]", "cvta.to.global.u64 %rdin, %rdin",
                     "cvta.to.global.u64 %rdfin, %rdfin", "cvta.to.global.u64 %rdout, %rdout",
                     "mov.u32 %rtid, %tid.x", "mov.u32 %rntid, %ntid.x", "mov.u32 %rctaid, %ctaid.x",
                     "mov.u32 %rnctaid, %nctaid.x", "mad.lo.u32 %rgid, %rctaid, %rntid, %rtid",
                     "mul.lo.u32 %rstride, %rntid, %rnctaid", f"mul.wide.u32 %rdme, %rgid, {4 * SLOTS}",
                     "add.s64 %rdme, %rdout, %rdme",
                     # %rsme: &s[tid]; %rsnext: &s[(tid + 1) % ntid] (ntid a power of two)
                     "mov.u32 %rsme, sh", "shl.b32 %rsnext, %rtid, 2", "add.u32 %rsme, %rsme, %rsnext",
                     "add.u32 %rsnext, %rtid, 1", "sub.u32 %rt0, %rntid, 1", "and.b32 %rsnext, %rsnext, %rt0",
                     "shl.b32 %rsnext, %rsnext, 2", "mov.u32 %rt0, sh", "add.u32 %rsnext, %rsnext, %rt0"):
            self.inst(text)
        for i in range(INT_ACCS):
            self.inst(f"mad.lo.u32 %ra{i}, %rgid, {2 * i + 3}, {i * 7919}")
        for i in range(FLOAT_ACCS):
            self.inst(f"cvt.rn.f32.u32 %fa{i}, %rtid")
            self.inst(f"mul.rn.f32 %fa{i}, %fa{i}, {_f32(0.125 * (i + 1))}")

    def text(self, name: str) -> str:
        decls = ["    .reg .pred %p<{}>;".format(self.regs["p"] + 1),
                 "    .reg .b32 %r<{}>;".format(self.regs["r"] + 1),
                 "    .reg .f32 %f<{}>;".format(self.regs["f"] + 1),
                 "    .reg .b64 %rd<{}>;".format(self.regs["rd"] + 1),
                 "    .reg .b32 %ra<{}>;".format(INT_ACCS),
                 "    .reg .f32 %fa<{}>;".format(FLOAT_ACCS),
                 "    .reg .b64 %rdin, %rdfin, %rdout, %rdme;",
                 "    .reg .b32 %rn, %rtid, %rntid, %rctaid, %rnctaid, %rgid, %rstride, %rsme, %rsnext, %rt0;",
                 "    .shared .align 4 .b32 sh[1024];"]
        return (HEADER + f".visible .entry {name}(.param .u64 inp, .param .u64 finp, .param .u64 out, "
                f".param .u32 n)\n{{\n" + "\n".join(decls + self.lines) + "\n}\n")


def emit(tree: list, name: str = "gen", regs=None) -> tuple:
    """(PTX text, instruction count) of a kernel whose body is `tree` (with the prologue
    before it and a `ret` after)."""
    e = _Emitter(dict(regs or {"r": 1, "f": 1, "rd": 1, "p": 1}))
    e.regs.update({k: max(v, _max_reg(tree, k) + 1) for k, v in e.regs.items()})
    e.prologue()
    e.seq(tree)
    e.inst("ret")
    return e.text(name), e.count


def _max_reg(tree, kind) -> int:
    """The highest number of a %<kind>N register the tree names."""
    best = 0
    for node in tree:
        for item in node[1:]:
            if isinstance(item, list):
                best = max(best, _max_reg(item, kind))
            elif isinstance(item, str) and item.startswith("%" + kind) and item[1 + len(kind):].isdigit():
                best = max(best, int(item[1 + len(kind):]))
    return best


def _kernel(g: _Generator, tree: list, name: str) -> "GeneratedKernel":
    text, count = emit(tree, name)
    return GeneratedKernel(text, tree, count, name)


def random_kernel(n: int, seed: int = 0, depth: int = 6, name: str = "gen", chunk: int = 1500,
                  uniform_branches: float = 0.0) -> GeneratedKernel:
    """A kernel of about n instructions (see the module docstring): pieces of about `chunk`
    instructions where barriers, shuffles and grid-stride loops go at block-uniform places,
    then a last piece (at most `chunk`, half of a small kernel) with per-thread early exits.
    Kernels of one seed share their first pieces, so that a kernel four times as large is
    four times as much code of the same kind (tests that count work compare the two).
    `uniform_branches`: the share of if conditions that compare n, alike in every thread, so
    that whole warps skip one side (0 keeps the kernels a seed gave before there were any)."""
    g = _Generator(seed, uniform_branches)
    g.prologue_size()
    end = n - 2 * INT_ACCS - 3 * FLOAT_ACCS - 1
    first = end - min(chunk, (end - g.count) // 2)
    tree = []
    while g.count < first:
        tree += g.block(min(chunk, first - g.count), depth, True, True)
    tree += g.block(end - g.count, depth, False, False, True)
    tree += g.epilogue()
    return _kernel(g, tree, name)


def small_loops_kernel(loops: int = 125, seed: int = 0, name: str = "gen") -> GeneratedKernel:
    """A flat run of `loops` small loops (~24 instructions each: a counted loop of a few
    arithmetic instructions and loads; every fifth a loop with a barrier exchange and
    arithmetic after it, every fifth a grid-stride loop)."""
    g = _Generator(seed)
    g.prologue_size()
    tree = []
    for i in range(loops):
        if i % 5 == 4:
            g.make_barrier_loop(tree)
            tree += g.straight(14)
        elif i % 5 == 2:
            g.make_stride(tree)
            tree += g.straight(8)
        else:
            g.make_loop(tree, 18, 1, True, False)
    tree += g.epilogue()
    return _kernel(g, tree, name)


# ------------------------------------------------------------------ the numpy model

class _Model:
    def __init__(self, kernel, inp, finp, n, grid, block, out):
        self.inp = np.asarray(inp, np.uint32)
        self.finp = np.asarray(finp, np.float32)
        self.n = np.uint32(n)
        self.grid, self.block = grid, block
        total = grid * block
        self.tid = np.tile(np.arange(block, dtype=np.uint32), grid)
        self.gid = np.arange(total, dtype=np.uint32)
        self.stride = np.uint32(total)
        self.out = (np.zeros(total * SLOTS, np.uint32) if out is None else np.array(out, np.uint32)).reshape(total, SLOTS)
        self.regs = {}
        self.kernel = kernel
        self.breaks = []
        for i in range(INT_ACCS):
            self.regs[f"%ra{i}"] = (self.gid * np.uint32(2 * i + 3) + np.uint32(i * 7919)).astype(np.uint32)
        for i in range(FLOAT_ACCS):
            self.regs[f"%fa{i}"] = (self.tid.astype(np.float32) * np.float32(0.125 * (i + 1))).astype(np.float32)
        self.regs["%rn"] = np.full(total, self.n, np.uint32)

    def run(self):
        mask = np.ones(len(self.gid), bool)
        with np.errstate(over="ignore"):
            self.seq(self.kernel.tree, mask)
        return self.out.reshape(-1)

    def val(self, x):
        if isinstance(x, int):
            return np.uint32(x & 0xFFFFFFFF)
        return self.regs[x]

    def set(self, d, mask, value):
        old = self.regs.get(d)
        if old is None:
            old = np.zeros(len(self.gid), value.dtype if hasattr(value, "dtype") else np.uint32)
        self.regs[d] = np.where(mask, value, old).astype(old.dtype)

    def seq(self, nodes, mask):
        for node in nodes:
            if not mask.any():
                return mask
            mask = self.step(node, mask)
        return mask

    @staticmethod
    def together(mask, group):
        """A barrier or shuffle: every thread of each group of `group` runs it, or none."""
        m = mask.reshape(-1, group)
        if not (m.all(axis=1) | ~m.any(axis=1)).all():
            raise ValueError("a barrier or shuffle where the threads of a block or warp diverge")

    def intop(self, op, a, b, c=None):
        a = a.astype(np.uint32) if hasattr(a, "astype") else a
        if op == "add":
            return a + b
        if op == "sub":
            return a - b
        if op == "mul.lo":
            return (a.astype(np.uint64) * np.uint64(b)).astype(np.uint32) if np.isscalar(b) else \
                (a.astype(np.uint64) * b.astype(np.uint64)).astype(np.uint32)
        if op == "mad.lo":
            return (a.astype(np.uint64) * np.uint64(b) + c.astype(np.uint64)).astype(np.uint32)
        if op == "xor":
            return a ^ b
        if op == "and":
            return a & b
        if op == "or":
            return a | b
        if op == "min":
            return np.minimum(a, b)
        if op == "max":
            return np.maximum(a, b)
        if op == "shl":
            return a << np.uint32(b)
        if op == "shr":
            return a >> np.uint32(b)
        raise ValueError(op)

    def step(self, node, mask):
        kind = node[0]
        R = self.regs
        if kind == "int":
            op, d, a, *srcs = node[1:]
            c = self.val(srcs[1]) if len(srcs) > 1 else None
            self.set(d, mask, self.intop(op, self.val(a), self.val(srcs[0]), c).astype(np.uint32))
        elif kind == "guarded":
            p, negated, op, d, a, src = node[1:]
            sel = mask & (~R[p] if negated else R[p])
            self.set(d, sel, self.intop(op, self.val(a), self.val(src)).astype(np.uint32))
        elif kind == "setp":
            cmp, p, a, src = node[1:]
            x, y = self.val(a), self.val(src)
            v = {"lt": x < y, "ge": x >= y, "ne": x != y, "eq": x == y}[cmp]
            self.set(p, mask, np.broadcast_to(v, mask.shape))
        elif kind == "fupd":
            fd, fs, r = node[1:]
            f1 = (R[r] & np.uint32(1023)).astype(np.float32)
            f2 = R[fs] * np.float32(0.25)
            v = (R[fd] * np.float32(0.5) + f2).astype(np.float32) + f1    # *0.5 and *0.25 are exact
            self.set(fd, mask, v.astype(np.float32))
        elif kind == "f2i":
            d, f = node[1:]
            t = np.trunc(R[f]).astype(np.int32).view(np.uint32)
            self.set(d, mask, R[d] ^ t)
        elif kind == "load":
            d, idx = node[1:]
            self.set(d, mask, R[d] + self.inp[R[idx] & np.uint32(IN_WORDS - 1)])
        elif kind == "fload":
            d, idx = node[1:]
            v = (R[d] * np.float32(0.5) + self.finp[R[idx] & np.uint32(IN_WORDS - 1)]).astype(np.float32)
            self.set(d, mask, v)
        elif kind == "store":
            slot, r = node[1:]
            self.out[mask, slot] = R[r][mask]
        elif kind == "fbits":
            t, f = node[1:]
            self.set(t, mask, R[f].view(np.uint32))
        elif kind == "shfl":
            d, r, k = node[1:]
            self.together(mask, 32)
            lanes = np.arange(len(mask)) ^ k
            self.set(d, mask, R[r][lanes])
        elif kind in ("exit", "break"):
            p, negated = node[1:]
            leave = mask & (~R[p] if negated else R[p])
            if kind == "break":
                self.breaks[-1] |= leave
            return mask & ~leave
        elif kind == "if":
            p, negated, then, else_ = node[1:]
            # `@p bra skip` (or `@!p`) skips `then` where its guard holds
            skip = ~R[p] if negated else R[p]
            return self.seq(then, mask & ~skip) | self.seq(else_ or [], mask & skip)
        elif kind == "loop":
            c, trip, body, top_test, _ = node[1:]
            self.set(c, mask, np.uint32(0))
            done = np.zeros_like(mask)
            running = mask.copy()
            self.breaks.append(done)
            while running.any():
                if top_test:
                    leave = running & (R[c] >= self.val(trip))
                    done |= leave
                    running &= ~leave
                    if not running.any():
                        break
                running = self.seq(body, running)
                self.set(c, running, R[c] + np.uint32(1))
                if not top_test:
                    again = running & (R[c] < self.val(trip))
                    done |= running & ~again
                    running = again
            self.breaks.pop()
            return done
        elif kind == "stride":
            i, acc, body = node[1:4]
            self.set(i, mask, self.gid)
            running = mask & (R[i] < self.n)
            done = mask & ~running
            while running.any():
                self.set(acc, running, R[acc] + self.inp[R[i] & np.uint32(IN_WORDS - 1)])
                running = self.seq(body, running)
                self.set(i, running, R[i] + self.stride)
                again = running & (R[i] < self.n)
                done |= running & ~again
                running = again
            return done
        elif kind == "barrier_loop":
            c, trip, r = node[1:4]
            self.together(mask, self.block)
            for _ in range(trip):
                v = R[r].reshape(self.grid, self.block)
                nxt = np.roll(v, -1, axis=1).reshape(-1)
                self.set(r, mask, R[r] + nxt)
        else:
            raise ValueError(kind)
        return mask
