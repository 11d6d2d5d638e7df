"""Lazy loading (ptx/index.py, compiler/pipeline.py): a module load indexes its kernels and
compiles none; a kernel is compiled at its first use from its unit, which holds only what
it reaches; kernels share the module's variables and device functions; CUDA_MODULE_LOADING=
EAGER compiles every kernel at load. The work is counted (compiles, parsed functions), not
timed."""
from __future__ import annotations

import ctypes
import struct

import numpy as np
import pytest

from anycuda.ptx import PtxError, parse
from anycuda.ptx import index as index_module
from anycuda.ptx.index import ModuleIndex
from anycuda.runtime import program as program_module
from anycuda.runtime.errors import CudaError, CUresult
from anycuda.runtime.program import load_program
from conformance import REVERSE_PTX, benchmark_module, launch_reverse

_modules = benchmark_module("modules")     # its generated modules of small kernels
HEADER, small_kernel, many_kernels = _modules.HEADER, _modules.small_kernel, _modules.many_kernels


@pytest.fixture
def counted(monkeypatch, fresh_cache):
    """The names of the kernels compiled, in order."""
    compiled = []
    real = program_module.compile_kernel

    def counting(unit, name, source_name):
        compiled.append(name)
        return real(unit, name, source_name)
    monkeypatch.setattr(program_module, "compile_kernel", counting)
    return compiled


