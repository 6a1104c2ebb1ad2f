#!/usr/bin/env bash
# Here, without a GPU: the GPU machine's Python (3.12) and PyTorch (2.11 for
# CUDA 13, from PyPI; it runs on the CPU too) in a venv, and in it
#   1. the whole plan's dry run (bench/gpu/dry_run.sh --reuse), which installs
#      the peers' wheels exactly as the device will and imports each one
#      (bench/gpu/peers.py): their pins and imports resolve, the CUTLASS
#      DSL's .pth file is read;
#   2. the PyTorch package's tests on the CPU under PyTorch 2.11: the custom
#      ops register and run as they will there (torch.compile included), and
#      the fused linear cross entropy's test.
# Its log is bench/results/<date>-peers-torch2.11-cpu.log.
#
#   bench/gpu/check_peers.sh [PYTHON3.12]
#
# Debian 12 has no Python 3.12: without an argument it takes
# /opt/py312/bin/python3.12, and builds it there from Ubuntu 24.04's source
# of CPython 3.12.3 (the GPU machine's version) where it is missing. The
# venv is /tmp/xent-gpu-py312 (about 5 GB with PyTorch's CUDA libraries).
set -euo pipefail
cd "$(dirname "$0")/../.."

py312=${1:-/opt/py312/bin/python3.12}
if [ ! -x "$py312" ]; then
  [ -z "${1:-}" ] || { echo "$py312 is not an executable Python" >&2; exit 2; }
  echo "building CPython 3.12.3 into /opt/py312 (a few minutes)"
  apt-get install -y -q libssl-dev libffi-dev zlib1g-dev libbz2-dev liblzma-dev libsqlite3-dev > /dev/null
  src=$(mktemp -d)
  curl -sf http://archive.ubuntu.com/ubuntu/pool/main/p/python3.12/python3.12_3.12.3.orig.tar.xz | tar -xJ -C "$src"
  (cd "$src"/Python-3.12.3 && ./configure -q --prefix=/opt/py312 && make -s -j"$(nproc)" && make -s altinstall) > /dev/null
  rm -rf "$src"
fi
venv=/tmp/xent-gpu-py312
if [ ! -x "$venv/bin/python" ]; then
  "$py312" -m venv "$venv"
  # What the GPU machine's image holds of what the peers need besides
  # their wheels: PyTorch 2.11 (with Triton), einops, cuda-bindings, protobuf.
  "$venv/bin/python" -m pip install -q torch==2.11.0 numpy packaging einops cuda-bindings protobuf
fi

./bazelw build //runtime:libxent_shared.so
lib=$(./bazelw info bazel-bin 2> /dev/null)/runtime/libxent_shared.so
log=bench/results/$(date -u +%Y-%m-%d)-peers-torch2.11-cpu.log
mkdir -p bench/results
set +e
(
  status=0
  echo "# bench/gpu/check_peers.sh, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(git rev-parse --short HEAD)"
  echo "# $("$venv/bin/python" -c 'import sys, torch; print("Python", sys.version.split()[0], "PyTorch", torch.__version__)')"
  echo "== the plan's dry run, installing the peers into this Python (removed first, if an earlier run left them)"
  # The distributions bench/gpu/build.sh pinned: the names of the wheels its SHA256SUMS lists.
  "$venv/bin/python" -m pip uninstall -q -y $(sed 's|^.*\./||; s|-.*||' gpu_run/wheels/peers/SHA256SUMS) 2>&1 |
    grep -v 'not installed' || true
  PYTHON=$venv/bin/python bench/gpu/dry_run.sh --reuse || status=1
  echo "== the package's tests on the CPU (the cpu backend's library)"
  for t in python/xent_torch_test.py python/xent_compile_test.py python/xent_cuda_test.py \
           tests/linear_ce_vs_torch_test.py; do
    echo "-- $t"
    XENT_LIBRARY=$lib "$venv/bin/python" "$t" 2>&1 || status=1
  done
  echo "# exit status $status"
  exit $status
) 2>&1 | tee "$log"
status=${PIPESTATUS[0]}
echo "wrote $log"
exit "$status"
