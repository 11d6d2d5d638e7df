"""compiler/folding.py: what FoldingBuilder folds on constants is what LLVM computes for the
same operation on those values at run time (llvm_harness), on edge values and fresh random
ones, and what it cannot fold it builds as an instruction."""
from __future__ import annotations

import struct

import numpy as np
import pytest
from llvmlite import ir

from anycuda.compiler.folding import FoldingBuilder, float_constant
from llvm_harness import Kernels

I1 = ir.IntType(1)

BINARY = ("add", "sub", "mul", "and_", "or_", "xor")
COMPARES = [("icmp_unsigned", op) for op in ("==", "!=", "<", "<=", ">", ">=")] + \
           [("icmp_signed", op) for op in ("==", "!=", "<", "<=", ">", ">=")]
CASTS = [("zext", 8, 32), ("sext", 8, 32), ("zext", 32, 64), ("sext", 32, 64), ("trunc", 64, 32),
         ("trunc", 32, 8)]


def _values(rng, bits, n=40):
    top = (1 << bits) - 1
    edges = [0, 1, 2, top, top - 1, top >> 1, (top >> 1) + 1, 31, 32, 33, 63, 64]
    return np.array([e & top for e in edges] + [int(v) for v in rng.integers(0, top, n, dtype=np.uint64, endpoint=True)],
                    dtype=np.uint64)


def _folded(fn_name, *args):
    """What FoldingBuilder gives for constant operands (a block is needed to build at all)."""
    fn = ir.Function(ir.Module(), ir.FunctionType(ir.VoidType(), []), "f")
    b = FoldingBuilder(fn.append_basic_block())
    return getattr(b, fn_name)(*args)


def _as_int(c: ir.Constant) -> int:
    assert isinstance(c, ir.Constant), f"not folded: {c}"
    return int(c.constant) & ((1 << c.type.width) - 1)


@pytest.mark.parametrize("bits", [8, 32, 64])
def test_arithmetic_and_compares_fold_to_what_llvm_computes(bits, rng):
    t = ir.IntType(bits)
    k = Kernels("folding")
    for name in BINARY:
        k.add(name, [t, t], t, lambda b, x, y, name=name: getattr(b, name)(x, y))
    for name, op in COMPARES:
        k.add(f"{name}{op}", [t, t], I1, lambda b, x, y, name=name, op=op: getattr(b, name)(op, x, y))
    k.build()
    xs = _values(rng, bits)
    a, c = np.repeat(xs, xs.size), np.tile(xs, xs.size)
    dtype = np.dtype(f"uint{bits}")
    for name in BINARY:
        want = k(name, a.astype(dtype), c.astype(dtype))
        got = [_as_int(_folded(name, ir.Constant(t, int(x)), ir.Constant(t, int(y)))) for x, y in zip(a, c)]
        assert got == [int(v) for v in want], name
    for name, op in COMPARES:
        want = k(f"{name}{op}", a.astype(dtype), c.astype(dtype))
        got = [_as_int(_folded(name, op, ir.Constant(t, int(x)), ir.Constant(t, int(y)))) for x, y in zip(a, c)]
        assert got == [int(v) for v in want], (name, op)


def test_casts_fold_to_what_llvm_computes(rng):
    for name, src, dst in CASTS:
        k = Kernels("casts")
        k.add("cast", [ir.IntType(src)], ir.IntType(dst), lambda b, x, name=name, dst=dst: getattr(b, name)(x, ir.IntType(dst)))
        k.build()
        xs = _values(rng, src)
        want = k("cast", xs.astype(f"uint{src}"))
        got = [_as_int(_folded(name, ir.Constant(ir.IntType(src), int(x)), ir.IntType(dst))) for x in xs]
        assert got == [int(v) for v in want], (name, src, dst)


def test_negative_constants_are_read_as_their_bits():
    i32, i64 = ir.IntType(32), ir.IntType(64)
    assert _as_int(_folded("zext", ir.Constant(i32, -1), i64)) == 0xFFFFFFFF
    assert _as_int(_folded("sext", ir.Constant(i32, -1), i64)) == (1 << 64) - 1
    assert _as_int(_folded("icmp_unsigned", "<", ir.Constant(i32, 1), ir.Constant(i32, -1))) == 1
    assert _as_int(_folded("icmp_signed", "<", ir.Constant(i32, 1), ir.Constant(i32, -1))) == 0


def test_a_select_on_a_constant_condition_is_its_operand():
    fn = ir.Function(ir.Module(), ir.FunctionType(ir.VoidType(), [ir.IntType(32), ir.IntType(32)]), "f")
    b = FoldingBuilder(fn.append_basic_block())
    x, y = fn.args
    assert b.select(ir.Constant(I1, 1), x, y) is x
    assert b.select(ir.Constant(I1, 0), x, y) is y
    assert b.select(ir.Constant(I1, True), x, y) is x


def test_what_is_not_constant_or_not_foldable_is_built():
    i32 = ir.IntType(32)
    fn = ir.Function(ir.Module(), ir.FunctionType(ir.VoidType(), [i32]), "f")
    b = FoldingBuilder(fn.append_basic_block())
    (x,) = fn.args
    assert isinstance(b.add(x, ir.Constant(i32, 1)), ir.Instruction)
    assert isinstance(b.shl(ir.Constant(i32, 1), ir.Constant(i32, 40)), ir.Instruction)    # poison in LLVM
    assert isinstance(b.udiv(ir.Constant(i32, 1), ir.Constant(i32, 0)), ir.Instruction)
    assert isinstance(b.add(ir.Constant(i32, 1), ir.Constant(i32, 2), flags=["nsw"]), ir.Instruction)
    with pytest.raises(ValueError, match="same type"):
        b.add(ir.Constant(i32, 1), ir.Constant(ir.IntType(64), 2))


@pytest.mark.parametrize("width, fmt", [(32, ("<I", "<f")), (64, ("<Q", "<d"))])
def test_float_immediates_become_constants_of_the_same_bits(width, fmt, rng):
    t = ir.FloatType() if width == 32 else ir.DoubleType()
    k = Kernels("floats")
    k.add("f", [ir.IntType(width)], t, lambda b, x: b.bitcast(x, t))
    k.build()
    patterns = [0, 1 << (width - 1), 1, 0x3F800000 if width == 32 else 0x3FF0000000000000] + \
               [int(v) for v in rng.integers(0, (1 << width) - 1, 200, dtype=np.uint64, endpoint=True)]
    constants = Kernels("constants")           # each constant as LLVM reads it back from its text
    finite = []
    for bits in patterns:
        c = float_constant(t, bits, width)
        value = struct.unpack(fmt[1], struct.pack(fmt[0], bits))[0]
        if not np.isfinite(value):
            assert c is None                 # a NaN's payload or an infinity: bitcast instead
            continue
        constants.add(f"c{len(finite)}", [ir.IntType(width)], t, lambda b, x, c=c: c)
        finite.append(bits)
    constants.build()
    zero = np.zeros(1, f"uint{width}")
    for i, bits in enumerate(finite):
        got = constants(f"c{i}", zero).view(f"uint{width}")[0]
        assert int(got) == bits == int(k("f", np.array([bits], f"uint{width}")).view(f"uint{width}")[0])
    assert float_constant(ir.HalfType(), 0x3C00, 16) is None
