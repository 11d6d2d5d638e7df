"""`call`: device functions with the `.param` convention, indirect calls through a
prototype, and the system calls nvcc emits (`vprintf`, `__assertfail`, `malloc`, `free`)."""
from __future__ import annotations

from llvmlite import ir

from ...ptx import ir as pir
from .. import abi
from ..cpu import faults
from ..types import I32, I64, PTR
from . import memcheck


def _param_pointer(f, item, decl_type=None):
    """Calls pass `.param` buffers by address; a register argument gets a temporary buffer."""
    b = f.b
    if isinstance(item, pir.Sym):
        if item.name in f.ptrs:
            return f.ptrs[item.name]
        return b.inttoptr(f.symbol_address(item.name, window=False), PTR)
    if isinstance(item, (pir.Reg, pir.Imm)):
        slot = f.entry_alloca(ir.ArrayType(ir.IntType(8), 16))
        p = b.bitcast(slot, PTR)
        if isinstance(item, pir.Reg):
            reg_slot, t = f.reg(item.name)
            b.store(b.load(reg_slot), b.bitcast(p, reg_slot.type))
        else:
            b.store(f.read(item, "b64"), b.bitcast(p, I64.as_pointer()))
        return p
    raise f.error(f"unsupported call argument {item}")


def _held(f, call):
    """call() where a watchdog's stop may not jump out of it (the printf and assert hooks run
    Python; malloc and free hold libc's locks): compiler/cpu/faults.held."""
    return faults.held(f.b, f.launch_field("fault_key", I64), call)


def _system_call(f, name, args, rets):
    """Calls to functions the CUDA runtime provides on the device."""
    b = f.b
    if name == "vprintf":
        fmt = b.load(b.bitcast(args[0], I64.as_pointer()))
        buf = b.load(b.bitcast(args[1], I64.as_pointer()))
        hook = b.inttoptr(f.launch_field("vprintf_hook", I64),
                          ir.FunctionType(I32, [PTR, PTR, PTR]).as_pointer())
        r = _held(f, lambda: b.call(hook, [f.ctx, b.inttoptr(fmt, PTR), b.inttoptr(buf, PTR)]))
        if rets:
            b.store(r, b.bitcast(rets[0], I32.as_pointer()))
        return True
    if name == "__assertfail":
        vals = [b.load(b.bitcast(a, I64.as_pointer())) for a in args[:2]]
        line = b.load(b.bitcast(args[2], I32.as_pointer()))
        func = b.load(b.bitcast(args[3], I64.as_pointer()))
        hook = b.inttoptr(f.launch_field("assert_hook", I64),
                          ir.FunctionType(ir.VoidType(), [PTR, PTR, PTR, I32, PTR]).as_pointer())
        _held(f, lambda: b.call(hook, [f.ctx, b.inttoptr(vals[0], PTR), b.inttoptr(vals[1], PTR), line,
                                       b.inttoptr(func, PTR)]))
        f.emit_trap(abi.LAUNCH_ERR_ASSERT)
        b.position_at_end(f.fn.append_basic_block("after.assert"))
        return True
    if name == "malloc":
        size = b.load(b.bitcast(args[0], I64.as_pointer()))
        p = _held(f, lambda: b.call(f.mc.libc("malloc", PTR, [I64]), [size]))
        memcheck.note_malloc(f, p, size)
        b.store(b.ptrtoint(p, I64), b.bitcast(rets[0], I64.as_pointer()))
        return True
    if name == "free":
        p = b.load(b.bitcast(args[0], I64.as_pointer()))
        _held(f, lambda: b.call(f.mc.libc("free", ir.VoidType(), [PTR]), [b.inttoptr(p, PTR)]))
        return True
    return False


def lower_call(f, inst):
    b = f.b
    ops = inst.operands
    rets_list, target, args_list = ops[0], ops[1], ops[2]
    rets = [_param_pointer(f, r) for r in rets_list.items]
    args = [_param_pointer(f, a) for a in args_list.items]
    if isinstance(target, pir.Sym):
        name = target.name
        callee = f.mc.function_symbol(name)
        if callee is None:
            if _system_call(f, name, args, rets):
                return
            raise f.error(f"call to undefined function {name}")
        if len(callee.args) != 1 + len(rets) + len(args):
            raise f.error(f"call to {name} passes {len(rets)} results and {len(args)} arguments, "
                          f"its declaration takes {len(callee.args) - 1} in all")
        b.call(callee, [f.ctx] + rets + args)
    else:
        fp = f.read(target, "u64")
        fnty = ir.FunctionType(ir.VoidType(), [PTR] * (1 + len(rets) + len(args)))
        b.call(b.inttoptr(fp, fnty.as_pointer()), [f.ctx] + rets + args)
    f.after_call_check()
