"""The compiler's stages, in order: the one place their order is written.

Loading a module costs its index (ptx/index.py: the text split into top-level items, the
variables parsed, no function body parsed). A kernel is compiled when it is first needed (its
first launch, an attribute query, or at load under CUDA_MODULE_LOADING=EAGER), by
`compile_kernel`:

  1. unit     ptx.index.ModuleIndex.kernel_unit: the kernel, the device functions it reaches
              and the variables they name, keeping the module's line numbers
  2. cache    compiler.build.cache: a kernel met before (same unit text, compiler, CPU) is loaded
  3. parse    ptx.parse: the unit's text to PTX IR
  4. lower    compiler.lowering.module.ModuleLowering: PTX IR to LLVM IR (lean for quick code and
              for big kernels: the general path alone; in full for optimised code): each function's
              analyses (analysis/), its step function (lowering/function.py with ops/ and
              vector/), a kernel's block function (simt/) and launch function (cpu/); the
              module's variables are declarations here, defined once by `compile_variables`
  5. build    compiler.build.jit.compile_to_object: LLVM IR to a native object; quick code first
              while the compile server lowers in full and optimises (compiler/build/tiers.py,
              a Recipe), optimised code into the cache
  6. link     runtime/program.py: the object linked into the process against the module's
              variables (jit.LoadedObject's `symbols`); where block programs may take the
              kernel's launches, its optimised object is made only when a launch needs it
              (`object_later`, kernel_object): a block program usually runs them all

  7. block program: at the first launch of a kernel with a block shape a block program may
              take (compiler/vector/blockprograms.py), that shape's block program, made from
              the same unit through the same cache and build stages (compile_block_program)

Each stage costs at most n log n in the size of what it is given: the index is one pass over
the module's text, a unit holds only what its kernel reaches, and a kernel never launched
costs nothing past the index.
"""
from __future__ import annotations

import os
import warnings
from dataclasses import dataclass, field, replace

from ..ptx import parse
from ..ptx.errors import PtxError
from ..ptx.index import Unit
from ..ptx.ir import Instruction
from . import constantprop
from .analysis.indexparams import index_parameters
from .build import cache, jit, tiers
from .irutil import collection_paused
from .lowering.module import KernelInfo, ModuleLowering
from .ops import memcheck
from .vector import blockprograms, looppeeling, unrolling

FORMAT = 1        # of what compile_kernel and compile_variables put in the cache


@dataclass
class CompiledKernel:
    """One kernel's object code (empty where `info.error` says it cannot run), what it needs
    of the module's variables (`externals`: symbols), and while it is being made, its
    optimised code on the way (tiers.OptimisedCode). With `object_later` the object is not
    made yet: kernel_object makes it, from `llvm_ir` where this process lowered the kernel."""
    name: str
    info: KernelInfo
    function_errors: dict                      # device function name -> PtxError
    object_code: bytes = b""
    externals: tuple = ()
    optimised: object = None
    object_later: bool = False
    llvm_ir: str = ""

    def __getstate__(self):
        return dict(self.__dict__, optimised=None, llvm_ir="")


@dataclass
class CompiledVariables:
    """The object that defines a module's variables (and the device functions their
    initialisers point to): `symbols` maps a variable's name to (its symbol, its size)."""
    symbols: dict = field(default_factory=dict)
    object_code: bytes = b""


def compile_kernel(unit: Unit, name: str, source_name: str = "<ptx>") -> CompiledKernel:
    """Kernel `name` of `unit` compiled for this CPU (stages 2-5 of the module docstring).
    Raises PtxError where the unit does not parse; a kernel that cannot be lowered comes back
    with `info.error` set and no code.

    Quick code comes from a lean lowering (lowering/module.py: the general path alone); the
    optimised code of a tiered kernel from a full one, made by the compile server itself
    (_optimised_ir), so that the program waits for neither."""
    mode = tiers.mode()
    key = _kernel_key(unit, name, source_name)
    hit = cache.load(key)
    if isinstance(hit, CompiledKernel):
        return hit
    tiered = mode == tiers.TIERED and tiers.can_optimise_in_background()
    # (a checked kernel is general already, and its check sites must be the same in both codes)
    lean = (tiered or mode == tiers.QUICK) and not memcheck.mode()
    info, function_errors, externals, llvm_ir, big = _lowered(unit, name, source_name, lean)
    result = CompiledKernel(name, info, function_errors)
    if info.error is not None:
        return result                           # not cached: its message names lines of this module
    result.externals = externals
    where = f"{source_name}:{name}"
    keep = tiers.Keep(key, CompiledKernel(name, info, function_errors, b"", externals))
    later = info.block_programs and block_programs_enabled()
    if tiered:                                  # made before the quick compile: the server starts sooner
        result.optimised = _optimised_job(unit, source_name, keep, later)
        if later and result.optimised is not None:
            cache.store(key, _info_alone(keep))     # the next run needs no compile for its block programs
    quick = mode == tiers.QUICK or result.optimised is not None
    if lean and not quick:                      # (no compile server after all) quick IR is not for the optimiser
        llvm_ir = _lowered(unit, name, source_name)[3]
    if not quick and later:
        result.object_later, result.llvm_ir = True, llvm_ir
        cache.store(key, result)                # its info: the object is made at need (kernel_object)
        return result
    result.object_code = jit.compile_to_object(llvm_ir, where, optimised=not quick)
    if not quick:
        cache.store(key, result)                # the cache holds optimised code only
    return result


