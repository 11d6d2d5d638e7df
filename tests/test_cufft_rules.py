"""Every argument rule of anycuda's cuFFT with the cufftResult it answers, one table row per
rule, for each plan function that applies it; and the work sizes the plan functions report."""
import numpy as np
import pytest

from anycuda.libraries.cufft import functions
from anycuda.libraries.cufft.status import CufftError, Result
from library_calls import caller, device, read

call = caller(functions.table())
C2C, R2C, C2R, Z2Z, D2Z, Z2D = 0x29, 0x2A, 0x2C, 0x69, 0x6A, 0x6C
EXEC = {C2C: "C2C", R2C: "R2C", C2R: "C2R", Z2Z: "Z2Z", D2Z: "D2Z", Z2D: "Z2D"}
FORWARD = -1


def ints(values, dtype=np.int32) -> int:
    return device(np.array(values, dtype))


def handle_out() -> np.ndarray:
    return np.full(1, 12345, np.int32)


def work_out() -> np.ndarray:
    return np.full(1, 777, np.uint64)


def made(kind=C2C, n=16) -> int:
    out = handle_out()
    call("cufftPlan1d", out.ctypes.data, n, kind, 1)
    return int(out[0])


def created() -> int:
    out = handle_out()
    call("cufftCreate", out.ctypes.data)
    return int(out[0])


# (sizes, type, batch, inembed, istride, idist, onembed, ostride, odist, expected)
PLAN_RULES = {
    "size 0": ((0,), C2C, 1, None, 1, 0, None, 1, 0, Result.INVALID_SIZE),
    "negative size": ((8, -2), C2C, 1, None, 1, 0, None, 1, 0, Result.INVALID_SIZE),
    "batch 0": ((8,), C2C, 0, None, 1, 0, None, 1, 0, Result.INVALID_SIZE),
    "rank 0": ((), C2C, 1, None, 1, 0, None, 1, 0, Result.INVALID_SIZE),
    "rank 4": ((2, 2, 2, 2), C2C, 1, None, 1, 0, None, 1, 0, Result.INVALID_SIZE),
    "unknown type": ((8,), 0x2B, 1, None, 1, 0, None, 1, 0, Result.INVALID_TYPE),
    "stride 0": ((8,), C2C, 2, (8,), 0, 8, (8,), 1, 8, Result.INVALID_VALUE),
    "distance 0": ((8,), C2C, 2, (8,), 1, 8, (8,), 1, 0, Result.INVALID_VALUE),
    "embed 0": ((4, 8), C2C, 1, (4, 0), 1, 32, (4, 8), 1, 32, Result.INVALID_SIZE),
}


def many_args(sizes, kind, batch, inembed, istride, idist, onembed, ostride, odist, wide=False):
    dt = np.int64 if wide else np.int32
    n = ints(list(sizes) or [8], dt)
    emb = lambda e: ints(e, dt) if e is not None else 0
    return len(sizes), n, emb(inembed), istride, idist, emb(onembed), ostride, odist, kind, batch


@pytest.mark.parametrize("rule", list(PLAN_RULES))
@pytest.mark.parametrize("form", ["cufftPlanMany", "cufftMakePlanMany", "cufftMakePlanMany64", "cufftEstimateMany",
                                  "cufftGetSizeMany", "cufftGetSizeMany64"])
def test_plan_rules(rule, form):
    *args, expected = PLAN_RULES[rule]
    many = many_args(*args, wide=form.endswith("64"))
    out, work = handle_out(), work_out()
    if form == "cufftPlanMany":
        call_args = (out.ctypes.data, *many)
    elif form == "cufftEstimateMany":
        call_args = (*many, work.ctypes.data)
    else:
        call_args = (created(), *many, work.ctypes.data)
    with pytest.raises(CufftError) as e:
        call(form, *call_args)
    assert e.value.status == expected
    if form == "cufftPlanMany":
        assert out[0] == -1                   # CUFFT_PLAN_NULL left behind, which cufftDestroy accepts
        call("cufftDestroy", -1)


@pytest.mark.parametrize("form,args,expected", [
    ("cufftPlan1d", (0, C2C, 1), Result.INVALID_SIZE),
    ("cufftPlan1d", (8, C2C, 0), Result.INVALID_SIZE),
    ("cufftPlan1d", (8, 0x77, 1), Result.INVALID_TYPE),
    ("cufftPlan2d", (8, 0, C2C), Result.INVALID_SIZE),
    ("cufftPlan3d", (8, 8, -1, R2C), Result.INVALID_SIZE),
    ("cufftPlan3d", (2, 2, 2, 0), Result.INVALID_TYPE),
])
def test_basic_plan_rules(form, args, expected):
    out = handle_out()
    with pytest.raises(CufftError) as e:
        call(form, out.ctypes.data, *args)
    assert e.value.status == expected
    assert out[0] == -1
    with pytest.raises(CufftError) as e:
        call(form.replace("Plan", "Estimate"), *args, work_out().ctypes.data)
    assert e.value.status == expected
    with pytest.raises(CufftError) as e:
        call(form.replace("cufftPlan", "cufftMakePlan"), created(), *args, work_out().ctypes.data)
    assert e.value.status == expected


def test_null_pointers_are_invalid_values():
    for form, args in (("cufftCreate", (0,)), ("cufftPlan1d", (0, 8, C2C, 1)), ("cufftPlan2d", (0, 4, 4, C2C)),
                       ("cufftPlan3d", (0, 2, 2, 2, C2C)),
                       ("cufftPlanMany", (handle_out().ctypes.data, 1, 0, 0, 1, 0, 0, 1, 0, C2C, 1))):
        with pytest.raises(CufftError) as e:
            call(form, *args)
        assert e.value.status == Result.INVALID_VALUE, form
    h, buf = made(), device(np.zeros(32, np.complex64))
    for src, dst in ((0, buf), (buf, 0), (0, 0)):
        with pytest.raises(CufftError) as e:
            call("cufftExecC2C", h, src, dst, FORWARD)
        assert e.value.status == Result.INVALID_VALUE


