"""The modifiers each PTX instruction may carry (PTX ISA 9.x), to tell an unknown modifier from a valid one.

An instruction's modifiers are the dot-separated words after its name (ptx/opcodes.py splits
them off): its types (`.u32`, `.f16x2`) and everything else (state spaces, rounding, `.ftz`,
`.sat`, cache operators, eviction priorities, memory orderings and scopes, vector widths,
comparisons, shuffle modes, shapes ...). MODIFIERS gives, for each instruction name, every
modifier that some form of it takes in the ISA's syntax; the parser refuses any other one
("st: unknown modifier .frobnicate", with its line). The table does not say which
combinations the ISA allows (`.sat` with `.s32` only, say), nor what anycuda implements: the
compiler's own tables (compiler/ops/table.py, compiler/vector/) say which modifiers each of
its paths lowers, and the compiler refuses the rest as not supported.

Data movement (mov, ld, ldu, st, selp) also takes the 16-bit float types, where the ISA's
syntax lists only the bit-size types: compilers have written `ld.f16` for half values, and a
move does not depend on how its bits are read. A family root written alone with an unknown
variant (`tcgen05.fence::before_thread_sync`, see opcodes.FAMILY_ROOTS) has no entry: its
words are the variant's name, which the compiler refuses as an instruction it lacks.
"""
from __future__ import annotations

from .opcodes import ALL


def words(*parts) -> frozenset:
    """One set of the modifiers in `parts`, each a string of words or a set."""
    out = set()
    for part in parts:
        out |= set(part.split()) if isinstance(part, str) else set(part)
    return frozenset(out)


# ---------------------------------------------------------------- types
BITS = words("b8 b16 b32 b64 b128")
UNSIGNED = words("u8 u16 u32 u64")
SIGNED = words("s8 s16 s32 s64")
INTEGERS = words("u16 u32 u64 s16 s32 s64")            # what integer arithmetic takes
PACKED_INTEGERS = words("u16x2 s16x2")
FLOATS = words("f32 f64")
HALVES = words("f16 f16x2 bf16 bf16x2")
NARROW_FLOATS = words("tf32 e4m3 e5m2 e3m2 e2m3 e2m1 ue8m0 ue4m3 e4m3x2 e5m2x2 e2m1x2 e2m3x2 e3m2x2 ue8m0x2",
                       "e4m3x4 e5m2x4 e2m1x4 e2m3x4 e3m2x4")
DATA = words(BITS, UNSIGNED, SIGNED, FLOATS, HALVES)      # what a load, store or move takes
TYPES = words(DATA, PACKED_INTEGERS, NARROW_FLOATS, "pred f32x2 b1 s4 u4 s2 u2 b1024")

# ---------------------------------------------------------------- other modifiers
ROUNDING = words("rn rz rm rp")
INTEGER_ROUNDING = words("rni rzi rmi rpi")
SPACES = words("const global local param param::entry param::func shared shared::cta shared::cluster")
SCOPES = words("cta cluster gpu sys")
LOAD_CACHING = words("ca cg cs lu cv")
STORE_CACHING = words("wb cg cs wt")
EVICTION = words("L1::evict_normal L1::evict_unchanged L1::evict_first L1::evict_last L1::no_allocate",
                  "L2::evict_normal L2::evict_first L2::evict_last")
CACHE_HINT = words("L2::cache_hint")
PREFETCH_SIZES = words("L2::64B L2::128B L2::256B")
VECTORS = words("v2 v4 v8")
COMPARISONS = words("eq ne lt le gt ge lo ls hi hs equ neu ltu leu gtu geu num nan")
BOOL_OPS = words("and or xor")
REDUCTIONS = words("add inc dec min max and or xor")
SHUFFLES = words("up down bfly idx")
PERMUTES = words("f4e b4e rc8 ecl ecr rc16")
FLOAT_CLASSES = words("finite infinite number notanumber normal subnormal")
GEOMETRIES = words("1d 2d 3d a1d a2d cube acube 2dms a2dms")
SURFACE_CLAMPS = words("trap clamp zero")
TEXTURE_QUERIES = words("width height depth channel_data_type channel_order normalized_coords",
                         "force_unnormalized_coords filter_mode addr_mode_0 addr_mode_1 addr_mode_2 array_size",
                         "num_mipmap_levels num_samples")
