"""Streaming stores: a large launch's output written past the caches.

An ordinary store to a cache line that is not in the cache reads the line from memory first
(to own it), then writes it back when it is evicted: two transfers for one write. A
non-temporal store (x86 MOVNT) collects the line in a write-combining buffer and writes it
once. For a kernel that only writes its output that is a quarter of vector_add's traffic
and a third of a stencil's or a transpose's (benchmarks/NOTES.md, "Streaming stores"). It
is the wrong choice where the data is read again soon: a non-temporal store sends it to
memory, and a later kernel (or the same thread's load) no longer finds it in the cache. So:

- The lowering marks the candidates (`mark`): stores to .global memory in buffers the
  kernel does not read (analysis.streams: saxpy's `y[i] = a * x[i] + y[i]` has the line in
  the cache by the time it writes it; softmax reads its output back to normalise it). The
  mark is an alias scope, as LLVM's vectoriser keeps alias scopes on the vector stores it
  makes and drops metadata it does not know; a scope that no access is `!noalias` to tells
  alias analysis nothing.
- The runtime decides per launch: its record's `stream_stores` is set where the grid's
  threads times what each stores through candidates (analysis.streaming_store_bytes) is
  more than the last-level cache holds (runtime/program.py), and the launch function
  copies it into the module's flag (`flag`).
- After LLVM's optimisation (`make_streaming`, called by jit), each marked vector store of
  16 bytes or more becomes: a non-temporal store where the flag is set and the address is
  aligned (to the vector, at most 64 bytes), else the store it was. Only the vector stores
  of vectorised loops qualify: scalar non-temporal stores would write partial lines.
  Deciding after vectorisation leaves the vectoriser alone: a `!nontemporal` store that it
  cannot prove aligned keeps it from vectorising the loop at all.
- Non-temporal stores are weakly ordered: another core may see a later store first. Each
  worker ends with an SFENCE (launch.emit_launch: the host and the next launch see the
  output), and where the flag is set, a release store or atomic is preceded by one
  (`fence_if_streaming`): CUDA's release makes earlier stores visible before the flag that
  publishes them. `fence`/`membar` lower to MFENCE, which orders non-temporal stores too.

Only x86-64 hosts get streaming stores (`supported`), the one place where they were
measured.
"""
from __future__ import annotations

import re
from contextlib import contextmanager

import llvmlite.binding as llvm
from llvmlite import ir

from ..irutil import alias_scopes, declare
from ..types import I32, PTR
from .textrewrite import ELEMENT_BYTES, VALUE, rewritten

FLAG = "anycuda.stream_stores"
SCOPE_NAME = "anycuda streaming store"
MIN_BYTES = 16            # narrower vectors are left alone (epilogues of a few elements)
ALIGN_CAP = 64            # a wider vector is stored as 64-byte pieces, each aligned alike


def supported(triple: str) -> bool:
    return triple.startswith("x86_64")


def host_supported() -> bool:
    return supported(llvm.get_process_triple())


# ------------------------------------------------------------------ during the lowering

def mark(module: ir.Module, store: ir.Instruction) -> ir.Instruction:
    """Mark a store as a streaming candidate (see the module docstring)."""
    store.set_metadata("alias.scope", alias_scopes(module, SCOPE_NAME))
    return store


def flag(module: ir.Module) -> ir.GlobalVariable:
    """The module's i32 flag: nonzero while the running launch wants streaming stores. It
    is in `llvm.used`, as the optimiser would otherwise delete a global nobody reads yet."""
    if FLAG in module.globals:
        return module.globals[FLAG]
    g = ir.GlobalVariable(module, I32, name=FLAG)
    g.linkage = "internal"
    g.initializer = ir.Constant(I32, 0)
    g.align = 4
    used = ir.GlobalVariable(module, ir.ArrayType(PTR, 1), name="llvm.used")
    used.linkage = "appending"
    used.section = "llvm.metadata"
    used.initializer = ir.Constant(used.type.pointee, [g])
    return g


def set_flag(b: ir.IRBuilder, value) -> None:
    """At a launch's start: the launch record's stream_stores into the flag. Two launches
    of one module running at once may disagree; either choice is correct, only slower."""
    if host_supported():
        b.store_atomic(value, flag(b.module), "monotonic", 4)


def fence(b: ir.IRBuilder) -> None:
    """SFENCE: this thread's non-temporal stores are visible before its later stores."""
    if host_supported():
        b.call(declare(b.module, "llvm.x86.sse.sfence", ir.VoidType(), []), [])


