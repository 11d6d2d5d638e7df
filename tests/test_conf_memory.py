"""State spaces and parameters: widths and vector loads, __ldg, shared (static and dynamic),
local arrays, __constant__ and __device__ variables with initialisers, struct, large and
many parameters, generic pointers into shared memory."""
import ctypes

import numpy as np
import pytest

import anycuda as ac
from conformance import load_cuda, poison


def _k(name):
    return load_cuda("memory").get_function(name)


def test_access_widths_and_vectors(rng):
    n = 500
    c8 = rng.integers(-128, 128, n).astype(np.int8)
    s16 = rng.integers(-2 ** 15, 2 ** 15, n).astype(np.int16)
    i64 = rng.integers(-2 ** 63, 2 ** 63, n, dtype=np.int64)
    v4 = rng.standard_normal((n, 4)).astype(np.float32)
    d2 = rng.standard_normal((n, 2))
    i4 = rng.integers(-2 ** 31, 2 ** 31, (n, 4), dtype=np.int64).astype(np.int32)
    out, fout = poison((n, 6), np.int64), poison((n, 2), np.float32)
    _k("widths")((4,), (128,), (ac.asarray(c8), ac.asarray(s16), ac.asarray(i64), ac.asarray(v4), ac.asarray(d2),
                                ac.asarray(i4), out, fout, np.int32(n)))
    g = out.get()
    assert np.array_equal(g[:, 0], c8) and np.array_equal(g[:, 1], s16) and np.array_equal(g[:, 2], i64)
    assert np.array_equal(g[:, 3], i4.astype(np.int64).sum(1))
    assert np.array_equal(g[:, 4], c8.view(np.uint8)) and np.array_equal(g[:, 5], s16.view(np.uint16))
    f = fout.get()
    assert np.allclose(f[:, 0], v4 @ np.array([1, 2, 3, 4], np.float32), rtol=1e-6, atol=1e-6)
    assert np.array_equal(f[:, 1], (d2[:, 0] - d2[:, 1]).astype(np.float32))


def test_state_spaces_and_module_variables(rng):
    block, grid = 64, 3
    n = block * grid
    idx = rng.integers(0, 1000, n).astype(np.int32)
    out = poison(n, np.float32)
    _k("spaces")((grid,), (block,), (ac.asarray(idx), out, np.int32(n)), shared_mem=4 * block)
    t = np.arange(n) % block
    table = np.array([1.5, -2.0, 3.25, 0.0, 8.0, -0.5, 7.0, 100.0], np.float32)
    want = (idx & 15) * 0.5 + t + table[((t + 1) % block) % 8] + np.float32(42 * 0.25)
    assert np.array_equal(out.get(), want.astype(np.float32))


def test_struct_parameter():
    mixed = np.dtype([("f", "<f4"), ("i", "<i4"), ("d", "<f8"), ("s", "<i2"), ("c", "i1"), ("pad", "V5")])
    m = np.array([(1.25, -7, 3.5e100, -300, -5, b"")], mixed)[0]
    out = poison(5, np.float64)
    _k("struct_param")((1,), (1,), (m, out))
    assert list(out.get()) == [1.25, -7, 3.5e100, -300, -5]
    with pytest.raises(TypeError):
        _k("struct_param")((1,), (1,), (b"\0" * 8, out))     # wrong size is refused, not misread


def test_large_parameter(rng):
    v = rng.integers(-1000, 1000, 1000).astype(np.int32)
    out = ac.zeros(1, np.int32)
    _k("big_param")((3,), (128,), (v.tobytes(), out))
    assert out.get()[0] == 3 * int((v.astype(np.int64) * (np.arange(1000) % 7)).sum())


def test_many_parameters():
    out, dout = poison(3, np.int32), poison(1, np.float64)
    args = [np.int32(v) for v in range(1, 11)] + [np.float64(1.5), np.float64(-2.0), np.float32(0.5), np.float32(4.0),
                                                   np.int8(-3), np.int16(-1234), np.int64(-(2 ** 40)), np.uint64(2 ** 63)]
    _k("many_params")((1,), (1,), tuple(args) + (out, dout))
    assert list(out.get()) == [sum(k * k for k in range(1, 11)), -3, -1234]
    assert dout.get()[0] == 1.5 * -2.0 + 2.0 - 2.0 ** 40 + 2.0 ** 63


