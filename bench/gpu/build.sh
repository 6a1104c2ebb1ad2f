#!/usr/bin/env bash
# Here, on a machine without a GPU: everything the GPU run's stages need that
# the working tree does not hold, under gpu_run/ (ignored by git; each device
# call carries the paths bench/gpu/plan.py names):
#
#   gpu_run/xent-gpu-libs.tar.xz   libxent_shared.so and its CUDA plugin
#                                  libxent_cuda.so beside it,
#                                  libxent_hip_on_cuda_shared.so,
#                                  libxent_roofline.so, both manifests, the
#                                  commit and the build's flags
#   gpu_run/xent-gpu-tests.tar.xz  gpu_test, gpu_hip_on_cuda_test,
#                                  large_shapes_test
#   gpu_run/wheels/part1, part2..  the peers' wheels too big to travel whole,
#                                  in pieces, one per call before the benchmark
#   gpu_run/wheels/peers           the other wheels and SHA256SUMS of all
#
# Kernels for sm_90a only (the H100 and H200; the ON_CHIP plan's wgmma), as machine code alone (no PTX:
# two thirds of an object's bytes, and unused on sm_90) in uncompressed
# fatbins (xz then finds the kernels the binaries share; nvcc's own
# compression hides them), and host code at -O2 (-c opt: the past-2^31 test
# fills 4.3e9 values), so that both archives stay under 20 MiB.
#
#   bench/gpu/build.sh              the archives and the wheels (PyPI, once:
#                                   the wheels are kept in gpu_run/pypi)
#   bench/gpu/build.sh --no-wheels  the archives alone
set -euo pipefail
cd "$(dirname "$0")/../.."

wheels=1
[ "${1:-}" = "--no-wheels" ] && wheels=0

# The peers, pinned for the GPU machine: Python 3.12 on x86-64, PyTorch
# 2.11 for CUDA 13 (.library/device/KINDS.md). Quack needs the CUTLASS DSL
# (the meta package, whose .pth file puts dsl_packages on sys.path; its
# -core, -base and -cu13 libraries) and TVM FFI. torch-c-dlpack-ext, which
# Quack's metadata names, is left out: its builds stop at PyTorch 2.9, and
# PyTorch 2.11 exports the DLPack exchange API itself (bench/gpu/peers.py
# prints it), so the extension's loader returns before loading anything.
PEERS=(liger-kernel==0.8.5 quack-kernels==0.6.5 nvidia-cutlass-dsl==4.8.1 nvidia-cutlass-dsl-libs-core==4.8.1
       nvidia-cutlass-dsl-libs-base==4.8.1 nvidia-cutlass-dsl-libs-cu13==4.8.1 apache-tvm-ffi==0.1.15.post2
       cut-cross-entropy==25.1.1)
PART_MIB=31   # a wheel bigger than this travels in pieces, one per call

# libxent without OpenMP, as the wheel builds it (python/build_wheel.py): the
# correctness stage installs the wheel made from these libraries.
FLAGS=(-c opt --config=cuda --define=xent_cuda_archs=90a --define=xent_hip_on_cuda_archs=90 --define=xent_cuda_ptx=0
       --define=xent_cuda_compress=none --define=xent_openmp=off)
./bazelw build "${FLAGS[@]}" //runtime:libxent_shared.so //runtime:libxent_cuda.so //runtime:libxent_hip_on_cuda_shared.so \
  //bench:libxent_roofline.so //tests:gpu_test //tests:gpu_hip_on_cuda_test //tests:large_shapes_test \
  //gen:cuda/manifest.tsv //gen:hip/manifest.tsv
bin=$(./bazelw info "${FLAGS[@]}" bazel-bin 2> /dev/null)

