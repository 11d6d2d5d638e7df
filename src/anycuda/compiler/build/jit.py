"""Machine code from LLVM IR with llvmlite's MCJIT, for the CPU this process runs on."""
from __future__ import annotations

import atexit
import ctypes
import ctypes.util
import os
import threading

import llvmlite.binding as llvm

from ...ptx import lexer
from ..cpu import loopprefetch, maskedaccesses, streamstores
from . import perfmap

_lock = threading.Lock()
_state = {}


def _initialise():
    """Once per process: native target, libgomp and libc symbols visible to JIT code."""
    with _lock:
        if _state:
            return _state
        llvm.initialize_native_target()
        llvm.initialize_native_asmprinter()
        llvm.initialize_native_asmparser()     # (the stretch markers' inline asm: irutil.mark_stretch)
        # PTX names become the names of LLVM locals (a register's slot, a label's block) and
        # PTX sets no bound on their length: past LLVM's 1,024 characters its IR parser
        # refused the module (fuzz_load_plain: a label renamed to 70,000 characters)
        llvm.set_option("", f"--non-global-value-max-name-size={lexer.MAX_NAME}")
        # libgomp runs the worker pool; libgcc_s has the helpers LLVM calls for what the
        # CPU lacks instructions for (128-bit integer conversions, f64 -> f16, ...)
        for lib, what in (("gomp", "libgomp (the GNU OpenMP runtime)"), ("gcc_s", "libgcc_s (gcc's runtime)")):
            path = ctypes.util.find_library(lib) or f"lib{lib}.so.1"
            try:
                # RTLD_NODELETE: LLVM closes the libraries it loaded when the process exits,
                # while libgomp's idle pool threads may still wake up inside it
                ctypes.CDLL(path, mode=os.RTLD_GLOBAL | getattr(os, "RTLD_NODELETE", 0))
                llvm.load_library_permanently(path)
            except RuntimeError as e:   # pragma: no cover - both ship with gcc's runtime
                raise RuntimeError(f"anycuda needs {what}: {e}") from e
        _state["tm"] = _host_target_machine()
        # quick code: LLVM's fast instruction selection, which takes a tenth of the time
        _state["tm_quick"] = _host_target_machine(opt=0)
        _state["triple"] = llvm.get_process_triple()
        return _state


def _host_target_machine(opt: int = 3):
    target = llvm.Target.from_default_triple()
    features = llvm.get_host_cpu_features().flatten()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(), features=features,
                                        opt=opt, reloc="default", codemodel="jitdefault")


def target_description() -> str:
    st = _initialise()
    return f"{st['triple']} {llvm.get_host_cpu_name()}"


# Lines of LLVM IR text (instructions, mostly) of one function above which its module is
# optimised with LIGHT_PASSES rather than O3: on one huge function O3's cost grows faster than the code
# (GVN, InstCombine, the loop passes; benchmarks/NOTES.md "Huge kernels"), while these are
# about linear and do what counts most for lowered PTX: registers out of stack slots,
# constants and dead code folded. The benchmark suite's kernels have at most ~31,000 lines.
LIGHT_ABOVE_LINES = 60_000
LIGHT_PASSES = ("sroa", "sccp", "instruction_combine", "simplify_cfg", "aggressive_dce")


def optimise(mod: llvm.ModuleRef, level: int = 3, light: bool = False) -> None:
    st = _initialise()
    pto = llvm.create_pipeline_tuning_options(speed_level=level)
    pb = llvm.create_pass_builder(st["tm"], pto)
    if light:
        pm = llvm.create_new_module_pass_manager()
        for name in LIGHT_PASSES:
            getattr(pm, f"add_{name}_pass")()
    else:
        pm = pb.getModulePassManager()
    pm.run(mod, pb)


def is_huge(llvm_ir: str) -> bool:
    """Whether a module's LLVM IR text has a function of more than LIGHT_ABOVE_LINES lines
    (it is then optimised with LIGHT_PASSES). Many functions of ordinary size are not: each
    costs O3 its own size."""
    return any(chunk.count("\n") > LIGHT_ABOVE_LINES for chunk in llvm_ir.split("\ndefine "))


def compile_to_object(llvm_ir: str, name: str = "module", optimised: bool = True) -> bytes:
    """Verify, optimise and compile LLVM IR text to a native object file. Unoptimised
    (quick) code takes 5-20x less time to make and runs 5-30x slower (compiler/build/tiers.py)."""
    st = _initialise()
    mod = llvm.parse_assembly(llvm_ir)
    mod.name = name
    mod.triple = st["triple"]
    mod.data_layout = str(st["tm"].target_data)
    mod.verify()
    _check_externals(mod)
    _dump("ANYCUDA_DUMP_IR", mod)
    if not optimised:
        code = st["tm_quick"].emit_object(mod)
    else:
        optimise(mod, light=is_huge(llvm_ir))
        mod = loopprefetch.add_prefetches(mod)
        mod = maskedaccesses.plain_where_safe(mod)
        mod = streamstores.make_streaming(mod, st["tm"])
        _dump("ANYCUDA_DUMP_OPT_IR", mod)
        code = st["tm"].emit_object(mod)
    _renew_exit_watch()
    return code