def test_device_variable_is_shared_and_visible_from_the_host():
    mod = load_cuda("memory")
    ptr = mod.get_global("counter")
    start = ctypes.c_int.from_address(ptr.ptr).value
    before = poison(1, np.int32)
    mod.get_function("bump_counter")((10,), (100,), (before,))
    ac.synchronize()
    assert ctypes.c_int.from_address(ptr.ptr).value == start + 1000
    assert start <= before.get()[0] < start + 1000
    scale = mod.get_global("scale")
    assert ctypes.c_double.from_address(scale.ptr).value == 0.25


def test_generic_pointer_into_shared_memory():
    out = poison(128, np.float32)
    _k("generic_shared")((1,), (128,), (out,))
    t = np.arange(128)
    assert np.array_equal(out.get(), (t * (t + 1) / 2).astype(np.float32))


def test_wrong_arguments_are_refused():
    out = poison(3, np.int32)
    k = _k("many_params")
    with pytest.raises(TypeError):
        k((1,), (1,), (out,))                                      # wrong count
    with pytest.raises(TypeError):
        _k("bump_counter")((1,), (1,), (np.zeros(1, np.int32),))   # a host array
    with pytest.raises(TypeError):
        _k("widths")((1,), (1,), (out,) * 8 + (np.float64(1),))     # 8-byte scalar for a 4-byte int


def test_store_widths_and_vector_shapes(rng):
    n = 300
    v = rng.integers(-2 ** 63, 2 ** 63, n, dtype=np.int64)
    outs = [poison(n, np.int8), poison(n, np.int16), poison(n, np.int64), poison((n, 4), np.float32),
            poison((n, 2), np.int32), poison((n, 2), np.float64), poison((n, 4), np.int8), poison((n, 4), np.int16),
            poison((n, 2), np.uint16)]
    _k("store_widths")((3,), (128,), (ac.asarray(v),) + tuple(outs) + (np.int32(n),))
    c8, s16, i64, f4, i2, d2, c4, s4, u2 = (o.get() for o in outs)
    u = v.view(np.uint64)
    assert np.array_equal(c8, v.astype(np.int8)) and np.array_equal(s16, (v >> 8).astype(np.int16))
    assert np.array_equal(i64, v * 3)
    assert np.array_equal(f4, np.stack([(v & 0xFF), (v >> 8) & 0xFF, np.full(n, -1.5), np.arange(n)], 1).astype(np.float32))
    assert np.array_equal(i2, np.stack([v.astype(np.int32), (v >> 32).astype(np.int32)], 1))
    assert np.array_equal(d2, np.stack([v.astype(np.int32).astype(np.float64), 0.25 * np.arange(n)], 1))
    assert np.array_equal(c4, np.stack([(v >> s).astype(np.int8) for s in (0, 8, 16, 24)], 1))
    assert np.array_equal(s4, np.stack([(v >> s).astype(np.int16) for s in (0, 16, 32, 48)], 1))
    assert np.array_equal(u2, np.stack([(u >> np.uint64(3)).astype(np.uint16), (u >> np.uint64(19)).astype(np.uint16)], 1))


def test_load_shapes_volatile_and_ldg(rng):
    n = 256
    c4 = rng.integers(-128, 128, (n, 4)).astype(np.int8)
    s2 = rng.integers(-2 ** 15, 2 ** 15, (n, 2)).astype(np.int16)
    i2 = rng.integers(-2 ** 31, 2 ** 31, (n, 2), dtype=np.int64).astype(np.int32)
    l2 = rng.integers(-2 ** 63, 2 ** 63, (n, 2), dtype=np.int64)
    d = rng.standard_normal(n) * 100
    vol = poison(n, np.int32)
    out = poison((n, 6), np.int64)
    _k("load_shapes")((2,), (128,), (ac.asarray(c4), ac.asarray(s2), ac.asarray(i2), ac.asarray(l2), ac.asarray(d),
                                     vol, out, np.int32(n)))
    g = out.get()
    c = c4.astype(np.int64)
    assert np.array_equal(g[:, 0], c[:, 0] + 2 * c[:, 1] + 3 * c[:, 2] + 4 * c[:, 3])
    assert np.array_equal(g[:, 1], s2[:, 0].astype(np.int64) - s2[:, 1])
    assert np.array_equal(g[:, 2], i2[:, 0].astype(np.int64) * 3 - i2[:, 1])
    assert np.array_equal(g[:, 3], l2[:, 0] ^ l2[:, 1])
    assert np.array_equal(g[:, 4], np.trunc(d * 8).astype(np.int64))
    assert np.array_equal(g[:, 5], np.arange(n) * 7 + 1) and np.array_equal(vol.get(), np.arange(n) * 7)


