"""What the drop-in library is called and whether its calls are traced: read by the build,
the entry points and the export tables alike."""
from __future__ import annotations

import os

LIBRARY = "libcuda.so.1"
TRACE = "api" in os.environ.get("ANYCUDA_LOG", "")     # ANYCUDA_LOG=api: trace every driver call
# anonymous stubs cuGetProcAddress hands out for driver functions anycuda lacks (build.py); the
# stubs exported by name come after them
STUBS = 1024
