"""Lowering of a whole PTX module for the CPU target: variables, shared-memory layout,
device functions, kernels (step + block + launch functions).

A function that cannot be lowered does not sink the module: its error is kept, and the
kernels that reach it report it when launched.
"""
from __future__ import annotations

import struct
from dataclasses import dataclass, field

from llvmlite import ir

from ...ptx import ir as pir
from ...ptx.errors import PtxError
from .. import abi
from ..analysis import memory
from ..cpu import launch
from ..irutil import declare, dynamic_shared_start, i32, i64
from ..layout import ParamInfo, align_up, decl_size, natural_align, passed_parameters
from ..ops import aggregation, memcheck
from ..simt import bands, blockfunction, gridsync
from ..simt.workspace import emit_record_error
from ..types import I8, I32, I64, PTR, width
from ..vector.unrolling import unroll_warp_loops
from .function import FunctionLowering
from .inline import inline_suspending_calls

# what a kernel's parameters may take (ptxas for sm_70 on: "uses too much parameter space
# (..., 0x7ffc max)"): a launch copies them into every block's context
PARAM_SPACE_BYTES = 0x7FFC
# a module's constant memory (ptxas: "uses too much global constant data (..., 0x10000 max)")
CONSTANT_BYTES = 0x10000


@dataclass
class KernelInfo:
    name: str
    export: str                       # symbol of `void launch(Launch*)` in the JIT module
    params: list
    param_size: int
    static_shared: int
    frame_size: int = 0
    directives: dict = field(default_factory=dict)
    error: PtxError = None            # set when the kernel (or a function it calls) cannot be lowered
    stream_bytes: int = 0             # what a thread stores that may bypass the caches (memory.streaming_store_bytes)
    any_block_order: bool = False     # nothing but time shows the order its blocks ran in (memory.any_block_order)
    bands: bool = False               # its launch function runs blocks of several rows in bands (simt/bands.py)
    check_sites: tuple = ()           # a checked kernel's accesses, by the number its failed checks give (ops/memcheck.py)
    check_tool: str = ""              # the sanitizer tool it was built for (memcheck.mode())
    sync_sites: dict = field(default_factory=dict)   # synccheck: resume code -> its check site's number
    block_programs: bool = False      # block programs may take its launches (pipeline._block_programs_may_take)
    index_params: tuple = ()          # (name, offset, bytes) of the parameter slots its index arithmetic
                                      # divides and multiplies by (analysis/indexparams.py)


