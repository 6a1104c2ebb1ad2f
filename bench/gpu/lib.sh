# Sourced by bench/gpu/stage.sh: where results go, how a step runs, and
# what a step's verdict line says. Nothing here needs a GPU.

# Results: $OUT on the device machine (what comes back), else bench/results/
# under a folder of the date, so that a run off the device keeps its files.
gpu_results_dir() {
  if [ -n "${OUT:-}" ]; then
    echo "$OUT"
  else
    echo "bench/results/$(date -u +%Y-%m-%d)-gpu-run"
  fi
}

# 0 when an NVIDIA GPU answers; XENT_GPU_RUN_NO_GPU=1 pretends there is none
# (the dry run on a machine that has one).
have_gpu() {
  [ -z "${XENT_GPU_RUN_NO_GPU:-}" ] && command -v nvidia-smi > /dev/null 2>&1 && nvidia-smi -L > /dev/null 2>&1
}

gpu_name() {
  if have_gpu; then
    nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1
  else
    echo "no GPU"
  fi
}

# The verdicts of a stage, one JSON object per line in $VERDICTS, and one
# line each on stdout that the output tail alone can be read from:
#   VERDICT <stage>/<step>: PASSED|FAILED (exit N)|TIMED OUT (after T s)|SKIPPED (why) [S s]
STAGE_STATUS=0
verdict() {  # step, word, detail, seconds
  local step=$1 word=$2 detail=$3 secs=$4
  local line="VERDICT $STAGE/$step: $word${detail:+ ($detail)} [${secs} s]"
  echo "$line"
  printf '{"stage": "%s", "step": "%s", "verdict": "%s", "detail": "%s", "seconds": %s}\n' \
    "$STAGE" "$step" "$word" "${detail//\"/\'}" "$secs" >> "$VERDICTS"
  case "$word" in
    FAILED | "TIMED OUT") STAGE_STATUS=1 ;;
  esac
}

# step NAME SECONDS [--gpu] COMMAND...: COMMAND (a program or an exported
# function) under its own timeout, its
# output appended to the stage's log (and shown), then its verdict. With
# --gpu it is SKIPPED where no GPU answers. A command that prints a line
# beginning "SKIPPED:" and exits 0 is SKIPPED too, with its reason.
step() {
  local name=$1 limit=$2
  shift 2
  local needs_gpu=0
  if [ "${1:-}" = "--gpu" ]; then
    needs_gpu=1
    shift
  fi
  if [ -n "${XENT_GPU_PLAN_ONLY:-}" ]; then
    echo "PLAN $STAGE/$name $limit"
    return 0
  fi
  echo "== $STAGE/$name (at most $limit s): $*" | tee -a "$LOG"
  if [ "$needs_gpu" = 1 ] && ! have_gpu; then
    verdict "$name" SKIPPED "no GPU" 0
    return 0
  fi
  local start=$SECONDS rc=0 capture
  capture=$(mktemp)
  set +e
  # A shell function of the stage runs too (they are exported).
  timeout -k 15 "$limit" bash -eo pipefail -c '"$@"' "$name" "$@" 2>&1 | tee "$capture" | tee -a "$LOG"
  rc=${PIPESTATUS[0]}
  set -e
  local secs=$((SECONDS - start))
  local skipped
  skipped=$(grep -m1 '^SKIPPED:' "$capture" | sed 's/^SKIPPED: *//' | cut -c1-160 || true)
  rm -f "$capture"
  if [ "$rc" = 124 ] || [ "$rc" = 137 ]; then
    verdict "$name" "TIMED OUT" "after $limit s" "$secs"
  elif [ "$rc" != 0 ]; then
    verdict "$name" FAILED "exit $rc" "$secs"
  elif [ -n "$skipped" ]; then
    verdict "$name" SKIPPED "$skipped" "$secs"
  else
    verdict "$name" PASSED "" "$secs"
  fi
  return 0
}