@pytest.mark.parametrize("plan_type", list(EXEC), ids=EXEC.get)
def test_exec_must_match_the_plan_type(plan_type):
    h = made(plan_type)
    buf = device(np.zeros(64, np.complex128))
    for kind, name in EXEC.items():
        args = (h, buf, buf, FORWARD) if name in ("C2C", "Z2Z") else (h, buf, buf)
        if kind == plan_type:
            call(f"cufftExec{name}", *args)
            continue
        with pytest.raises(CufftError) as e:
            call(f"cufftExec{name}", *args)
        assert e.value.status == Result.INVALID_VALUE, name


@pytest.mark.parametrize("direction", [0, 2, -2])
def test_complex_exec_needs_a_direction(direction):
    buf = device(np.zeros(16, np.complex128))
    for kind in (C2C, Z2Z):
        with pytest.raises(CufftError) as e:
            call(f"cufftExec{EXEC[kind]}", made(kind), buf, buf, direction)
        assert e.value.status == Result.INVALID_VALUE


def test_handles_that_name_no_made_plan():
    buf = device(np.zeros(16, np.complex64))
    gone = made()
    call("cufftDestroy", gone)
    fresh = created()
    for h in (999_999, gone):
        for form, args in (("cufftExecC2C", (h, buf, buf, FORWARD)), ("cufftSetStream", (h, 0)),
                           ("cufftSetWorkArea", (h, buf)), ("cufftSetAutoAllocation", (h, 0)),
                           ("cufftGetSize", (h, work_out().ctypes.data)), ("cufftDestroy", (h,)),
                           ("cufftMakePlan1d", (h, 8, C2C, 1, work_out().ctypes.data))):
            with pytest.raises(CufftError) as e:
                call(form, *args)
            assert e.value.status == Result.INVALID_PLAN, (form, h)
    for form, args in (("cufftExecC2C", (fresh, buf, buf, FORWARD)), ("cufftGetSize", (fresh, work_out().ctypes.data))):
        with pytest.raises(CufftError) as e:                   # created but never made
            call(form, *args)
        assert e.value.status == Result.INVALID_PLAN, form


@pytest.mark.parametrize("form,args", [("cufftGetSize1d", (8, C2C, 1)), ("cufftGetSize2d", (8, 8, C2C)),
                                       ("cufftGetSize3d", (4, 4, 4, C2C)),
                                       ("cufftGetSizeMany", (1, ints([8]), 0, 1, 0, 0, 1, 0, C2C, 1))])
def test_get_size_needs_a_plan(form, args):
    with pytest.raises(CufftError) as e:
        call(form, 999_999, *args, work_out().ctypes.data)
    assert e.value.status == Result.INVALID_PLAN


def test_work_sizes_are_reported_by_every_form():
    """anycuda's transforms need no work area: every form reports 0 bytes; a work area set
    anyway is accepted and left alone."""
    for form, args in (("cufftEstimate1d", (1024, C2C, 4)), ("cufftEstimate2d", (64, 64, R2C)),
                       ("cufftEstimate3d", (8, 8, 8, Z2D)),
                       ("cufftEstimateMany", many_args((16, 16), D2Z, 3, None, 1, 0, None, 1, 0)),
                       ("cufftGetSize1d", (created(), 1024, C2C, 4)), ("cufftGetSize2d", (created(), 64, 64, R2C)),
                       ("cufftGetSize3d", (created(), 8, 8, 8, Z2D)),
                       ("cufftGetSizeMany", (created(), *many_args((16,), C2C, 2, None, 1, 0, None, 1, 0))),
                       ("cufftGetSizeMany64", (created(), *many_args((16,), C2C, 2, None, 1, 0, None, 1, 0, True))),
                       ("cufftMakePlan1d", (created(), 1024, C2C, 4)), ("cufftMakePlan2d", (created(), 64, 64, R2C)),
                       ("cufftMakePlan3d", (created(), 8, 8, 8, Z2D)),
                       ("cufftMakePlanMany", (created(), *many_args((16,), C2C, 2, None, 1, 0, None, 1, 0))),
                       ("cufftMakePlanMany64", (created(), *many_args((16,), C2C, 2, None, 1, 0, None, 1, 0, True)))):
        work = work_out()
        call(form, *args, work.ctypes.data)
        assert work[0] == 0, form
    h = made()
    work = work_out()
    call("cufftGetSize", h, work.ctypes.data)
    assert work[0] == 0
    scratch = device(np.full(64, np.nan, np.float32))
    call("cufftSetWorkArea", h, scratch)
    x = device(np.ones(16, np.complex64))
    call("cufftExecC2C", h, x, x, FORWARD)
    assert np.all(np.isnan(read(scratch, 64, np.float32)))


def test_version_and_properties():
    v = np.zeros(1, np.int32)
    call("cufftGetVersion", v.ctypes.data)
    assert v[0] == 12500                                 # CUFFT_VERSION of cuFFT 12.5
    parts = []
    for prop in (0, 1, 2):                               # MAJOR_VERSION, MINOR_VERSION, PATCH_LEVEL
        call("cufftGetProperty", prop, v.ctypes.data)
        parts.append(int(v[0]))
    assert parts == [12, 5, 0]
    with pytest.raises(CufftError) as e:
        call("cufftGetProperty", 7, v.ctypes.data)
    assert e.value.status == Result.INVALID_VALUE