def _init_bytes(decl: pir.VarDecl) -> bytes:
    """The bytes of the initialiser's values, at most the variable's size (the rest is zeros:
    _initial_data)."""
    t = decl.type
    size = decl_size(decl)
    out = bytearray()
    esize = max(width(t) // 8, 1)
    for v in decl.init or ():
        if t.startswith("f") and t != "f16" or isinstance(v, float):
            fmt = {2: "<e", 4: "<f", 8: "<d"}[esize]
            if isinstance(v, float) or t.startswith("f"):
                out += struct.pack(fmt, float(v))
                continue
        out += (int(v) & ((1 << (8 * esize)) - 1)).to_bytes(esize, "little")
    return bytes(out[:size] if size else out)


def _initial_data(decl: pir.VarDecl, size: int) -> ir.Constant:
    """A variable's initial bytes: its initialiser's values, then zeros as a zero-filled part
    (`= {1}` of a gigabyte is not a gigabyte of IR text)."""
    values = _init_bytes(decl) if decl.init else b""
    if not values:
        return ir.Constant(ir.ArrayType(I8, size), None)
    if len(values) >= size:
        return ir.Constant(ir.ArrayType(I8, size), bytearray(values[:size]))
    head, tail = ir.ArrayType(I8, len(values)), ir.ArrayType(I8, size - len(values))
    return ir.Constant(ir.LiteralStructType([head, tail], packed=True),
                       [ir.Constant(head, bytearray(values)), ir.Constant(tail, None)])


class ModuleLowering:
    """`external_variables`: the module's `.global` and `.const` variables are declared, not
    defined: a kernel's unit (ptx/index.py) is linked against the variables its module
    defines once (compiler/pipeline.compile_variables), which every kernel of it shares.

    `lean`: code for the quick tier, which LLVM compiles without optimising. The kernels take
    the general path alone, as checked kernels do: no grid-stride yields, no settled branches
    (analysis/guards.py), no warp regions or runs (vector/), no registers rebuilt from their
    affine form at a resume. Each of those is a copy of code that only pays once optimised;
    unoptimised, they tripled the IR and the time to make it (benchmarks/NOTES.md, "Lean quick
    code"). The kernels' ABI (KernelInfo: symbols, parameters, shared sizes) is the same as
    without, so the optimised code of a full lowering can take over a launch of lean code.

    `quick`: lean code that will not be optimised (it implies `lean`): registers saved at a
    site live in their spill arrays (lowering/spills.py), and no register has a pointer
    shadow (what it gives is alias information for the optimiser). Code for the optimiser,
    a big kernel's lean code included, is made without it."""

    def __init__(self, module: pir.Module, source_name: str = "<ptx>", external_variables: bool = False,
                 lean: bool = False, quick: bool = False):
        self.ptx = module
        self.source_name = source_name
        self.external_variables = external_variables
        self.mod = ir.Module(name=source_name)
        self.globals = {}             # PTX name -> LLVM global (global/const variables)
        self.functions = {}           # PTX name -> LLVM function (defined .func)
        self.shared = {}              # module-scope shared name -> offset
        self.shared_size = 0
        self.extern_shared = set()
        self.global_bytes = {}        # .global/.const variable name -> its bytes
        self.kernel_shared = {}       # kernel name -> {name: offset}
        self.kernel_shared_size = {}
        self._params = {}
        self.kernels = {}             # name -> KernelInfo
        self.function_errors = {}     # func name -> PtxError
        self.callees = {}             # function name -> set of direct callee names
        self.waits_on_grid = gridsync.reads_grid_workspace(module)   # polls a grid barrier: see gridsync
        self.tool = memcheck.mode()               # the sanitizer tool the kernels are built for ('' none)
        self.checked = bool(self.tool)            # every access tested first (ops/memcheck.py)
        self.general_only = self.checked or lean or quick   # no specialised paths (see `lean` above)
        self.lean = lean or quick
        self.quick = quick
        self.check_sites = []                     # memcheck.Site of each tested access

    # -------------------------------------------------------------- services for FunctionLowering
    def intrinsic(self, b, name, ret, args):
        return b.call(declare(self.mod, name, ret, [a.type for a in args]), args)

    def libc(self, name, ret, args):
        return declare(self.mod, name, ret, args)

    def record_error_fn(self):
        return emit_record_error(self.mod)

    def globaltimer_fn(self):
        """i64 anycuda.globaltimer(): nanoseconds of the realtime clock."""
        fn = self.mod.globals.get("anycuda.globaltimer")
        if fn is not None:
            return fn
        fn = ir.Function(self.mod, ir.FunctionType(I64, []), name="anycuda.globaltimer")
        fn.linkage = "internal"
        ts_ty = ir.LiteralStructType([I64, I64])
        cg = declare(self.mod, "clock_gettime", I32, [I32, ts_ty.as_pointer()])
        b = ir.IRBuilder(fn.append_basic_block())
        ts = b.alloca(ts_ty)
        b.call(cg, [i32(0), ts])
        sec = b.load(b.gep(ts, [i32(0), i32(0)]))
        nsec = b.load(b.gep(ts, [i32(0), i32(1)]))
        b.ret(b.add(b.mul(sec, i64(1_000_000_000)), nsec))
        return fn

    def kernel_params(self, pfn):
        if pfn.name not in self._params:
            infos, off = {}, 0
            for d in pfn.params:
                align = natural_align(d)
                off = align_up(off, align)
                size = decl_size(d)
                infos[d.name] = ParamInfo(d.name, off, size, align, d.type, d.count or 1)
                off += size
                if off > PARAM_SPACE_BYTES:
                    raise PtxError(f"kernel {pfn.name} uses too much parameter space ({off} bytes by {d.name}, "
                                   f"{PARAM_SPACE_BYTES} at most, as ptxas says)", d.loc.line, d.loc.col,
                                   self.source_name)
            self._params[pfn.name] = infos
        return self._params[pfn.name]

    def shared_offset(self, pfn, name):
        local = self.kernel_shared.get(pfn.name, {})
        if name in local:
            return local[name]
        if name in self.shared:
            return self.shared[name]
        return None

    def global_symbol(self, name):
        if name in self.globals:
            return self.globals[name]
        return self.functions.get(name)

    def function_symbol(self, name):
        return self.functions.get(name)

    # -------------------------------------------------------------- module lowering
    def lower(self):
        self._declare_variables()
        self._declare_functions()
        for pfn in self.ptx.functions:
            if pfn.body is None:
                continue
            if pfn.is_kernel:
                self._lower_kernel(pfn)
            else:
                self._lower_function(pfn)
        self._propagate_errors()
        for info in self.kernels.values():
            info.check_sites = tuple(self.check_sites)
            info.check_tool = self.tool
        return self

    def _declare_variables(self):
        constant = 0
        for d in self.ptx.variables:
            if d.type in ("texref", "samplerref", "surfref"):
                continue              # texture references: refused where used (compiler/ops/textures.py)
            if d.space == "const":
                constant += decl_size(d)
                if constant > CONSTANT_BYTES:
                    raise PtxError(f"the module uses too much constant data ({constant} bytes by {d.name}, "
                                   f"{CONSTANT_BYTES} at most)", d.loc.line, d.loc.col, self.source_name)
            if d.space in ("global", "const"):
                self._declare_global(d)
            elif d.space == "shared":
                if d.linkage == "extern" or d.count == 0:
                    self.extern_shared.add(d.name)
                    continue
                self.shared_size = align_up(self.shared_size, natural_align(d))
                self.shared[d.name] = self.shared_size
                self.shared_size += decl_size(d)
        # shared variables declared inside device functions share the module window
        for pfn in self.ptx.functions:
            if pfn.body is None or pfn.is_kernel:
                continue
            for st in pfn.body:
                if isinstance(st, pir.VarDecl) and st.space == "shared" and st.name not in self.shared:
                    self.shared_size = align_up(self.shared_size, natural_align(st))
                    self.shared[st.name] = self.shared_size
                    self.shared_size += decl_size(st)

    def _declare_global(self, d: pir.VarDecl):
        size = decl_size(d)
        if d.linkage == "extern" and not d.init:
            if d.count == 0 or size == 0:
                return   # an unsized extern: resolved only by linking, reported at use
        has_syms = any(isinstance(v, (pir.Sym, pir.GenericSym)) for v in (d.init or ()))
        if self.external_variables:
            ty = ir.ArrayType(I64, max(size // 8, 1)) if has_syms else ir.ArrayType(I8, max(size, 1))
            g = ir.GlobalVariable(self.mod, ty, name="ptx.g." + d.name)     # no initialiser: a declaration
        elif has_syms:
            n = max(size // 8, 1)
            ty = ir.ArrayType(I64, n)
            g = ir.GlobalVariable(self.mod, ty, name="ptx.g." + d.name)
            g._pending_init = d
        else:
            # (zeros as zeroinitializer: a zero-filled section, not megabytes of IR text and object data)
            initial = _initial_data(d, max(size, 1))
            g = ir.GlobalVariable(self.mod, initial.type, name="ptx.g." + d.name)
            g.initializer = initial
        g.align = max(natural_align(d), 16)
        self.globals[d.name] = g
        self.global_bytes[d.name] = max(size, 1) if not has_syms else max(size // 8, 1) * 8

    def _resolve_symbol_initialisers(self):
        for name, g in self.globals.items():
            d = getattr(g, "_pending_init", None)
            if d is None:
                continue
            items = []
            for v in d.init:
                if isinstance(v, (pir.Sym, pir.GenericSym)):
                    target = self.global_symbol(v.name)
                    if target is None:
                        raise PtxError(f"initialiser of {d.name} names unknown symbol {v.name}",
                                       d.loc.line, d.loc.col, self.source_name)
                    items.append(target.ptrtoint(I64))
                else:
                    items.append(ir.Constant(I64, int(v) & (2 ** 64 - 1)))
            n = g.type.pointee.count
            items += [ir.Constant(I64, 0)] * (n - len(items))
            g.initializer = ir.Constant(g.type.pointee, items[:n])

    def _declare_functions(self):
        for pfn in self.ptx.functions:
            if pfn.is_kernel or pfn.body is None:
                continue
            nargs = 1 + len(pfn.rets) + len(pfn.params)
            fn = ir.Function(self.mod, ir.FunctionType(ir.VoidType(), [PTR] * nargs), name="ptx.f." + pfn.name)
            fn.linkage = "internal"
            self.functions[pfn.name] = fn
        self._resolve_symbol_initialisers()

    def _record_callees(self, pfn):
        names = set()
        for st in pfn.body:
            if isinstance(st, pir.Instruction) and st.opcode == "call" and isinstance(st.operands[1], pir.Sym):
                names.add(st.operands[1].name)
        self.callees[pfn.name] = names

    def _lower_function(self, pfn):
        self._record_callees(pfn)
        fn = self.functions[pfn.name]
        try:
            FunctionLowering(self, pfn, fn, is_kernel=False).lower()
        except PtxError as e:
            self.function_errors[pfn.name] = e
            _replace_body(fn)
            b = ir.IRBuilder(fn.append_basic_block("unsupported"))
            b.call(self.record_error_fn(), [fn.args[0], i32(abi.LAUNCH_ERR_UNSUPPORTED)])
            b.ret_void()

    def _lower_kernel(self, pfn):
        pfn = inline_suspending_calls(self.ptx, pfn)
        pfn = unroll_warp_loops(pfn)                # (constant shuffle offsets: warp runs)
        self._record_callees(pfn)
        local_shared, static = self.kernel_shared_layout(pfn)
        if static > abi.STATIC_SHARED_BYTES:
            raise PtxError(f"kernel {pfn.name} uses too much shared data ({static} bytes, {abi.STATIC_SHARED_BYTES} at "
                           f"most: more is dynamic shared memory, asked for at launch)", pfn.loc.line, pfn.loc.col,
                           self.source_name)
        self.kernel_shared[pfn.name] = local_shared
        index = len(self.kernels)
        export = f"anycuda.launch.{index}"
        params = list(self.kernel_params(pfn).values())
        psize = max((p.offset + p.size for p in params), default=0)
        info = KernelInfo(pfn.name, export, params, psize, static, directives=dict(pfn.directives),
                          stream_bytes=memory.streaming_store_bytes(pfn.body, self.kernel_params(pfn)),
                          any_block_order=memory.any_block_order(pfn.body))
        self.kernels[pfn.name] = info
        # step(frame, resume, params, tid.x, tid.y, tid.z, linear tid): the parameter buffer is
        # read-only for the whole launch (saying so, and how large it is, lets the optimiser
        # load parameters once per block); the thread index comes as values, so a block's
        # thread loop need not store it anywhere
        # Scalar parameters also come as values, loaded once per block by the block function,
        # so that the thread loop sees them as loop-invariant (64-bit ones as pointers).
        # Last come the block's header, its spill arrays, its thread count and the thread's
        # induction value (FunctionLowering.step_arg): neither header nor spill arrays are
        # reachable from the kernel's own pointers. Neither says so by a noalias argument:
        # inlined into a loop over threads, a noalias argument became a noalias.scope.decl
        # call in the loop's body, which no access group covers, so the vectoriser no longer
        # took the loop as parallel and checked its addresses at run time, per row of a 2-D
        # block (sgemm 0.87-0.91x the time without it on the spill arrays; a 5x5 convolution
        # in 16 x 16 blocks ~1.5x without it on the header). The header's loads are in an
        # alias scope that the kernel's loads and stores are marked apart from instead
        # (irutil.apart_from_header): softmax needs them out of its loops (4x without).
        scalars = passed_parameters(params)
        step = ir.Function(self.mod, ir.FunctionType(I32, [PTR, I32, PTR, I32, I32, I32, I32] +
                                                     [ty for _, ty in scalars] + [PTR, PTR, I64, I64]),
                           name=f"ptx.k{index}.step")
        step.linkage = "internal"
        params_arg = step.args[2]
        params_arg.add_attribute("noalias")
        if psize:
            params_arg.attributes.dereferenceable = psize
        header_arg = step.args[abi.step_tail_index("header")]
        header_arg.attributes.dereferenceable = abi.FRAME_HEADER
        lowering = FunctionLowering(self, pfn, step, is_kernel=True)
        try:
            lowering.lower()
        except PtxError as e:
            info.error = e
            _replace_body(step)
            return
        info.frame_size = lowering.frame_size
        if lowering.combined and lowering.sites:      # (aggregation.combinable asks for a kernel without sites)
            raise AssertionError(f"{pfn.name}: combined atomics in a kernel with sites")
        combined_init, combined_flush = aggregation.emit_block_hooks(self.mod, f"ptx.k{index}", lowering.combined)
        combined_merge = aggregation.emit_merge(self.mod, f"ptx.k{index}", lowering.combined) \
            if lowering.combined and aggregation.carries_across_blocks(pfn.body, lowering.combined) else None
        header_arg.attributes.dereferenceable = abi.FRAME_HEADER + 8 * lowering.affine_slots
        # device functions, printf/assert and trap read the thread index from the frame
        calls = any(isinstance(st, pir.Instruction) and st.opcode in ("call", "trap", "brx") for st in pfn.body)
        # synccheck's entries name a thread's block from its frame
        synccheck = self.tool == "synccheck"
        info.sync_sites = dict(lowering.sync_sites)
        plan = blockfunction.BlockPlan(f"ptx.k{index}", step, lowering.sites, lowering.frame_size,
                                       frame_needs_index=calls or synccheck, scalar_params=scalars,
                                       site_consts=lowering.site_consts, spill_bytes=lowering.spill_bytes,
                                       affine_sites=lowering.affine_sites,
                                       self_checked_sites=lowering.self_checked_sites, advances=lowering.advances,
                                       regions=lowering.regions, guarded_rounds=lowering.guarded_rounds,
                                       probe_bounds=lowering.probe_bounds, synccheck=synccheck,
                                       combined_init=combined_init, combined_flush=combined_flush,
                                       combined_merge=combined_merge, one_round=self.lean,
                                       combined_in_place=combined_merge is not None
                                       and aggregation.in_place(lowering.combined),
                                       by_column=not lowering.sites and memory.stores_run_along_y(
                                           pfn.body, self.kernel_params(pfn)),
                                       bands=not lowering.sites and not lowering.reads_shared
                                       and memory.any_block_order(pfn.body),
                                       segments=lowering.segments())
        block = blockfunction.emit_block_function(self.mod, plan)
        bands.add_band(self.mod, plan, block)
        info.bands = getattr(block, "band", None) is not None
        if combined_merge is not None:
            # the worker's run of blocks sets up the totals it carries and performs them last
            block.carried_hooks = (combined_init, combined_flush)
        launch.emit_launch(self.mod, f"ptx.k{index}", block, bool(lowering.sites), lowering.frame_size, export,
                           spill_bytes=lowering.spill_bytes, race_shadow=self.tool == "racecheck")

    def kernel_shared_layout(self, pfn) -> tuple:
        """({shared variable declared in kernel `pfn`: its offset in the window}, the static
        shared size): after the module's own; an extern (unsized) one joins extern_shared."""
        local_shared, off = {}, self.shared_size
        for st in pfn.body:
            if isinstance(st, pir.VarDecl) and st.space == "shared":
                if st.linkage == "extern" or st.count == 0:
                    self.extern_shared.add(st.name)
                    continue
                off = align_up(off, natural_align(st))
                local_shared[st.name] = off
                off += decl_size(st)
        return local_shared, off

    def _propagate_errors(self):
        """A kernel that reaches a function that failed to lower fails with that error."""
        for info in self.kernels.values():
            if info.error is not None:
                continue
            seen, todo = set(), [info.name]
            while todo:
                name = todo.pop()
                for callee in self.callees.get(name, ()):
                    if callee in seen:
                        continue
                    seen.add(callee)
                    if callee in self.function_errors:
                        info.error = self.function_errors[callee]
                        break
                    todo.append(callee)
                if info.error is not None:
                    break

    # extern shared: its window offset is where the dynamic part starts, known at launch
    def extern_shared_offset(self, f):
        return dynamic_shared_start(f.b, f.launch_field("shared_total", I32), f.launch_field("dyn_shared", I32))


def _replace_body(fn: ir.Function):
    """Drop a partially lowered body; the function becomes a stub that never runs."""
    fn.blocks = []
    if fn.function_type.return_type == I32:
        b = ir.IRBuilder(fn.append_basic_block("unsupported"))
        b.ret(i32(abi.STEP_TRAP))