SURFACE_QUERIES = words("width height depth channel_data_type channel_order array_size memory_layout")
ALIGNED = words("sync aligned")
COMPLETE_TX = words("mbarrier::complete_tx::bytes")
TENSOR_DIMS = words("1d 2d 3d 4d 5d")
LOAD_MODES = words("tile tile::gather4 tile::scatter4 im2col im2col::w im2col::w::128 im2col_no_offs")
CTA_GROUPS = words("cta_group::1 cta_group::2")
MMA_SHAPES = words("m8n8k4 m8n8k16 m8n8k32 m8n8k128 m16n8k4 m16n8k8 m16n8k16 m16n8k32 m16n8k64 m16n8k128",
                    "m16n8k256")
WMMA_SHAPES = words("m16n16k16 m32n8k16 m8n32k16 m16n16k8 m8n8k4 m8n8k32 m8n8k128")
WGMMA_SHAPES = frozenset(f"m64n{n}k{k}" for n in range(8, 257, 8) for k in (8, 16, 32, 64, 256))
MMA_KINDS = words("kind::f16 kind::tf32 kind::f8f6f4 kind::i8 kind::mxf8f6f4 kind::mxf4 kind::mxf4nvf4")
TMEM_SHAPES = words("16x64b 16x128b 16x256b 32x32b 16x32bx2 128x256b 4x256b 128x128b 64x128b 32x128b")
TMEM_COUNTS = words("x1 x2 x4 x8 x16 x32 x64 x128")
MATRIX_FORMATS = words("b8x16 b6x16_p32 b4x16_p64")
COLLECTOR_USES = frozenset(f"collector::{buffer}::{use}" for buffer in ("a", "b0", "b1", "b2", "b3")
                           for use in ("fill", "use", "lastuse", "discard"))
_VIDEO = words("u32 s32 sat add min max")               # vadd & co: types, saturation, secondary op
_VIDEO_SIMD = words("u32 s32 sat add")                  # vadd2 & co

