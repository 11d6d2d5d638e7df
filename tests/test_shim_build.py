"""The build of libcuda.so.1: at install (setup.py's `build_at_install`) into the package, else on
first use into the cache; which one anycuda uses, and what `anycuda info` says about it."""
import os
import shutil
import site
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

import anycuda
from anycuda import cli
from anycuda.shim import build, standins

PACKAGE = Path(anycuda.__file__).resolve().parent

# A program with no Python in it: opens a libcuda.so.1 by path and asks it the first questions
# every CUDA program asks.
CHECK_PROGRAM = r"""
#include <dlfcn.h>
#include <stdio.h>
int main(int argc, char **argv) {
    void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
    if (!h) { printf("dlopen failed: %s\n", dlerror()); return 1; }
    int (*init)(unsigned) = (int (*)(unsigned))dlsym(h, "cuInit");
    int (*version)(int *) = (int (*)(int *))dlsym(h, "cuDriverGetVersion");
    int (*count)(int *) = (int (*)(int *))dlsym(h, "cuDeviceGetCount");
    if (!init || !version || !count) { printf("missing driver functions\n"); return 1; }
    int v = 0, n = 0;
    int r1 = init(0), r2 = version(&v), r3 = count(&n);
    printf("cuInit %d, cuDriverGetVersion %d (%d), cuDeviceGetCount %d (%d)\n", r1, r2, v, r3, n);
    return r1 || r2 || r3 || v <= 0 || n <= 0;
}
"""


@pytest.fixture(scope="module")
def check_program(tmp_path_factory):
    cc = shutil.which("gcc") or shutil.which("cc")
    if cc is None:
        pytest.skip("needs a C compiler")
    folder = tmp_path_factory.mktemp("check")
    (folder / "check.c").write_text(CHECK_PROGRAM)
    subprocess.run([cc, "-o", str(folder / "check"), str(folder / "check.c"), "-ldl"], check=True)
    return folder / "check"


def _run_check(program, library, **env_changes):
    env = dict(os.environ, PYTHONVERBOSE="1", **env_changes)
    env.pop("ANYCUDA_PYTHONPATH", None)
    libdir = sysconfig.get_config_var("LIBDIR")
    if libdir:
        env["LD_LIBRARY_PATH"] = os.pathsep.join(p for p in (libdir, env.get("LD_LIBRARY_PATH")) if p)
    return subprocess.run([str(program), str(library)], capture_output=True, text=True, timeout=300, env=env)


@pytest.fixture(scope="module")
def installed_copy(tmp_path_factory):
    """A copy of the anycuda package in a folder of its own, with the library built into it by the
    function setup.py calls, as `pip install` lays it out: <site>/anycuda/shim/lib/."""
    if not (shutil.which("gcc") or shutil.which("cc")):
        pytest.skip("needs a C compiler")
    site_dir = tmp_path_factory.mktemp("site")
    shutil.copytree(PACKAGE, site_dir / "anycuda", ignore=shutil.ignore_patterns("__pycache__", "lib"))
    files = build.build_at_install(site_dir / "anycuda" / "shim" / "lib")
    assert build.INSTALL_FAILURE not in [f.name for f in files], files
    return site_dir


def test_build_at_install_writes_a_stamped_library(installed_copy):
    folder = installed_copy / "anycuda" / "shim" / "lib"
    names = {p.name for p in folder.iterdir()}
    assert {build.LIBRARY, *build.DROP_INS, *standins.STANDINS, build.BUILD_STAMP, build.MODULE_PATHS} <= names
    assert (folder / build.BUILD_STAMP).read_text().strip() == build.recipe_fingerprint()
    assert (folder / build.MODULE_PATHS).read_text().split() == site.getsitepackages()


def test_library_built_at_install_answers_a_c_program(installed_copy, check_program):
    """Loaded by a program without Python, the library's interpreter imports anycuda from the
    package the library lies in (found from the library's own location, not a path in it)."""
    r = _run_check(check_program, installed_copy / "anycuda" / "shim" / "lib" / build.LIBRARY)
    assert r.returncode == 0, r.stdout + r.stderr[-3000:]
    assert "cuInit 0, cuDriverGetVersion 0" in r.stdout
    assert str(installed_copy / "anycuda" / "__init__.py") in r.stderr          # PYTHONVERBOSE's import trace


