#!/usr/bin/env bash
# The benchmarks' peers (Liger-Kernel, Quack, Cut Cross-Entropy) as wheels for the GPU machine,
# which reaches no package registry and takes 64 MiB a call.
#
# Here (with PyPI), once:
#   bench/peer_wheels.sh fetch .whl      # the pinned wheels, big ones cut in parts
# It prints which files go with which call: every call but the last carries
# one batch and runs `bench/peer_wheels.sh stash .whl` (the parts wait in
# /tmp on the device, which stays warm between calls made back to back);
# the last carries the rest and runs `bench/peer_wheels.sh install .whl`,
# which joins the parts, checks each wheel's sha256 against the list fetch
# wrote, and installs them into /tmp/site (export PYTHONPATH=/tmp/site).
set -euo pipefail

# Python 3.12 on x86-64, PyTorch 2.11 for CUDA 13 there (.library/device/KINDS.md).
PEERS=(liger-kernel==0.8.5 quack-kernels==0.6.5 nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-base==4.8.1
       nvidia-cutlass-dsl-libs-cu13==4.8.1 apache-tvm-ffi==0.1.15.post2 torch-c-dlpack-ext==0.1.5
       cut-cross-entropy==25.1.1)
PART=40m          # a part of a wheel bigger than this travels alone
STASH=/tmp/xent_peer_parts

cmd=${1:-}
dir=${2:-.whl}
case "$cmd" in
  fetch)
    mkdir -p "$dir"
    platforms=()
    for p in manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_24_x86_64 manylinux_2_27_x86_64 \
             manylinux_2_28_x86_64 manylinux_2_31_x86_64 manylinux_2_34_x86_64 manylinux_2_35_x86_64; do
      platforms+=(--platform "$p")
    done
    python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
      "${platforms[@]}" -d "$dir" "${PEERS[@]}"
    (cd "$dir" && sha256sum ./*.whl > SHA256SUMS)
    for w in "$dir"/*.whl; do
      if [ "$(stat -c %s "$w")" -gt $((40 * 1024 * 1024)) ]; then
        split -b "$PART" -d -a 2 "$w" "$w.part"
        rm "$w"
      fi
    done
    echo "wheels in $dir ($(du -sh "$dir" | cut -f1)):"
    ls -l "$dir"
    echo "carry at most ~45 MB of them per call besides the build: one part per call, stash, then install"
    ;;
  stash)
    mkdir -p "$STASH"
    cp "$dir"/*.part* "$STASH"/ 2>/dev/null || true
    ls -l "$STASH"
    ;;
  install)
    mkdir -p "$STASH" /tmp/xent_peer_wheels
    cp "$dir"/* "$STASH"/ 2>/dev/null || true
    for first in "$STASH"/*.whl.part00; do
      [ -e "$first" ] || continue
      whl=${first%.part00}
      cat "$whl".part* > "/tmp/xent_peer_wheels/$(basename "$whl")"
    done
    cp "$STASH"/*.whl "$STASH"/SHA256SUMS /tmp/xent_peer_wheels/ 2>/dev/null || true
    (cd /tmp/xent_peer_wheels && sha256sum -c SHA256SUMS)
    python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target /tmp/site \
      /tmp/xent_peer_wheels/*.whl
    echo "installed: export PYTHONPATH=/tmp/site"
    ;;
  *)
    echo "usage: bench/peer_wheels.sh fetch|stash|install DIR" >&2
    exit 2
    ;;
esac