def _check_externals(mod):
    """Every function the code calls must exist in this process: an unresolved one would
    become a call to address 0."""
    for fn in mod.functions:
        if fn.is_declaration and not fn.name.startswith("llvm.") and not llvm.address_of_symbol(fn.name):
            raise RuntimeError(f"generated code calls {fn.name}, which this process does not provide")


def _dump(var, mod):
    path = os.environ.get(var)
    if path:
        with open(path, "a") as fh:
            fh.write(str(mod))


_exit = {"exiting": lambda: False, "linking": True, "register": None, "renewals": 0}
_kept_at_exit = []
LINK_WAIT_AT_EXIT = 10.0      # seconds the exit waits for a link in progress (one takes milliseconds)
# LLVM makes some statics at their first use, each destroyed by an exit handler of its own
# registered then: after the watch's. The watch is registered again after each compile and
# link (the handler runs once), so that it runs before them; an object from the compile
# server, being linked on another thread as a C program exited, met a destroyed static and
# crashed the exit (NVIDIA's threadFenceReduction, 1 run in 5). Past this many operations every
# path has been taken (and a long run would register a handler per kernel).
EXIT_WATCH_RENEWALS = 256


def watch_process_exit(register, exiting) -> None:
    """For a host process whose exit handlers may unload modules after LLVM's own static
    destructors have run (see shim/build.py): `register()` installs a C exit handler, which
    must happen once LLVM's library is loaded; `exiting()` tells whether it has run. From
    then on JIT code is left to the process's end rather than freed."""
    _initialise()
    register()
    _exit["exiting"] = exiting
    _exit["register"] = register


def _renew_exit_watch() -> None:
    """Register the exit watch again (EXIT_WATCH_RENEWALS), after an LLVM operation."""
    if _exit["register"] is not None and _exit["renewals"] < EXIT_WATCH_RENEWALS and not _exit["exiting"]():
        _exit["renewals"] += 1
        _exit["register"]()


_link_lock = threading.Lock()


def stop_linking() -> None:
    """The process is exiting: wait for a link in progress, then refuse any more. The compile
    server's objects are linked on the optimiser's thread (compiler/tiers.py), which the exit
    does not stop; a link meeting the teardown that follows (LLVM's static destructors, the
    interpreter's finalisation) would crash the program or end it through LLVM's exit(1).
    Run from Python's exit handlers, and from the C one of watch_process_exit."""
    held = _link_lock.acquire(timeout=LINK_WAIT_AT_EXIT)
    _exit["linking"] = False
    if held:
        _link_lock.release()


atexit.register(stop_linking)


class LoadedObject:
    """A native object file linked into this process (kept alive with its engine).

    `symbols` ({name: address}) resolves the object's external data: a kernel's object
    declares its module's variables, which another object defines once per module instance
    (compiler/pipeline.py). LLVM resolves names through one table of the process, so the
    names are set and the object's relocations resolved under one lock: another object
    with the same names but other addresses is linked before or after, never between."""

    def __init__(self, object_code: bytes, symbols: dict = None):
        _initialise()
        with _link_lock:
            if not _exit["linking"]:
                raise RuntimeError("the process is exiting: no more code is linked")
            for name, address in (symbols or {}).items():
                llvm.add_symbol(name, address)
            # the engine owns (and frees) its target machine: give it one of its own
            self.engine = llvm.create_mcjit_compiler(llvm.parse_assembly(""), _host_target_machine())
            self.engine.add_object_file(llvm.ObjectFileRef.from_data(object_code))
            self.engine.finalize_object()
            _renew_exit_watch()
        if perfmap.enabled():
            perfmap.record(object_code, self.address)
        self._functions = None
        self._object_code = object_code

    def function_names(self) -> frozenset:
        """The names of the functions the object holds, its internal ones too (found once;
        the profile reads a kernel's warp regions from them)."""
        if self._functions is None:
            self._functions = frozenset(name for name, *_ in perfmap.function_symbols(self._object_code))
        return self._functions

    def __del__(self, _exit=_exit, _kept_at_exit=_kept_at_exit):
        # the module's names are bound here: an object kept until the interpreter tears down
        # its modules (a library's kernels in a module-level table) is collected after them
        if _exit["exiting"]():
            _kept_at_exit.append(getattr(self, "engine", None))   # freeing it now would reach a destroyed LLVM

    def address(self, symbol: str) -> int:
        addr = self.engine.get_function_address(symbol)
        if not addr:
            addr = self.engine.get_global_value_address(symbol)
        return addr
