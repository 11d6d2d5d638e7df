"""A tiny JIT harness for testing IR-emitting helpers one at a time.

`Kernels` collects helpers into one llvmlite module: each becomes an element-wise loop
`void name(T0 *a0, T1 *a1, ..., R *out, i64 n)` whose body is the helper's straight-line
IR. `build()` verifies, optimises (as the real compiler does, so that anything the helper
leaves as LLVM poison or UB is likely to show) and JIT-compiles the module with MCJIT
once; the compiled helpers are then called on numpy arrays through ctypes.

Argument types are llvmlite types: ir.IntType(N) takes numpy uintN (or intN) arrays,
ir.HalfType() takes float16 (or uint16) arrays, float and double take float32/float64.
An i1 result comes back as uint8.
"""
from __future__ import annotations

import ctypes
import ctypes.util
import os

import numpy as np
import llvmlite.binding as llvm
import llvmlite.ir as ir

_ready = {}


def _init():
    if _ready:
        return _ready["tm"]
    llvm.initialize_native_target()
    llvm.initialize_native_asmprinter()
    # LLVM calls libgcc_s helpers for what the CPU lacks (f64 -> f16, 128-bit conversions)
    path = ctypes.util.find_library("gcc_s") or "libgcc_s.so.1"
    ctypes.CDLL(path, mode=os.RTLD_GLOBAL | getattr(os, "RTLD_NODELETE", 0))
    llvm.load_library_permanently(path)
    target = llvm.Target.from_default_triple()
    _ready["tm"] = target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                                features=llvm.get_host_cpu_features().flatten(),
                                                opt=2, codemodel="jitdefault")
    return _ready["tm"]


def _storage(t: ir.Type):
    """(LLVM element type in memory, numpy dtype) for a value type."""
    if isinstance(t, ir.IntType):
        w = max(8, t.width)
        return ir.IntType(w), np.dtype(f"uint{w}")
    if isinstance(t, ir.HalfType):
        return ir.IntType(16), np.dtype(np.uint16)
    if isinstance(t, ir.FloatType):
        return t, np.dtype(np.float32)
    if isinstance(t, ir.DoubleType):
        return t, np.dtype(np.float64)
    raise TypeError(t)


def _to_value(b, v, t):
    if isinstance(t, ir.HalfType):
        return b.bitcast(v, t)
    if isinstance(t, ir.IntType) and t.width < 8:
        return b.trunc(v, t)
    return v


def _from_value(b, v, st):
    if isinstance(v.type, ir.HalfType):
        return b.bitcast(v, st)
    if isinstance(v.type, ir.IntType) and v.type.width < st.width:
        return b.zext(v, st)
    return v


class Kernels:
    def __init__(self, name="helpers"):
        self.module = ir.Module(name=name)
        self.module.triple = llvm.get_process_triple()
        self.sigs = {}
        self.engine = None

    def add(self, name, arg_types, ret_type, body):
        """Add `name`: out[i] = body(b, *args[i]) where body emits IR with builder b."""
        i64 = ir.IntType(64)
        stores = [_storage(t) for t in arg_types]
        rst, rdt = _storage(ret_type)
        fnty = ir.FunctionType(ir.VoidType(), [s.as_pointer() for s, _ in stores] + [rst.as_pointer(), i64])
        fn = ir.Function(self.module, fnty, name=name)
        entry = fn.append_basic_block("entry")
        loop = fn.append_basic_block("loop")
        done = fn.append_basic_block("done")
        b = ir.IRBuilder(entry)
        n = fn.args[-1]
        b.cbranch(b.icmp_signed(">", n, ir.Constant(i64, 0)), loop, done)
        b.position_at_end(loop)
        i = b.phi(i64)
        i.add_incoming(ir.Constant(i64, 0), entry)
        args = [_to_value(b, b.load(b.gep(p, [i])), t) for p, t in zip(fn.args[:-2], arg_types)]
        res = body(b, *args)
        if res.type != ret_type:
            raise TypeError(f"{name}: helper returned {res.type}, expected {ret_type}")
        b.store(_from_value(b, res, rst), b.gep(fn.args[-2], [i]))
        nxt = b.add(i, ir.Constant(i64, 1))
        i.add_incoming(nxt, b.block)
        b.cbranch(b.icmp_signed("<", nxt, n), loop, done)
        b.position_at_end(done)
        b.ret_void()
        self.sigs[name] = ([d for _, d in stores], rdt)

    def build(self):
        tm = _init()
        mod = llvm.parse_assembly(str(self.module))
        mod.verify()
        pto = llvm.create_pipeline_tuning_options(speed_level=2)
        pb = llvm.create_pass_builder(tm, pto)
        pb.getModulePassManager().run(mod, pb)
        self.engine = llvm.create_mcjit_compiler(mod, _init_engine_tm())
        self.engine.finalize_object()
        return self

    def __call__(self, name, *arrays):
        dtypes, rdt = self.sigs[name]
        n = max(np.size(a) for a in arrays) if arrays else 1
        conv = []
        for a, dt in zip(arrays, dtypes):
            a = np.asarray(a)
            if a.dtype != dt:
                a = a.view(dt) if a.dtype.itemsize == dt.itemsize else a.astype(dt)
            conv.append(np.ascontiguousarray(np.broadcast_to(a, (n,))))
        out = np.zeros(n, rdt)
        addr = self.engine.get_function_address(name)
        proto = ctypes.CFUNCTYPE(None, *([ctypes.c_void_p] * (len(conv) + 1)), ctypes.c_int64)
        proto(addr)(*[a.ctypes.data for a in conv], out.ctypes.data, n)
        return out


def _init_engine_tm():
    _init()
    target = llvm.Target.from_default_triple()
    return target.create_target_machine(cpu=llvm.get_host_cpu_name(),
                                        features=llvm.get_host_cpu_features().flatten(),
                                        opt=2, codemodel="jitdefault")
