"""What a thread keeps across a site, and how it goes on after one.

At a site (a barrier, a warp collective, a yield) a thread's step function returns, and the
block function calls it again later with the site as its resume point. The registers live
across the site are either recomputed after it or spilled (`_plan_spills`): a register that
holds the same value wherever it is live is recomputed; the others go to spill arrays outside
the frames, an element per thread, and a register whose value is thread-linear (analysis/affine.py)
is saved less its form, so that a uniform round may rebuild it from one value (`_reload`).
`suspend` emits the leaving and the resuming.

Spills is a part of FunctionLowering (function.py), which inherits it: its methods read and
write the lowering's state (registers, frame, resume blocks).
"""
from __future__ import annotations

from llvmlite import ir

from ...ptx import ir as pir
from ...ptx.errors import UnsupportedPtx
from .. import abi
from ..analysis import affine, dataflow, suspensions, uniformity
from ..irutil import i32, i64, in_header_scope, load_field, store_field
from ..ops import memcheck
from ..types import I1, I8, I32, I64, llvm_width, type_kind

# sites that wait for nothing of other threads: not synccheck's
UNCHECKED_SITES = ("yield", "mbar_wait")
_FOLD = {"and": lambda a, b: a & b, "or": lambda a, b: a | b, "xor": lambda a, b: a ^ b,
         "add": lambda a, b: a + b, "sub": lambda a, b: a - b, "mul": lambda a, b: a * b,
         "shl": lambda a, b: a << b, "lshr": lambda a, b: a >> b}


def _byte_width(ty) -> int:
    """Bytes of an integer or floating-point LLVM type."""
    return {"float": 4, "double": 8, "half": 2}.get(str(ty)) or ty.width // 8


def _constant_int(v):
    """The unsigned value of an integer expression built from constants only (llvmlite's
    builder does not fold them), or None."""
    if not isinstance(v.type, ir.IntType):
        return None
    mask = (1 << v.type.width) - 1
    if isinstance(v, ir.Constant):
        return v.constant & mask if isinstance(v.constant, int) else None
    if not isinstance(v, ir.Instruction):
        return None
    ops = [_constant_int(o) if isinstance(getattr(o, "type", None), ir.IntType) else None for o in v.operands]
    if any(o is None for o in ops):
        return None
    if v.opname in _FOLD and len(ops) == 2:
        return _FOLD[v.opname](*ops) & mask
    if v.opname in ("zext", "trunc") and len(ops) == 1:
        return ops[0] & mask
    if v.opname == "icmp" and len(ops) == 2 and v.op in ("eq", "ne"):
        return int((ops[0] == ops[1]) == (v.op == "eq"))
    return None


