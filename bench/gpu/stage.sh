#!/usr/bin/env bash
# One stage of the GPU run (docs/GPU_RUN.md), one device command each:
#
#   bench/gpu/stage.sh correctness      every test that needs a GPU
#   bench/gpu/stage.sh sanitize TOOL... compute-sanitizer, one tool per run
#   bench/gpu/stage.sh bench            the benchmark beside its peers
#   bench/gpu/stage.sh profile          ncu, the V sweep and the linear CE
#   bench/gpu/stage.sh wheels           only stash the wheel parts carried
#
# It unpacks gpu_run/xent-gpu.tar.xz (bench/gpu/build.sh wrote it here, and
# the call carried it), stashes the wheel parts the call carried, and runs
# its steps, each under its own timeout, printing one VERDICT line per step.
# Everything it writes goes to $OUT (at most 8 files, plain names), or to
# bench/results/<date>-gpu-run/ where OUT is unset. Without a GPU the steps
# that need one say SKIPPED and the rest run: bench/gpu/dry_run.sh runs
# every stage so. Exit status 1 if any step failed or timed out.
#
# Each step's limit can be changed with XENT_GPU_LIMIT_<STEP> (seconds, the
# step's name upper-cased, '-' as '_'), and one step run alone with
# XENT_GPU_ONLY=<step>[,<step>...]; see docs/GPU_RUN.md for rerunning a failed step.
set -euo pipefail
cd "$(dirname "$0")/../.."
. bench/gpu/lib.sh

STAGE=${1:-}
shift || true
case "$STAGE" in
  correctness | sanitize | bench | profile | wheels) ;;
  *)
    echo "usage: bench/gpu/stage.sh correctness|sanitize TOOL...|bench|profile|wheels" >&2
    exit 2
    ;;
esac

RESULTS=$(gpu_results_dir)
mkdir -p "$RESULTS"
LOG=$RESULTS/$STAGE.log
VERDICTS=$RESULTS/$STAGE-verdicts.jsonl
: > "$VERDICTS"
# The libraries (every stage) and the test binaries (correctness, sanitize),
# two archives so that the benchmark's calls have room for the peers' wheels.
ARCHIVES=gpu_run/xent-gpu-libs.tar.xz
case "$STAGE" in correctness | sanitize) ARCHIVES="$ARCHIVES gpu_run/xent-gpu-tests.tar.xz" ;; esac
BIN=/tmp/xent-gpu                 # the unpacked archives
STASH=/tmp/xent-gpu-wheel-parts   # wheel parts, kept while the machine stays warm
PYTHON=${PYTHON:-python3}
export PYTHONUNBUFFERED=1

{
  # (No commit here: the device's copy of the tree may carry a .git of its
  # own that is not this one; the archives' commit follows the unpack.)
  echo "# stage $STAGE, $(date -u +%Y-%m-%dT%H:%M:%SZ)"
  echo "# device: $(gpu_name); host $(uname -n), $(nproc) cores; $("$PYTHON" --version 2>&1)"
} | tee "$LOG"

# A step's limit, from its default or XENT_GPU_LIMIT_<STEP>.
limit() {
  local var
  var=XENT_GPU_LIMIT_$(echo "$1" | tr 'a-z-' 'A-Z_')
  echo "${!var:-$2}"
}

# run_step NAME DEFAULT_SECONDS [--gpu] COMMAND...: step, unless XENT_GPU_ONLY
# (one step's name, or several, comma-separated) names others.
run_step() {
  local name=$1 secs
  secs=$(limit "$1" "$2")
  shift 2
  if [ -n "${XENT_GPU_ONLY:-}" ]; then
    case ",$XENT_GPU_ONLY," in
      *",$name,"*) ;;
      *) return 0 ;;
    esac
  fi
  step "$name" "$secs" "$@"
}

# --- Steps every stage runs first -----------------------------------------

