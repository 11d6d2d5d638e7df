"""The minimal inputs the fuzz targets (test_fuzz_*.py) found crashing or misbehaving, kept
so that each fix stays: a CudaError with a message where there was a segfault, an overrun or
another exception type."""
import ctypes

import numpy as np
import pytest

from anycuda.driver import api
from anycuda.runtime.errors import CudaError


def _code(call, *args):
    with pytest.raises(CudaError) as e:
        call(*args)
    assert e.value.message
    return e.value.code.name


@pytest.mark.parametrize("dst", [2**64 - 1, 2**48, 0, 8])
def test_copy_to_no_memory_is_invalid_value(context, dst):
    """Was a segfault: cuMemcpy(0xffffffffffffffff, host, 8)."""
    src = np.arange(8, dtype=np.uint8)
    assert _code(api.cuMemcpy, dst, src.ctypes.data, 8) == "CUDA_ERROR_INVALID_VALUE"
    assert _code(api.cuMemcpy, src.ctypes.data, dst, 8) == "CUDA_ERROR_INVALID_VALUE"


def test_memset_past_its_allocation_is_invalid_value(context):
    """Was a write over the heap: cuMemsetD8 of 2**40 bytes into a 4096-byte allocation."""
    ptr = api.cuMemAlloc(4096)
    guard = api.cuMemAlloc(4096)
    api.cuMemsetD8(guard, 0x5A, 4096)
    try:
        assert _code(api.cuMemsetD8, ptr, 0, 2**40) == "CUDA_ERROR_INVALID_VALUE"
        assert _code(api.cuMemsetD8, ptr + 4095, 0, 2) == "CUDA_ERROR_INVALID_VALUE"
        assert _code(api.cuMemcpy, ptr + 1, guard, 4096) == "CUDA_ERROR_INVALID_VALUE"
        api.cuMemsetD8(ptr + 4095, 7, 1)                        # the last byte itself is fine
        back = np.zeros(4096, dtype=np.uint8)
        api.cuMemcpy(back.ctypes.data, guard, 4096)
        assert (back == 0x5A).all()
        last = ctypes.c_uint8()
        api.cuMemcpy(ctypes.addressof(last), ptr + 4095, 1)
        assert last.value == 7
    finally:
        api.cuMemFree(ptr)
        api.cuMemFree(guard)


def test_host_to_host_copies_still_work(context):
    src = np.random.default_rng().integers(0, 256, 10_000, dtype=np.uint8)
    dst = np.zeros_like(src)
    api.cuMemcpy(dst.ctypes.data, src.ctypes.data, src.nbytes)
    assert (dst == src).all()


def test_destroying_the_primary_context_is_refused(context):
    """Was an AttributeError later: cuCtxDestroy(primary) dropped its handle, and
    cuDevicePrimaryCtxReset then found none."""
    assert _code(api.cuCtxDestroy, context) == "CUDA_ERROR_INVALID_CONTEXT"
    api.cuDevicePrimaryCtxReset(0)
    assert api.cuDevicePrimaryCtxRetain(0) == context
    api.cuCtxSetCurrent(context)
    api.cuMemFree(api.cuMemAlloc(64))


def _cubin_with(offset: int, value: int) -> bytes:
    from test_fuzz_binaries import tiny_cubin
    data = bytearray(tiny_cubin())
    data[offset:offset + 8] = value.to_bytes(8, "little")
    return bytes(data)


@pytest.mark.parametrize("cut", [4, 5, 40, 63])
def test_truncated_elf_header_is_an_elf_error(cut):
    """Was an IndexError: b'\\x7fELF' alone."""
    from anycuda import elf
    from test_fuzz_binaries import tiny_cubin
    with pytest.raises(elf.ElfError, match="truncated ELF header"):
        elf.entry_functions(tiny_cubin()[:cut])


