#!/usr/bin/env bash
# What a device call brought back, into bench/results/ to commit as it came:
#
#   bench/gpu/collect.sh FILES_AT
#
# FILES_AT is the folder the device tool's reply names (files_at). The files
# go to bench/results/<date>-<device>/ (the device as the stage's log names
# it, e.g. 2026-11-25-NVIDIA-H100-80GB-HBM3), unchanged; a stage run again
# replaces its own files. Where that folder already holds a run of other
# archives (another commit, the same day and device), they go to
# <date>-<device>-<commit> instead, so that no run overwrites another's
# files. Prints each stage's verdict lines.
set -euo pipefail
cd "$(dirname "$0")/../.."

src=${1:?usage: bench/gpu/collect.sh FILES_AT}
log=$(find "$src" -maxdepth 3 -name '*.log' ! -name sanitizer.log | head -1)
[ -n "$log" ] || { echo "no stage log under $src" >&2; exit 1; }
device=$(sed -n 's/^# device: \([^,;]*\).*/\1/p' "$log" | head -1)
day=$(sed -n 's/^# stage [a-z]*, \([0-9-]*\)T.*/\1/p' "$log" | head -1)
slug=$(echo "$device" | tr -c 'A-Za-z0-9\n' '-' | tr -s '-' | sed 's/-$//')
# The commit of the archives a stage log (or logs) ran.
archives_commit() { { sed -n 's/^# archives built from commit \([0-9a-f]*\).*/\1/p' "$@" 2> /dev/null || true; } | head -1; }
commit=$(archives_commit "$log")
dest=bench/results/${day:-$(date -u +%Y-%m-%d)}-${slug:-unknown-device}
# The commit of the run already in $dest, if any (its stage logs say it;
# the first run's logs do not: another run too). An empty folder is free.
if [ -n "$(ls -A "$dest" 2> /dev/null)" ] && [ -n "$commit" ]; then
  theirs=$(archives_commit "$dest"/*.log)
  if [ -z "$theirs" ] || [ "$theirs" != "$commit" ]; then
    dest=$dest-${commit:0:7}
  fi
fi
mkdir -p "$dest"
find "$src" -type f -exec cp {} "$dest"/ \;
chmod u+w "$dest"/*
echo "copied into $dest: $(ls "$dest" | tr '\n' ' ')"
grep -h '^VERDICT' "$dest"/*.log 2> /dev/null || true