def test_text_only_recipe_matches_the_module():
    """pip's build environment has no numpy or llvmlite: the C text setup.py reads from
    export_tables without importing the runtime must be the module's own."""
    from anycuda.shim import export_tables
    text_only = build._text_only("export_tables")
    assert text_only.DECLARATIONS == export_tables.DECLARATIONS
    assert text_only.STUB_SOURCE == export_tables.STUB_SOURCE


# ---------------------------------------------------------------- which library is used

def _fake_build(folder, stamp=None):
    folder.mkdir(parents=True, exist_ok=True)
    for name in (build.LIBRARY,) + build.DROP_INS + standins.STANDINS:
        (folder / name).write_bytes(b"")
    (folder / build.BUILD_STAMP).write_text((stamp or build.recipe_fingerprint()) + "\n")


@pytest.fixture
def folders(tmp_path, monkeypatch):
    """An install folder and a cache of our own, both empty."""
    install = tmp_path / "package" / "lib"
    monkeypatch.setattr(build, "install_folder", lambda: install)
    monkeypatch.setenv("ANYCUDA_CACHE_DIR", str(tmp_path / "cache"))
    built = []
    monkeypatch.setattr(build, "build", lambda folder, module_paths=None: built.append(folder) or _fake_build(folder))
    return install, build.shim_folder(), built


def test_fresh_install_build_is_preferred(folders):
    install, cache, built = folders
    _fake_build(install)
    _fake_build(cache)
    assert build.shim_state() == (install, "install", None)
    assert build.shim_dir() == install and not built


def test_stale_install_build_falls_back_to_the_cache(folders, capsys):
    install, cache, built = folders
    _fake_build(install, stamp="0123456789abcdef")           # built from other shim sources
    folder, how, why = build.shim_state()
    assert (folder, how) == (cache, None) and "stale" in why
    assert build.shim_dir() == cache and built == [cache]   # built into the cache, not silently skipped
    assert "stale" in capsys.readouterr().err
    assert build.shim_state() == (cache, "cache", why)
    assert build.shim_dir() == cache and built == [cache]   # and not built again


def test_incomplete_install_build_is_not_used(folders):
    install, cache, built = folders
    _fake_build(install)
    (install / standins.STANDINS[0]).unlink()
    assert build.shim_state()[:2] == (cache, None)


def test_missing_or_failed_install_build_says_why(folders):
    install, cache, built = folders
    assert "no library was built at install" in build.shim_state()[2]
    install.mkdir(parents=True)
    (install / build.INSTALL_FAILURE).write_text("no C compiler (cc is not on PATH)\n")
    _fake_build(cache)
    assert build.shim_state() == (cache, "cache", "the build at install failed: no C compiler (cc is not on PATH)")


def test_failed_build_at_install_leaves_a_note(tmp_path, monkeypatch, capsys):
    def fail(folder, module_paths=None):
        (folder / build.LIBRARY).write_bytes(b"half")
        raise RuntimeError("CompileError: command 'cc' failed")
    monkeypatch.setattr(build, "build", fail)
    folder = tmp_path / "lib"
    folder.mkdir()
    files = build.build_at_install(folder)
    assert files == [folder / build.INSTALL_FAILURE]
    assert "CompileError" in files[0].read_text()
    assert "could not build libcuda.so.1 at install" in capsys.readouterr().err


def test_recipe_fingerprint_covers_the_compiled_sources(tmp_path, monkeypatch):
    before = build.recipe_fingerprint()
    shim = tmp_path / "shim"
    shutil.copytree(PACKAGE / "shim", shim, ignore=shutil.ignore_patterns("__pycache__", "lib"))
    shutil.copytree(PACKAGE / "libraries", tmp_path / "libraries", ignore=shutil.ignore_patterns("__pycache__"))
    monkeypatch.setattr(build, "__file__", str(shim / "build.py"))
    assert build.recipe_fingerprint() == before
    (shim / "entry.py").write_text("# imported at run time, not compiled in\n")
    assert build.recipe_fingerprint() == before
    with open(shim / "declarations.py", "a") as f:
        f.write("# changed\n")
    changed = build.recipe_fingerprint()
    assert changed != before
    # a library's C signatures are compiled into its build too
    with open(tmp_path / "libraries" / "cublas" / "signatures.py", "a") as f:
        f.write("# changed\n")
    assert build.recipe_fingerprint() != changed


