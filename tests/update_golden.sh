#!/bin/bash
# Rewrites tests/golden/ from the current templates: ./bazelw run //tests:update_golden
set -euo pipefail
xentgen="$PWD/$1"
cd "$BUILD_WORKSPACE_DIRECTORY"
# Keep in step with GOLDEN_VARIANTS in tests/gen_test.py.
variants="ce_fwd_bf16_i64_mean,ce_bwd_f32_i32_none,ce_fwd_bwd_f16_i64_sum,ce_fwd_bwd_bf16_prob_mean"
for target in cuda hip; do
  tmp=$(mktemp -d)
  "$xentgen" --spec specs/cross_entropy.lua --target "$target" --out "$tmp" --kernels "$variants"
  mkdir -p "tests/golden/$target"
  for f in "$tmp"/*.cu "$tmp"/*.hip; do
    [ -e "$f" ] && cp "$f" "tests/golden/$target/"
  done
  rm -rf "$tmp"
done
echo "tests/golden updated; review with git diff"
