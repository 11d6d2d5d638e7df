"""Lowering of one PTX function body to LLVM IR (the per-thread code).

A kernel becomes a *step function* `i32 step(i8* frame, i32 resume)`: it runs one thread from
its resume point until the thread reaches a barrier or warp collective (a *site*), exits or
traps. At a site the thread stores the registers that are live across it and the
collective's operands in its frame and returns the site number; the block scheduler
(simt/blockfunction.py) runs the collective for the whole warp or block and calls step again with
that site as resume point. A `.func` becomes an ordinary LLVM function
`void f(i8* ctx, i8* ret0.., i8* param0..)` whose `.param` arguments are byte buffers.

Instruction semantics live in ops/ (`ops/instructions.py`: the tables and handlers); this module
owns registers, operands, addresses and control flow; spills.py what a thread keeps across a
site and how it resumes.
"""
from __future__ import annotations

import dataclasses

from llvmlite import ir

from ...ptx import ir as pir
from ...ptx.errors import PtxError, UnsupportedPtx
from .. import abi
from ..folding import FoldingBuilder, float_constant
from ..analysis import dataflow, fusion, gridstride, guards, memory, quotients, suspensions, uniformity
from ..irutil import (collection_paused, convert_bits, i32, i64, in_header_scope, in_thread_group, load_field,
                      register_address, store_field)
from ..layout import decl_size, passed_parameters
from ..ops import atomictable, instructions, matrixruns, mbarrier, spinwaits, warpsteps
from ..simt import gridsync, probebounds
from ..types import I1, I8, I32, I64, PTR, llvm_type, llvm_width, type_kind, width
from ..vector import warpregions, warpruns
from .spills import Spills

SPECIAL_FIELDS = {"tid": "tid", "ntid": "ntid", "ctaid": "ctaid", "nctaid": "nctaid"}

# Special registers that read as another one, or as a constant, on anycuda's device model
# (PTX ISA 9.x chapter 10). No launch makes thread block clusters of more than one CTA
# (driver/launches.py takes a 1x1x1 cluster shape only), so a CTA is its own cluster: rank 0 of 1,
# cluster id = CTA id. The device reserves no shared memory (runtime/device.py), so the
# aggregate size is the CTA's own and the reserved region is empty at offset 0; no kernel
# runs inside a device graph; there are no performance counters (%pm*: 0); the driver defines
# no environment registers (%envreg*: 0) but %envreg1/2 (gridsync.GRID_WS_REGISTERS).
SPECIAL_ALIASES = {"clusterid": "ctaid", "nclusterid": "nctaid", "aggr_smem_size": "total_smem_size"}
SPECIAL_CONSTANTS = {"cluster_ctaid": 0, "cluster_nctaid": 1, "cluster_ctarank": 0, "cluster_nctarank": 1,
                     "current_graph_exec": 0,
                     **{name: 0 for name in pir.SPECIAL_REGISTERS
                        if name.startswith(("pm", "envreg", "reserved_smem_offset_"))}}
SHARED_ALLOCATION_UNIT = 128     # %total_smem_size counts in these (the ISA's unit for sm_8x to sm_12x)

# Frame slot (16 bytes after the header, in kernels that make calls) where a kernel tells the
# device functions it calls where its thread's local memory is: i64 the top of its stack region
# (the frames of its callees, with their .local variables and parameter buffers, lie below
# it), then i32 [first, end) offsets from the frame of its .local variables when they live in
# the frame (both 0 when not)
LOCAL_WINDOW_SLOT = abi.FRAME_HEADER


class LoweringError(PtxError):
    pass


# the most .local data one function's thread may have (CUDA's 512 KiB of local memory per
# thread): they lie on a worker's stack, or in the block's frames
LOCAL_BYTES = 512 << 10