def launch_small(kernel, i, n=1000):
    out = np.full(n, 0xCDCDCDCD, np.uint32)
    kernel.launch((-(-n // 256), 1, 1), (256, 1, 1), struct.pack("<QI", out.ctypes.data, n))
    np.testing.assert_array_equal(out, np.arange(n, dtype=np.uint32) * np.uint32(i))


def test_a_load_compiles_nothing_and_a_launch_compiles_one_kernel(counted):
    prog = load_program(many_kernels(2000), "many.ptx")
    assert len(prog.kernel_names()) == 2000 and counted == []
    kernel = prog.kernel("k1234")
    assert counted == []                      # looking a kernel up compiles nothing either
    launch_small(kernel, 1234)
    launch_small(kernel, 1234)
    assert counted == ["k1234"]
    launch_small(prog.kernel("k7"), 7)
    assert counted == ["k1234", "k7"]


def test_a_unit_holds_what_its_kernel_reaches():
    text = HEADER + """
.global .align 4 .u32 used_by_a;
.global .align 4 .u32 used_by_helper;
.global .align 4 .u32 unused;
.const .align 4 .u32 table[4];
.func (.param .b32 r) helper(.param .b32 x)
{
  .reg .b32 %r<3>;
  ld.param.b32 %r1, [x]; ld.global.u32 %r2, [used_by_helper]; add.u32 %r1, %r1, %r2;
  st.param.b32 [r], %r1;
  ret;
}
.func (.param .b32 r) other(.param .b32 x)
{
  .reg .b32 %r<2>;
  ld.param.b32 %r1, [x]; st.param.b32 [r], %r1;
  ret;
}
.visible .entry a(.param .u64 p)
{
  .reg .b32 %r<3>; .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [p]; ld.global.u32 %r1, [used_by_a];
  { .param .b32 x; .param .b32 r; st.param.b32 [x], %r1; call.uni (r), helper, (x); ld.param.b32 %r2, [r]; }
  st.global.u32 [%rd1], %r2;
  ret;
}
.visible .entry b(.param .u64 p)
{
  .reg .b32 %r<2>; .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [p]; mov.u32 %r1, 1; st.global.u32 [%rd1], %r1;
  ret;
}
"""
    index = ModuleIndex(text, "units.ptx")
    a = parse(index.kernel_unit("a").text)
    assert [f.name for f in a.functions] == ["helper", "a"]
    # every .const variable is in every unit: a generic address may point into any of them
    assert {v.name for v in a.variables} == {"used_by_a", "used_by_helper", "table"}
    b = parse(index.kernel_unit("b").text)
    assert [f.name for f in b.functions] == ["b"] and {v.name for v in b.variables} == {"table"}
    # the unit keeps the module's lines: kernel a starts where it does in the module
    line = text[:text.index(".visible .entry a")].count("\n") + 1
    assert a.functions[1].loc.line == line
    assert index.kernel_unit("a").text.splitlines()[line - 1].startswith(".visible .entry a")


SHARED = HEADER + """
.global .align 4 .u32 total = 5;
.func (.param .b32 r) plus_total(.param .b32 x)
{
  .reg .b32 %r<3>;
  ld.param.b32 %r1, [x]; ld.global.u32 %r2, [total]; add.u32 %r1, %r1, %r2;
  st.param.b32 [r], %r1;
  ret;
}
.visible .entry store_total(.param .u32 v)
{
  .reg .b32 %r<2>;
  ld.param.u32 %r1, [v]; st.global.u32 [total], %r1;
  ret;
}
.visible .entry read_total(.param .u64 p, .param .u32 x)
{
  .reg .b32 %r<3>; .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [p]; ld.param.u32 %r1, [x];
  { .param .b32 a; .param .b32 r; st.param.b32 [a], %r1; call.uni (r), plus_total, (a); ld.param.b32 %r2, [r]; }
  st.global.u32 [%rd1], %r2;
  ret;
}
"""


def test_kernels_compiled_apart_share_the_module_variables(counted):
    prog = load_program(SHARED, "shared.ptx")
    out = np.zeros(1, np.uint32)
    reader = prog.kernel("read_total")
    reader.launch((1, 1, 1), (1, 1, 1), struct.pack("<QI", out.ctypes.data, 10))
    assert out[0] == 15
    prog.kernel("store_total").launch((1, 1, 1), (1, 1, 1), struct.pack("<I", 100))
    reader.launch((1, 1, 1), (1, 1, 1), struct.pack("<QI", out.ctypes.data, 10))
    assert out[0] == 110
    address, size = prog.global_address("total")
    assert size == 4 and ctypes.c_uint32.from_address(address).value == 100
    assert counted == ["read_total", "store_total"]


def test_an_error_in_one_kernel_names_its_module_line_and_spares_the_others(counted):
    kernels = [small_kernel(i) for i in range(300)]
    kernels[150] = kernels[150].replace("mul.lo.u32 %r5, %r2, 150;", "frobnicate.u32 %r5, %r2, 150;")
    text = HEADER + "".join(kernels)
    line = text[:text.index("frobnicate")].count("\n") + 1
    prog = load_program(text, "one_bad.ptx")
    with pytest.raises(CudaError) as e:
        launch_small(prog.kernel("k150"), 150)
    assert e.value.code == CUresult.CUDA_ERROR_INVALID_PTX
    assert f"one_bad.ptx:{line}:" in str(e.value) and "frobnicate" in str(e.value)
    launch_small(prog.kernel("k151"), 151)
    launch_small(prog.kernel("k149"), 149)
    with pytest.raises(CudaError):           # the error stays the kernel's
        launch_small(prog.kernel("k150"), 150)
    assert counted == ["k150", "k151", "k149"]


def test_eager_loading_compiles_every_kernel_at_load(counted, monkeypatch):
    monkeypatch.setenv("CUDA_MODULE_LOADING", "EAGER")
    prog = load_program(many_kernels(5), "eager.ptx")
    assert sorted(counted) == [f"k{i}" for i in range(5)]
    launch_small(prog.kernel("k3"), 3)
    assert len(counted) == 5


def test_an_instance_shares_compiled_kernels_but_not_variables(counted):
    prog = load_program(SHARED, "shared.ptx")
    other = prog.instance()
    out = np.zeros(1, np.uint32)
    prog.kernel("store_total").launch((1, 1, 1), (1, 1, 1), struct.pack("<I", 40))
    for p, expected in ((prog, 41), (other, 6)):
        p.kernel("read_total").launch((1, 1, 1), (1, 1, 1), struct.pack("<QI", out.ctypes.data, 1))
        assert out[0] == expected
    assert counted == ["store_total", "read_total"]


@pytest.mark.parametrize("text, fragment", [
    (HEADER + ".visible .entry k() {\n  ret;\n", "end of input"),
    (HEADER + ".visible .entry k() {\n  ret;\n}\n}\n", "unexpected '}'"),
    (HEADER + ".global .u32 x = {1, 2;\n", "end of input"),
    (HEADER + ".global .u32 x\n", "end of input"),
    (HEADER + "garbage here;\n", "module scope"),
])
def test_text_that_does_not_split_fails_the_load(text, fragment):
    with pytest.raises(PtxError) as e:
        load_program(text, "broken.ptx")
    assert fragment in str(e.value) and "broken.ptx:" in str(e.value)


def test_the_index_handles_braces_and_semicolons_in_comments_and_strings():
    text = HEADER + """// a comment with { and ; and }
/* a block comment { ; } */
.file 1 "path/with;semi{brace}.cu"
.visible .entry k(.param .u64 p) // trailing } comment
{
  .reg .b32 %r<2>; .reg .b64 %rd<2>;
  // begin inline asm {
  ld.param.u64 %rd1, [p]; mov.u32 %r1, 3; st.global.u32 [%rd1], %r1;
  ret;
}
.section .debug_str { .b8 65, 0 }
"""
    index = ModuleIndex(text, "odd.ptx")
    assert index.kernels == ["k"]
    out = np.zeros(1, np.uint32)
    load_program(text, "odd.ptx").kernel("k").launch((1, 1, 1), (1, 1, 1), struct.pack("<Q", out.ctypes.data))
    assert out[0] == 3


def test_the_index_is_one_pass_over_the_text(monkeypatch):
    """Splitting visits each item once: the regular expressions are started once per item
    (and once per initialiser), however large the module."""
    starts = []
    real = index_module._Splitter._item_end

    def counting(self, pos):
        starts.append(pos)
        return real(self, pos)
    monkeypatch.setattr(index_module._Splitter, "_item_end", counting)
    for n in (100, 400):
        starts.clear()
        index = ModuleIndex(many_kernels(n), "many.ptx")
        assert len(starts) == n == len(index.kernels)
        assert len(set(starts)) == n


def test_a_unit_costs_what_it_reaches(monkeypatch):
    """The names a function uses are found once per function, whichever kernel reaches it."""
    scans = []
    real = ModuleIndex.names_used

    def counting(self, item):
        if id(item) not in self._names:
            scans.append(item.name)
        return real(self, item)
    monkeypatch.setattr(ModuleIndex, "names_used", counting)
    index = ModuleIndex(SHARED, "shared.ptx")
    index.kernel_unit("read_total")
    index.kernel_unit("read_total")
    assert sorted(scans) == ["plus_total", "read_total"]
    index.kernel_unit("store_total")
    assert sorted(scans) == ["plus_total", "read_total", "store_total"]


def test_threads_that_launch_a_kernel_first_at_once_link_it_once(counted):
    """Host threads launching one kernel for the first time together: it is compiled and
    linked once, and every launch runs it (a second link had dropped the object a first
    launch was running)."""
    import threading
    prog = load_program(many_kernels(50), "threads.ptx")
    kernel = prog.kernel("k17")
    errors, barrier = [], threading.Barrier(8)

    def run():
        try:
            barrier.wait()
            for _ in range(5):
                launch_small(kernel, 17)
        except BaseException as e:     # noqa: BLE001 - reported by the test
            errors.append(e)
    threads = [threading.Thread(target=run) for _ in range(8)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors[0]
    assert counted == ["k17"] and not kernel._quick


def test_the_driver_reports_the_loading_mode(monkeypatch):
    """cuModuleGetLoadingMode: CU_MODULE_LAZY_LOADING (2) by default, CU_MODULE_EAGER_LOADING (1)
    under CUDA_MODULE_LOADING=EAGER, as anycuda loads."""
    from anycuda.driver import api
    monkeypatch.delenv("CUDA_MODULE_LOADING", raising=False)
    assert api.cuModuleGetLoadingMode() == 2
    monkeypatch.setenv("CUDA_MODULE_LOADING", "EAGER")
    assert api.cuModuleGetLoadingMode() == 1


@pytest.fixture
def objects(monkeypatch, fresh_cache):
    """The names of the objects compiled (pipeline.jit.compile_to_object), in order."""
    from anycuda.compiler import pipeline
    names = []
    real = pipeline.jit.compile_to_object

    def counting(llvm_ir, name="module", optimised=True):
        names.append(name.split(":", 1)[1])
        return real(llvm_ir, name, optimised)
    monkeypatch.setattr(pipeline.jit, "compile_to_object", counting)
    return names


def test_a_kernel_block_programs_run_gets_its_own_object_when_a_launch_needs_it(objects):
    """Optimised, a kernel with a barrier whose launches a block program takes compiles that
    program and not its own code; a block shape no block program takes (12 threads: not rows of
    whole vectors) makes the kernel's own object then, once; the next process finds both in the
    cache, and one whose cache holds only the kernel's info (its object never made) lowers it
    again when it needs it."""
    prog = load_program(REVERSE_PTX, "reverse.ptx")
    kernel = prog.kernel("reverse")
    launch_reverse(kernel, 256)
    launch_reverse(kernel, 64)
    assert objects == ["reverse.block256x1x1", "reverse.block64x1x1"]
    assert kernel._jit is None                          # its own code not made, nor linked
    launch_reverse(kernel, 12)
    launch_reverse(kernel, 12)
    assert objects[2:] == ["reverse"]
    del objects[:]
    again = load_program(REVERSE_PTX, "reverse.ptx").kernel("reverse")
    launch_reverse(again, 12)
    launch_reverse(again, 256)
    assert objects == []                                # all from the cache

    other = REVERSE_PTX.replace(".entry reverse(", ".entry reverse_again(")
    launch_reverse(load_program(other, "other.ptx").kernel("reverse_again"), 256)
    assert objects == ["reverse_again.block256x1x1"]
    later = load_program(other, "other.ptx").kernel("reverse_again")
    launch_reverse(later, 12)                           # info from the cache, its object made now
    assert objects[1:] == ["reverse_again"] and later._jit is not None