MODIFIERS = {
    # integer and floating-point arithmetic
    "add": words(INTEGERS, PACKED_INTEGERS, FLOATS, HALVES, ROUNDING, "f32x2 ftz sat cc"),
    "sub": words(INTEGERS, FLOATS, HALVES, ROUNDING, "f32x2 ftz sat cc"),
    "mul": words(INTEGERS, FLOATS, HALVES, ROUNDING, "f32x2 hi lo wide ftz sat"),
    "mad": words(INTEGERS, FLOATS, ROUNDING, "hi lo wide sat cc ftz"),
    "mul24": words("u32 s32 hi lo"),
    "mad24": words("u32 s32 hi lo sat"),
    **dict.fromkeys(("sad", "rem"), INTEGERS),
    "div": words(INTEGERS, FLOATS, ROUNDING, "approx full ftz"),
    **dict.fromkeys(("abs", "neg"), words("s16 s32 s64", FLOATS, HALVES, "ftz")),
    **dict.fromkeys(("min", "max"), words(INTEGERS, PACKED_INTEGERS, FLOATS, HALVES, "ftz NaN xorsign abs relu")),
    **dict.fromkeys(("popc", "clz", "brev", "bfi"), words("b32 b64")),
    "bfind": words("u32 u64 s32 s64 shiftamt"),
    "bfe": words("u32 u64 s32 s64"),
    "fns": words("b32"),
    "szext": words("clamp wrap u32 s32"),
    "bmsk": words("clamp wrap b32"),
    "dp4a": words("u32 s32"),
    "dp2a": words("u32 s32 lo hi"),
    **dict.fromkeys(("addc", "subc"), words("u32 s32 u64 s64 cc")),
    "madc": words("u32 s32 u64 s64 cc hi lo"),
    "testp": words(FLOAT_CLASSES, FLOATS),
    "copysign": FLOATS,
    "fma": words(FLOATS, HALVES, ROUNDING, "f32x2 ftz sat relu oob"),
    **dict.fromkeys(("rcp", "sqrt"), words(FLOATS, ROUNDING, "approx ftz")),
    "rsqrt": words(FLOATS, "approx ftz"),
    **dict.fromkeys(("sin", "cos", "lg2"), words("f32 approx ftz")),
    "ex2": words("f32", HALVES, "approx ftz"),
    "tanh": words("f32", HALVES, "approx"),
    # comparison and selection
    **dict.fromkeys(("set", "setp"), words(COMPARISONS, BOOL_OPS, "ftz b16 b32 b64", INTEGERS, FLOATS, HALVES)),
    "selp": words(DATA - {"b8", "u8", "s8", "b128"}),
    "slct": words("b16 b32 b64", INTEGERS, FLOATS, "ftz"),
    # logic and shifts
    **dict.fromkeys(("and", "or", "xor", "not"), words("pred b16 b32 b64")),
    "cnot": words("b16 b32 b64"),
    "lop3": words("b32 and or"),
    "shf": words("l r clamp wrap b32"),
    "shl": words("b16 b32 b64"),
    "shr": words("b16 b32 b64", INTEGERS),
    "prmt": words("b32", PERMUTES),
    # data movement and conversion
    "mov": words(DATA - {"b8", "u8", "s8"}, "pred"),
    "ld": words(DATA, SPACES, SCOPES, LOAD_CACHING, EVICTION, CACHE_HINT, PREFETCH_SIZES, VECTORS,
                 "weak volatile relaxed acquire mmio nc"),
    "ldu": words(DATA, "global v2 v4"),
    "st": words(DATA, SPACES - {"const", "param::entry"}, SCOPES, STORE_CACHING, EVICTION, CACHE_HINT, VECTORS,
                 "weak volatile relaxed release mmio"),
    "prefetch": words("global local const param L1 L2 L2::evict_last L2::evict_normal tensormap"),
    "prefetchu": words("L1"),
    "applypriority": words("global L2::evict_normal"),
    "discard": words("global L2"),
    "createpolicy": words("fractional range global cvt L2 L2::evict_last L2::evict_normal L2::evict_first",
                           "L2::evict_unchanged b64"),
    "isspacep": SPACES - {"param::func"},
    "cvta": words(SPACES - {"param::func"}, "to u32 u64"),
    "cvt": words(BITS - {"b8", "b16", "b64", "b128"}, UNSIGNED, SIGNED, FLOATS, HALVES, NARROW_FLOATS,
                  ROUNDING, INTEGER_ROUNDING, "rna rs ftz sat relu satfinite pack s4 u4 s2 u2"),
    "mapa": words("shared::cluster u32 u64"),
    "getctarank": words("shared::cluster u32 u64"),
    **dict.fromkeys(("alloca", "stacksave", "stackrestore"), words("u32 u64")),
    # textures and surfaces
    "tex": words(GEOMETRIES, "base level grad v2 v4 u32 s32 f16 f16x2 f32"),
    "tld4": words("r g b a 2d a2d cube acube v4 u32 s32 f32"),
    "txq": words(TEXTURE_QUERIES, "level b32"),
    "istypep": words("texref samplerref surfref"),
    "suld": words("b", GEOMETRIES - {"cube", "acube", "2dms", "a2dms"}, LOAD_CACHING - {"lu"}, "v2 v4",
                   BITS - {"b128"}, SURFACE_CLAMPS),
    "sust": words("b p", GEOMETRIES - {"cube", "acube", "2dms", "a2dms"}, STORE_CACHING, "v2 v4",
                   BITS - {"b128"}, SURFACE_CLAMPS),
    "sured": words("b p 1d 2d 3d add min max and or u32 u64 s32 s64 b32 b64", SURFACE_CLAMPS),
    "suq": words(SURFACE_QUERIES, "b32"),
    # control flow
    **dict.fromkeys(("bra", "call", "ret"), words("uni")),
    "brx": words("idx uni"),
    **dict.fromkeys(("exit", "trap", "brkpt"), frozenset()),
    # synchronisation and communication
    "bar": words("cta sync arrive red popc and or u32 pred warp"),
    "barrier": words("cta sync arrive red popc and or u32 pred aligned cluster wait acquire release relaxed"),
    "membar": words("cta gl sys proxy alias async global shared::cta shared::cluster"),
    "fence": words("sc acq_rel acquire release", SCOPES, "mbarrier_init",
                    "sync_restrict::shared::cta sync_restrict::shared::cluster"),
    "fence.proxy": words("alias async async::generic global shared::cta shared::cluster tensormap::generic",
                          "acquire release", SCOPES, "sync_restrict::shared::cta sync_restrict::shared::cluster"),
    "atom": words("global shared shared::cta shared::cluster relaxed acquire release acq_rel", SCOPES,
                   REDUCTIONS, "cas exch noftz", CACHE_HINT, VECTORS,
                   "b16 b32 b64 b128 u32 u64 s32 s64", FLOATS, HALVES),
    "red": words("global shared shared::cta shared::cluster relaxed release", SCOPES, REDUCTIONS, "noftz",
                  CACHE_HINT, "v2 v4 v8 b32 b64 u32 u64 s32 s64", FLOATS, HALVES),
    "vote": words("sync all any uni ballot pred b32"),
    "match": words("sync any all b32 b64"),
    "activemask": words("b32"),
    "redux": words("sync add min max and or xor abs NaN u32 s32 b32 f32"),
    "shfl": words("sync b32", SHUFFLES),
    "griddepcontrol": words("launch_dependents wait"),
    "elect": words("sync"),
    "nanosleep": words("u32"),
    "setmaxnreg": words("inc dec sync aligned u32"),
    "pmevent": words("mask"),
    # asynchronous copies and mbarriers
    "cp.async": words("ca cg shared shared::cta global", CACHE_HINT, PREFETCH_SIZES),
    **dict.fromkeys(("cp.async.commit_group", "cp.async.wait_group", "cp.async.wait_all",
                     "cp.async.bulk.commit_group"), frozenset()),
    "cp.async.bulk.wait_group": words("read"),
    "cp.async.mbarrier.arrive": words("noinc shared shared::cta b64"),
    "cp.async.bulk": words("shared::cluster shared::cta global bulk_group multicast::cluster cp_mask", COMPLETE_TX,
                            CACHE_HINT),
    "cp.async.bulk.tensor": words(TENSOR_DIMS, "shared::cluster shared::cta global bulk_group multicast::cluster",
                                   LOAD_MODES, CTA_GROUPS, COMPLETE_TX, CACHE_HINT),
    "cp.async.bulk.prefetch": words("L2 global", CACHE_HINT),
    "cp.async.bulk.prefetch.tensor": words(TENSOR_DIMS, "L2 global", LOAD_MODES, CACHE_HINT),
    "cp.reduce.async.bulk": words("global shared::cta shared::cluster bulk_group noftz", COMPLETE_TX, REDUCTIONS,
                                   CACHE_HINT, "b32 b64 u32 u64 s32 s64 f16 bf16", FLOATS),
    "cp.reduce.async.bulk.tensor": words(TENSOR_DIMS, "global shared::cta bulk_group", LOAD_MODES, REDUCTIONS,
                                          CACHE_HINT),
    **dict.fromkeys(("multimem.cp.async.bulk", "multimem.cp.reduce.async.bulk"),
                    words("global shared::cta shared::cluster bulk_group noftz", COMPLETE_TX, REDUCTIONS,
                           CACHE_HINT, "b32 b64 u32 u64 s32 s64 f16 bf16", FLOATS)),
    "multimem.ld_reduce": words("global weak relaxed acquire", SCOPES, "min max add and or xor acc::f32 acc::f16",
                                 VECTORS, "b32 b64 u32 u64 s32 s64", FLOATS, HALVES,
                                 "e4m3 e4m3x2 e4m3x4 e5m2 e5m2x2 e5m2x4"),
    "multimem.st": words("global weak relaxed release", SCOPES, VECTORS, "b32 b64 u32 u64 s32 s64", FLOATS, HALVES,
                          "e4m3 e4m3x2 e4m3x4 e5m2 e5m2x2 e5m2x4"),
    "multimem.red": words("global relaxed release", SCOPES, "min max add and or xor", VECTORS,
                           "b32 b64 u32 u64 s32 s64", FLOATS, HALVES),
    "st.async": words("weak release mmio", SCOPES, "shared::cluster global", COMPLETE_TX, "v2 v4",
                       BITS - {"b128"}, UNSIGNED, SIGNED, FLOATS),
    "red.async": words("relaxed release mmio", SCOPES, "shared::cluster global", COMPLETE_TX, REDUCTIONS,
                        "b32 b64 u32 u64 s32 s64"),
    "st.bulk": words("weak shared::cta"),
    **dict.fromkeys(("mbarrier.init", "mbarrier.inval"), words("shared shared::cta b64")),
    **dict.fromkeys(("mbarrier.expect_tx", "mbarrier.complete_tx"),
                    words("relaxed cta cluster shared shared::cta shared::cluster b64")),
    **dict.fromkeys(("mbarrier.arrive", "mbarrier.arrive_drop"),
                    words("release relaxed cta cluster shared shared::cta shared::cluster expect_tx noComplete b64")),
    **dict.fromkeys(("mbarrier.test_wait", "mbarrier.try_wait"),
                    words("acquire relaxed cta cluster shared shared::cta parity b64")),
    "mbarrier.pending_count": words("b64"),
    "tensormap.replace": words("tile global_address rank box_dim global_dim global_stride element_stride elemtype",
                                "interleave_layout swizzle_mode swizzle_atomicity fill_mode global shared::cta",
                                "b1024 b32 b64"),
    "tensormap.cp_fenceproxy": words(ALIGNED, "global shared::cta tensormap::generic release", SCOPES),
    "clusterlaunchcontrol.try_cancel": words("async shared::cta multicast::cluster::all b128", COMPLETE_TX),
    "clusterlaunchcontrol.query_cancel": words("is_canceled get_first_ctaid get_first_ctaid::x get_first_ctaid::y",
                                                "get_first_ctaid::z pred b32 b128 v4"),
    # matrix instructions
    **dict.fromkeys(("mma", "mma.sp"), words(ALIGNED, MMA_SHAPES, "m8n8k4 row col satfinite xor and popc",
                                              "block_scale scale_vec::1X scale_vec::2X scale_vec::4X",
                                              "sp::ordered_metadata", MMA_KINDS, NARROW_FLOATS,
                                              "f16 bf16 f32 f64 s32 s8 u8 s4 u4 b1")),
    "ldmatrix": words(ALIGNED, "m8n8 m16n16 m8n16 x1 x2 x4 trans shared shared::cta b16 b8", MATRIX_FORMATS),
    "stmatrix": words(ALIGNED, "m8n8 m16n8 x1 x2 x4 trans shared shared::cta b16 b8"),
    "movmatrix": words(ALIGNED, "m8n8 trans b16"),
    "wmma.load": words(ALIGNED, "a b c row col global shared shared::cta", WMMA_SHAPES,
                        "f16 bf16 tf32 f32 f64 s32 s8 u8 s4 u4 b1"),
    "wmma.store": words(ALIGNED, "d row col global shared shared::cta", WMMA_SHAPES, "f16 f32 f64 s32"),
    "wmma.mma": words(ALIGNED, "row col satfinite xor and popc", ROUNDING, WMMA_SHAPES,
                       "f16 bf16 tf32 f32 f64 s32 s8 u8 s4 u4 b1"),
    **dict.fromkeys(("wgmma.mma_async", "wgmma.mma_async.sp"),
                    words(ALIGNED, WGMMA_SHAPES, "satfinite and popc f16 bf16 tf32 f32 e4m3 e5m2 s32 s8 u8 b1")),
    **dict.fromkeys(("wgmma.fence", "wgmma.commit_group", "wgmma.wait_group"), ALIGNED),
    **dict.fromkeys(("tcgen05.alloc", "tcgen05.dealloc", "tcgen05.relinquish_alloc_permit"),
                    words(CTA_GROUPS, ALIGNED, "shared::cta b32")),
    "tcgen05.ld": words(ALIGNED, TMEM_SHAPES, TMEM_COUNTS, "pack::16b red min max abs NaN b32 u32 s32 f32"),
    "tcgen05.st": words(ALIGNED, TMEM_SHAPES, TMEM_COUNTS, "unpack::16b b32"),
    "tcgen05.cp": words(CTA_GROUPS, TMEM_SHAPES, MATRIX_FORMATS, "warpx2::02_13 warpx2::01_23 warpx4"),
    "tcgen05.shift": words(CTA_GROUPS, "down"),
    **dict.fromkeys(("tcgen05.mma", "tcgen05.mma.sp", "tcgen05.mma.ws", "tcgen05.mma.ws.sp"),
                    words(CTA_GROUPS, MMA_KINDS, "block_scale scale_vec::1X scale_vec::2X scale_vec::4X block16",
                           "block32 ashift", COLLECTOR_USES)),
    "tcgen05.commit": words(CTA_GROUPS, "mbarrier::arrive::one shared::cluster multicast::cluster b64"),
    # the ISA spells these tcgen05.fence::before_thread_sync and tcgen05.wait::ld, which reach
    # the parser as the family root (no entry); the dotted names take nothing
    **dict.fromkeys(("tcgen05.fence", "tcgen05.wait"), ALIGNED),
    # video instructions
    **dict.fromkeys(("vadd", "vsub", "vabsdiff", "vmin", "vmax"), _VIDEO),
    **dict.fromkeys(("vshl", "vshr"), words(_VIDEO, "clamp wrap")),
    "vmad": words("u32 s32 sat po shr7 shr15"),
    "vset": words("u32 s32 eq ne lt le gt ge add min max"),
    **dict.fromkeys(("vadd2", "vsub2", "vavrg2", "vabsdiff2", "vmin2", "vmax2",
                     "vadd4", "vsub4", "vavrg4", "vabsdiff4", "vmin4", "vmax4"), _VIDEO_SIMD),
    **dict.fromkeys(("vset2", "vset4"), words("u32 s32 eq ne lt le gt ge add")),
}

assert set(MODIFIERS) == ALL, sorted(set(MODIFIERS) ^ ALL)


def unknown_modifier(opcode: str, mods) -> str | None:
    """The first of `mods` that no form of instruction `opcode` takes, or None (also for a
    family root, opcodes.FAMILY_ROOTS, written with a variant the table does not know)."""
    allowed = MODIFIERS.get(opcode)
    if allowed is None:
        return None
    return next((m for m in mods if m not in allowed), None)