def _optimised_job(unit: Unit, source_name: str, keep: tiers.Keep, later: bool):
    """The compile server's job making a kernel's optimised object from its full lowering (a
    Recipe: the program lowers it lean for its quick code), stored in the cache as `keep` says
    when it arrives; queued now, or where block programs may take the kernel's launches
    (`later`) only when a launch needs the kernel's own code (the runtime queues it). None
    where no compile server can run."""
    compiled = keep.entry
    job = tiers.optimise_in_background(
        tiers.Recipe(_optimised_ir, (unit.text, compiled.name, source_name, _abi(compiled.info))),
        f"{source_name}:{compiled.name}", keep=keep, later=later)
    if job is not None:
        folder = cache.cache_dir()

        def arrived(object_code):
            if object_code is not None:
                cache.store_in(folder, keep.key, keep.value(object_code))
        job.subscribe(arrived)
    return job


def _info_alone(keep: tiers.Keep) -> CompiledKernel:
    """The cache's entry of a kernel whose object is left for later: its info alone."""
    return replace(keep.entry, object_later=True)


def kernel_object(unit: Unit, compiled: CompiledKernel, source_name: str = "<ptx>") -> bytes:
    """The object of a kernel compile_kernel left `object_later` (whose launches a block
    program may take), made at the first launch that needs the kernel's own code. Optimised:
    compiled now from the IR this process lowered, else from the unit lowered again, and
    cached with the kernel's info. Tiered (its info came from the cache): quick code now, and
    the optimised code a job made `later` (`compiled.optimised`), which the caller queues
    once a launch needs it, as for a kernel compiled in this process."""
    if not compiled.object_later:
        return compiled.object_code
    where = f"{source_name}:{compiled.name}"
    key = _kernel_key(unit, compiled.name, source_name)
    if tiers.mode() == tiers.TIERED and not memcheck.mode():
        keep = tiers.Keep(key, replace(compiled, object_later=False, llvm_ir=""))
        job = _optimised_job(unit, source_name, keep, later=True)
        if job is not None:
            quick_ir = _lowered(unit, compiled.name, source_name, lean=True)[3]
            compiled.object_code = jit.compile_to_object(quick_ir, where, optimised=False)
            compiled.optimised, compiled.object_later, compiled.llvm_ir = job, False, ""
            return compiled.object_code
    llvm_ir = compiled.llvm_ir or _lowered(unit, compiled.name, source_name)[3]
    code = jit.compile_to_object(llvm_ir, where)
    compiled.object_code, compiled.object_later, compiled.llvm_ir = code, False, ""
    cache.store(key, compiled)
    return code


def _kernel_key(unit: Unit, name: str, source_name: str) -> str:
    # a checked kernel (ops/memcheck.py) is another build of the same unit
    return cache.key_for(f"kernel {name} {FORMAT} {memcheck.mode()}\0{unit.key}", source_name)


# PTX instructions in a kernel's unit from which its optimised code is lean too: the
# specialised copies of a full lowering grow LLVM's work faster than the kernel, and past this
# size they no longer paid at run time either (generated kernels, benchmarks/NOTES.md "Lean
# quick code": 2,000 instructions 8.4 s to compile and 8.5 ms to run in full, 1.8 s and 4.7 ms
# lean; 50,000: 320 s against 51 s to compile). The benchmark suite's kernels have < 900.
BIG_KERNEL = 1500


def _instructions(module) -> int:
    return sum(sum(isinstance(st, Instruction) for st in f.body) for f in module.functions if f.body)


