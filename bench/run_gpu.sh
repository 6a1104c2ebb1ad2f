#!/usr/bin/env bash
# Every GPU test and benchmark on a machine of your own with an NVIDIA GPU,
# Bazel's prerequisites (./bazelw installs them on Debian), PyTorch (2.4 or
# later for torch.compile) and matplotlib; the peers (Liger-Kernel, Quack,
# Cut Cross-Entropy) are whatever that Python has installed.
#
#   bench/run_gpu.sh            build, then the four stages back to back
#   bench/run_gpu.sh --reuse    the stages over what gpu_run/ already holds
#
# The same stages as the rented H100's plan (docs/GPU_RUN.md), without its
# limits on what travels: bench/gpu/build.sh --no-wheels builds the archives
# (sm_90 kernels: pass other --define=xent_cuda_archs through a build of your
# own for another GPU), and bench/gpu/stage.sh runs correctness, sanitize,
# bench and profile, each step under its time limit (XENT_GPU_LIMIT_<STEP>
# raises one). Results go to bench/results/<date>-gpu-run/.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "${1:-}" = "--reuse" ] || bench/gpu/build.sh --no-wheels
rm -rf /tmp/xent-gpu-wheel-parts   # no wheels travel here
status=0
for stage in correctness sanitize bench profile; do
  bench/gpu/stage.sh "$stage" || status=1
done
exit $status
