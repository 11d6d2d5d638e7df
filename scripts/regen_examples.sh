#!/usr/bin/env bash
# Regenerate the PTX shipped with the bundled examples (needs nvcc on PATH).
set -euo pipefail
cd "$(dirname "$0")/../src/anycuda/examples"
for cu in *.cu; do
    nvcc -ptx -arch=sm_75 -o "${cu%.cu}.ptx" "$cu"
done
