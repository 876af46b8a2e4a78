#!/usr/bin/env bash
# Installs the Debian packages gradsync needs, and any named as arguments (the end-to-end harness
# names its own). Idempotent: skips what is installed, runs `apt-get update` once before
# installing, uses sudo when not root.
set -euo pipefail
packages=(build-essential cmake make pkg-config ccache libopenmpi-dev openmpi-bin libboost-dev
  libeigen3-dev catch2 libbenchmark-dev libcli11-dev nlohmann-json3-dev zlib1g-dev
  dataset-fashion-mnist gnuplot-nox libtbb-dev libgloo-dev libdnnl-dev
  # PyTorch and LibTorch (gradsync::torch, the Python package gradsync.torch and their tests)
  python3-torch libtorch-dev pybind11-dev python3-dev python3-venv python3-pytest python3-pytest-timeout "$@")
# Thrust for the codec kernels: the CUDA toolkit's CCCL when installed, else Debian's.
[ -e /usr/local/cuda/include/cccl/thrust/version.h ] || [ -e /usr/local/cuda/include/thrust/version.h ] ||
  packages+=(libthrust-dev)
# Optional extras: clang + its runtime for the libFuzzer target.
[ "${GRADSYNC_SETUP_FUZZ:-1}" = 1 ] && packages+=(clang libclang-rt-14-dev)

missing=()
for p in "${packages[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -eq 0 ]; then
  echo "setup: all ${#packages[@]} packages present"
  exit 0
fi
sudo=""
if [ "$(id -u)" -ne 0 ]; then sudo="sudo"; fi
echo "setup: installing ${missing[*]}"
$sudo apt-get update -qq
DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -qq --no-install-recommends "${missing[@]}"
