"""anycuda's build step beyond pyproject.toml: `pip install` builds libcuda.so.1 (cffi embedding)
and the nvJitLink stand-ins into the package's shim/lib/ (for an editable install, into the
source tree's src/anycuda/shim/lib/, where the installed package looks for them).

The build never fails the install: without a C compiler or Python's headers it leaves a note
saying why, prints a warning, and anycuda builds the library on first use into the user cache
(see anycuda.shim.build).
"""
import importlib
import re
import sys
import types
from pathlib import Path

from setuptools import Command, setup
from setuptools.command.build import build
from setuptools.dist import Distribution

HERE = Path(__file__).resolve().parent
PACKAGE = HERE / "src" / "anycuda"


def shim_build_module():
    """anycuda.shim.build from this source tree, without running anycuda/__init__.py: pip's build
    environment holds cffi but not anycuda's runtime dependencies."""
    version = re.search(r'^__version__ = "([^"]+)"', (PACKAGE / "__init__.py").read_text(), re.M).group(1)
    for name, folder in (("anycuda", PACKAGE), ("anycuda.shim", PACKAGE / "shim")):
        module = types.ModuleType(name)
        module.__path__ = [str(folder)]
        module.__version__ = version
        sys.modules[name] = module
    return importlib.import_module("anycuda.shim.build")


class build_shim(Command):
    """Build libcuda.so.1 and the nvJitLink stand-ins into anycuda/shim/lib/."""

    description = "build anycuda's libcuda.so.1 (cffi embedding) into the package"
    user_options = []

    def initialize_options(self):
        self.build_lib = None
        self.editable_mode = False          # set by setuptools for `pip install -e`
        self.outputs = []

    def finalize_options(self):
        self.set_undefined_options("build_py", ("build_lib", "build_lib"))

    def run(self):
        if self.editable_mode:
            folder = PACKAGE / "shim" / "lib"
        else:
            folder = Path(self.build_lib) / "anycuda" / "shim" / "lib"
        files = shim_build_module().build_at_install(folder)
        self.outputs = [] if self.editable_mode else [str(f) for f in files]

    def get_outputs(self):
        return self.outputs


class build_with_shim(build):
    sub_commands = build.sub_commands + [("build_shim", None)]


class BinaryDistribution(Distribution):
    """The wheel holds a library linked against this Python's libpython: tag it for this
    interpreter and platform, not py3-none-any."""

    def has_ext_modules(self):
        return True


setup(cmdclass={"build": build_with_shim, "build_shim": build_shim}, distclass=BinaryDistribution)