def test_string_table_offset_past_any_file_is_an_elf_error():
    """Was an OverflowError: the section-name table's offset set to 2**63."""
    from anycuda import elf
    from test_fuzz_binaries import tiny_cubin
    good = tiny_cubin()
    shoff = int.from_bytes(good[0x28:0x30], "little")
    names_header = shoff + 64                      # section 1, .shstrtab; sh_offset is at +24
    with pytest.raises(elf.ElfError, match="malformed ELF section table"):
        elf.entry_functions(_cubin_with(names_header + 24, 2**63))


OVERRUN = """
import struct, sys
import numpy as np
from anycuda.driver import api
from anycuda.runtime.errors import CudaError
api.cuInit(0)
api.cuCtxSetCurrent(api.cuDevicePrimaryCtxRetain(0))
mod = api.cuModuleLoadData(open(sys.argv[1], "rb").read())
func = api.cuModuleGetFunction(mod, "vector_add")
a, b, c = (api.cuMemAlloc(256) for _ in range(3))
params = struct.pack("<QQQI", a, b, c, 2**31 - 1)     # n far past the buffers' 64 elements
for _ in range(3):
    try:
        api.cuLaunchKernel(func, (64, 1, 1), (256, 1, 1), 0, 0, params)
        api.cuCtxSynchronize()
    except CudaError:                                  # (a fault, as a GPU may answer: the process lives)
        break
    junk = [np.zeros(n) for n in range(1, 200)] + [bytearray(64) for _ in range(1000)]
print("alive")
"""