@collection_paused
def _lowered(unit: Unit, name: str, source_name: str, lean: bool = False, constants: dict = None) -> tuple:
    """(KernelInfo, function errors, external symbols, LLVM IR text, whether the unit is big)
    of kernel `name` of `unit` (stages 3 and 4): with `lean`, quick code (ModuleLowering's
    `quick`: lean, never optimised); else for the optimiser, lean where the unit is big
    (BIG_KERNEL). The
    garbage collector is paused from parsing to the IR's text: paused in lowering alone, its
    walks of the objects lowering made moved into printing."""
    module = parse(unit.text, source_name)
    kernel, index = _kernel_function(module, name), ()
    if kernel is not None and constants:        # (a variant of the kernel: runtime/specialisation.py)
        kernel.body = constantprop.with_parameters(kernel.body, constants)
    elif kernel is not None:
        index = tuple((p.name, p.offset, p.size) for p in index_parameters(kernel.body))
    big = _instructions(module) >= BIG_KERNEL
    takes = _block_programs_may_take(module, name)      # (before lowering: it rewrites bodies)
    lowering = ModuleLowering(module, source_name, external_variables=True, lean=big, quick=lean).lower()
    info = lowering.kernels[name]
    info.block_programs = takes
    info.index_params = index
    if info.error is not None:
        return info, dict(lowering.function_errors), (), "", big
    return (info, dict(lowering.function_errors), tuple(g.name for g in lowering.globals.values()),
            str(lowering.mod), big)


def _block_programs_may_take(module, name: str) -> bool:
    """Whether block programs may take kernel `name`'s launches (blockprograms.check_takes):
    whether compile_kernel may leave its optimised object for later."""
    pfn = _kernel_function(module, name)
    if pfn is None:
        return False
    try:
        blockprograms.check_takes(pfn)
    except Exception:        # noqa: BLE001 - NotVectorisable, or a fault of ours: the object is made at once
        return False
    return True


def _kernel_function(module, name: str):
    """The parsed kernel `name` of `module` with a body, or None."""
    return next((f for f in module.functions if f.is_kernel and f.name == name and f.body is not None), None)


def _abi(info: KernelInfo) -> tuple:
    """What the code of a kernel offers the runtime, which both of its codes must agree on:
    the optimised code takes over launches of the quick code, with the quick code's KernelInfo."""
    return (info.export, tuple(info.params), info.param_size, info.static_shared,
            sorted(info.directives.items()), info.stream_bytes, info.any_block_order)


def _optimised_ir(text: str, name: str, source_name: str, abi: tuple, constants: dict = None) -> str:
    """In the compile server: the full lowering of kernel `name` (a Recipe of compile_kernel),
    refused where its ABI differs from the quick code's (the quick code then stays); with
    `constants`, of the kernel specialised to those parameter values (compile_specialised)."""
    info, _, _, llvm_ir, _ = _lowered(Unit(text, ""), name, source_name, constants=constants)
    if info.error is not None:
        raise info.error
    if _abi(info) != abi:
        raise RuntimeError(f"the full lowering of {name} differs from its quick code: {_abi(info)} against {abi}")
    return llvm_ir


def compile_variables(unit: Unit, source_name: str = "<ptx>") -> CompiledVariables:
    """The object defining the variables of a module's variables unit (ptx/index.py)."""
    key = cache.key_for(f"variables {FORMAT}\0{unit.key}", source_name)
    hit = cache.load(key)
    if isinstance(hit, CompiledVariables):
        return hit
    lowering = ModuleLowering(parse(unit.text, source_name), source_name).lower()
    symbols = {}
    for name, g in lowering.globals.items():
        symbols[name] = (g.name, lowering.global_bytes[name])
    # data alone needs no optimiser; device functions whose addresses a table holds do
    optimised = bool(lowering.functions)
    result = CompiledVariables(symbols, jit.compile_to_object(str(lowering.mod), f"{source_name}:variables",
                                                              optimised=optimised))
    cache.store(key, result)
    return result


# ---------------------------------------------------------------- kernels specialised to parameter values

def compile_specialised(unit: Unit, source_name: str, info: KernelInfo, constants: dict, arrived) -> None:
    """`arrived(object code or None)`, called once, with kernel `info.name`'s optimised code
    specialised to the parameter values `constants` ({(parameter, byte offset): (value, bytes)},
    its index parameters: runtime/specialisation.py): at once where it comes from the cache or
    is compiled here (ANYCUDA_JIT=optimised, or no compile server), else when the compile
    server has made it. None where it failed (the kernel's own code goes on running)."""
    values = tuple(sorted(constants.items()))
    key = cache.key_for(f"{_kernel_key(unit, info.name, source_name)}\n// specialised to {values}", source_name)
    hit = cache.load(key)
    if hit is not None:
        arrived(hit or None)
        return
    name = f"{source_name}:{info.name} specialised"
    recipe = tiers.Recipe(_optimised_ir, (unit.text, info.name, source_name, _abi(info), dict(values)))
    job = tiers.optimise_in_background(recipe, name, keep=tiers.Keep(key)) if tiers.mode() == tiers.TIERED else None
    if job is None:
        try:
            code = jit.compile_to_object(recipe.make(*recipe.args), name)
        except Exception as e:    # noqa: BLE001 - a fault of ours must not cost the launch: the kernel's own code runs it
            warnings.warn(f"anycuda: kernel {info.name} specialised to its parameters failed ({type(e).__name__}: {e})",
                          RuntimeWarning, stacklevel=2)
            arrived(None)
            return
        cache.store(key, code)
        arrived(code)
        return
    folder = cache.cache_dir()

    def done(code):
        if code is not None:
            cache.store_in(folder, key, code)
        arrived(code or None)
    job.subscribe(done)


