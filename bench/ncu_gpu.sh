#!/usr/bin/env bash
# Nsight Compute's summary of the three most important kernels (issue 13,
# item 4): the bf16 forward, fused forward+backward and backward at
# 16384 x 131072 (bench/ncu_driver.py), on a machine with an NVIDIA GPU:
#
#   bench/ncu_gpu.sh --prebuilt DIR [--out FILE] [--source FILE]
#
# DIR holds the unpacked archives of bench/gpu/build.sh (bench/gpu/stage.sh
# unpacks them into /tmp/xent-gpu). Every xent kernel
# those calls launch is profiled with the sections that say what limits it:
# DRAM throughput against the peak (SpeedOfLight, MemoryWorkloadAnalysis),
# achieved occupancy and registers (Occupancy, LaunchStats) and the warps'
# stall reasons (WarpStateStats, SchedulerStats). The clocks are left as the
# GPU sets them (--clock-control none), as in the benchmark's timings, not
# locked to base. Writes the text report to FILE (default
# bench/results/<date>-<gpu>-ncu.txt).
#
# With --source FILE, the three rows kernels (the loops that stream the
# logits) are profiled a second time with the per-instruction sections
# (SourceCounters, InstructionStats), and their SASS with each instruction's
# executed count and stall samples is written to FILE as CSV: where a
# kernel's instructions go beyond the main loop that bench/sass_report.py
# reads (the row's prologue, the last partial batch, the block reduction);
# bench/ncu_source.py summarises it.
set -euo pipefail
cd "$(dirname "$0")/.."

[ "${1:-}" = "--prebuilt" ] && [ -n "${2:-}" ] || { echo "usage: bench/ncu_gpu.sh --prebuilt DIR [--out FILE]" >&2; exit 2; }
prebuilt=$2
out=""
source_out=""
shift 2
while [ $# -gt 0 ]; do
  case "$1" in
    --out) out=${2:?--out FILE}; shift 2 ;;
    --source) source_out=${2:?--source FILE}; shift 2 ;;
    *) echo "bench/ncu_gpu.sh: unknown argument $1" >&2; exit 2 ;;
  esac
done
ncu=${NCU:-$(command -v ncu || echo "${CUDA_HOME:-/usr/local/cuda}/bin/ncu")}
export LD_LIBRARY_PATH="${CUDA_HOME:-/usr/local/cuda}/lib64:${LD_LIBRARY_PATH:-}"
gpu=$(nvidia-smi --query-gpu=name --format=csv,noheader | head -1 | tr -c 'A-Za-z0-9\n' '-' | tr -s '-' | sed 's/-$//')
[ -n "$out" ] || out="bench/results/$(date -u +%Y-%m-%d)-${gpu}-ncu.txt"
mkdir -p "$(dirname "$out")"
{
  echo "# Nsight Compute, $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(cat "$prebuilt/commit" 2>/dev/null || echo unknown)"
  echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); $("$ncu" --version | tail -1)"
  echo "# command: bench/ncu_gpu.sh (bench/ncu_driver.py: bf16 fwd, fwd_bwd, bwd at 16384 x 131072)"
  "$ncu" --kernel-name regex:'^xent_cuda_' --nvtx --clock-control none \
    --section SpeedOfLight --section MemoryWorkloadAnalysis --section Occupancy --section LaunchStats \
    --section WarpStateStats --section SchedulerStats \
    "${PYTHON:-python3}" bench/ncu_driver.py --lib "$prebuilt/libxent_shared.so"
} 2>&1 | tee "$out"
echo "wrote $out"
[ -n "$source_out" ] || exit 0

# The per-instruction view: one launch of each rows kernel, into a report
# file, then its source page (SASS alone: the kernels carry no line table)
# as CSV, one block per kernel.
report=$(mktemp -d)/rows
"$ncu" --kernel-name regex:'^xent_cuda_.*_rows$' --clock-control none \
  --section SourceCounters --section InstructionStats --section LaunchStats \
  --import-source no -o "$report" \
  "${PYTHON:-python3}" bench/ncu_driver.py --lib "$prebuilt/libxent_shared.so"
{
  echo "# Nsight Compute source page (SASS), $(date -u +%Y-%m-%dT%H:%M:%SZ), commit $(cat "$prebuilt/commit" 2>/dev/null || echo unknown)"
  echo "# device: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1); $("$ncu" --version | tail -1)"
  "$ncu" --import "$report.ncu-rep" --page details --print-units base \
    --section InstructionStats --section LaunchStats
  "$ncu" --import "$report.ncu-rep" --page source --print-source sass --csv
} > "$report.csv" 2>&1
# 18 MB for the three kernels: over the 16 MiB a file may come back in, so
# FILE.xz is written compressed (0.4 MB); bench/ncu_source.py reads either.
case "$source_out" in
  *.xz) xz -T0 -6 -c "$report.csv" > "$source_out" ;;
  *) cp "$report.csv" "$source_out" ;;
esac
echo "wrote $source_out ($(wc -l < "$report.csv") lines)"
