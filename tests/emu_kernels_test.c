/* Every generated variant of one rendering (CUDA: 32-lane warps, HIP: 64-lane
   wavefronts) run by the SIMT emulator through the public API (the cpu
   backend), against the CPU reference, on the shapes where kernels go wrong:
   fewer rows than a warp, widths that are no multiple of anything, rows
   longer than one block's tile, N = 1, C = 1, a 128K vocabulary, and batches
   where every row is ignored.
   usage: emu_kernels_test cuda|hip MANIFEST.tsv [KEY-PATTERN] */
#define _POSIX_C_SOURCE 200809L
#include <fnmatch.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "runtime/emu/emu.h"
#include "tests/testutil.h"

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: emu_kernels_test cuda|hip MANIFEST.tsv [KEY-PATTERN]\n");
    return 2;
  }
  const xent_backend_kind target = strcmp(argv[1], "hip") == 0 ? XENT_BACKEND_HIP : XENT_BACKEND_CUDA;
  xent_handle* h = NULL;
  if (xent_create(&h, XENT_BACKEND_CPU) != XENT_OK || xent_cpu_emulate(h, target) != XENT_OK) {
    printf("FAIL: %s\n", xent_last_error());
    return 1;
  }
  char** keys = NULL;
  const int count = tu_read_manifest(argv[2], &keys);
  if (count <= 0) {
    fprintf(stderr, "cannot read %s\n", argv[2]);
    return 1;
  }
  /* The 16K- and 65K-row cases take minutes under ASan; .ci/run's
     sanitizer pass skips them (the plain pass runs them). */
  const int skip_huge = getenv("XENT_EMU_SKIP_HUGE") != NULL;
  if (skip_huge) printf("XENT_EMU_SKIP_HUGE is set: the cases of 16K rows and more are not run\n");
  /* The sanitizer pass runs a third of the variants of each op and dtype
     with labels: every label type and every reduction once (i64 with a
     mean, i32 with none, soft labels with a sum), each with every case,
     and half the softmax family (tu_sampled); the plain pass runs them all. */
  const int sample = getenv("XENT_EMU_SAMPLE") != NULL;
  if (sample) printf("XENT_EMU_SAMPLE is set: of each op and dtype, the i64 mean, i32 none and prob sum variants, one softmax kind\n");
  /* Bazel's test sharding (tests/BUILD's shard_count): every other variant
     a shard, so that the shards of both renderings keep both of CI's cores
     busy to the end (one rendering's test ran alone for two minutes at the
     end of .ci/run's suite, and again of its ASan pass). */
  int shard, shards;
  if (tu_test_shard(&shard, &shards) != 0) return 2;
  char tag[16];
  snprintf(tag, sizeof tag, " [%s]", argv[1]);
  int failures = 0, runs = 0, fused = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int k = 0; k < count; ++k) {
    if (argc > 3 && fnmatch(argv[3], keys[k], 0) != 0) continue;
    if (k % shards != shard) continue;
    if (sample && !tu_sampled(keys[k])) continue;
    if (strncmp(keys[k], "ce_fwd_bwd_", 11) == 0 && strstr(keys[k], "_f64_") == NULL) fused++;
    /* Emulating 16K rows and more is slow: four variants run the cases of
       that many (more rows than blocks; the tile shapes' rows floor). The
       fused bf16 one covers the grid stride; the f16 sum (72000, past f16's
       range: inf, as PyTorch's) and the f32 rows (confident rows of losses
       near 1e-6, whose error is f32's absolute floor) hold the comparisons
       to what the first H200 run found; the bf16 backward is the tile
       shape's third op. */
    const int huge = !skip_huge && (strcmp(keys[k], "ce_fwd_bwd_bf16_i64_mean") == 0 ||
                                    strcmp(keys[k], "ce_fwd_f16_i64_sum") == 0 ||
                                    strcmp(keys[k], "ce_fwd_f32_i64_none") == 0 ||
                                    strcmp(keys[k], "ce_bwd_bf16_i32_none") == 0);
    failures += tu_check_key(h, keys[k], tag, 7919u * (unsigned)k, huge ? INT64_MAX : 16383, &runs);
    /* The kernels with an on-chip shape (the fused pass and the softmax
       forward, f64 aside) again with the rows on chip asked for: every
       option mix through the pipeline, CUDA's in clusters of 1 to 8,
       HIP's in a workgroup with the next row in registers. Under
       XENT_EMU_SKIP_HUGE (the sanitizer pass, which runs the pipeline's
       code, not its arithmetic, for errors) the bf16 variants' only: every
       option mix once, the registers-full cases below in f32 too. */
    const int chip = (strncmp(keys[k], "ce_fwd_bwd_", 11) == 0 || strncmp(keys[k], "sm_fwd_", 7) == 0) &&
                     strstr(keys[k], "_f64_") == NULL && (!skip_huge || strstr(keys[k], "_bf16_") != NULL);
    if (chip) {
      char chip_tag[48];
      snprintf(chip_tag, sizeof chip_tag, "%s [rows on chip]", tag);
      failures += tu_check_key_on_chip(h, keys[k], chip_tag, 7919u * (unsigned)k + 1u,
                                       target == XENT_BACKEND_CUDA ? 65536 : 4096, &runs);
    }
  }
  /* HIP's on-chip rows fill its registers: every one of the 4 vectors a
     thread of 512 holds of the next row (rows of 1875 vectors, 30000 bytes
     of the shape's 32 KiB), five rows walked in turn by the two blocks the
     emulated device holds. */
  if (target == XENT_BACKEND_HIP && shard == 0) {
    for (int k = 0; k < TU_ON_CHIP_KEYS; ++k) {
      if (argc > 3 && fnmatch(argv[3], tu_on_chip_keys[k], 0) != 0) continue;
      const int64_t C = strstr(tu_on_chip_keys[k], "_f32_") ? 7500 : 15000;
      failures += tu_check_key_on_chip_at(h, tu_on_chip_keys[k], 5, C, 31u * (unsigned)k, " [hip, registers full]");
      ++runs;
    }
    /* gpu_test's pipeline check as the HIP backend runs it (5 rows here). */
    if (argc == 3) failures += tu_check_on_chip_rows(h, " [hip pipeline]", 37u, 5, 12001, &runs);
  }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("%s rendering, shard %d of %d: %d calls in %.1f s\n", argv[1], shard + 1, shards, runs,
         (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
  /* The on-chip shape (a row in shared memory across a thread-block
     cluster) runs only where the spec's tune tables name it and a case's C
     falls in it: say which cluster sizes ran, and for a whole CUDA run (or
     a shard of one) with fused kernels in it, require the multi-block
     clusters (distributed shared memory) to have: every fused variant's
     CUDA tune but f64's has the on-chip shapes, and every one runs a case
     in them. */
  unsigned long long clusters[XENT_EMU_MAX_CLUSTER + 1];
  xent_emu_cluster_launch_counts(clusters);
  unsigned long long multi = 0;
  printf("cluster launches by blocks per cluster:");
  for (int k = 1; k <= XENT_EMU_MAX_CLUSTER; k *= 2) {
    printf(" %d: %llu", k, clusters[k]);
    if (k > 1) multi += clusters[k];
  }
  printf("\n");
  if (target == XENT_BACKEND_CUDA && argc == 3 && fused > 0 && multi == 0) {
    printf("FAIL: no launch ran the on-chip shape in a cluster of several blocks (specs/cross_entropy.lua's on_chip "
           "shapes and the cases in tests/cases.c no longer meet)\n");
    failures++;
  }
  /* The tile shape (short rows staged in shared memory, the spec's `tile`
     shapes): a whole run must have launched it, in either rendering. */
  static xent_emu_func_record recs[8192];
  const int nrecs = xent_emu_func_records(recs, 8192);
  unsigned long long tiles = 0;
  for (int i = 0; i < nrecs && i < 8192; ++i)
    if (strstr(recs[i].name, "<XENT_TILE>") != NULL) tiles += recs[i].launches;
  printf("tile-shape launches: %llu\n", tiles);
  if (argc == 3 && tiles == 0) {
    printf("FAIL: no launch ran the tile shape (specs/cross_entropy.lua's tile shapes and the cases in "
           "tests/cases.c no longer meet)\n");
    failures++;
  }
  printf("%d passed, %d failed\n", runs - failures, failures);
  tu_free_manifest(keys, count);
  xent_destroy(h);
  return failures ? 1 : 0;
}
