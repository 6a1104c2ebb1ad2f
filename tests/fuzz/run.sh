#!/usr/bin/env bash
# Fuzzes the spec loader and the template renderer (tests/fuzz/spec_fuzzer.c)
# under AddressSanitizer and UBSan with libFuzzer, for a bounded time, from
# the real specs (specs/, read as they are) and the hostile ones in
# tests/fuzz/corpus. .ci/run calls it; run it by hand for
# longer with a time in seconds:  tests/fuzz/run.sh 600
#
# The run is reproducible (a fixed seed); new inputs it finds go to a
# scratch corpus, so the repository's corpus changes only when someone
# copies an interesting one in. A finding stops the run with the input that
# triggered it (crash-*, leak-*, timeout-*) in the scratch directory.
set -euo pipefail
cd "$(dirname "$0")/../.."
seconds="${1:-60}"

clang=clang-14
if ! command -v "$clang" >/dev/null || ! ls /usr/lib/llvm-14/lib/clang/*/lib/linux/libclang_rt.fuzzer-x86_64.a >/dev/null 2>&1 ||
   [ ! -f /usr/include/lua5.4/lua.h ]; then
  sudo=""
  [ "$(id -u)" -eq 0 ] || sudo="sudo"
  $sudo apt-get update -q >&2
  DEBIAN_FRONTEND=noninteractive $sudo apt-get install -y -q --no-install-recommends clang-14 libclang-rt-14-dev liblua5.4-dev >&2
fi

work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT
cc -O1 -o "$work/embed" gen/embed.c
"$work/embed" "$work/lua_modules.c" dsl=gen/lua/dsl.lua template=gen/lua/template.lua context=gen/lua/context.lua \
  xentgen=gen/lua/xentgen.lua sandbox=gen/lua/sandbox.lua
sources=(gen/dispatch_emit.c gen/error.c gen/fileio.c gen/filter.c gen/lua_host.c gen/render.c gen/spec_limits.c
         gen/spec_load.c gen/variant.c "$work/lua_modules.c" tests/fuzz/spec_fuzzer.c)
"$clang" -std=c11 -g -O1 -fsanitize=fuzzer,address,undefined -fno-sanitize-recover=undefined -I. -I/usr/include/lua5.4 \
  -o "$work/spec_fuzzer" "${sources[@]}" -llua5.4 -lm -ldl

mkdir -p "$work/corpus" "$work/findings"
# -timeout: past the generator's own CPU-time limit (2 s in the harness, and
# a second's grace), so a slow input is reported as the limit's failure.
UBSAN_OPTIONS=print_stacktrace=1 "$work/spec_fuzzer" -seed=1 -max_total_time="$seconds" -timeout=20 -rss_limit_mb=3072 \
  -max_len=8192 -dict=tests/fuzz/spec.dict -artifact_prefix="$work/findings/" -print_final_stats=1 \
  "$work/corpus" specs tests/fuzz/corpus 2>&1 | tail -n 25 || {
  echo "spec fuzzing found a problem; the input is in:" >&2
  ls "$work/findings" >&2
  for f in "$work/findings"/*; do [ -f "$f" ] && { echo "--- $f" >&2; head -c 2000 "$f" >&2; echo >&2; }; done
  exit 1
}