@contextmanager
def unless_streaming(b: ir.IRBuilder):
    """The builder in a block that runs only where the running launch makes no streaming
    stores: a prefetch for writing ahead of a candidate store reads the line for ownership,
    the traffic a streaming store saves (layernorm's output rows: 7% of the samples on
    `prefetchw` ahead of `vmovntps`)."""
    if not host_supported():
        yield
        return
    on = b.load_atomic(flag(b.module), "monotonic", 4)
    with b.if_then(b.icmp_unsigned("==", on, ir.Constant(I32, 0))):
        yield


def fence_if_streaming(b: ir.IRBuilder) -> None:
    """SFENCE where the running launch may have made streaming stores (before a release)."""
    if not host_supported():
        return
    on = b.load_atomic(flag(b.module), "monotonic", 4)
    with b.if_then(b.icmp_unsigned("!=", on, ir.Constant(I32, 0)), likely=False):
        fence(b)


# ------------------------------------------------------------------ after optimisation

_METADATA = re.compile(r"^!(\d+) = (?:distinct )?!\{(.*)\}$", re.M)
_STORE = re.compile(r"^(\s*)store (<(\d+) x (float|double|half|bfloat|i8|i16|i32|i64)>) (.+?), ptr ("
                    + VALUE + r"), align (\d+)(.*)$", re.M)
_SCOPE_USE = re.compile(r"!alias\.scope !(\d+)")


def _marked_scope_lists(text: str) -> set:
    """The ids of the alias-scope lists that hold the streaming scope: the one `mark` made,
    and those the inliner made by adding scopes of its own to it."""
    nodes = {m.group(1): m.group(2) for m in _METADATA.finditer(text)}
    scope = next((i for i, ops in nodes.items() if ops.startswith(f'!"{SCOPE_NAME}"')), None)
    if scope is None:
        return set()
    return {i for i, ops in nodes.items() if i != scope and f"!{scope}" in (o.strip() for o in ops.split(","))}


def _helper_name(vty: str, align: int) -> str:
    return "anycuda.stream." + re.sub(r"\W", "", vty) + f".a{align}"


def _helper(vty: str, nbytes: int, align: int) -> str:
    """`void (value, ptr)`: a non-temporal store where the flag is set and the address is
    aligned, else the plain store it replaces."""
    need = min(nbytes, ALIGN_CAP)
    return f"""
define internal void @"{_helper_name(vty, align)}"({vty} %v, ptr %p) alwaysinline {{
entry:
  %on = load atomic i32, ptr @"{FLAG}" monotonic, align 4
  %a = ptrtoint ptr %p to i64
  %low = and i64 %a, {need - 1}
  %aligned = icmp eq i64 %low, 0
  %flagged = icmp ne i32 %on, 0
  %stream = and i1 %flagged, %aligned
  br i1 %stream, label %streaming, label %cached
streaming:
  store {vty} %v, ptr %p, align {need}, !nontemporal !{{i32 1}}
  ret void
cached:
  store {vty} %v, ptr %p, align {align}
  ret void
}}"""


def rewrite(text: str) -> str:
    """The optimised module's IR text with its marked vector stores made streaming (see
    the module docstring); the text itself where it has none."""
    if SCOPE_NAME not in text or (f'@"{FLAG}"' not in text and f"@{FLAG}" not in text):
        return text
    lists = _marked_scope_lists(text)
    helpers = {}

    def replace(m):
        indent, vty, n, elem, value, ptr, align, rest = m.groups()
        nbytes = int(n) * ELEMENT_BYTES[elem]
        scope = _SCOPE_USE.search(rest)
        if scope is None or scope.group(1) not in lists or nbytes < MIN_BYTES or nbytes & (nbytes - 1):
            return m.group(0)
        helpers[(vty, int(align))] = nbytes
        return f'{indent}call void @"{_helper_name(vty, int(align))}"({vty} {value}, ptr {ptr})'

    out = _STORE.sub(replace, text)
    if not helpers:
        return text
    return out + "".join(_helper(vty, nbytes, align) for (vty, align), nbytes in helpers.items()) + "\n"


def make_streaming(mod: llvm.ModuleRef, target_machine) -> llvm.ModuleRef:
    """`mod` (optimised) with its marked vector stores made streaming: a new module, or
    `mod` itself where there are none or the host has no streaming stores."""
    if not supported(mod.triple):
        return mod
    out = rewritten(mod, rewrite)
    if out is mod:
        return mod
    pm = llvm.create_new_module_pass_manager()
    pm.add_always_inliner_pass()
    pm.run(out, llvm.create_pass_builder(target_machine, llvm.create_pipeline_tuning_options(speed_level=0)))
    return out