unpack() {
  local archive
  rm -rf "$BIN" && mkdir -p "$BIN"
  for archive in $ARCHIVES; do
    [ -f "$archive" ] || { echo "no $archive: run bench/gpu/build.sh here and carry it (docs/GPU_RUN.md)"; return 1; }
    xz -dc "$archive" | tar -xf - -C "$BIN" || return 1
    echo "$archive: $(sha256sum "$archive" | cut -c1-16), $(du -h "$archive" | cut -f1)"
  done
  echo "built: $(tr '\n' ' ' < "$BIN/build.txt")"
  # The tree that travelled holds the sources the binaries were built from
  # (the scripts, the Python tests and the package come from the tree).
  local changed
  changed=$(sha256sum -c --quiet "$BIN/sources.sha256" 2>&1 | head -5 || true)
  if [ -n "$changed" ]; then
    echo "the tree's sources differ from the archive's (commit $(cat "$BIN/commit")): rebuild with bench/gpu/build.sh"
    echo "$changed"
    return 1
  fi
  # Every binary finds its libraries (libcudart.so.13 is the CUDA runtime's).
  local missing
  missing=$(for f in "$BIN"/gpu_test "$BIN"/gpu_hip_on_cuda_test "$BIN"/large_shapes_test "$BIN"/*.so; do
    [ -e "$f" ] && ldd "$f" | grep 'not found' | sed "s|^|$(basename "$f"): |"
  done || true)
  if [ -n "$missing" ]; then
    echo "unresolved libraries:"
    echo "$missing"
    return 1
  fi
  "$PYTHON" -c "import ctypes, sys; ctypes.CDLL(sys.argv[1]); print('libxent_shared.so loads')" "$BIN/libxent_shared.so"
  [ -f "$BIN/libxent_cuda.so" ] || { echo "libxent_cuda.so (the CUDA plugin) is not beside libxent_shared.so"; return 1; }
}

# The wheel parts this call carried (gpu_run/wheels/, one batch of the plan)
# wait in $STASH for the stage that installs them.
stash() {
  mkdir -p "$STASH"
  local n=0
  for f in gpu_run/wheels/*/*; do
    [ -e "$f" ] || continue
    cp "$f" "$STASH"/
    n=$((n + 1))
  done
  echo "stashed $n files; $STASH holds: $(ls "$STASH" | tr '\n' ' ')"
}

# --- The HIP-on-CUDA shim's exchange under racecheck -------------------------

# tests/hip_on_cuda_exchange_test.cu, compiled here by the device's nvcc
# (seconds): the shim's wavefront exchange at 1, 15 and 16 wavefronts a
# block must be clean under racecheck, and the same with its first barrier
# left out must not, or racecheck cannot see the barriers the shim uses and
# a clean report of the HIP rendering means nothing.
exchange_racecheck() {
  local nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc exe=/tmp/xent-gpu/hip_on_cuda_exchange_test out
  local sanitizer=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")}
  "$nvcc" -O2 -arch=sm_90 -Iruntime/hip_on_cuda tests/hip_on_cuda_exchange_test.cu -o "$exe" || return 1
  "$exe" || { echo "the exchange returned wrong values"; return 1; }
  # (Under bash -e: the planted run may also exit 1 for wrong values.)
  out=$("$sanitizer" --tool racecheck "$exe" 2>&1 || true)
  echo "$out" | tee -a "$RESULTS/sanitizer.log"
  grep -q 'RACECHECK SUMMARY: 0 hazards displayed (0 errors, 0 warnings)' <<< "$out" ||
    { echo "racecheck reported the shim's exchange"; return 1; }
  out=$("$sanitizer" --tool racecheck "$exe" --planted 2>&1 || true)
  tail -3 <<< "$out"
  grep -q 'RACECHECK SUMMARY: [1-9]' <<< "$out" ||
    { echo "racecheck did not report the planted race (the exchange without its first barrier)"; return 1; }
  echo "racecheck: the shim's exchange clean, the planted race found"
}

# --- The tensor cores' tiles -------------------------------------------------

# tests/warpgroup_mma_test.cc and tests/lce_on_chip_test.cc, compiled here
# for sm_90a by the device's nvcc (seconds, side by side): wgmma chains in
# every pair of operand layouts (a swizzled operand staged by a tensor
# copy), and the linear cross entropy's two passes with the logits on chip
# (their stages tensor copies where H is a multiple of 8), against float64,
# which the suite runs only under the emulator. They hold the emulator's
# model of the operand layouts, the tensor copy's swizzle and the
# accumulator's fragment to the hardware's.
tensor_cores() {
  local nvcc=${CUDA_HOME:-/usr/local/cuda}/bin/nvcc t pid status=0 pids=()
  mkdir -p /tmp/xent-gpu
  for t in warpgroup_mma_test lce_on_chip_test; do
    "$nvcc" -O2 -arch=sm_90a -x cu -Ikernels "tests/$t.cc" -o "/tmp/xent-gpu/$t" &
    pids+=($!)
  done
  for pid in "${pids[@]}"; do wait "$pid" || status=1; done
  [ "$status" = 0 ] || return 1
  /tmp/xent-gpu/warpgroup_mma_test || status=1
  /tmp/xent-gpu/lce_on_chip_test || status=1
  return "$status"
}

# The ON_CHIP plan on the GPU: linear_ce_vs_torch_test's on_chip tests
# through the CUDA backend, and the package's test_linear_plans (and its
# determinism rule's, test_linear_plans_deterministic_algorithms).
on_chip() {
  local status=0
  env XENT_LIBRARY="$BIN/libxent_shared.so" XENT_TEST_DEVICE=cuda "$PYTHON" tests/linear_ce_vs_torch_test.py \
    -k on_chip || status=1
  # (The installed package, as PKG below runs it: exported functions see
  # no arrays.)
  env -u XENT_LIBRARY -u XENT_EXTENSION PYTHONPATH="$SITE" PYTHONSAFEPATH=1 XENT_TEST_DEVICE=cuda \
    "$PYTHON" python/xent_torch_test.py -k test_linear_plans || status=1
  return "$status"
}

# --- The fused linear cross entropy under memcheck ---------------------------

# Its vocabulary split (the one pass and both tiled plans, ranks as threads
# on the GPU; cuBLASLt's GEMMs, the steps, the shard records, the combine,
# the backward from records and from the lse) under compute-sanitizer's
# memcheck, its report into sanitizer.log (issue 62).
memcheck_linear_ce() {
  local sanitizer=${COMPUTE_SANITIZER:-$(command -v compute-sanitizer || echo "${CUDA_HOME:-/usr/local/cuda}/bin/compute-sanitizer")}
  echo "== memcheck: tests/linear_ce_vs_torch_test.py LinearCrossEntropy.test_vocabulary_parallel" >> "$RESULTS/sanitizer.log"
  env XENT_LIBRARY="$BIN/libxent_shared.so" XENT_TEST_DEVICE=cuda \
    "$sanitizer" --tool memcheck --error-exitcode 1 "$PYTHON" tests/linear_ce_vs_torch_test.py \
    LinearCrossEntropy.test_vocabulary_parallel 2>&1 | tee -a "$RESULTS/sanitizer.log"
  return "${PIPESTATUS[0]}"
}

# --- The peers: wheels joined, checked and installed ------------------------

# Join the parts, check every wheel against SHA256SUMS, install them into
# the Python that runs the benchmark (its own environment, so that the .pth
# file putting CUTLASS's dsl_packages on sys.path is read), and import each
# peer. Where a part is missing (the machine was given back between calls),
# says which and fails: bench.py then names the peer it could not import.
install_peers() {
  local joined=/tmp/xent-gpu-wheels
  rm -rf "$joined" && mkdir -p "$joined"
  if [ -z "$(ls -A "$STASH" 2> /dev/null)" ]; then
    echo "SKIPPED: no wheels were carried: the peers are whatever $PYTHON already has"
    return 0
  fi
  [ -f "$STASH/SHA256SUMS" ] || { echo "no SHA256SUMS in $STASH: gpu_run/wheels/peers was not carried"; return 1; }
  for first in "$STASH"/*.whl.part00; do
    [ -e "$first" ] || continue
    cat "${first%.part00}".part* > "$joined/$(basename "${first%.part00}")"
  done
  cp "$STASH"/*.whl "$STASH"/SHA256SUMS "$joined"/ 2> /dev/null || true
  # Every whole wheel is installed; one whose parts did not all arrive is
  # named, and the step fails after the others are in.
  local checked good bad
  checked=$(cd "$joined" && sha256sum -c SHA256SUMS 2> /dev/null || true)
  good=$(echo "$checked" | sed -n 's|^\./\(.*\): OK$|\1|p')
  bad=$(echo "$checked" | grep -v ': OK$' || true)
  if [ -n "$bad" ]; then
    echo "missing or incomplete (their parts ride with the calls before; docs/GPU_RUN.md):"
    echo "$bad"
  fi
  [ -n "$good" ] || return 1
  local version
  version=$("$PYTHON" -c 'import sys; print("%d.%d" % sys.version_info[:2])')
  if [ "$version" = 3.12 ]; then
    (cd "$joined" && "$PYTHON" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir $good)
    "$PYTHON" bench/gpu/peers.py || [ -n "$bad" ]
  else
    # Off the device machine with another Python: that pip resolves every
    # wheel for CPython 3.12 on x86-64 is all that can be checked.
    "$PYTHON" -m pip install -q --dry-run --ignore-installed --no-index --no-deps --only-binary=:all: \
      --python-version 3.12 --implementation cp --platform manylinux_2_28_x86_64 --target /tmp/xent-gpu-pip-check \
      $(cd "$joined" && for w in $good; do echo "$joined/$w"; done)
    [ -n "$bad" ] || echo "SKIPPED: Python $version here: the wheels resolve for CPython 3.12, none installed"
  fi
  [ -z "$bad" ]
}

# --- Libraries from PyTorch's wheels --------------------------------------
# NCCL for gpu_test's NCCL check, and the CUDA runtime and cuBLASLt where the
# toolkit's lib64 lacks them (libcudart.so.13 is linked, cuBLASLt loaded).
wheel_lib_dirs=$("$PYTHON" - << 'EOF' 2> /dev/null || true
import glob, os
try:
    import nvidia
    for name in ("libnccl.so.2", "libcudart.so.13", "libcublasLt.so.13"):
        hits = [p for d in nvidia.__path__ for p in glob.glob(os.path.join(d, "**", name), recursive=True)]
        if hits:
            print(os.path.dirname(hits[0]), end=":")
except ImportError:
    pass
EOF
)

# --- The stage -----------------------------------------------------------

export LD_LIBRARY_PATH="$BIN:${CUDA_HOME:-/usr/local/cuda}/lib64:$wheel_lib_dirs${LD_LIBRARY_PATH:-}"
export ARCHIVES BIN STASH PYTHON
export RESULTS
export -f unpack stash install_peers exchange_racecheck tensor_cores on_chip memcheck_linear_ce
run_step stash 10 stash
if [ "$STAGE" != wheels ]; then
  XENT_GPU_ONLY='' run_step unpack 20 unpack
  if [ "$STAGE_STATUS" != 0 ]; then
    echo "# stage $STAGE: stopped, the archives did not unpack or load" | tee -a "$LOG"
    exit 1
  fi
fi
XENT_COMMIT=$(cat "$BIN/commit" 2>/dev/null || echo unknown)
export XENT_COMMIT
echo "# archives built from commit $XENT_COMMIT" | tee -a "$LOG"

# The package as users install it: the wheel python/build_wheel.py makes
# from the archive's libraries (libxent without OpenMP and the CUDA plugin,
# as a user's wheel holds them), installed by pip into $SITE with no index.
# The package's steps import it from there (PYTHONSAFEPATH: not the tree's
# python/, which bench.py's own timings use with the same libraries), and
# its C++ path is what `python -m xent.build_extension` builds against this
# machine's PyTorch, into $XENT_CACHE_DIR, by the correctness stage and
# kept while the machine stays warm.
SITE=/tmp/xent-gpu-site
export XENT_CACHE_DIR=/tmp/xent-gpu-ext
install_wheel() {
  rm -rf "$SITE" /tmp/xent-gpu-dist
  "$PYTHON" python/build_wheel.py --library "$BIN" --gpu cuda --out /tmp/xent-gpu-dist
  "$PYTHON" -m pip install --no-index --no-deps --quiet --target "$SITE" /tmp/xent-gpu-dist/xent-*.whl
  echo "installed: $(cd "$SITE" && ls xent/*.so | tr '\n' ' ')"
}
export SITE
export -f install_wheel
PKG=(env -u XENT_LIBRARY -u XENT_EXTENSION PYTHONPATH="$SITE" PYTHONSAFEPATH=1)
case "$STAGE" in correctness | bench) XENT_GPU_ONLY='' run_step wheel 30 install_wheel ;; esac
if [ "$STAGE" = correctness ]; then
  # (One C++ file against PyTorch's headers: 53 s on this project's 2-core machine.)
  XENT_GPU_ONLY='' run_step extension 50 "${PKG[@]}" "$PYTHON" -m xent.build_extension
fi
EXTENSION=$(PYTHONPATH=python "$PYTHON" -c 'import torch; from xent import build_extension as b; print(b.cached(torch) or "")' \
  2> /dev/null || true)
if [ -n "$EXTENSION" ]; then
  export XENT_EXTENSION="$EXTENSION"  # bench.py's package, from the tree
else
  echo "# no extension in $XENT_CACHE_DIR (a cold machine?): the package runs its Python path" | tee -a "$LOG"
fi

case "$STAGE" in
  correctness)
    # Every variant, then the shapes past 2^31, the linear CE on both
    # backends, and the package on CUDA tensors (graphs, streams, compile).
    run_step gpu_test 60 --gpu "$BIN/gpu_test" "$BIN/manifest.tsv"
    run_step gpu_hip_on_cuda_test 60 --gpu "$BIN/gpu_hip_on_cuda_test" "$BIN/hip_manifest.tsv"
    # (The fifth run: 24 s.)
    run_step large_shapes 40 --gpu "$BIN/large_shapes_test"
    # (The fifth run: 7 and 6 s of the linear CE's, 14 of the package's, 6 of
    # the graphs'. The linear CE's gave 10 s to package_compile.)
    run_step linear_ce_cuda 20 --gpu env XENT_LIBRARY="$BIN/libxent_shared.so" XENT_TEST_DEVICE=cuda \
      XENT_TEST_SKIP_ON_CHIP=1 "$PYTHON" tests/linear_ce_vs_torch_test.py
    run_step linear_ce_hip 20 --gpu env XENT_LIBRARY="$BIN/libxent_hip_on_cuda_shared.so" XENT_TEST_DEVICE=cuda \
      XENT_TEST_BACKEND=hip "$PYTHON" tests/linear_ce_vs_torch_test.py
    run_step package_cuda 40 --gpu "${PKG[@]}" XENT_TEST_DEVICE=cuda XENT_NATIVE=1 XENT_TEST_SKIP_ON_CHIP=1 \
      "$PYTHON" python/xent_torch_test.py
    run_step package_graphs 25 --gpu "${PKG[@]}" "$PYTHON" python/xent_cuda_test.py
    run_step tensor_cores 25 --gpu tensor_cores
    # The ON_CHIP plan's first run on tensor cores, in processes of its
    # own: the C API's tests, then the package's plan= (a trap there would
    # have cost the steps above their CUDA context).
    run_step on_chip 30 --gpu on_chip
    # CUDA tensors alone (CPU tensors run off the GPU): Inductor's C++
    # builds for them took most of 70 s on the first run's machine, 29 s
    # in the fifth run; the linear cross entropy's cases add about 20.
    run_step package_compile 65 --gpu "${PKG[@]}" XENT_TEST_DEVICES=cuda \
      XENT_TEST_TRACEBACK_AFTER=60 "$PYTHON" python/xent_compile_test.py
    # xent_jax on JAX's CUDA platform, from the installed wheel: its FFI
    # handlers built against the device's jaxlib at first use (about 15 s).
    run_step jax_cuda 45 --gpu "${PKG[@]}" XENT_JAX_PLATFORMS=cuda "$PYTHON" python/xent_jax_test.py
    ;;
  sanitize)
    # One tool per run over the reduced case list (bench/sanitize_gpu.sh),
    # cases of at most 1024 rows, the bit-for-bit reruns off.
    [ $# -gt 0 ] || set -- memcheck racecheck synccheck initcheck
    export XENT_TEST_MAX_ROWS=${XENT_TEST_MAX_ROWS:-1024} XENT_TEST_SKIP_RERUNS=1
    for tool in "$@"; do
      for test in gpu_test gpu_hip_on_cuda_test; do
        run_step "$tool-$test" 55 --gpu bench/sanitize_gpu.sh --prebuilt "$BIN" --log "$RESULTS/sanitizer.log" \
          --only "$test" "$tool"
      done
      [ "$tool" != racecheck ] || run_step racecheck-exchange 40 --gpu exchange_racecheck
      # (Not timed under memcheck yet: XENT_GPU_LIMIT_MEMCHECK_LINEAR_CE raises it.)
      [ "$tool" != memcheck ] || run_step memcheck-linear_ce 30 --gpu memcheck_linear_ce
    done
    ;;
  bench)
    # (The fifth run's install took 29 s.)
    XENT_GPU_ONLY='' run_step peers 50 install_peers
    run_step bench 250 --gpu "$PYTHON" bench/bench.py --lib "$BIN/libxent_shared.so" \
      --roofline "$BIN/libxent_roofline.so" --out "$RESULTS/bench" --groups large,dtypes,small_vocab,nd,softmax
    # Every launch shape of the tune sweep on the same tensors
    # (xent_set_row_shape): what the specs' tune tables are chosen from.
    run_step tune 150 --gpu "$PYTHON" bench/bench.py --lib "$BIN/libxent_shared.so" \
      --roofline "$BIN/libxent_roofline.so" --out "$RESULTS/tune" --groups tune
    # The package's host time per call over its library calls, on CUDA tensors.
    run_step host_overhead 20 --gpu "${PKG[@]}" "$PYTHON" bench/host_overhead.py --device cuda --rounds 1 --reps 100 --out "$RESULTS/host-overhead"
    ;;
  profile)
    XENT_GPU_ONLY='' run_step peers 90 install_peers
    run_step ncu 120 --gpu bench/ncu_gpu.sh --prebuilt "$BIN" --out "$RESULTS/ncu.txt" --source "$RESULTS/ncu-source.csv.xz"
    run_step sweep 140 --gpu "$PYTHON" bench/bench.py --lib "$BIN/libxent_shared.so" \
      --roofline "$BIN/libxent_roofline.so" --out "$RESULTS/sweep" --groups sweep
    run_step bench_linear 160 --gpu "$PYTHON" bench/bench_linear.py --lib "$BIN/libxent_shared.so" \
      --out "$RESULTS/linear"
    ;;
  wheels) ;;
esac

echo "# stage $STAGE: $(grep -c . "$VERDICTS") steps, exit status $STAGE_STATUS; files in $RESULTS: $(ls "$RESULTS" | tr '\n' ' ')" | tee -a "$LOG"
exit $STAGE_STATUS
