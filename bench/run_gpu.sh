#!/usr/bin/env bash
# The one command behind every number in docs/PERFORMANCE.md, on a machine
# with an NVIDIA GPU, PyTorch (2.x for torch.compile) and matplotlib:
#
#   bench/run_gpu.sh                 # builds with ./bazelw --config=cuda
#   bench/run_gpu.sh --prebuilt DIR  # or takes what `bench/run_gpu.sh --build-only DIR` built elsewhere
#
# It runs, on the GPU:
#   //tests:gpu_test             every CUDA variant against the reference,
#                                determinism, CUDA graphs, the split
#                                vocabulary, NCCL;
#   //tests:gpu_hip_on_cuda_test the same for every HIP variant, through
#                                runtime/hip_on_cuda;
#   //tests:large_shapes_test    calls past 2^31 elements;
#   linear_ce_vs_torch_test      the fused linear cross entropy on CUDA
#                                tensors, through the CUDA backend and the
#                                HIP one built for NVIDIA;
#   the PyTorch package's tests  on CUDA tensors (xent_torch_test,
#                                xent_cuda_test, xent_compile_test);
# then the benchmarks (bench.py, bench_linear.py), and writes
# bench/results/<date>-<gpu>.{json,png,log} and <date>-<gpu>-linear.json.
# compute-sanitizer is bench/sanitize_gpu.sh, a call of its own.
set -euo pipefail
cd "$(dirname "$0")/.."

prebuilt="" build_only=""
case "${1:-}" in
  --prebuilt) prebuilt="$2" ;;
  --build-only) build_only="$2" ;;
  "") ;;
  *) echo "usage: bench/run_gpu.sh [--prebuilt DIR | --build-only DIR]" >&2; exit 2 ;;
esac

if [ -z "$prebuilt" ]; then
  ./bazelw build --config=cuda //runtime:libxent_shared.so //bench:libxent_roofline.so //tests:gpu_test \
    //tests:gpu_hip_on_cuda_test //runtime:libxent_hip_on_cuda_shared.so //tests:large_shapes_test
  prebuilt=$(mktemp -d)
  cp bazel-bin/runtime/libxent_shared.so bazel-bin/runtime/libxent_hip_on_cuda_shared.so bazel-bin/bench/libxent_roofline.so \
     bazel-bin/tests/gpu_test bazel-bin/tests/large_shapes_test \
     bazel-bin/tests/gpu_hip_on_cuda_test bazel-bin/gen/cuda/manifest.tsv "$prebuilt"/
  cp bazel-bin/gen/hip/manifest.tsv "$prebuilt/hip_manifest.tsv"
  git rev-parse HEAD > "$prebuilt/commit" 2>/dev/null || echo unknown > "$prebuilt/commit"
  if [ -n "$build_only" ]; then
    mkdir -p "$build_only" && cp "$prebuilt"/* "$build_only"/ && chmod u+w "$build_only"/*
    echo "built into $build_only"
    exit 0
  fi
fi

python=${PYTHON:-python3}
# NCCL from PyTorch's wheels, for gpu_test's NCCL check.
nccl=$("$python" -c 'import nvidia.nccl, os; print(os.path.join(list(nvidia.nccl.__path__)[0], "lib"))' 2>/dev/null || true)
# libcudart.so.13 for the prebuilt binaries, wherever CUDA is.
export LD_LIBRARY_PATH="${nccl:+$nccl:}${CUDA_HOME:-/usr/local/cuda}/lib64:${LD_LIBRARY_PATH:-}"

gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr -c 'A-Za-z0-9\n' '-' | tr -s '-' | sed 's/-$//')
out="bench/results/$(date -u +%Y-%m-%d)-${gpu}"
mkdir -p bench/results
exec > >(tee "$out.log") 2>&1
status=0
echo "== gpu_test"
"$prebuilt/gpu_test" "$prebuilt/manifest.tsv" || status=1
echo "== gpu_hip_on_cuda_test"
"$prebuilt/gpu_hip_on_cuda_test" "$prebuilt/hip_manifest.tsv" || status=1
echo "== large_shapes_test (past 2^31 elements, contiguous and strided)"
"$prebuilt/large_shapes_test" || status=1
echo "== linear_ce_vs_torch_test on CUDA tensors (cuBLASLt's GEMMs)"
XENT_LIBRARY="$prebuilt/libxent_shared.so" XENT_TEST_DEVICE=cuda "$python" tests/linear_ce_vs_torch_test.py || status=1
echo "== linear_ce_vs_torch_test on the HIP backend built for NVIDIA (cuBLASLt as hipBLASLt)"
XENT_LIBRARY="$prebuilt/libxent_hip_on_cuda_shared.so" XENT_TEST_DEVICE=cuda XENT_TEST_BACKEND=hip "$python" \
  tests/linear_ce_vs_torch_test.py || status=1
echo "== the PyTorch package on CUDA tensors (every CPU case, then CUDA graphs, streams, no host sync, torch.compile)"
XENT_LIBRARY="$prebuilt/libxent_shared.so" XENT_TEST_DEVICE=cuda "$python" python/xent_torch_test.py || status=1
XENT_LIBRARY="$prebuilt/libxent_shared.so" "$python" python/xent_cuda_test.py || status=1
XENT_LIBRARY="$prebuilt/libxent_shared.so" "$python" python/xent_compile_test.py || status=1
echo "== bench"
XENT_COMMIT=$(cat "$prebuilt/commit") "$python" bench/bench.py --lib "$prebuilt/libxent_shared.so" \
  --roofline "$prebuilt/libxent_roofline.so" --out "$out" ${BENCH_GROUPS:+--groups "$BENCH_GROUPS"} || status=1
echo "== bench_linear (the fused linear cross entropy beside the GEMMs, PyTorch, Liger-Kernel, Cut Cross-Entropy)"
XENT_COMMIT=$(cat "$prebuilt/commit") "$python" bench/bench_linear.py --lib "$prebuilt/libxent_shared.so" \
  --out "$out-linear" || status=1
exit $status
