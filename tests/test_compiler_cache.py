"""The on-disk cache of compiled kernels: hits skip compilation, a corrupt entry is
compiled again, a changed PTX text is a different entry; concurrent launches on streams."""
import pickle

import numpy as np

import anycuda as ac
from anycuda import compiler
from anycuda.compiler.build import cache
from anycuda.ptx.index import ModuleIndex

PTX = """.version 8.0
.target sm_80
.address_size 64
.visible .entry fill(.param .u64 p, .param .u32 v)
{
  .reg .b32 %r<4>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [p]; ld.param.u32 %r1, [v];
  mov.u32 %r2, %tid.x; mov.u32 %r3, %ctaid.x; mad.lo.s32 %r2, %r3, 256, %r2;
  mul.wide.u32 %rd2, %r2, 4; add.s64 %rd3, %rd1, %rd2; st.global.u32 [%rd3], %r1;
  ret;
}
"""


def compile_one(ptx, kernel, name="fill.ptx"):
    return compiler.compile_kernel(ModuleIndex(ptx, name).kernel_unit(kernel), kernel, name)


def test_cache_hit_corruption_and_keys(tmp_path, monkeypatch):
    monkeypatch.setenv("ANYCUDA_CACHE_DIR", str(tmp_path))
    first = compile_one(PTX, "fill")
    entries = list(tmp_path.rglob("*.pkl"))
    assert len(entries) == 1
    calls = []
    real = cache.store
    monkeypatch.setattr(cache, "store", lambda key, value: calls.append(key) or real(key, value))
    again = compile_one(PTX, "fill")
    assert not calls and again.object_code == first.object_code          # served from disk
    entries[0].write_bytes(b"not a pickle")
    compile_one(PTX, "fill")
    assert len(calls) == 1                                               # corrupt: compiled and rewritten
    assert isinstance(pickle.loads(entries[0].read_bytes()), compiler.CompiledKernel)
    compile_one(PTX.replace("256", "128"), "fill")
    assert len(list(tmp_path.rglob("*.pkl"))) == 2


TWO = PTX + """
.visible .entry twice(.param .u64 p)
{
  .reg .b32 %r<3>; .reg .b64 %rd<4>;
  ld.param.u64 %rd1, [p];
  mov.u32 %r1, %tid.x; shl.b32 %r2, %r1, 1;
  mul.wide.u32 %rd2, %r1, 4; add.s64 %rd3, %rd1, %rd2; st.global.u32 [%rd3], %r2;
  ret;
}
"""


def test_a_kernel_keeps_its_entry_when_another_kernel_changes(tmp_path, monkeypatch):
    """Each kernel is keyed by its own unit: a module that differs in one kernel (here with
    lines added before the other) compiles only that one again."""
    monkeypatch.setenv("ANYCUDA_CACHE_DIR", str(tmp_path))
    compile_one(TWO, "fill")
    compile_one(TWO, "twice")
    assert len(list(tmp_path.rglob("*.pkl"))) == 2
    changed = TWO.replace("st.global.u32 [%rd3], %r1;", "add.u32 %r1, %r1, 1;\n  st.global.u32 [%rd3], %r1;")
    built = []
    real = compiler.pipeline.jit.compile_to_object
    monkeypatch.setattr(compiler.pipeline.jit, "compile_to_object", lambda *a, **k: built.append(a[1]) or real(*a, **k))
    compile_one(changed, "twice")
    compile_one(changed, "fill")
    assert built == ["fill.ptx:fill"]


def test_cache_can_be_turned_off(tmp_path, monkeypatch):
    monkeypatch.setenv("ANYCUDA_CACHE_DIR", str(tmp_path))
    monkeypatch.setenv("ANYCUDA_CACHE", "0")
    compile_one(PTX, "fill")
    assert not list(tmp_path.rglob("*.pkl"))


def test_concurrent_launches_on_streams():
    k = ac.RawModule(ptx=PTX).get_function("fill")
    streams = [ac.Stream() for _ in range(4)]
    outs = [ac.zeros(256 * 64, np.uint32) for _ in streams]
    for rep in range(5):
        for i, (s, o) in enumerate(zip(streams, outs)):
            k((64,), (256,), (o, np.uint32(100 * i + rep)), stream=s)
    ac.synchronize()
    for i, o in enumerate(outs):
        assert (o.get() == 100 * i + 4).all()


def test_the_fingerprint_reads_every_module_of_the_compiler():
    """Code made by any stage's module is keyed by it: a change anywhere in ptx/ or compiler/
    (sub-packages included) misses the entries made before."""
    names = {name for name, _ in cache.fingerprint_sources()}
    assert {"ptx/parser.py", "ptx/modifiers.py", "compiler/pipeline.py", "compiler/ops/instructions.py",
            "compiler/vector/warpruns.py", "compiler/build/cache.py"} <= names