# No kernel of the run may use local memory on sm_90: the tests' build
# compiles every kernel for sm_100 and only a sample for sm_90 (.ci/run says
# why), so this
# build, which compiles them all for sm_90, is where a spill or stack frame
# there shows. ptxas -v's report is each unit's log beside its object.
if grep -HE '(^|[^0-9])[1-9][0-9]* bytes (stack frame|spill stores|spill loads)' \
     "$bin"/gen/cuda_objects/*.log "$bin"/gen/hip_on_cuda_objects/*.log; then
  echo "build.sh: local memory (a stack frame or spills) in the sm_90 kernels above" >&2
  exit 1
fi
n=$(cat "$bin"/gen/cuda_objects/*.log "$bin"/gen/hip_on_cuda_objects/*.log | grep -c "bytes stack frame")
echo "build.sh: ptxas's report for $n sm_90 kernels, no local memory"

stage=$(mktemp -d)
trap 'rm -rf "$stage"' EXIT
mkdir -p "$stage/libs" "$stage/tests"
cp "$bin/runtime/libxent_shared.so" "$bin/runtime/libxent_cuda.so" "$bin/runtime/libxent_hip_on_cuda_shared.so" \
  "$bin/bench/libxent_roofline.so" \
  "$bin/gen/cuda/manifest.tsv" "$stage/libs/"
cp "$bin/gen/hip/manifest.tsv" "$stage/libs/hip_manifest.tsv"
cp "$bin/tests/gpu_test" "$bin/tests/gpu_hip_on_cuda_test" "$bin/tests/large_shapes_test" "$stage/tests/"
chmod -R u+w "$stage"
git rev-parse HEAD > "$stage/libs/commit"
# The sources the binaries were built from, checked against the tree that
# travels (which has no .git there): the Python tests and the package come
# from the tree, so both must be the same code.
git ls-files runtime gen templates kernels specs tests python/xent third_party/gpu | xargs sha256sum > "$stage/libs/sources.sha256"
{
  echo "bazel ${FLAGS[*]}"
  echo "$(/usr/local/cuda/bin/nvcc --version | tail -1)"
  [ -z "$(git status --porcelain --untracked-files=no)" ] || echo "tree with uncommitted changes"
} > "$stage/libs/build.txt"

# One xz stream per archive with a 256 MiB window (as much memory to unpack):
# the three test binaries (80 MB each) hold the same kernels, which xz then
# stores once.
mkdir -p gpu_run
for name in libs tests; do
  tar -C "$stage/$name" -cf - . | xz -T1 --lzma2=preset=9,dict=256MiB > "gpu_run/.xent-gpu-$name.tar.xz.tmp"
  mv "gpu_run/.xent-gpu-$name.tar.xz.tmp" "gpu_run/xent-gpu-$name.tar.xz"
  echo "gpu_run/xent-gpu-$name.tar.xz: $(du -h "gpu_run/xent-gpu-$name.tar.xz" | cut -f1) ($(ls "$stage/$name" | tr '\n' ' '))"
done

if [ "$wheels" = 1 ]; then
  pypi=gpu_run/pypi
  mkdir -p "$pypi"
  platforms=()
  for p in manylinux_2_17_x86_64 manylinux2014_x86_64 manylinux_2_24_x86_64 manylinux_2_27_x86_64 \
           manylinux_2_28_x86_64 manylinux_2_31_x86_64 manylinux_2_34_x86_64 manylinux_2_35_x86_64; do
    platforms+=(--platform "$p")
  done
  python3 -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    "${platforms[@]}" -d "$pypi" "${PEERS[@]}"
  # Exactly the pinned wheels (an earlier pin's file may still be in the cache).
  rm -rf gpu_run/.wheels.tmp && mkdir -p gpu_run/.wheels.tmp/peers
  for spec in "${PEERS[@]}"; do
    name=${spec%%==*} version=${spec#*==}
    whl=$(ls "$pypi"/"${name//-/_}"-"$version"-*.whl)
    cp "$whl" gpu_run/.wheels.tmp/peers/
  done
  (cd gpu_run/.wheels.tmp/peers && sha256sum ./*.whl > SHA256SUMS)
  n=0
  for whl in gpu_run/.wheels.tmp/peers/*.whl; do
    if [ "$(stat -c %s "$whl")" -gt $((PART_MIB << 20)) ]; then
      split -b "${PART_MIB}m" -d -a 2 "$whl" "$whl.part"
      rm "$whl"
      for part in "$whl".part*; do
        n=$((n + 1))
        mkdir -p "gpu_run/.wheels.tmp/part$n"
        mv "$part" "gpu_run/.wheels.tmp/part$n/"
      done
    fi
  done
  rm -rf gpu_run/wheels && mv gpu_run/.wheels.tmp gpu_run/wheels
  du -sh gpu_run/wheels/*
fi

python3 bench/gpu/plan.py --check
