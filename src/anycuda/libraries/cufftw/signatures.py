"""The C side of every FFTW function anycuda's libcufftw implements, as data (no imports: the
library's build reads it before numpy is installed). None returns a status: plans are pointers
(NULL when planning fails, as FFTW answers), execution and clean-up return nothing. Kinds as in
cublas/signatures.py: p pointer, e int (also FFTW's unsigned flags, the same in a call),
z size_t, d double. Each function exists as fftw_ (double precision) and fftwf_ (single)."""
from __future__ import annotations

_PLAN = "void *"
_MANY = "epeppeeppee"          # rank, n, howmany, in, inembed, istride, idist, out, onembed, ostride, odist

# name after the precision prefix -> (kinds, C result type)
_FUNCTIONS = {
    "plan_dft_1d": ("eppee", _PLAN), "plan_dft_2d": ("eeppee", _PLAN), "plan_dft_3d": ("eeeppee", _PLAN),
    "plan_dft": ("epppee", _PLAN),
    "plan_dft_r2c_1d": ("eppe", _PLAN), "plan_dft_r2c_2d": ("eeppe", _PLAN), "plan_dft_r2c_3d": ("eeeppe", _PLAN),
    "plan_dft_r2c": ("epppe", _PLAN),
    "plan_dft_c2r_1d": ("eppe", _PLAN), "plan_dft_c2r_2d": ("eeppe", _PLAN), "plan_dft_c2r_3d": ("eeeppe", _PLAN),
    "plan_dft_c2r": ("epppe", _PLAN),
    "plan_many_dft": (_MANY + "ee", _PLAN), "plan_many_dft_r2c": (_MANY + "e", _PLAN),
    "plan_many_dft_c2r": (_MANY + "e", _PLAN),
    "plan_guru_dft": ("epepppee", _PLAN), "plan_guru_dft_r2c": ("epepppe", _PLAN),
    "plan_guru_dft_c2r": ("epepppe", _PLAN),
    "plan_guru64_dft": ("epepppee", _PLAN), "plan_guru64_dft_r2c": ("epepppe", _PLAN),
    "plan_guru64_dft_c2r": ("epepppe", _PLAN),
    "execute": ("p", "void"), "execute_dft": ("ppp", "void"), "execute_dft_r2c": ("ppp", "void"),
    "execute_dft_c2r": ("ppp", "void"), "destroy_plan": ("p", "void"), "cleanup": ("", "void"),
    "malloc": ("z", "void *"), "free": ("p", "void"), "alloc_real": ("z", "void *"), "alloc_complex": ("z", "void *"),
    "export_wisdom_to_file": ("p", "void"), "import_wisdom_from_file": ("p", "int"), "print_plan": ("p", "void"),
    "set_timelimit": ("d", "void"), "cost": ("p", "double"), "flops": ("pppp", "void"),
}

PREFIXES = ("fftw_", "fftwf_")          # double, single precision

FUNCTIONS = {}                            # every function answers a value, none a status
VALUED = {prefix + name: signature for prefix in PREFIXES for name, signature in _FUNCTIONS.items()}


def c_signatures() -> dict:
    """C name -> (C result type, kinds) of everything anycuda's libcufftw implements."""
    return {name: (result, kinds) for name, (kinds, result) in VALUED.items()}