def test_a_kernel_writing_far_past_its_allocation_leaves_the_process_alive(tmp_path):
    """Found by fuzz_launch: a kernel writing 64 KB past a 256-byte allocation overwrote
    malloc's records while device memory came from the host's heap, and the process died later
    (SIGSEGV or glibc's 'corrupted double-linked list'). Run in a child so a crash is a failure."""
    import subprocess
    import sys
    from test_fuzz_launch import VECTOR_ADD
    script = tmp_path / "overrun.py"
    script.write_text(OVERRUN)
    done = subprocess.run([sys.executable, str(script), str(VECTOR_ADD)], capture_output=True, text=True,
                          timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "alive", done.stderr[-2000:]


SHARED_PAST_ITS_WINDOW = b""".version 8.0
.target sm_80
.address_size 64
.extern .shared .align 4 .b8 window[];
.visible .entry past(.param .u32 stride)
{
  .reg .b32 %r<5>;
  ld.param.u32 %r1, [stride];
  mov.u32 %r2, %tid.x;
  mul.lo.u32 %r3, %r2, %r1;
  mov.u32 %r4, window;
  add.u32 %r4, %r4, %r3;
  st.shared.u32 [%r4], %r2;
  ret;
}
"""


def _mappings() -> int:
    with open("/proc/self/maps") as f:
        return sum(1 for _ in f)


def test_a_module_goes_with_its_reset_context(context):
    """Was a SIGSEGV (or LLVM's "Unable to allocate section memory") after ~50,000 inputs of
    fuzz_shared_window: after each fault the target resets the primary context and loads its
    module again, and every earlier module's code stayed mapped (six mappings a reset) until
    mmap ran out. A context's modules now go with it, as on a GPU: the old handles name
    nothing, and a hundred fault/reset/reload rounds leave the count of mappings about where
    it was."""
    import struct

    def fault_and_reset():
        mod = api.cuModuleLoadData(SHARED_PAST_ITS_WINDOW + b"\0")
        fn = api.cuModuleGetFunction(mod, "past")
        with pytest.raises(CudaError) as e:          # a window of 0 bytes, stored into 504 bytes on
            api.cuLaunchKernel(fn, (1, 1, 1), (64, 1, 1), 0, 0, struct.pack("<I", 8))
            api.cuCtxSynchronize()
        assert e.value.code.name == "CUDA_ERROR_ILLEGAL_ADDRESS"
        api.cuDevicePrimaryCtxReset(0)
        api.cuCtxSetCurrent(api.cuDevicePrimaryCtxRetain(0))
        return mod, fn

    for _ in range(10):
        fault_and_reset()
    before = _mappings()
    for _ in range(100):
        mod, fn = fault_and_reset()
    assert _mappings() <= before + 100, (before, _mappings())     # the leak was 600; the heap wanders by tens
    assert _code(api.cuModuleGetFunction, mod, "past") == "CUDA_ERROR_INVALID_HANDLE"
    assert _code(api.cuLaunchKernel, fn, (1, 1, 1), (1, 1, 1), 0, 0, struct.pack("<I", 0)) == "CUDA_ERROR_INVALID_HANDLE"


UNDECLARED_ACROSS_A_BARRIER = """.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 out)
{
  .reg .b32 %r<3>; .reg .b64 %rd<3>;
  ld.param.u64 %rd1, [out];
  mov.u32 %x, %tid.x;
  bar.sync 0;
  st.global.u32 [%rd1], %x;
  ret;
}
"""


def test_an_undeclared_register_live_across_a_barrier_is_invalid_ptx(context):
    """Was a KeyError in the spills' plan (fuzz_load_plain: %rd2 renamed everywhere but in its
    declaration, replay('load', 1500804023, 87)): now the error any undeclared register gets,
    with its line, when the kernel is launched (a kernel that does not compile fails there)."""
    import struct
    mod = api.cuModuleLoadData(UNDECLARED_ACROSS_A_BARRIER.encode())
    k = api.cuModuleGetFunction(mod, "k")
    out = api.cuMemAlloc(64)
    with pytest.raises(CudaError) as e:
        api.cuLaunchKernel(k, (1, 1, 1), (32, 1, 1), 0, 0, struct.pack("<Q", out))
        api.cuCtxSynchronize()
    assert e.value.code.name == "CUDA_ERROR_INVALID_PTX"
    assert "undeclared register %x" in str(e.value) and ":8:" in str(e.value)
    api.cuMemFree(out)
    api.cuModuleUnload(mod)


LONG_NAMES = """.version 8.0
.target sm_80
.address_size 64
.visible .entry k(.param .u64 out)
{
  .reg .b32 REG; .reg .b64 %rd<3>; .reg .pred %p;
  ld.param.u64 %rd1, [out];
  mov.u32 REG, %tid.x;
  cvta.to.global.u64 %rd1, %rd1;
  mul.wide.u32 %rd2, REG, 4;
  add.s64 %rd1, %rd1, %rd2;
  setp.eq.u32 %p, REG, 0;
  @%p bra LABEL;
  add.u32 REG, REG, 100;
LABEL:
  st.global.u32 [%rd1], REG;
  ret;
}
"""


def test_names_of_seventy_thousand_characters_compile_and_run(context):
    """Was a RuntimeError from LLVM's IR parser (fuzz_load_plain, replay('load', 4154538754,
    172): a label renamed to 70,000 characters, past LLVM's bound of 1,024 on local names)."""
    import struct
    ptx = LONG_NAMES.replace("REG", "%" + "r" * 70_000).replace("LABEL", "L" + "l" * 70_000)
    mod = api.cuModuleLoadData(ptx.encode())
    out = api.cuMemAlloc(4 * 32)
    api.cuMemsetD8(out, 0xCD, 4 * 32)
    api.cuLaunchKernel(api.cuModuleGetFunction(mod, "k"), (1, 1, 1), (32, 1, 1), 0, 0, struct.pack("<Q", out))
    got = np.empty(32, dtype=np.uint32)
    api.cuMemcpy(got.ctypes.data, out, 4 * 32)
    assert list(got) == [0] + [t + 100 for t in range(1, 32)]
    api.cuMemFree(out)
    api.cuModuleUnload(mod)


GUARD_COPIES = """
import numpy as np
from anycuda.driver import api
from anycuda.runtime import arena
from anycuda.runtime.errors import CudaError
api.cuInit(0)
api.cuCtxSetCurrent(api.cuDevicePrimaryCtxRetain(0))
big = api.cuMemAlloc(1 << 20)             # a mapping of its own, between two guards
small = api.cuMemAlloc(100)               # a slot of a slab
host = np.zeros(8192, dtype=np.uint8)
wild = [big - 4096, big + (1 << 20), big + (1 << 20) + arena.GUARD - 8, small + 256]
api.cuMemFree(small)
wild.append(small)                        # freed: no allocation holds it
refused = 0
for ptr in wild:
    for call in ((api.cuMemcpy, ptr, host.ctypes.data, 8), (api.cuMemcpy, host.ctypes.data, ptr, 8),
                 (api.cuMemsetD8, ptr, 7, 8)):
        try:
            call[0](*call[1:])
        except CudaError as e:
            assert e.code.name == "CUDA_ERROR_INVALID_VALUE" and "outside any live allocation" in str(e), e
            refused += 1
print("refused", refused)
"""


def test_copies_into_device_memory_outside_allocations_are_refused(tmp_path):
    """Found by fuzz_api_plain (replay(1188890350, 321991) after 321,990 sequences): a copy to
    a freed pointer that now lay in a guard page of another mapping passed the host-memory
    check (the guard is mapped, only inaccessible) and the process died of SIGSEGV. Now
    device memory outside a live allocation (guards, freed slots, past an end) is refused.
    Run in a child: at the commit before it crashes."""
    import subprocess
    import sys
    script = tmp_path / "guards.py"
    script.write_text(GUARD_COPIES)
    done = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=300)
    assert done.returncode == 0 and done.stdout.strip() == "refused 15", (done.returncode, done.stderr[-2000:])


