"""Word on stderr while compiling keeps a program waiting (runtime/progress.py): nothing for
short waits, a line when a wait passes the delay and one at its end (stderr not a terminal),
nothing with ANYCUDA_QUIET=1, and never a byte on stdout."""
from __future__ import annotations

import struct
import time

import numpy as np
import pytest

from anycuda.runtime import program as program_module, progress
from anycuda.runtime.program import load_program

PTX = """.version 8.0
.target sm_80
.address_size 64
.visible .entry one(.param .u64 p)
{
  .reg .b64 %rd<2>; .reg .b32 %r<2>;
  ld.param.u64 %rd1, [p]; mov.u32 %r1, 7; st.global.u32 [%rd1], %r1;
  ret;
}
"""


@pytest.fixture
def slow_compile(monkeypatch, fresh_cache):
    """Compiling a kernel takes at least 0.5 s; anything is said after 0.2 s."""
    real = program_module.compile_kernel

    def slow(*args, **kwargs):
        time.sleep(0.5)
        return real(*args, **kwargs)
    monkeypatch.setattr(program_module, "compile_kernel", slow)
    monkeypatch.setattr(progress, "DELAY", 0.2)
    monkeypatch.delenv("ANYCUDA_QUIET", raising=False)


def _first_launch():
    out = np.zeros(1, np.uint32)
    load_program(PTX, "progress.ptx").kernel("one").launch((1, 1, 1), (1, 1, 1), struct.pack("<Q", out.ctypes.data))
    assert out[0] == 7


def test_a_long_wait_is_said_on_stderr_at_its_start_and_end(slow_compile, capfd):
    _first_launch()
    out, err = capfd.readouterr()
    assert out == ""
    lines = err.strip().splitlines()
    assert len(lines) == 2, err
    assert "compiling kernel one of progress.ptx" in lines[0] and "0 of 1 done" in lines[0]
    assert lines[1].startswith("anycuda: compiled 1 code object in ")


def test_quiet_says_nothing(slow_compile, capfd, monkeypatch):
    monkeypatch.setenv("ANYCUDA_QUIET", "1")
    _first_launch()
    assert capfd.readouterr() == ("", "")


def test_a_short_wait_says_nothing(fresh_cache, capfd, monkeypatch):
    monkeypatch.setattr(progress, "DELAY", 30.0)
    monkeypatch.delenv("ANYCUDA_QUIET", raising=False)
    _first_launch()
    time.sleep(0.1)
    assert capfd.readouterr() == ("", "")


def test_on_a_terminal_one_line_is_rewritten(slow_compile, capfd, monkeypatch):
    monkeypatch.setattr(progress, "_stderr_is_terminal", lambda: True)
    monkeypatch.setattr(progress, "REFRESH", 0.05)
    _first_launch()
    out, err = capfd.readouterr()
    assert out == ""
    assert err.count("\n") == 1 and err.endswith("\n")          # one line, ended once
    rewrites = err.split("\r")[1:]
    assert len(rewrites) >= 3 and all("\x1b[K" in r for r in rewrites)
    assert "compiling kernel one" in rewrites[0] and "compiled 1 code object" in rewrites[-1]
