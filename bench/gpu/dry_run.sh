#!/usr/bin/env bash
# The whole GPU run, here, without a GPU: proves the plan fits before a GPU
# session spends its minutes of device time on it (docs/GPU_RUN.md).
#
#   bench/gpu/dry_run.sh            builds the archives and fetches the wheels
#                                   (bench/gpu/build.sh), then the rest
#   bench/gpu/dry_run.sh --reuse    takes what gpu_run/ already holds
#
# It checks every limit of the device machine (bench/gpu/plan.py --check),
# then runs each call of the plan as the device would: in a copy of what
# travels (the working tree git does not ignore, and the call's carried
# paths), with OUT set to an empty folder, one after the other with the
# wheel parts kept in /tmp between calls as a warm machine keeps them. The
# steps that need a GPU print SKIPPED; the rest run: the archives unpack,
# every binary finds its libraries, the sources match, the wheels join and
# pass their checksums, and they install (with PYTHON a Python 3.12 with
# PyTorch: bench/gpu/check_peers.sh makes one) or resolve for Python 3.12.
# Then it checks what each call left in OUT: at most 8 files of 16 MiB,
# plain names, at most 2 folders down. Exit status 1 on any problem.
set -euo pipefail
cd "$(dirname "$0")/../.."

if [ "${1:-}" != "--reuse" ]; then
  bench/gpu/build.sh
fi
python3 bench/gpu/plan.py --check

status=0
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
rm -rf /tmp/xent-gpu-wheel-parts /tmp/xent-gpu
mapfile -t calls < <(python3 - << 'EOF'
import json, sys
sys.path.insert(0, "bench/gpu")
import plan
for command, carry in plan.calls():
    print(json.dumps([command, carry]))
EOF
)
n=0
for call in "${calls[@]}"; do
  n=$((n + 1))
  command=$(python3 -c 'import json, sys; print(json.loads(sys.argv[1])[0])' "$call")
  mapfile -t carry < <(python3 -c 'import json, sys; print("\n".join(json.loads(sys.argv[1])[1]))' "$call")
  # What travels: the tree git does not ignore, and the carried paths.
  tree=$work/tree$n out=$work/out$n
  mkdir -p "$tree" "$out"
  git ls-files -z --cached --others --exclude-standard | xargs -0 cp --parents -t "$tree" 2> /dev/null || true
  for c in "${carry[@]}"; do
    cp -r --parents "$c" "$tree"/
  done
  echo "=== call $n: $command (carries ${carry[*]})"
  start=$SECONDS
  set +e
  (cd "$tree" && OUT=$out XENT_GPU_RUN_NO_GPU=1 timeout 600 $command)
  rc=$?
  set -e
  echo "=== call $n: exit status $rc in $((SECONDS - start)) s"
  [ "$rc" = 0 ] || { echo "DRY RUN PROBLEM: call $n ($command) exited $rc"; status=1; }
  # Every step either passed or was skipped for want of a GPU.
  if grep -h '"verdict": "\(FAILED\|TIMED OUT\)"' "$out"/*-verdicts.jsonl; then
    echo "DRY RUN PROBLEM: call $n has a failed step"
    status=1
  fi
  # What comes back from OUT.
  files=$(find "$out" -type f | wc -l)
  [ "$files" -le 8 ] || { echo "DRY RUN PROBLEM: call $n left $files files in OUT, over 8"; status=1; }
  while IFS= read -r f; do
    rel=${f#"$out"/}
    [ "$(stat -c %s "$f")" -le $((16 << 20)) ] || { echo "DRY RUN PROBLEM: $rel is over 16 MiB"; status=1; }
    [[ "$rel" =~ ^[A-Za-z0-9._-]+(/[A-Za-z0-9._-]+){0,2}$ ]] || { echo "DRY RUN PROBLEM: $rel: not a plain name 2 folders down at most"; status=1; }
  done < <(find "$out" -type f)
  [ "$(du -sb "$out" | cut -f1)" -le $((64 << 20)) ] || { echo "DRY RUN PROBLEM: call $n's OUT is over 64 MiB"; status=1; }
  echo "=== call $n: OUT holds $files files: $(cd "$out" && ls | tr '\n' ' ')"
done
if [ "$status" = 0 ]; then
  echo "DRY RUN PASSED: ${#calls[@]} calls fit the device machine's limits; the steps that need a GPU said SKIPPED"
else
  echo "DRY RUN FAILED"
fi
exit $status
