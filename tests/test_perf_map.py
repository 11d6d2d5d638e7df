"""ANYCUDA_PERF_MAP (compiler/build/perfmap.py): the functions of linked code, internal ones
too, named in /tmp/perf-<pid>.map at the addresses where they run."""
import ctypes

import numpy as np

import anycuda as ac
from anycuda.compiler.build import jit, perfmap

IR = r"""
define internal i32 @inner(i32 %x) noinline {
  %y = mul i32 %x, 3
  ret i32 %y
}
define i32 @outer(i32 %x) {
  %y = call i32 @inner(i32 %x)
  %z = add i32 %y, 1
  ret i32 %z
}
"""


def _entries(path):
    out = {}
    with open(path) as fh:
        for line in fh:
            start, size, name = line.split()
            out[name] = (int(start, 16), int(size, 16))
    return out


def test_internal_functions_are_named_where_they_run(monkeypatch, tmp_path):
    obj = jit.compile_to_object(IR, "perfmap_test")
    symbols = {name: exported for name, _, _, _, exported in perfmap.function_symbols(obj)}
    assert symbols == {"inner": False, "outer": True}
    monkeypatch.setattr(perfmap, "path", lambda: str(tmp_path / "perf.map"))
    monkeypatch.setenv("ANYCUDA_PERF_MAP", "1")
    loaded = jit.LoadedObject(obj)
    entries = _entries(tmp_path / "perf.map")
    assert entries["outer"][0] == loaded.address("outer")
    # inner's address: where outer's call goes (calling it through that address gives 3x)
    inner = ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32)(entries["inner"][0])
    assert inner(14) == 42
    assert ctypes.CFUNCTYPE(ctypes.c_int32, ctypes.c_int32)(loaded.address("outer"))(14) == 43


def test_not_an_elf_object_has_no_symbols():
    assert perfmap.function_symbols(b"MZ not elf") == []


def test_a_kernel_launch_names_its_functions(monkeypatch, tmp_path, compile_cuda):
    monkeypatch.setattr(perfmap, "path", lambda: str(tmp_path / "perf.map"))
    monkeypatch.setenv("ANYCUDA_PERF_MAP", "1")
    mod = compile_cuda('extern "C" __global__ void twice(float* x, int n) { int i = blockIdx.x * blockDim.x + '
                       'threadIdx.x; if (i < n) x[i] *= 2.0f; }', name="perfmap_kernel.cu")
    x = ac.asarray(np.arange(100, dtype=np.float32))
    mod.get_function("twice")((1,), (128,), (x, np.int32(100)))
    ac.synchronize()
    assert np.array_equal(x.get(), 2 * np.arange(100, dtype=np.float32))
    names = set(_entries(tmp_path / "perf.map"))
    assert any(n.endswith(".worker") for n in names) and any(n.startswith("anycuda.launch.") for n in names)


def test_stretches_of_a_block_program_are_named_apart(monkeypatch, tmp_path, compile_cuda, fresh_cache):
    """ANYCUDA_PERF_MAP=stretches: a block program's code between the markers at its
    stretches' starts (irutil.mark_stretch) is named `...:stretchN`, the parts side by side
    and covering the function; the kernel's answer is numpy's."""
    from conftest import ran_as_block_program
    monkeypatch.setattr(perfmap, "path", lambda: str(tmp_path / "perf.map"))
    monkeypatch.setenv("ANYCUDA_PERF_MAP", "stretches")
    mod = compile_cuda(r'''
extern "C" __global__ void pair_sums(const float* x, float* out) {
    __shared__ float s[128];
    int t = threadIdx.x, i = blockIdx.x * 128 + t;
    s[t] = x[i];
    __syncthreads();
    out[i] = s[t] + s[t ^ 1];
}''', name="perfmap_stretches.cu")
    k = mod.get_function("pair_sums")
    x = np.arange(512, dtype=np.float32)
    out = ac.zeros(512, np.float32)
    k((4,), (128,), (ac.asarray(x), out))
    ac.synchronize()
    assert np.array_equal(out.get(), x + x.reshape(-1, 2)[:, ::-1].ravel())
    assert ran_as_block_program(k, 128)
    entries = _entries(tmp_path / "perf.map")
    stretches = sorted((start, size, name) for name, (start, size) in entries.items() if ":stretch" in name)
    assert [name.rsplit(":", 1)[1] for _, _, name in stretches] == ["stretch0", "stretch1"]
    whole = entries[stretches[0][2].rsplit(":", 1)[0]]
    parts = [whole] + [(start, size) for start, size, _ in stretches]
    assert all(a + n == b for (a, n), (b, _) in zip(parts, parts[1:]))      # side by side, in order