def test_shared_memory_of_several_types(rng):
    block, grid = 128, 3
    n = block * grid
    x = rng.standard_normal(n)
    out = poison(n, np.float64)
    _k("shared_types")((grid,), (block,), (ac.asarray(x), out, np.int32(n)), shared_mem=12 * block)
    t = np.arange(n) % block
    r = block - 1 - t
    xr = x.reshape(grid, block)
    sd = xr[:, ::-1].reshape(-1)
    q = (t % 32).astype(np.float32)
    vsum = (q + (q + np.float32(0.5)) - q + 2 * q).astype(np.float64)
    want = sd + ((r * 300 + 2 ** 15) % 2 ** 16 - 2 ** 15) + (r * 3) % 256 + vsum + 2 * np.roll(xr, -1, axis=1).reshape(-1) + r * r
    assert np.allclose(out.get(), want, rtol=1e-13, atol=1e-12)


def test_local_arrays_and_generic_pointers(rng):
    block, grid = 64, 2
    n = block * grid
    idx = rng.integers(0, 1000, n).astype(np.int32)
    out, spaces = poison((n, 4), np.float64), poison((n, 3), np.int32)
    _k("locals_and_generic")((grid,), (block,), (ac.asarray(idx), out, spaces, np.int32(n)))
    g, s = out.get(), spaces.get()
    t = np.arange(n) % block
    loc = np.arange(24)[None, :] * 1.5 + t[:, None]
    gbuf = np.zeros(64)
    gbuf[:8] = np.arange(1, 9)
    j = idx
    first = np.where(j & 1, loc[:, :8].sum(1), np.where(j & 2, np.arange(8).sum(), gbuf[:8].sum()))
    assert np.array_equal(g[:, 0], first)
    lc = ((j % 40) - t + 128) % 256 - 128
    assert np.array_equal(g[:, 1], loc[np.arange(n), j % 24] + lc + (j % 8))
    assert np.array_equal(g[:, 2], np.array([loc[i, j[i] % 16: j[i] % 16 + 8].sum() for i in range(n)]))
    assert np.array_equal(g[:, 3], np.array([np.arange(j[i] % 56, j[i] % 56 + 8).sum() for i in range(n)]))
    sh_off = s[:, 1]
    assert np.array_equal(sh_off - sh_off[t == 0].repeat(block), t * 8)   # shared addresses step by 8 bytes
    # __isGlobal/__isShared/__isLocal (isspacep) on generic pointers into each space
    want = np.where(j & 1, 4, np.where(j & 2, 2, 1))
    bad = np.nonzero(s[:, 0] != want)[0]
    assert not len(bad), f"isspacep: {len(bad)} rows, e.g. got {s[bad[:4], 0]} want {want[bad[:4]]} (1 global, 2 shared, 4 local)"
    assert (s[:, 2] == 1).all()


def test_constant_memory_and_host_written_globals():
    mod = load_cuda("memory")
    host_vals = np.array([3, -1, 4, -1, 5, -9, 2, -6], np.int32)
    ctypes.memmove(mod.get_global("host_set").ptr, host_vals.ctypes.data, host_vals.nbytes)
    table = (ctypes.c_longlong * 8).from_address(mod.get_global("dev_table").ptr)
    assert list(table) == [10, 20, 30, 40, 50, 60, 70, 80]
    table[3] = -12345
    n = 64
    out = poison((n, 4), np.float64)
    mod.get_function("constants")((1,), (n,), (out, np.int32(n)))
    g = out.get()
    i = np.arange(n)
    ctab = np.array([1.5, -2.0, 3.25, 0.0, 8.0, -0.5, 7.0, 100.0], np.float32).astype(np.float64)
    assert np.array_equal(g[:, 0], np.arange(16)[i % 16] + 0.5 + ctab[i % 8])
    assert np.array_equal(g[:, 1], (np.float32(0.5) * i.astype(np.float32) - np.float32(3)).astype(np.float64) + 1e10 + np.array([1, -2, 3, -4])[i % 4])
    assert np.array_equal(g[:, 2], host_vals[i % 8])
    dev = np.array([10, 20, 30, -12345, 50, 60, 70, 80])
    assert np.array_equal(g[:, 3], dev[i % 8])
    table[3] = 40


S16 = np.dtype({"names": ["f", "i", "s", "c", "u", "w"], "formats": ["<f4", "<i4", "<i2", "i1", "u1", "<u4"],
                "offsets": [0, 4, 8, 10, 11, 12], "itemsize": 16})
