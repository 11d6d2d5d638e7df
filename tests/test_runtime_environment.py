"""runtime/environment.py: the settings a launch reads from the environment, read the cheap way,
answer as os.environ does after every kind of change made through it."""
import os

import pytest

from anycuda.runtime import environment

NAME = "ANYCUDA_TEST_ENVIRONMENT_SETTING"


@pytest.fixture(params=["raw table", "os.environ"])
def reading(request, monkeypatch):
    """Both ways environment reads: os.environ's raw table, and os.environ itself (where a
    Python has no such table)."""
    assert environment._RAW is not None        # (CPython on POSIX has it: the cheap way is taken)
    if request.param == "os.environ":
        monkeypatch.setattr(environment, "_RAW", None)


def test_raw_follows_every_change_made_through_os_environ(monkeypatch, reading):
    monkeypatch.delenv(NAME, raising=False)
    assert environment.raw(NAME.encode()) is None
    assert not environment.is_set(NAME.encode())
    monkeypatch.setenv(NAME, " 2.5 ")
    assert environment.raw(NAME.encode()) == b" 2.5 "
    assert environment.is_set(NAME.encode())
    os.environ[NAME] = "0"
    assert environment.raw(NAME.encode()) == b"0" and not environment.is_set(NAME.encode())
    os.environ[NAME] = " "
    assert not environment.is_set(NAME.encode())
    os.environ.update({NAME: "yes\u00e9"})
    assert environment.raw(NAME.encode()) == os.fsencode("yes\u00e9")
    del os.environ[NAME]
    assert environment.raw(NAME.encode()) is None
    os.environ.setdefault(NAME, "1")
    assert environment.is_set(NAME.encode())
    os.environ.pop(NAME)
    assert environment.raw(NAME.encode()) is None


def test_every_variable_of_the_environment_reads_as_os_environ_has_it(reading):
    for name, value in os.environ.items():
        assert environment.raw(os.fsencode(name)) == os.fsencode(value)