class FunctionLowering(Spills):
    """Lowers one PTX function (kernel or device function) into an LLVM function.

    One class of ~800 lines (with Spills, spills.py, ~400 more) because every handler of ops/
    and vector/ is given it as the one view of the function being lowered: its registers and
    their pointer shadows, operands, addresses, frame and control flow, read and written as
    each instruction is lowered."""

    def __init__(self, mc, pfn: pir.Function, llfn: ir.Function, is_kernel: bool):
        self.mc = mc                      # the ModuleLowering that owns symbols and layouts
        self.pfn = pfn
        self._read_memory = None         # (streams)
        self.reads_shared = False         # whether its code reaches the block's shared memory
        self.fn = llfn
        self.is_kernel = is_kernel
        self.regs = {}                    # name -> (alloca, ptx type)
        # A 64-bit register also keeps its value as a pointer, derived from the pointer it was
        # computed from where it was (a parameter plus offsets): memory accesses then reach
        # LLVM as getelementptr chains rather than inttoptr, which its vectoriser can follow.
        # Invariant: the shadow always equals inttoptr of the register's value.
        self.shadows = {}
        self.derived = set()              # registers that were given a derived pointer
        self.last_stored = {}             # stack slot -> (LLVM block, value last stored there in it)
        self.param_values = {}
        self.ptrs = {}                    # name -> i8* (locals, param buffers)
        self.labels = {}
        self.prototypes = {}
        self.branch_targets = {}
        self.sites = []                   # site kinds, index = site number - 1
        self.site_live = {}
        self.spill_slots = {}
        self.frame_size = abi.FRAME_HEADER
        self.local_offsets = {}
        self.local_window = None          # (first, end) frame offsets of the .local variables
        self.publishes_locals = False
        self._stack_mark = None
        self.param_bufs = []              # (i8*, size) of the .param variables declared in the body
        self.depot = None                 # (i8*, size) of the stack slot of the .local variables
        self.resume_blocks = []           # (site number, block that continues after it)
        self.site_consts = []             # per site: {frame slot: int} of its constant operands
        self.remat = {}                   # register -> position of the one instruction that defines it
        self.spill_bytes = 0              # bytes of spill arrays per thread
        self.yield_pairs = []             # (back edge, loop exit) positions of a loop's yields
        self.written = {}                 # suspension position -> registers written since a resume
        self.remat_at = {}                # suspension position -> {register: definition} recomputed there
        self.block_uniform = set()        # registers every thread of a block computes alike
        self.stride_loop_at = {}          # back-edge yield position -> its loop (gridstride.StrideLoop)
        self.affine_sites = {}            # site -> [(header slot, spill offset, size, stride, known)]: see _reload
        self.proven_alike = set()         # saved registers whose saved value is one for the whole block
        self.self_checked_sites = set()   # yield sites whose rounds check themselves (blockfunction.uniform_round)
        self.affine_slots = 0             # header slots after FRAME_HEADER for rebuilt registers
        self.in_spill_arrays = set()      # quick code: registers whose slot is their spill array element
        self.linear_forms = {}            # saved register -> thread-linear form it is saved without
        self.probe_bounds = None          # the block-wide bounds of the known predicates (probebounds.py)
        self.fused_products = {}          # id(add/sub) -> the mul fused into it (fusion.fused_products)
        self.known_branches = {}          # position of a branch a probe settles -> what computes its
                                          # predicate (compiler/analysis/guards.py)
        self.guarded_rounds = {}          # resume site (0: start) -> bits of the known branches it reaches
        self.site_at = {}                 # position of a suspending instruction -> its site
        self.sync_sites = {}              # synccheck: site -> number of its memcheck.Site (Spills.suspend)
        self.advances = {}                # first shuffle's site -> (advance function, last's site): warpruns
        self.regions = {}                 # fixed shuffle's site (0: a site-less kernel's start) -> warpregions' function
        self.matrix_runs = {}             # id(MATRIX_RUN instruction) -> its members (ops/matrixruns.py)
        self.matrix_run = None            # the run whose members are being lowered (matrixruns.MatrixRun)
        self.combined = []                # atomics a block performs once for its threads (ops/aggregation.py)
        self.atomic_table = None          # the table a block's scattered atomics are held in (ops/atomictable.py)
        self.segmenting = None            # the divisions a row's threads run in segments by (analysis/quotients.py)
        self.segment_slots = ()           # per division: frame offsets of its dividend, divisor and quotient
        self.inst = None
        self._analyses = {}               # key -> what `analysed` made once for this body
        self._thread_offsets = {}         # (element size, type) -> this thread's element of the spill arrays (spill_ptr)

    def analysed(self, key, make):
        """make(), made once per key for this function's body (the passes after lowering,
        which make one region or run at a time, share the analyses of the whole body rather
        than each making them anew: that was O(regions * n))."""
        if key not in self._analyses:
            self._analyses[key] = make()
        return self._analyses[key]

    def registers_alike(self) -> set:
        """Integer registers every thread of the block computes alike (uniformity's
        block_uniform_registers of this body, made once; the caller does not change it)."""
        return self.analysed("registers alike", lambda: uniformity.block_uniform_registers(
            self.pfn.body, self.mc.kernel_params(self.pfn)))

    # ------------------------------------------------------------------ errors
    def error(self, msg: str, cls=LoweringError) -> PtxError:
        inst = self.inst
        loc = inst.loc if inst is not None else self.pfn.loc
        return cls(msg, loc.line, loc.col, self.mc.source_name, inst.text if inst is not None else "")

    # ------------------------------------------------------------------ set-up
    @collection_paused
    def lower(self):
        # forms first: the passes read operands by place (the CFG a branch's target)
        self._check_forms(self.pfn.body)
        if self.is_kernel:
            # a wait after each mbarrier test and in each spin on a word, a warp's step before a
            # volatile access: their own sites, which no grid-stride yield may cross
            body = warpsteps.with_steps(spinwaits.with_waits(mbarrier.with_waits(self.pfn.body)))
            self.pfn = dataclasses.replace(self.pfn, body=body)
            if not self.mc.lean:
                self._insert_yields()
            # after the yields, which only go before branches: a run never holds one
            body, self.matrix_runs = matrixruns.grouped(self.pfn.body)
            self.pfn = dataclasses.replace(self.pfn, body=body)
        body = self.pfn.body
        if self.is_kernel and not self.mc.general_only:   # checked and lean kernels take the general path
            self.known_branches = guards.known_branches(body, self.mc.kernel_params(self.pfn))
        self.fused_products = fusion.fused_products(body)
        for st in body:
            if isinstance(st, pir.Prototype):
                self.prototypes[st.name] = st
            elif isinstance(st, pir.BranchTargets):
                self.branch_targets[st.name] = st.targets
        if self.is_kernel:
            self.site_live = dataflow.live_across_suspensions(body, self.branch_targets)
            for back, leave in self.yield_pairs:
                # both ends of a loop's round spill the same registers (a dead one too), so
                # that no spill store is conditional: LLVM would need a masked store
                both = sorted(set(self.site_live[back]) | set(self.site_live[leave]))
                self.site_live[back] = self.site_live[leave] = both
            # a kernel that calls device functions tells them where its .local variables
            # are, in a slot after the frame header (see space_windows)
            self.publishes_locals = any(isinstance(st, pir.Instruction) and st.opcode == "call" for st in body)
            self.frame_size = LOCAL_WINDOW_SLOT + (16 if self.publishes_locals else 0)
            self.atomic_table = atomictable.plan(self)
        entry = self.fn.append_basic_block("entry")
        self.b = b = FoldingBuilder(entry)
        if self.is_kernel:
            self.ctx = self.fn.args[0]
        else:
            self.ctx = self.fn.args[0]
        self.carry = b.alloca(I1, name="carry")
        b.store(ir.Constant(I1, 0), self.carry)
        self._declare_body_vars(body)
        if self.is_kernel and not self.mc.general_only and not self._has_sites():
            self._plan_segments(body)
        self._bind_params()
        if self.is_kernel:
            self._plan_spills(body)
        for st in body:
            if isinstance(st, pir.Label):
                self.labels[st.name] = self.fn.append_basic_block(st.name.replace("$", "_"))
        start = self.fn.append_basic_block("start")
        self.dispatch_block = b.block
        if self.is_kernel and self.mc.quick:
            self._keep_saved_registers_in_spill_arrays()
        b.position_at_end(start)
        if self.is_kernel and self.publishes_locals:
            # the top of the kernel's stack slots: its mark, local slot and call parameter
            # buffers (whose addresses a callee may take) lie in any order in its frame
            top = b.add(b.ptrtoint(self.stack_mark(), I64), i64(1))
            slots = self.param_bufs + ([self.depot] if self.depot is not None else [])
            for p, size in slots:
                end = b.add(b.ptrtoint(p, I64), i64(size))
                top = b.select(b.icmp_unsigned(">", end, top), end, top)
            first, end = self.local_window or (0, 0)
            store_field(b, self.ctx, LOCAL_WINDOW_SLOT, top)
            store_field(b, self.ctx, LOCAL_WINDOW_SLOT + 8, i32(first))
            store_field(b, self.ctx, LOCAL_WINDOW_SLOT + 12, i32(end))
        for pos, st in enumerate(body):
            if isinstance(st, pir.Label):
                target = self.labels[st.name]
                if not b.block.is_terminated:
                    b.branch(target)
                b.position_at_end(target)
            elif isinstance(st, pir.Instruction):
                self.inst = st
                self.inst_pos = pos
                if b.block.is_terminated:
                    b.position_at_end(self.fn.append_basic_block("dead"))
                self.lower_instruction(st)
        self.inst = None
        if not b.block.is_terminated:
            self.emit_return()
        self._emit_dispatch(start)
        self.frame_size = (self.frame_size + 63) // 64 * 64
        if self.mc.general_only:
            pass                          # checked (one place is instrumented: ops/memcheck.py) or lean
        elif self.is_kernel and self.sites:
            self.advances = warpruns.emit_advances(self)
            self.regions = warpregions.emit_regions(self)
        elif self.is_kernel:
            self.regions = warpregions.emit_entry_region(self)
        if self.known_branches:
            self.guarded_rounds = guards.rounds_reaching(body, self.branch_targets, list(self.known_branches),
                                                         {site: pos for pos, site in self.site_at.items()})
            self.probe_bounds = probebounds.emit_bounds(self)

    def _insert_yields(self):
        """A yield before the back edge of each grid-stride loop (gridstride.grid_stride_yields)."""
        body = self.pfn.body
        targets = {st.name: st.targets for st in body if isinstance(st, pir.BranchTargets)}
        at = gridstride.grid_stride_yields(body, targets, self.mc.kernel_params(self.pfn))
        if not at:
            return
        # `@p bra LOOP` becomes `@!p bra EXIT; yield; bra LOOP; EXIT: yield`: a thread leaving
        # the loop yields too, so that a round from the back edge ends at a yield on either
        # path (spills only, no collective's operands), which LLVM can if-convert, and the
        # threads that leave together go on together
        new = []
        for pos, st in enumerate(body):
            if pos not in at:
                new.append(st)
                continue
            yield_ = pir.Instruction(suspensions.YIELD, (), (), st.loc, text="(yield)")
            if st.guard is None:
                self.stride_loop_at[len(new)] = at[pos]
                new += [yield_, st]
                continue
            leave = f"$anycuda_loop_exit{pos}"
            skip = pir.Guard(st.guard.reg, not st.guard.negated)
            new.append(dataclasses.replace(st, guard=skip, operands=(pir.Sym(leave),)))
            back = len(new)
            self.stride_loop_at[back] = at[pos]
            new += [yield_, dataclasses.replace(st, guard=None), pir.Label(leave, st.loc)]
            self.yield_pairs.append((back, len(new)))
            new.append(yield_)
        self.pfn = dataclasses.replace(self.pfn, body=new)

    def _check_forms(self, body):
        """Every instruction is one its handler lowers, with all its modifiers (instructions.refusal:
        none is lowered as if absent), and has as many operands as one of its forms
        (instructions.OPERAND_COUNTS), checked before any pass reads them (the CFG reads branch
        targets)."""
        for st in body:
            if not isinstance(st, pir.Instruction):
                continue
            why = instructions.refusal(st)
            if why is not None:
                self.inst = st
                raise self.error(why, UnsupportedPtx)
            counts = instructions.operand_counts(st)
            if counts is not None and len(st.operands) not in counts:
                self.inst = st
                raise self.error(f"'{st.opcode}' takes {' or '.join(map(str, counts))} operands, "
                                 f"got {len(st.operands)}")

    def _declare_body_vars(self, body):
        b = self.b
        depot, depot_size, depot_align = {}, 0, 8
        pointers = _may_hold_pointers(body)
        for st in body:
            if not isinstance(st, pir.VarDecl):
                continue
            if st.space == "reg":
                if st.vector:
                    raise self._decl_error(st, "vector registers are not supported")
                self.regs[st.name] = (b.alloca(llvm_type(st.type), name=st.name.lstrip("%")), st.type)
                if st.type in ("b64", "u64", "s64") and st.name in pointers and not self.mc.quick:
                    self.shadows[st.name] = b.alloca(PTR, name=st.name.lstrip("%") + ".ptr")
            elif st.space in ("local", "param"):
                size = decl_size(st)
                align = st.align or min(max(width(st.type) // 8, 1), 16)
                if st.space == "local" and self.is_kernel and self._has_sites():
                    off = (self.frame_size + align - 1) // align * align
                    self.local_offsets[st.name] = off
                    self.frame_size = off + size
                    self.local_window = (min(self.local_offsets.values()), self.frame_size)
                elif st.space == "local":
                    # all .local variables share one stack slot, as in nvcc's __local_depot, so
                    # that one address range tells a local address from any other (isspacep)
                    depot_size = (depot_size + align - 1) // align * align
                    depot[st.name] = depot_size
                    depot_size += size
                    depot_align = max(depot_align, align)
                else:
                    buf = b.alloca(ir.ArrayType(I8, max(size, 1)), name=st.name)
                    buf.align = max(align, 8)
                    self.ptrs[st.name] = b.bitcast(buf, PTR)
                    self.param_bufs.append((self.ptrs[st.name], size))
            elif st.space == "shared":
                pass  # laid out by the module (ModuleLowering.shared_offset)
            else:
                raise self._decl_error(st, f".{st.space} variables inside a function are not supported")
        local_bytes = max(depot_size, self.frame_size if self.local_window else 0) + (depot_align if depot else 0)
        if local_bytes > LOCAL_BYTES:
            raise self._decl_error(next(st for st in body if isinstance(st, pir.VarDecl) and st.space == "local"),
                                   f"{self.pfn.name} uses too much local data ({local_bytes} bytes with its "
                                   f"alignment, {LOCAL_BYTES} at most: CUDA's local memory per thread)")
        if depot:
            buf = b.alloca(ir.ArrayType(I8, max(depot_size, 1)), name="local_depot")
            buf.align = depot_align
            self.depot = (b.bitcast(buf, PTR), depot_size)
            for name, off in depot.items():
                self.ptrs[name] = b.gep(self.depot[0], [i64(off)]) if off else self.depot[0]

    def _decl_error(self, decl, msg):
        return LoweringError(msg, decl.loc.line, decl.loc.col, self.mc.source_name)

    def _has_sites(self):
        return bool(self.site_live)

    def _bind_params(self):
        if self.is_kernel:
            return
        args = list(self.fn.args[1:])
        for decl, arg in zip(list(self.pfn.rets) + list(self.pfn.params), args):
            self.ptrs[decl.name] = arg

    def _emit_dispatch(self, start):
        """The entry block: jump to the start, or to the continuation of a site on resume."""
        b = self.b
        b.position_at_end(self.dispatch_block)
        probe = None
        if self.is_kernel and self.known_branches:
            probe = self.fn.append_basic_block("probe")
            with b.goto_block(probe):
                self._emit_probe()
        segment = None
        if self.segmenting is not None:
            segment = self.fn.append_basic_block("segment")
            with b.goto_block(segment):
                self._emit_segment()
        if not self.is_kernel or not (self.resume_blocks or probe or segment):
            b.branch(start)
            return
        # guards.PASSED only tells the known branches their way (instructions.bra), SEGMENTED
        # the divisions where their quotients are (segment_quotient)
        mode_bits = guards.PASSED | quotients.SEGMENTED
        sw = b.switch(b.and_(self.fn.args[1], i32(~mode_bits)), start)
        for site, blk in self.resume_blocks:
            sw.add_case(i32(site), blk)
        if probe is not None:
            sw.add_case(i32(guards.PROBE & ~mode_bits), probe)
        if segment is not None:
            sw.add_case(i32(quotients.SEGMENT & ~mode_bits), segment)

    def _emit_probe(self):
        """The step function's PROBE case (compiler/analysis/guards.py): compute the known branches'
        predicates, return a bit per branch that this thread does not take."""
        b, body = self.b, self.pfn.body
        for pos in guards.probe_closure(self.known_branches):
            self.inst, self.inst_pos = body[pos], pos
            self.lower_instruction(body[pos])
        self.inst = None
        stays = i32(0)
        for i, pos in enumerate(self.known_branches):
            guard = body[pos].guard
            taken = self.read(guard.reg, "pred")
            stays_here = taken if guard.negated else b.not_(taken)
            stays = b.or_(stays, b.shl(b.zext(stays_here, I32), i32(i)))
        b.ret(stays)

    def _plan_segments(self, body):
        """Frame slots for the divisions whose quotients a block's rows of threads run in
        segments by (analysis/quotients.py): per division its dividend, its divisor and its
        segment's quotient, an i32 each, after the frame's own fields."""
        self.segmenting = quotients.segmenting(body, self.mc.kernel_params(self.pfn))
        if self.segmenting is None:
            return
        base = (self.frame_size + 3) // 4 * 4
        self.segment_slots = tuple((base + 12 * i, base + 12 * i + 4, base + 12 * i + 8)
                                   for i in range(len(self.segmenting.divisions)))
        self.frame_size = base + 12 * len(self.segment_slots)

    def segments(self) -> tuple:
        """The divisions a block's rows run in segments by (simt/segments.py): per division the
        frame offsets of its dividend, divisor and quotient, and whether it is signed."""
        if self.segmenting is None:
            return ()
        return tuple(slots + (d.signed,) for d, slots in zip(self.segmenting.divisions, self.segment_slots))

    def _emit_segment(self):
        """The step function's SEGMENT case: compute just the divisions' dividends and divisors
        for this thread and leave them in their frame slots (the block function reads them at
        a segment's first two threads)."""
        b, body = self.b, self.pfn.body
        for pos in self.segmenting.closure:
            self.inst, self.inst_pos = body[pos], pos
            self.lower_instruction(body[pos])
        self.inst = None
        for d, (dividend, divisor, _) in zip(self.segmenting.divisions, self.segment_slots):
            t = "s32" if d.signed else "u32"
            store_field(b, self.ctx, dividend, self.read(pir.Reg(d.dividend), t))
            store_field(b, self.ctx, divisor, self.read(d.divisor, t))
        b.ret(i32(0))

    def segment_quotient(self, divided, a, c, remainder=False):
        """What the div (or rem, `remainder`) being lowered writes: `divided`, its quotient (or
        remainder) of a by c, unless the instruction is one the block's rows run in segments
        by and the step runs with the resume bit SEGMENTED: then its segment's quotient, read
        from the frame (a - quotient * c for rem). A negative resume argument (PROBE, SEGMENT)
        divides."""
        index = self.segmenting.at.get(self.inst_pos) if self.segmenting is not None else None
        if index is None:
            return divided
        b = self.b
        on = b.icmp_signed("==", b.and_(self.fn.args[1], i32(quotients.SEGMENTED | (1 << 31))),
                           i32(quotients.SEGMENTED))
        # (read as the header's fields are: a block without sites passes its one frame as the
        # header, and the kernel's accesses are apart from it, so the load leaves the thread loop)
        q = self.thread_access(in_header_scope(self.fn.module, load_field(
            b, self.step_arg("header"), self.segment_slots[index][2], I32)))
        return b.select(on, b.sub(a, b.mul(q, c)) if remainder else q, divided)

    def entry_alloca(self, typ, name=""):
        """A stack slot allocated once per call, not once per loop iteration."""
        with self.b.goto_block(self.dispatch_block):
            return self.b.alloca(typ, name=name)

    # ------------------------------------------------------------------ frame / ctx
    # A kernel's step function ends with (i8* header, i8* spill, i64 threads, i64 induction):
    # the block's header (the frame header fields every thread of the block shares), the
    # spill arrays, the block's thread count (see _plan_spills) and, when resuming at
    # `site + AFFINE_RESUME`, the value of the loop's induction register for this thread (see
    # _reload). Reading the shared fields through one noalias header rather than each
    # thread's own frame lets the optimiser keep them out of a loop over threads.
    BLOCK_FIELDS = frozenset(("ntid_x", "ntid_y", "ntid_z", "ctaid_x", "ctaid_y", "ctaid_z",
                              "nctaid_x", "nctaid_y", "nctaid_z", "shared_base", "launch", "worker"))

    def step_arg(self, name):
        return self.fn.args[abi.step_tail_index(name)]

    def ctx_field(self, name, typ=I32):
        if self.is_kernel and name in self.BLOCK_FIELDS:
            # the block's header: written before the scheduler's loops over threads, only read in them
            field = load_field(self.b, self.step_arg("header"), abi.CTX[name], typ)
            return self.thread_access(in_header_scope(self.fn.module, field))
        return load_field(self.b, self.ctx, abi.CTX[name], typ)

    def thread_access(self, access):
        """Mark a load or store as one of this thread's own (irutil.thread_parallel_group):
        no other thread of the block depends on it before the next stop."""
        return in_thread_group(self.fn.module, access)

    def streams(self, inst) -> bool:
        """Whether store `inst` may bypass the caches where its launch asks for that
        (memory.streams, compiler/cpu/streamstores.py): never in quick code, which runs until
        its optimised code arrives."""
        if self.mc.quick:
            return False
        return memory.streams(inst, self.memory_read())

    def memory_read(self) -> tuple:
        """memory.read_memory of the function's body, made once (warp regions ask it per loop)."""
        if self._read_memory is None:
            params = self.mc.kernel_params(self.pfn) if self.is_kernel else ()
            self._read_memory = memory.read_memory(self.pfn.body, params)
        return self._read_memory

    def parallel_space(self, space: str) -> bool:
        """Whether the kernel's loads and stores in state space `space` ('' = generic) may be
        marked as this thread's own (thread_access). Global, shared and constant memory are
        the kernel's: CUDA orders what threads do there only at barriers, atomics and fences.
        A thread's .local variables and call parameter buffers are not: outside a frame of
        its own they are stack slots that every thread of a loop over threads reuses, so a
        generic address qualifies only in a kernel without such slots."""
        if space in ("global", "shared", "const"):
            return True
        return space == "" and self.is_kernel and self.depot is None and not self.param_bufs

    def launch_ptr(self):
        return self.b.inttoptr(self.ctx_field("launch", I64), PTR)

    def launch_field(self, name, typ):
        return load_field(self.b, self.launch_ptr(), abi.LAUNCH[name], typ)

    def shared_base(self):
        self.reads_shared = True        # (a kernel that never does may run its blocks in bands)
        return self.ctx_field("shared_base", I64)

    # ------------------------------------------------------------------ registers
    def reg(self, name):
        try:
            return self.regs[name]
        except KeyError:
            raise self.error(f"undeclared register {name}") from None

    def read(self, op, t: str, signed=None) -> ir.Value:
        """The value of an operand viewed as PTX type `t`."""
        b = self.b
        lt = llvm_type(t)
        if signed is None:
            signed = t.startswith("s")
        if isinstance(op, pir.Reg):
            slot, decl = self.reg(op.name)
            self.check_operand_type(op, decl, t)
            return convert_bits(b, self.load_slot(slot), lt, signed)
        if isinstance(op, pir.Imm):
            return self.immediate(op, t)
        if isinstance(op, pir.SpecialReg):
            v = self.special(op)
            return convert_bits(b, v, lt, False)
        if isinstance(op, pir.Not):
            return b.not_(self.read(op.operand, "pred"))
        if isinstance(op, pir.Sym):
            return convert_bits(b, self.symbol_address(op.name, window=True), lt)
        if isinstance(op, pir.Vec):
            return self.pack(op, t)
        raise self.error(f"operand {op} cannot be read as .{t}")

    def check_operand_type(self, op, declared: str, t: str):
        """PTX lets a .bN register stand for any N-bit type, and sizes may differ where an
        instruction widens or narrows; what it never allows is a float register where an
        integer type is used (or the reverse), nor a predicate where a value is expected."""
        if declared == t or declared.startswith("b") or t.startswith("b"):
            if (declared == "pred") == (t == "pred"):
                return
        elif (declared == "pred") == (t == "pred") and type_kind(declared) == type_kind(t):
            return
        raise self.error(f"operand {op.name} is declared .{declared} but used as .{t}")

    def immediate(self, op: pir.Imm, t: str) -> ir.Value:
        lt = llvm_type(t)
        if t == "pred":
            return ir.Constant(I1, 1 if op.value else 0)
        if isinstance(lt, ir.IntType):
            if op.is_float:
                if op.bits is not None:
                    return ir.Constant(lt, op.bits & ((1 << lt.width) - 1))
                raise self.error(f"float immediate {op.value} used as .{t}")
            return ir.Constant(lt, op.value & ((1 << lt.width) - 1))
        if op.is_float and op.bits is not None and op.width == llvm_width(lt):
            return float_constant(lt, op.bits, op.width) or self.b.bitcast(ir.Constant(ir.IntType(op.width), op.bits), lt)
        return ir.Constant(lt, float(op.value))

    def write(self, op, value: ir.Value, t: str, pointer: ir.Value = None):
        """Store `value` (of PTX type `t`) into a destination register or vector; `pointer`
        is the same value as a pointer derived from its source, when the caller knows one."""
        b = self.b
        if isinstance(op, pir.Sym) and op.name == "_":
            return
        if isinstance(op, pir.Vec):
            return self.unpack(op, value, t)
        if not isinstance(op, pir.Reg):
            raise self.error(f"destination {op} is not a register")
        slot, decl = self.reg(op.name)
        self.check_operand_type(op, decl, t)
        stored = convert_bits(b, value, slot.type.pointee, t.startswith("s"))
        self.store_slot(stored, slot)
        self.set_shadow(op.name, stored, pointer if width(t) == 64 else None)

    def store_slot(self, value, slot):
        """Store to a register's (or its pointer shadow's) slot, every store to which goes
        through here, so that load_slot knows the value."""
        self.b.store(value, slot)
        self.last_stored[slot] = (self.b.block, value)

    def load_slot(self, slot):
        """A register's (or its shadow's) value: the one last stored or loaded in this LLVM
        block when there is one (the block's own instructions run in order, and no store
        bypasses store_slot), else a load. A third of the loads of lowered code read what the
        instruction before wrote; LLVM would remove them, after parsing them, or in the quick
        tier not at all."""
        known = self.last_stored.get(slot)
        if known is not None and known[0] is self.b.block:
            return known[1]
        value = self.b.load(slot)
        self.last_stored[slot] = (self.b.block, value)
        return value

    def set_shadow(self, name, int_value, pointer=None):
        shadow = self.shadows.get(name)
        if shadow is not None:
            self.store_slot(pointer if pointer is not None else self.b.inttoptr(int_value, PTR), shadow)
            if pointer is not None:
                self.derived.add(name)

    def pointer_of(self, op):
        """The pointer form of a register that has held a pointer derived from a kernel
        parameter (or None). Any register's shadow would be correct; these are the ones
        worth following."""
        if isinstance(op, pir.Reg) and op.name in self.derived:
            return self.load_slot(self.shadows[op.name])
        return None

    def pack(self, vec: pir.Vec, t: str) -> ir.Value:
        """`{a, b}` as one value: element 0 in the low bits."""
        b = self.b
        total = width(t)
        n = len(vec.items)
        ew = total // n
        acc = ir.Constant(ir.IntType(total), 0)
        for i, item in enumerate(vec.items):
            v = self.read(item, f"b{ew}")
            acc = b.or_(acc, b.shl(b.zext(v, acc.type) if ew < total else v, ir.Constant(acc.type, i * ew)))
        return convert_bits(b, acc, llvm_type(t))

    def unpack(self, vec: pir.Vec, value: ir.Value, t: str):
        b = self.b
        total = width(t)
        n = len(vec.items)
        ew = total // n
        iv = convert_bits(b, value, ir.IntType(total))
        for i, item in enumerate(vec.items):
            part = b.trunc(b.lshr(iv, ir.Constant(iv.type, i * ew)), ir.IntType(ew)) if ew < total else iv
            self.write(item, part, f"b{ew}")

    # ------------------------------------------------------------------ special registers
    def special(self, op: pir.SpecialReg) -> ir.Value:
        b = self.b
        name, comp = SPECIAL_ALIASES.get(op.name, op.name), op.component
        if name == "tid" and comp in ("x", "y", "z") and self.is_kernel:
            return self.fn.args[3 + "xyz".index(comp)]      # the step function's thread index
        if name in SPECIAL_FIELDS and comp in ("x", "y", "z"):
            return self.ctx_field(f"{name}_{comp}")
        linear = self.fn.args[6] if self.is_kernel else self.ctx_field("linear")
        if name == "laneid":
            return b.and_(linear, i32(31))
        if name == "warpid":
            return b.lshr(linear, i32(5))
        if name == "nwarpid":
            n = b.mul(b.mul(self.ctx_field("ntid_x"), self.ctx_field("ntid_y")), self.ctx_field("ntid_z"))
            return b.lshr(b.add(n, i32(31)), i32(5))
        if name.startswith("lanemask_"):
            lane = b.and_(linear, i32(31))
            bit = b.shl(i32(1), lane)
            kind = name[len("lanemask_"):]
            if kind == "eq":
                return bit
            lt = b.sub(bit, i32(1))
            return {"lt": lt, "le": b.or_(lt, bit), "gt": b.not_(b.or_(lt, bit)), "ge": b.not_(lt)}[kind]
        if name == "smid":          # the worker running the block (a cooperative launch has more)
            return b.urem(self.ctx_field("worker"), self.launch_field("multiprocessors", I32))
        if name == "nsmid":
            return self.launch_field("multiprocessors", I32)
        if name in ("clock", "clock_hi", "clock64"):
            c = self.mc.intrinsic(b, "llvm.readcyclecounter", I64, [])
            return {"clock": b.trunc(c, I32), "clock_hi": b.trunc(b.lshr(c, i64(32)), I32), "clock64": c}[name]
        if name in ("globaltimer", "globaltimer_lo", "globaltimer_hi"):
            t = b.call(self.mc.globaltimer_fn(), [])
            if name == "globaltimer_lo":
                return b.trunc(t, I32)
            if name == "globaltimer_hi":
                return b.trunc(b.lshr(t, i64(32)), I32)
            return t
        if name == "dynamic_smem_size":
            return self.launch_field("dyn_shared", I32)
        if name == "total_smem_size":
            unit = SHARED_ALLOCATION_UNIT
            return b.and_(b.add(self.launch_field("shared_total", I32), i32(unit - 1)), i32(-unit))
        if name == "gridid":
            return self.launch_field("grid_id", I64)
        if name == "is_explicit_cluster":
            return b.icmp_unsigned("!=", self.launch_field("explicit_cluster", I32), i32(0))
        if name in gridsync.GRID_WS_REGISTERS:
            return gridsync.workspace_register(b, self.launch_ptr(), name)
        declared = pir.SPECIAL_REGISTERS.get(name, "")
        if declared.startswith("v4") and comp is None:
            raise self.error(f"%{op.name} without a component is not supported", UnsupportedPtx)
        if name in SPECIAL_CONSTANTS:
            return ir.Constant(llvm_type(declared.split(".")[-1]), SPECIAL_CONSTANTS[name])
        raise self.error(f"special register %{op.name}{'.' + comp if comp else ''} is not supported", UnsupportedPtx)

    # ------------------------------------------------------------------ symbols and addresses
    def symbol_address(self, name: str, window: bool) -> ir.Value:
        """The i64 address of a symbol. With window=True a shared variable gives its offset
        in the shared window (what `mov r, smem_var` yields); otherwise its generic address."""
        b = self.b
        if name in self.ptrs:
            return b.ptrtoint(self.ptrs[name], I64)
        if name in self.local_offsets:
            return b.ptrtoint(b.gep(self.ctx, [i64(self.local_offsets[name])]), I64)
        if self.is_kernel and name in self.mc.kernel_params(self.pfn):
            off = self.mc.kernel_params(self.pfn)[name].offset
            return b.add(b.ptrtoint(self.fn.args[2], I64), i64(off))
        shared = self.mc.shared_offset(self.pfn, name)
        if shared is None and name in self.mc.extern_shared:
            shared = self.mc.extern_shared_offset(self)
        if shared is not None:
            if isinstance(shared, int):
                shared = i64(shared)
            if window:
                return shared
            return b.add(self.shared_base(), shared)
        g = self.mc.global_symbol(name)
        if g is not None:
            return b.ptrtoint(g, I64)
        raise self.error(f"unknown symbol {name}")

    def is_kernel_param(self, op) -> bool:
        """A memory operand naming one of this kernel's parameters (read-only during a launch)."""
        return (self.is_kernel and isinstance(op, pir.Addr) and isinstance(op.base, pir.Sym)
                and op.base.name not in self.ptrs and op.base.name in self.mc.kernel_params(self.pfn))

    def kernel_param_offset(self, op: pir.Addr) -> int:
        """Byte offset in the launch's parameter buffer of the kernel parameter element `op`
        names (is_kernel_param)."""
        return self.mc.kernel_params(self.pfn)[op.base.name].offset + op.offset

    def kernel_param_value(self, op: pir.Addr, extra: int, t: str):
        """(value, pointer-or-None) of a kernel parameter element, loaded in the entry block."""
        key = (op.base.name, op.offset + extra, t)
        passed = self.passed_parameter(op.base.name)
        if passed is not None and op.offset + extra == 0 and width(t) == 8 * passed[0].size \
                and key not in self.param_values:
            info, arg = passed
            # the value is cached for every later read of this element, so the conversion to
            # the read's type (bitcast to float/double) belongs in the entry block as well:
            # made where the first read is, it does not dominate a read on another path (a
            # sibling branch, or the resume point after bar.sync where the read is redone)
            if arg.type == PTR:
                self.param_values[key] = (self.entry_value(
                    lambda b: convert_bits(b, b.ptrtoint(arg, I64), llvm_type(t))), arg)
            else:
                self.param_values[key] = (self.entry_value(lambda b: convert_bits(b, arg, llvm_type(t))), None)
        if key not in self.param_values:
            b = self.b
            with b.goto_block(self.dispatch_block):
                off = self.kernel_param_offset(op) + extra
                addr = b.gep(self.fn.args[2], [i64(off)])
                meta = b.module.add_metadata([])
                size = max(width(t) // 8, 1)
                if width(t) == 64:
                    p = b.load(self.typed_ptr(addr, PTR), align=size)
                    p.set_metadata("invariant.load", meta)
                    self.param_values[key] = (b.ptrtoint(p, I64), p)
                else:
                    v = b.load(self.typed_ptr(addr, llvm_type(t)), align=size)
                    v.set_metadata("invariant.load", meta)
                    self.param_values[key] = (v, None)
        return self.param_values[key]

    def passed_parameter(self, name):
        """(ParamInfo, step argument) when kernel parameter `name` is passed as a value."""
        params = list(self.mc.kernel_params(self.pfn).values())
        for i, (info, _) in enumerate(passed_parameters(params)):
            if info.name == name:
                return info, self.fn.args[7 + i]
        return None

    def entry_value(self, make):
        with self.b.goto_block(self.dispatch_block):
            return make(self.b)

    def address(self, op, space: str) -> ir.Value:
        """An i8* for a memory operand in state space `space` ('' = generic)."""
        b = self.b
        if not isinstance(op, pir.Addr):
            if isinstance(op, (pir.Reg, pir.Sym)):
                op = pir.Addr(op, 0)
            else:
                raise self.error(f"expected a memory operand, got {op}")
        if op.base is None:
            addr = i64(op.offset)
        elif isinstance(op.base, pir.Sym):
            addr = self.symbol_address(op.base.name, window=(space == "shared"))
            addr = b.add(addr, i64(op.offset))
        else:
            slot, t = self.reg(op.base.name)
            if space != "shared" and op.base.name in self.derived:
                p = self.load_slot(self.shadows[op.base.name])
                return b.gep(p, [i64(op.offset)]) if op.offset else p
            addr = register_address(b, self.load_slot(slot), op.offset)
        if space == "shared":
            # an offset from the window's base pointer (the same address as base + offset)
            # lets LLVM relate the accesses of neighbouring threads
            return b.gep(b.inttoptr(self.shared_base(), PTR), [addr])
        return b.inttoptr(addr, PTR)

    def typed_ptr(self, p: ir.Value, lt: ir.Type) -> ir.Value:
        return self.b.bitcast(p, lt.as_pointer())

    def stack_mark(self):
        """A one-byte stack slot of this call: its address lies within this function's stack
        frame, so above every frame this function calls."""
        if self._stack_mark is None:
            self._stack_mark = self.entry_alloca(I8, "stack_mark")
        return self._stack_mark

    def _own_local_window(self):
        """[lo, hi) of this function's .local variables (in the frame or the stack slot), or None."""
        b = self.b
        if self.local_window is not None:
            ctx = b.ptrtoint(self.ctx, I64)
            return b.add(ctx, i64(self.local_window[0])), b.add(ctx, i64(self.local_window[1]))
        if self.depot is not None:
            lo = b.ptrtoint(self.depot[0], I64)
            return lo, b.add(lo, i64(self.depot[1]))
        return None

    def space_windows(self, space: str) -> list:
        """The [lo, hi) i64 address ranges where generic addresses of a state space lie, for
        this thread. On the CPU every space is host memory, so each window is where the
        runtime put that space: shared memory after the block's frames; .local variables in
        the thread's frame (a kernel with barriers or collectives) or in one stack slot;
        kernel parameters in the launch's parameter buffer; .const variables in module
        globals. The global window is everything else (see instructions.isspacep)."""
        b = self.b
        if space == "shared":
            base = self.shared_base()
            return [(base, b.add(base, b.zext(self.launch_field("shared_total", I32), I64)))]
        if space == "local":
            if self.is_kernel:
                own = self._own_local_window()
                return [own] if own is not None else []
            # the stack from this frame up to the kernel's: the .local variables and parameter
            # buffers of every function in the call chain (the ISA puts the address of a device
            # function's parameter in .local too); and the kernel's locals in its frame
            lo = b.ptrtoint(self.stack_mark(), I64)
            if self.depot is not None:
                dlo = b.ptrtoint(self.depot[0], I64)
                lo = b.select(b.icmp_unsigned("<", dlo, lo), dlo, lo)
            ctx = b.ptrtoint(self.ctx, I64)
            first = b.zext(load_field(b, self.ctx, LOCAL_WINDOW_SLOT + 8, I32), I64)
            end = b.zext(load_field(b, self.ctx, LOCAL_WINDOW_SLOT + 12, I32), I64)
            return [(lo, load_field(b, self.ctx, LOCAL_WINDOW_SLOT, I64)), (b.add(ctx, first), b.add(ctx, end))]
        if space == "param":
            if self.is_kernel:
                params = self.mc.kernel_params(self.pfn).values()
                lo = b.ptrtoint(self.fn.args[2], I64)
            else:
                params = [p for k in self.mc.ptx.functions if k.is_kernel
                          for p in self.mc.kernel_params(k).values()]
                lo = self.launch_field("params", I64)
            size = max((p.offset + p.size for p in params), default=0)
            return [(lo, b.add(lo, i64(size)))]
        if space == "const":
            wins = []
            for d in self.mc.ptx.variables:
                g = self.mc.globals.get(d.name) if d.space == "const" else None
                if g is not None:
                    lo = b.ptrtoint(g, I64)
                    wins.append((lo, b.add(lo, i64(decl_size(d)))))
            return wins
        raise self.error(f"no address window for state space .{space}")

    # ------------------------------------------------------------------ control flow helpers
    def emit_return(self):
        b = self.b
        if self.is_kernel:
            b.ret(i32(abi.STEP_EXIT))
        else:
            b.ret_void()

    def emit_exit(self):
        """`exit`: the thread ends. In a device function, flag it for the caller."""
        if self.is_kernel:
            self.b.ret(i32(abi.STEP_EXIT))
        else:
            store_field(self.b, self.ctx, abi.CTX["exit_flag"], i32(1))
            self.b.ret_void()

    def emit_trap(self, code=abi.LAUNCH_ERR_TRAP):
        b = self.b
        if self.is_kernel:
            # the error names the block from the thread's frame, where the scheduler keeps
            # the block index only for kernels with calls (blockfunction.emit_block_function)
            for k in ("ctaid_x", "ctaid_y", "ctaid_z"):
                store_field(b, self.ctx, abi.CTX[k], self.ctx_field(k))
        b.call(self.mc.record_error_fn(), [self.ctx, i32(code)])
        if self.is_kernel:
            b.ret(i32(abi.STEP_TRAP))
        else:
            store_field(b, self.ctx, abi.CTX["exit_flag"], i32(2))
            b.ret_void()

    def after_call_check(self):
        """A callee that executed exit or trap returns with the frame's exit flag set."""
        b = self.b
        flag = self.ctx_field("exit_flag")
        cont = self.fn.append_basic_block("call.cont")
        leave = self.fn.append_basic_block("call.exit")
        b.cbranch(b.icmp_signed("!=", flag, i32(0)), leave, cont)
        b.position_at_end(leave)
        if self.is_kernel:
            b.ret(b.select(b.icmp_signed("==", flag, i32(2)), i32(abi.STEP_TRAP), i32(abi.STEP_EXIT)))
        else:
            b.ret_void()
        b.position_at_end(cont)

    # ------------------------------------------------------------------ instructions
    def lower_instruction(self, inst: pir.Instruction):
        if suspensions.is_yield(inst):
            return self.suspend("yield", {}, None)
        if suspensions.is_mbarrier_wait(inst):
            return mbarrier.wait(self, inst)
        if suspensions.is_spin_wait(inst):
            return spinwaits.wait(self, inst)
        if suspensions.is_warp_step(inst):
            return warpsteps.step(self, inst)
        if suspensions.is_matrix_run(inst):
            return matrixruns.lower_run(self, inst, instructions.HANDLERS)
        handler = instructions.HANDLERS[inst.opcode]      # (_check_forms: there is one)
        b = self.b
        if inst.guard is not None and inst.opcode != "bra":
            g = self.read(inst.guard.reg, "pred")
            if inst.guard.negated:
                g = b.not_(g)
            then = self.fn.append_basic_block("guarded")
            after = self.fn.append_basic_block("after")
            b.cbranch(g, then, after)
            b.position_at_end(then)
            handler(self, inst)
            if not b.block.is_terminated:
                b.branch(after)
            b.position_at_end(after)
        else:
            handler(self, inst)


# the instructions that may give their destination a pointer derived from its source
# (FunctionLowering.write's `pointer`: ops/instructions.py mov, ld of a parameter, cvta, add)
_POINTER_MAKERS = frozenset(("mov", "ld", "ldu", "cvta", "add"))


def _may_hold_pointers(body) -> set:
    """The registers that a pointer-making instruction writes: only these get a pointer
    shadow (FunctionLowering.set_shadow), which every write of the register keeps up to date;
    the others' pointer is never asked for."""
    out = set()
    for st in body:
        if isinstance(st, pir.Instruction) and st.opcode in _POINTER_MAKERS and st.operands:
            dst = st.operands[0]
            items = dst.items if isinstance(dst, pir.Vec) else (dst,)
            out.update(item.name for item in items if isinstance(item, pir.Reg))
    return out