S40 = np.dtype({"names": ["d", "p", "i", "c", "q", "f"], "formats": ["<f8", "<u8", "<i4", "i1", "<i8", "<f4"],
                "offsets": [0, 8, 16, 20, 24, 32], "itemsize": 40})
S48 = np.dtype({"names": ["v", "d", "k", "w"], "formats": [("<f4", 4), "<f8", "<i4", ("<f4", 3)],
                "offsets": [0, 16, 24, 28], "itemsize": 48})


def test_struct_parameters_of_several_layouts():
    target = poison(1, np.float32)
    a = np.array([(2.5, -77, -1234, -100, 200, 4000000000)], S16)[0]
    b = np.array([(-1e-300, target.data.ptr, 123456, 17, -(2 ** 62), 0.125)], S40)[0]
    c = np.array([((1, 2, 3, 4), 6.5e200, -8, (0.5, 0.25, 4.0))], S48)[0]
    out = poison(15, np.float64)
    _k("struct_params")((1,), (1,), (a, b, c.tobytes(), out))
    assert list(out.get()) == [2.5, -77, -1234, -100, 200, 4000000000, -1e-300, 123456, 17, float(-(2 ** 62)),
                               0.125, 4321.0, 6.5e200, -8, 4.25]
    assert target.get()[0] == 99.5


def test_sixteen_kilobyte_parameter(rng):
    v = rng.integers(-2 ** 40, 2 ** 40, 2000, dtype=np.int64)
    out = ac.zeros(1, np.int64)
    _k("huge_param")((2,), (256,), (v.tobytes(), out))
    want = 2 * int((v.astype(object) * np.arange(1, 2001)).sum())
    assert int(out.get()[0]) == (want + 2 ** 63) % 2 ** 64 - 2 ** 63


def test_pointer_tables_and_arithmetic(rng):
    n = 32
    base = ac.asarray(rng.integers(-1000, 1000, 200).astype(np.int32))
    offs = rng.integers(0, 190, n)
    rows = ac.asarray(np.array([base.data.ptr + 4 * int(o) for o in offs], np.uint64))
    out = poison((n, 3), np.int64)
    _k("pointer_math")((1,), (n,), (rows, base, out, np.int32(n)))
    g = out.get()
    b = base.get()
    assert np.array_equal(g[:, 0], offs)
    assert np.array_equal(g[:, 1], (offs > 0).astype(int) + 2 + 4)
    assert np.array_equal(g[:, 2], b[offs + 1].astype(np.int64) + b[offs + 2])


# isspacep on a generic address made by cvta from each state space, asked in the kernel and in
# a device function that is not inlined; a second local variable and a barrier (which moves
# the kernel's locals from the stack into the thread's frame) vary the layout. `mid`, called
# with the kernel's local address, asks `spaces` about its own local variable, the address of
# its own parameter (local, says the ISA) and the kernel's address it was given.
SPACES = ("global", "shared", "local", "const", "param")
ISSPACEP_PTX = """
.version 8.0
.target sm_80
.address_size 64
.global .align 8 .b8 gvar[64];
.const .align 8 .b8 cvar[64];
.func (.param .b32 r) spaces(.param .b64 p)
{{
  .reg .b64 %a; .reg .pred %q<6>; .reg .b32 %s<8>;
  ld.param.u64 %a, [p];
  {query}
  st.param.b32 [r], %s6;
  ret;
}}
.func (.param .b32 r) mid(.param .b64 q)
{{
  .local .align 8 .b8 mvar[16];
  .reg .b64 %m<4>; .reg .b32 %u<4>;
  mov.u64 %m1, mvar; cvta.local.u64 %m1, %m1;
  {{ .param .b64 p; .param .b32 rr; st.param.b64 [p], %m1; call.uni (rr), spaces, (p); ld.param.b32 %u1, [rr]; }}
  mov.u64 %m2, q; cvta.local.u64 %m2, %m2;
  {{ .param .b64 p; .param .b32 rr; st.param.b64 [p], %m2; call.uni (rr), spaces, (p); ld.param.b32 %u2, [rr]; }}
  ld.param.u64 %m3, [q];
  {{ .param .b64 p; .param .b32 rr; st.param.b64 [p], %m3; call.uni (rr), spaces, (p); ld.param.b32 %u3, [rr]; }}
  shl.b32 %u2, %u2, 8; shl.b32 %u3, %u3, 16; or.b32 %u1, %u1, %u2; or.b32 %u1, %u1, %u3;
  st.param.b32 [r], %u1;
  ret;
}}
.visible .entry k(.param .u64 pout, .param .u64 pbuf, .param .align 8 .b8 pk[24])
{{
  .local .align 4 .b8 other[12];
  .local .align 8 .b8 lvar[40];
  .shared .align 8 .b8 svar[64];
  .reg .b64 %a<8>; .reg .b64 %a; .reg .b64 %o; .reg .pred %q<6>; .reg .b32 %s<8>; .reg .b32 %t;
  {sync}
  mov.u64 %a1, gvar; cvta.global.u64 %a1, %a1;
  mov.u64 %a2, svar; cvta.shared.u64 %a2, %a2;
  mov.u64 %a3, lvar; cvta.local.u64 %a3, %a3;
  mov.u64 %a4, cvar; cvta.const.u64 %a4, %a4;
  mov.u64 %a5, pk; cvta.param.u64 %a5, %a5;
  ld.param.u64 %a6, [pbuf];
  mov.u64 %a7, other; cvta.local.u64 %a7, %a7;
  ld.param.u64 %o, [pout];
  mov.u32 %t, %tid.x; mul.wide.u32 %a, %t, 128; add.s64 %o, %o, %a;
  {body}
  ret;
}}"""