class Spills:
    """A function's spills and suspension (see the module docstring): a part of
    FunctionLowering."""

    # Registers live across a site are either recomputed after it or spilled. A register with
    # one definition, by a pure integer instruction of constants, special registers that
    # stay fixed for a thread (its index, the block's), kernel parameters, symbol addresses
    # and other such registers, holds the same value wherever it is live: it is recomputed
    # (this keeps addresses such as shared-array rows visible to the vectoriser as functions
    # of the thread index, and spares the spill traffic). Others go to spill arrays outside
    # the frames, one per register with elements of the register's size (thread t's value at
    # spill + MAX_BLOCK_THREADS * offset + t * size), so that a loop
    # over threads saves and reloads them with contiguous vector stores and loads.
    REMAT_OPCODES = frozenset(("mov", "add", "sub", "mul", "mad", "shl", "shr", "and", "or", "xor",
                               "not", "cvta", "cvt", "ld", "selp", "min", "max"))
    REMAT_SPECIAL = frozenset(("tid", "ntid", "ctaid", "nctaid", "laneid", "warpid", "nwarpid",
                               "lanemask_eq", "lanemask_lt", "lanemask_le", "lanemask_gt", "lanemask_ge"))
    REMAT_MAX_CHAIN = 16

    def _plan_spills(self, body):
        if not self.site_live:
            return          # a kernel without sites keeps nothing across one
        self._require_declared(body, {r for regs in self.site_live.values() for r in regs})
        if self.mc.quick:
            # quick code keeps saved registers in their spill arrays: saving costs nothing, so
            # nothing is recomputed instead, and no site asks what was written since a resume
            self._lay_out_spills({r for regs in self.site_live.values() for r in regs})
            return
        if not self.mc.lean:      # (what the registers' saved forms and rebuilds need: not lean code)
            self.block_uniform = self.registers_alike()
        defs = dataflow.definition_positions(body)
        cost = {}

        def chain(r):
            """Instructions needed to recompute r (each register's count once per register
            that reads it), or None: at most REMAT_MAX_CHAIN; None for a cycle. Iterative
            (a chain of thousands of registers would pass Python's recursion limit), each
            register's definition read once: O(n) over all calls."""
            todo = [(r, None)]
            while todo:
                x, sources = todo.pop()
                if sources is None:              # first visit
                    if x in cost:
                        continue
                    cost[x] = None               # until known; a cycle is not recomputable
                    ps = defs.get(x, [])
                    if len(ps) != 1 or x not in self.regs or not self._pure_definition(body[ps[0]], x):
                        continue
                    sources = [op.name for op in body[ps[0]].operands[1:] if isinstance(op, pir.Reg)]
                    todo.append((x, sources))
                    todo += [(u, None) for u in reversed(sources) if u not in cost]
                else:                            # its sources are known
                    n = 1
                    for u in sources:
                        if cost.get(u) is None:
                            n = None
                            break
                        n += cost[u]
                    if n is not None and n <= self.REMAT_MAX_CHAIN:
                        cost[x] = n
            return cost[r]
        live_regs = sorted({r for regs in self.site_live.values() for r in regs})
        for r in live_regs:
            if chain(r) is not None:
                self.remat[r] = defs[r][0]
        spilled = set()
        reaching = dataflow.reaching_definitions(body, self.branch_targets)

        def fixed(r):
            """{register: definition} for r and what its recomputation reads (one definition each)."""
            out, todo = {}, [r]
            while todo:
                x = todo.pop()
                if x not in out:
                    out[x] = defs[x][0]
                    todo += [op.name for op in body[out[x]].operands[1:] if isinstance(op, pir.Reg)]
            return out
        for site, regs in self.site_live.items():
            here = {}
            for r in regs:
                if r in self.remat:
                    continue
                need = self._recomputable_at(body, reaching, chain, fixed, r, site, site, 0)
                if need is None:
                    spilled.add(r)
                else:
                    here.update(need)
            if here:
                self.remat_at[site] = here
        for back, leave in self.yield_pairs:
            # the same at both ends of a loop's round (see lower)
            if self.remat_at.get(back) != self.remat_at.get(leave):
                for pos in (back, leave):
                    spilled |= {r for r in self.remat_at.pop(pos, {}) if r in self.site_live[pos]}
        self.written = dataflow.written_since_resume(body, self.branch_targets,
                                                     {pos: set(need) for pos, need in self.remat_at.items()},
                                                     {pos: set(regs) for pos, regs in self.site_live.items()})
        for back, leave in self.yield_pairs:
            written = self.written.get(back, set()) | self.written.get(leave, set())
            self.written[back] = self.written[leave] = written
        for r in list(self.remat):
            self.remat.update(fixed(r))     # what a recomputation reads is recomputed with it
        self._lay_out_spills(spilled)
        if self.mc.lean:
            return
        inductions = {loop.induction for loop in self.stride_loop_at.values()}
        params = self.mc.kernel_params(self.pfn)
        self.linear_forms = {r: f for r, f in affine.thread_linear_forms(body, params).items()
                             if r in self.spill_slots and r not in inductions and r not in self.block_uniform
                             and self.regs[r][0].type.pointee == I32}
        if uniformity.control_uniform(body, params):
            # every thread saves the same value: the scheduler need not compare them
            self.proven_alike = self.block_uniform | uniformity.uniform_remainders(body, params, self.linear_forms)

    def _require_declared(self, body, names):
        """A register live across a site that no .reg declares is the error the lowering of its
        first instruction would give (the plan looks registers up before any instruction is
        lowered: a fuzzed kernel whose %rd2 was renamed everywhere but in its declaration
        ended in a KeyError here)."""
        missing = names - self.regs.keys()
        if not missing:
            return
        for st in body:
            if isinstance(st, pir.Instruction):
                named = [r for r in sum(dataflow.defs_uses(st), ()) if r in missing]
                if named:
                    self.inst = st
                    raise self.error(f"undeclared register {named[0]}")
        raise self.error(f"undeclared register {sorted(missing)[0]}")

    def _lay_out_spills(self, spilled):
        """Each saved register's spill array: largest elements first, which keeps every array
        aligned to its element size."""
        size = lambda r: max(llvm_width(self.regs[r][0].type.pointee) // 8, 1)
        off = 0
        for r in sorted(spilled, key=lambda r: (-size(r), r)):
            self.spill_slots[r] = (off, size(r))
            off += size(r)
        self.spill_bytes = (off + 7) // 8 * 8

    def _recomputable_at(self, body, reaching, chain, fixed, r, at, site, depth):
        """{register: position of its definition} to run at `site`'s resume so that r holds
        what it held when read at position `at` (the site itself, or an instruction of the
        chain), or None. Each register of the chain must have one reaching definition, the
        same at `at` and at the site, placed before its reader, by a pure integer instruction
        of fixed values (as for registers recomputed everywhere: see chain in _plan_spills).
        nvcc reuses registers: `%r92 = %tid.x` becomes a later loop's index, and is then
        recomputed at the sites before that loop and saved only at those after it."""
        if chain(r) is not None:
            return fixed(r)
        pos = reaching.only(at, r)
        if pos is None or pos != reaching.only(site, r) or depth > self.REMAT_MAX_CHAIN or r not in self.regs:
            return None
        st = body[pos]
        if pos >= at or not self._pure_definition(st, r):
            return None
        need = {r: pos}
        for op in st.operands[1:]:
            if isinstance(op, pir.Reg):
                sub = self._recomputable_at(body, reaching, chain, fixed, op.name, pos, site, depth + 1)
                if sub is None:
                    return None
                need.update(sub)
        return need

    def _pure_definition(self, st, r) -> bool:
        """`st` writes integer register r, and only that, from immediates, symbol addresses,
        kernel parameters, special registers fixed for the thread and other registers (whose
        own definitions the caller checks): running it again gives the same r."""
        if st.guard is not None or st.opcode not in self.REMAT_OPCODES or "cc" in st.mods:
            return False
        ops = st.operands
        if not ops or not isinstance(ops[0], pir.Reg) or ops[0].name != r:
            return False
        if type_kind(self.regs[r][1]) != "int" or self.regs[r][1] == "pred":
            return False
        if st.opcode == "ld" and ("param" not in st.mods or len(ops) != 2 or not self.is_kernel_param(ops[1])):
            return False
        for op in ops[1:]:
            if isinstance(op, pir.SpecialReg) and op.name not in self.REMAT_SPECIAL:
                return False
            if isinstance(op, pir.Addr) and st.opcode != "ld":
                return False
            if not isinstance(op, (pir.Reg, pir.SpecialReg, pir.Addr, pir.Imm, pir.Sym)):
                return False
        return True

    # ------------------------------------------------------------------ suspension
    def suspend(self, kind: str, operands: dict, results):
        """Leave the step function at a site and continue after it on resume.

        operands: {'op_a': i64 value, 'op_b': i32, ...} stored in the frame header;
        results: callable(builder) run in the resume block to write destinations."""
        if not self.is_kernel:
            raise self.error(f"{self.inst.opcode} inside a device function that was not inlined "
                             "is not supported", UnsupportedPtx)
        b = self.b
        live = self.site_live.get(self.inst_pos, [])
        self.sites.append(abi.SITE[kind])
        site = len(self.sites)
        self.site_at[self.inst_pos] = site
        if self.mc.tool == "synccheck" and kind not in UNCHECKED_SITES:
            # what synccheck's reports name for a thread stopped here (compiler/simt/synccheck.py)
            self.sync_sites[site] = memcheck.record_site(self, kind, "", caller=True)
        # constant operands are stored by the scheduler from its site table (the scheduler's
        # record of where each thread stopped), so that a loop over threads that all reach
        # this site stores nothing per thread into the frames
        consts = {}
        for name, value in operands.items():
            c = _constant_int(value)
            if c is None:
                store_field(b, self.ctx, abi.CTX[name], value)
            else:
                consts[abi.CTX[name]] = (c, value.type.width)
        self.site_consts.append(consts)
        # a register unchanged since the last resume holds what its spill array has
        written = self.written.get(self.inst_pos)
        here = self.remat_at.get(self.inst_pos, {})
        live = [r for r in live if r not in here]
        for r in live:
            if r in self.spill_slots and r not in self.in_spill_arrays and (written is None or r in written):
                value = self.load_slot(self.reg(r)[0])
                if value.type == I1:
                    value = b.zext(value, I8)
                if r in self.linear_forms:
                    value = b.sub(value, self._linear_part(r))
                self.thread_access(b.store(value, self.spill_ptr(r)))
        b.ret(i32(site))
        resume = self.fn.append_basic_block(f"resume{site}")
        self.resume_blocks.append((site, resume))
        b.position_at_end(resume)
        self._reload(live, {})
        rebuilt = self._affine_registers(live)
        if rebuilt:
            cont = self.fn.append_basic_block(f"resumed{site}")
            b.branch(cont)
            again = self.fn.append_basic_block(f"resume{site}.affine")
            self.resume_blocks.append((site + abi.AFFINE_RESUME, again))
            b.position_at_end(again)
            slots = {r: (self.affine_slots + k, stride) for k, (r, stride) in enumerate(rebuilt.items())}
            self.affine_sites[site] = [(slots[r][0],) + self.spill_slots[r] + (stride, self._proven_affine(r, stride))
                                       for r, stride in rebuilt.items()]
            loop = self.stride_loop_at.get(self.inst_pos)
            if loop is not None and not loop.scatters:
                # a round with atomics stays scalar: its own min/max reductions would cost
                # more than the vectorised passes they replace (histogram)
                self.self_checked_sites.add(site)
            self.affine_slots += len(rebuilt)
            self._reload(live, slots)
            b.branch(cont)
            b.position_at_end(cont)
        self._recompute([r for r in live if r not in self.spill_slots], here)
        if results is not None:
            results(b)

    def _affine_registers(self, live):
        """{register: stride} of the saved 32- and 64-bit integer registers that a uniform
        round may rebuild (see _reload): at a grid-stride loop's back-edge yield its
        induction register (first + t), at such a yield or a block barrier the registers
        every thread computes alike (first)."""
        inst = self.inst
        if self.mc.lean or not (suspensions.is_yield(inst) or suspensions.is_block_barrier(inst)):
            return {}
        saved = [r for r in live if r in self.spill_slots and type_kind(self.regs[r][1]) == "int"
                 and self.regs[r][1] != "pred" and self.spill_slots[r][1] in (4, 8)]
        strides = {r: 0 for r in saved if r in self.block_uniform or r in self.linear_forms}
        loop = self.stride_loop_at.get(self.inst_pos)
        induction = loop.induction if loop is not None else None
        if induction in saved:
            strides[induction] = 1
        return strides

    def _proven_affine(self, r, stride) -> bool:
        """Whether saved register r is known to have its affine form at every stop (stride 0:
        one value in all threads, control_uniform), so that the scheduler may take it
        without comparing the threads' values. An induction's first + t is always compared."""
        return stride == 0 and r in self.proven_alike

    # When a uniform round resumes every thread of a block at a grid-stride loop's back edge,
    # the loop's induction register usually holds first + t for thread t (the threads started
    # at consecutive indices and took the same steps), and at a barrier a tile loop's counter
    # holds the same value in every thread. Reloaded from its spill array, the vectoriser sees
    # each access such a register addresses as a gather; the scheduler checks the spill array
    # for that form (stride 1 or 0) and, where it holds, resumes at `site + AFFINE_RESUME`,
    # where the register is the step's induction argument (stride 1: first + t, counted by
    # the scheduler) or `first` read from a slot after the block's header (stride 0):
    # accesses by neighbouring threads are then contiguous vectors.
    def _reload(self, live, affine_slots):
        b = self.b
        for r in live:
            if r not in self.spill_slots or r in self.in_spill_arrays:
                continue
            if r in affine_slots:
                slot = self.reg(r)[0]
                index, stride = affine_slots[r]
                if stride:
                    # first + t, counted by the scheduler's loop over the threads: as a counter of
                    # that loop (rather than first + t here) the vectoriser makes it a vector
                    # induction, not eight scalars gathered into a vector
                    value = self.step_arg("induction")
                    if slot.type.pointee.width < 64:
                        value = b.trunc(value, slot.type.pointee)
                else:
                    slot_value = load_field(b, self.step_arg("header"), abi.FRAME_HEADER + 8 * index, slot.type.pointee)
                    value = self.thread_access(in_header_scope(b.module, slot_value))
            else:
                value = self.thread_access(b.load(self.spill_ptr(r)))
                if self.reg(r)[0].type.pointee == I1:
                    value = b.trunc(value, I1)
            if r in self.linear_forms:
                value = b.add(value, self._linear_part(r))
            self.store_slot(value, self.reg(r)[0])
            self.set_shadow(r, value)

    def _linear_part(self, r):
        """i32: register r's thread-linear form (affine.thread_linear_forms) evaluated for
        this thread. A saved register of such a form is stored without it and gets it back
        on resume: what is stored is then often the same in every thread (a tile's row start),
        which a uniform round rebuilds from one value, so that r's accesses vectorise."""
        b = self.b
        total = i32(0)
        for axis, factor, k in affine.linear_terms(self.linear_forms[r]):
            term = b.mul(self.fn.args[3 + "xyz".index(axis)], i32(k))
            if factor is not None and factor.startswith("%"):
                name, comp = factor[1:].split(".")
                term = b.mul(term, self.special(pir.SpecialReg(name, comp)))
            elif factor is not None:
                value, _ = self.kernel_param_value(pir.Addr(pir.Sym(factor)), 0, "b32")
                term = b.mul(term, value)
            total = b.add(total, term)
        return total

    def _keep_saved_registers_in_spill_arrays(self):
        """Quick code: a register that some site saves lives in its spill array all along (its
        slot is this thread's element there, addressed once at the entry), so that no site
        saves it and no resume reloads it. Unoptimised, each save and each reload was three
        instructions per register and site (a third of a barrier-heavy kernel's code), and an
        access to the array costs what one to a stack slot does; optimised code keeps
        registers in stack slots, which LLVM makes values. Predicates stay saved as bytes."""
        for r in list(self.spill_slots):
            slot, decl = self.regs[r]
            if slot.type.pointee != I1:
                self.regs[r] = (self.spill_ptr(r), decl)
                self.in_spill_arrays.add(r)

    def spill_ptr(self, r):
        off, size = self.spill_slots[r]
        slot = self.reg(r)[0]
        # a predicate is saved as a byte: the vectoriser refuses i1 memory accesses (their
        # vector would pack bits), and with them the whole loop over threads
        ty = I8 if slot.type.pointee == I1 else slot.type.pointee
        # arrays sized for the largest block: constant distances between them tell LLVM that
        # they do not overlap. This thread's element of the arrays of each type is addressed
        # once per call (a kernel's sites reload and save hundreds of registers), each array
        # then by a constant index from it: one instruction per access, not three
        start = abi.MAX_BLOCK_THREADS * off
        if _byte_width(ty) != size or start % size:
            raise AssertionError(f"spill slot of {size} bytes at {off} for {ty}")
        key = (size, str(ty))
        if key not in self._thread_offsets:
            self._thread_offsets[key] = self.entry_value(
                lambda e: e.bitcast(e.gep(self.step_arg("spill"), [e.mul(e.sext(self.fn.args[6], I64), i64(size))]),
                                    ty.as_pointer()))
        first = self._thread_offsets[key]
        return self.b.gep(first, [i64(start // size)]) if start else first

    def _recompute(self, regs, here):
        """Run again the definitions of registers that _plan_spills chose to recompute: those
        recomputed everywhere (regs) and those recomputed at this site (here: {register:
        definition})."""
        need, todo = set(), list(regs)
        while todo:
            r = todo.pop()
            if r in need:
                continue
            need.add(r)
            st = self.pfn.body[self.remat[r]]
            todo += [op.name for op in st.operands[1:] if isinstance(op, pir.Reg)]
        positions = {self.remat[r] for r in need} | set(here.values())     # `here` is closed already
        saved = self.inst, self.inst_pos
        for pos in sorted(positions):
            self.inst, self.inst_pos = self.pfn.body[pos], pos
            self.lower_instruction(self.inst)
        self.inst, self.inst_pos = saved