# ---------------------------------------------------------------- block programs (stage 7)

def block_programs_enabled() -> bool:
    """ANYCUDA_BLOCK_PROGRAMS=0 keeps every kernel in the rounds (for comparison); quick
    code (ANYCUDA_JIT=quick) makes none, nor does a checked run (ops/memcheck.py: the rounds
    are the one place its tests are made)."""
    return (os.environ.get("ANYCUDA_BLOCK_PROGRAMS", "1") != "0" and tiers.mode() != tiers.QUICK
            and not memcheck.mode())


def compile_block_program(unit: Unit, source_name: str, kernel: str, block: tuple, arrived) -> None:
    """`arrived(object code or None)`, called once, with `kernel`'s block program for blocks
    of shape `block`, made from the kernel's unit: at once where it comes from the cache or
    is compiled here (ANYCUDA_JIT=optimised), else when the compile server has made it
    (tiered: the program waits for neither the IR nor the object). None for a kernel the
    block program does not take (which the cache remembers) or whose block program failed."""
    shape = "x".join(map(str, block))
    key = cache.key_for(f"{unit.key}\n// block program of {kernel} for blocks of {shape}", source_name)
    hit = cache.load(key)
    if hit is not None:
        arrived(hit or None)                    # b"": the kernel is not taken
        return
    name = f"{source_name}:{kernel}.block{shape}"
    job = None
    if tiers.mode() == tiers.TIERED:
        # before the optimised code of the kernels waiting: a block program runs faster, and
        # most compile in a fraction of their kernel's optimised code's time (threadFenceReduction's
        # 0.2 s against 1.1 s), so that short programs have it while they run
        job = tiers.optimise_in_background(tiers.Recipe(_block_program_or_none, (unit.text, source_name, kernel,
                                                                                   block)), name, first=True,
                                           keep=tiers.Keep(key))
    if job is None:
        try:
            llvm_ir = _block_program_or_none(unit.text, source_name, kernel, block)
        except Exception as e:    # noqa: BLE001 - a fault of ours must not cost the launch: the rounds run it
            _warn_block_program_failed(kernel, f"{type(e).__name__}: {e}")
            arrived(None)
            return
        code = b"" if llvm_ir is None else jit.compile_to_object(llvm_ir, name)
        cache.store(key, code)
        arrived(code or None)
        return

    folder = cache.cache_dir()

    def done(code):
        if code is not None:
            cache.store_in(folder, key, code)
        elif job.error:
            _warn_block_program_failed(kernel, job.error)
        arrived(code or None)
    job.subscribe(done)


def _warn_block_program_failed(kernel: str, why: str) -> None:
    warnings.warn(f"anycuda: the block program of {kernel} failed ({why}); it runs as before",
                  RuntimeWarning, stacklevel=3)


def _block_program_or_none(text: str, source_name: str, kernel: str, block: tuple) -> str | None:
    """block_program_ir, or None for a kernel the block program does not take (a Recipe of
    compile_block_program's: the compile server answers an empty object for it)."""
    try:
        return block_program_ir(text, source_name, kernel, block)
    except (blockprograms.NotVectorisable, PtxError):
        return None


@collection_paused
def block_program_ir(text: str, source_name: str, kernel: str, block) -> str:
    """LLVM IR of the block program of `kernel` (in the unit `text`) for blocks of shape
    `block` (x, y, z), or of `block` x 1 x 1 threads for a number (compiler/vector/blockprograms.py).
    Raises NotVectorisable for a kernel it does not take."""
    block = (block, 1, 1) if isinstance(block, int) else tuple(block)
    module = parse(text, source_name)
    pfn = _kernel_function(module, kernel)
    if pfn is None:
        raise blockprograms.NotVectorisable(f"no kernel {kernel}")
    blockprograms.check_takes(pfn)
    pfn = looppeeling.peel_middle_entries(pfn)          # loops entered in their middle,
    pfn = unrolling.unroll_shape_loops(pfn, block)      # loops the block shape fixes,
    pfn = unrolling.fold_shape_branches(pfn, block)     # and branches,
    pfn = unrolling.known_operands(pfn, block)          # and the values it fixes written in
    layout = ModuleLowering(module, source_name, external_variables=True)
    layout._declare_variables()
    return blockprograms.emit_module(layout, pfn, block)