def _query(reg):
    """PTX leaving the isspacep answers for the address in `reg` as bits of %s6."""
    lines = [f"isspacep.{sp} %q{i + 1}, {reg}; selp.u32 %s{i + 1}, {1 << i}, 0, %q{i + 1};"
             for i, sp in enumerate(SPACES)]
    return " ".join(lines) + " or.b32 %s6, %s1, %s2; or.b32 %s6, %s6, %s3; or.b32 %s6, %s6, %s4; or.b32 %s6, %s6, %s5;"


def _isspacep_kernel(sync):
    body = []
    col = 0
    for addr in range(1, 8):
        for off in (0, 7):                               # the first byte and one inside
            body.append(f"add.s64 %a, %a{addr}, {off}; {_query('%a')} st.global.u32 [%o+{4 * col}], %s6;")
            body.append("{ .param .b64 p; .param .b32 r; st.param.b64 [p], %a; call.uni (r), spaces, (p); "
                        f"ld.param.b32 %s6, [r]; }} st.global.u32 [%o+{4 * col + 4}], %s6;")
            col += 2
    body.append("{ .param .b64 p; .param .b32 r; st.param.b64 [p], %a3; call.uni (r), mid, (p); "
                f"ld.param.b32 %s6, [r]; }} st.global.u32 [%o+{4 * col}], %s6;")
    return ISSPACEP_PTX.format(query=_query("%a"), sync="bar.sync 0;" if sync else "", body="\n  ".join(body))


@pytest.mark.parametrize("sync", [False, True])
def test_isspacep_on_each_space(sync):
    from anycuda.runtime.program import load_program
    import struct
    prog = load_program(_isspacep_kernel(sync), "isspacep.ptx")
    k = prog.kernel("k")
    n = 8
    out = np.full((n, 32), 0xDEADBEEF, np.uint32)
    buf = np.zeros(16, np.uint64)
    params = struct.pack("<QQ", out.ctypes.data, buf.ctypes.data) + bytes(24)
    k.launch((2, 1, 1), (n, 1, 1), params, 64)
    bit = {sp: 1 << i for i, sp in enumerate(SPACES)}
    # the ISA puts the kernel parameters inside the global window; const data is global
    # memory on the CPU too
    want_for = {"global": bit["global"], "shared": bit["shared"], "local": bit["local"],
                "const": bit["const"] | bit["global"], "param": bit["param"] | bit["global"]}
    made = ["global", "shared", "local", "const", "param", "global", "local"]
    want = np.array([want_for[sp] for sp in made for _ in range(4)], np.uint32)
    local3 = bit["local"] * 0x10101
    assert (out[:, 28] == local3).all(), f"nested device functions: {[hex(v) for v in out[:, 28]]}, want {local3:#x}"
    for t in range(n):
        bad = np.nonzero(out[t, :28] != want)[0]
        assert not len(bad), "; ".join(
            f"{made[j // 4]} address{' + 7' if j % 4 >= 2 else ''}{' in a device function' if j % 2 else ''}: "
            f"got {[sp for sp in SPACES if out[t, j] & bit[sp]]}" for j in bad[:6])