# ---------------------------------------------------------------- what anycuda says

def test_info_describes_each_case(monkeypatch):
    monkeypatch.setattr(build, "shim_state", lambda: (Path("/p/anycuda/shim/lib"), "install", None))
    lines = cli.shim_description()
    assert lines[0] == "libcuda.so.1           built at install into /p/anycuda/shim/lib"
    assert lines[1].startswith("CUDA libraries         libcublas.so.13")
    monkeypatch.setattr(build, "shim_state", lambda: (Path("/c/shim/x"), "cache", "the build at install failed: E"))
    lines = cli.shim_description()
    assert "built on first use into the cache /c/shim/x" in lines[0] and "failed: E" in lines[1]
    monkeypatch.setattr(build, "shim_state", lambda: (Path("/c/shim/x"), None, "no library was built at install"))
    lines = cli.shim_description()
    assert "not built yet" in lines[0] and "no library was built at install" in lines[1]


def test_info_and_shim_path_name_the_same_build():
    path = subprocess.run([sys.executable, "-m", "anycuda.cli", "shim-path"], capture_output=True, text=True,
                          timeout=300, check=True).stdout.strip()
    info = subprocess.run([sys.executable, "-m", "anycuda.cli", "info"], capture_output=True, text=True,
                          timeout=300, check=True).stdout
    line = next(l for l in info.splitlines() if l.startswith("libcuda.so.1"))
    assert line.endswith(f"built at install into {path}") or line.endswith(f"built on first use into the cache {path}")


# ---------------------------------------------------------------- a wheel in a fresh environment

@pytest.mark.slow
def test_wheel_installed_into_a_fresh_environment(tmp_path, check_program):
    """`pip install` of anycuda (pip's isolated build) into a new environment builds the library
    into that environment's package, and it runs there. The new environment sees this one's
    packages through a .pth file, so only anycuda itself is installed."""
    repo = PACKAGE.parent.parent
    if not (repo / "setup.py").exists():
        pytest.skip("needs anycuda's source tree")
    source = tmp_path / "source"
    shutil.copytree(PACKAGE, source / "src" / "anycuda", ignore=shutil.ignore_patterns("__pycache__", "lib"))
    for name in ("setup.py", "pyproject.toml", "README.md"):
        shutil.copy(repo / name, source / name)
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    target = Path(subprocess.run([str(python), "-c", "import sysconfig; print(sysconfig.get_paths()['purelib'])"],
                                 capture_output=True, text=True, check=True).stdout.strip())
    (target / "outer.pth").write_text("".join(p + "\n" for p in site.getsitepackages()))
    r = subprocess.run([str(python), "-m", "pip", "install", "--no-deps", str(source)],
                       capture_output=True, text=True, timeout=600)
    if r.returncode != 0 and "No matching distribution" in r.stderr:
        pytest.skip("pip cannot reach a package index for the build requirements")
    assert r.returncode == 0, r.stdout[-3000:] + r.stderr[-3000:]
    folder = target / "anycuda" / "shim" / "lib"
    assert (folder / build.LIBRARY).exists(), sorted(os.listdir(folder)) if folder.exists() else "no shim/lib"
    info = subprocess.run([str(python), "-m", "anycuda.cli", "info"], capture_output=True, text=True, timeout=300,
                          cwd=tmp_path)
    assert f"built at install into {folder}" in info.stdout, info.stdout + info.stderr
    r = subprocess.run([str(python), "-m", "anycuda.cli", "run", "--", str(check_program), str(folder / build.LIBRARY)],
                       capture_output=True, text=True, timeout=300, cwd=tmp_path)
    assert r.returncode == 0 and "cuInit 0" in r.stdout, r.stdout + r.stderr[-3000:]
