#!/usr/bin/env bash
# trainer_vs_pytorch with PyTorch at its best: installs OpenBLAS (libopenblas0-pthread) for Debian's
# torch first (scripts/setup.sh; torch takes whichever libblas.so.3 is installed, and the reference
# BLAS makes its linear layers ~10x slower), then runs both sides in one invocation; the table
# names the BLAS torch loaded.
#   benchmarks/trainer/run.sh [trainer_vs_pytorch options]    (BUILD: build directory, default build/default)
set -euo pipefail
root=$(cd "$(dirname "$0")/../.." && pwd)
"$root/scripts/setup.sh" python3-torch libopenblas0-pthread
exec "${BUILD:-$root/build/default}/benchmarks/trainer/trainer_vs_pytorch" "$@"