def _sized_kernel(declarations: str, params: str = ".param .u64 out") -> str:
    """A kernel that stores its thread index through its first parameter, with `declarations`
    (module variables before it, `.local`/`.shared` ones in it: "{module}|{body}"), the
    address of a module variable `g` stored after it where there is one."""
    module, body = declarations.split("|")
    uses = "mov.u64 %rd1, g; st.global.u64 [%rd1+8], %rd1;" if " g[" in module else ""
    return f""".version 8.0
.target sm_80
.address_size 64
{module}
.visible .entry k({params})
{{
  {body}
  .reg .b32 %r; .reg .b64 %rd<2>;
  ld.param.u64 %rd1, [out];
  mov.u32 %r, %tid.x;
  st.global.u32 [%rd1], %r;
  {uses}
  ret;
}}
"""


def _launch_code(text: str) -> str:
    """The error of loading `text` and launching its kernel once (None if it ran)."""
    import struct
    out = api.cuMemAlloc(64)
    try:
        mod = api.cuModuleLoadData(text.encode())
        try:
            api.cuLaunchKernel(api.cuModuleGetFunction(mod, "k"), (1, 1, 1), (32, 1, 1), 0, 0,
                               struct.pack("<Q", out) + bytes(0x8000))
            api.cuCtxSynchronize()
        finally:
            api.cuModuleUnload(mod)
    except CudaError as e:
        assert e.message
        return e.code.name
    finally:
        api.cuMemFree(out)
    return None


