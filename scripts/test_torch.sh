#!/usr/bin/env bash
# The PyTorch user's test: installs this checkout into the environment of PYTHON (an interpreter
# whose torch is 1.13 or 2.x) with pip, then runs tests/torch against the installed package - the
# same tests `make test` runs against Debian's PyTorch - on 1, 2 and 3 ranks (mpiexec), each rank
# checked against that torch's own DDP.
#   scripts/test_torch.sh PYTHON              e.g. ~/venv/bin/python
#   scripts/test_torch.sh --venv DIR VERSION  makes (or reuses) a venv in DIR with torch==VERSION first
# Needs the system packages of scripts/setup.sh (Open MPI, Boost, ...).
set -euo pipefail
here="$(cd "$(dirname "$0")/.." && pwd)"
if [ "${1:-}" = --venv ]; then
  [ $# -eq 3 ] || { echo "usage: $0 --venv DIR TORCH_VERSION" >&2; exit 2; }
  venv="$2" version="$3"
  if ! "$venv/bin/python" -c "import torch, sys; sys.exit(torch.__version__.split('+')[0] != '$version')" 2>/dev/null; then
    echo "test_torch: making $venv with torch==$version (pip's cache: $(/usr/bin/python3 -m pip cache dir 2>/dev/null || echo default))"
    /usr/bin/python3 -m venv "$venv"
    "$venv/bin/pip" install -q --disable-pip-version-check "torch==$version" numpy
  fi
  python="$venv/bin/python"
else
  [ $# -eq 1 ] || { echo "usage: $0 PYTHON | $0 --venv DIR TORCH_VERSION" >&2; exit 2; }
  python="$1"
fi
"$python" -c "import torch" || { echo "test_torch: $python cannot import torch: install PyTorch there first" >&2; exit 2; }
"$python" -m pip install -q --disable-pip-version-check "scikit-build-core>=0.10" pytest pytest-timeout
# No build isolation: the build needs nothing pip would fetch, and scikit-build-core is above.
"$python" -m pip install -q --disable-pip-version-check --no-build-isolation --force-reinstall --no-deps "$here"
"$python" -c "import gradsync.torch as g; print('test_torch:', g.build_info())"

export OMPI_ALLOW_RUN_AS_ROOT=1 OMPI_ALLOW_RUN_AS_ROOT_CONFIRM=1 OMPI_MCA_rmaps_base_oversubscribe=1
cd "$(mktemp -d)"  # not the checkout: `import gradsync` must find the installed package
pytest=("$python" -m pytest -c "$here/tests/torch/pytest.ini" "$here/tests/torch")
failed=0
for ranks in 1 2 3; do
  echo "=== tests/torch on $ranks rank(s), torch $("$python" -c 'import torch; print(torch.__version__)') ==="
  if [ "$ranks" = 1 ]; then "${pytest[@]}" || failed=1
  else mpiexec -np "$ranks" "${pytest[@]}" || failed=1
  fi
done
exit $failed