@pytest.mark.parametrize("declarations, params, was", [
    # fuzz_run_plain, replay('run', 1496303154, 52849): a parameter at 4 GiB filled the
    # harness's parameter buffer for 30 s (ptxas: "Constant overflow")
    ("|", ".param .u64 out, .param .align 4294967296 .u64 far", "a 4 GiB parameter buffer"),
    ("|", ".param .u64 out, .param .align 65536 .u64 far", "65 KiB of parameters (ptxas: 0x7ffc max)"),
    ("|", ".param .u64 out, .param .align 4 .b8 big[32760]", "32,768 bytes of parameters"),
    ("|.local .align 2147483648 .b8 l[16];", ".param .u64 out", "a segfault: the stack realigned by 2 GiB"),
    ("|.local .align 16 .b8 l[1048576];", ".param .u64 out", "1 MiB of local data on a worker's stack"),
    (".global .align 1099511627776 .b8 g[16];|", ".param .u64 out", "a RuntimeError from LLVM"),
    (".global .align 2147483648 .b8 g[16];|", ".param .u64 out", "a SystemError: a 2 GiB code object"),
    ("|.shared .align 8 .b8 s[102400];", ".param .u64 out", "a launch error: 'may use at most -53248'"),
    (".const .align 8 .b8 c[1048576];|", ".param .u64 out", "run (ptxas: 0x10000 max)"),
])
def test_variables_beyond_cudas_limits_are_invalid_ptx(context, declarations, params, was):
    """Each was `was`; now CUDA_ERROR_INVALID_PTX naming the limit, and the context goes on."""
    assert _launch_code(_sized_kernel(declarations, params)) == "CUDA_ERROR_INVALID_PTX"
    assert _launch_code(_sized_kernel("|", ".param .u64 out")) is None


def test_module_variables_past_the_memory_there_is_are_out_of_memory(context):
    """Was a MemoryError (a terabyte of zeros as the initialiser's bytes); with zeros as a
    zero-filled section, LLVM's loader would abort the process."""
    assert _launch_code(_sized_kernel(".global .align 8 .b8 g[1099511627776];|")) == "CUDA_ERROR_OUT_OF_MEMORY"
    assert _launch_code(_sized_kernel("|", ".param .u64 out")) is None


@pytest.mark.parametrize("declarations, params", [
    ("|", ".param .u64 out, .param .align 4 .b8 big[32756]"),          # 32,764 bytes: the most
    ("|.local .align 16 .b8 l[65536];", ".param .u64 out"),
    ("|.shared .align 1048576 .b8 s[16];", ".param .u64 out"),
    ("|.shared .align 8 .b8 s[49152];", ".param .u64 out"),
    (".const .align 8 .b8 c[65536];|", ".param .u64 out"),
    (".global .align 8 .b8 g[268435456];|", ".param .u64 out"),    # 256 MiB of zeros: a zero-filled section
])
def test_variables_within_the_limits_run(context, declarations, params):
    assert _launch_code(_sized_kernel(declarations, params)) is None


def test_module_variables_hold_their_initialisers_then_zeros(context, rng):
    """Zeros past an initialiser's values are a zero-filled part (a gigabyte `= {1}` was a
    gigabyte of IR text): every variable reads back its values, then zeros, at its size."""
    ints = rng.integers(0, 2**32, 3, dtype=np.uint64)
    floats = rng.standard_normal(2)
    text = f""".version 8.0
.target sm_80
.address_size 64
.global .align 4 .u32 part[8] = {{{', '.join(map(str, ints))}}};
.global .align 8 .f64 halfway[4] = {{{', '.join(repr(float(x)) for x in floats)}}};
.global .align 4 .u32 full[3] = {{{', '.join(map(str, ints))}}};
.global .align 4 .u32 zeros[5];
.global .align 4 .u32 big[4194304] = {{{ints[0]}}};
.visible .entry k(.param .u64 p) {{ ret; }}
"""
    want = {"part": np.concatenate([ints, np.zeros(5)]).astype(np.uint32),
            "halfway": np.concatenate([floats, np.zeros(2)]),
            "full": ints.astype(np.uint32), "zeros": np.zeros(5, np.uint32),
            "big": np.concatenate([ints[:1], np.zeros(4194303)]).astype(np.uint32)}
    mod = api.cuModuleLoadData(text.encode())
    try:
        for name, values in want.items():
            ptr, size = api.cuModuleGetGlobal(mod, name)
            assert size == values.nbytes, name
            got = np.full_like(values, 77)
            api.cuMemcpy(got.ctypes.data, ptr, size)
            np.testing.assert_array_equal(got, values, err_msg=name)
    finally:
        api.cuModuleUnload(mod)
