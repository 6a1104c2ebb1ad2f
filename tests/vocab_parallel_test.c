/* Vocabulary-parallel cross entropy under the emulator: every dtype, label
   type, reduction and op, on the shared cases (tests/cases.c) and their
   option mixes, with the vocabulary split over 2 or 3 ranks (threads, each
   with its own handle) and checked against the unsplit CPU reference.
   usage: vocab_parallel_test cuda|hip [KEY-PATTERN] */
#define _POSIX_C_SOURCE 200809L
#include <fnmatch.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "tests/testutil.h"

/* Cases up to these sizes: the split adds nothing new past a few blocks'
   worth of rows (the 65K-row case only slows the emulator down), and the
   128K-class case keeps the long rows. */
enum { MAX_ELEMENTS = 300000, MAX_ROWS = 4096 };
/* With XENT_EMU_SKIP_HUGE (the sanitizer pass of .ci/run) the 20K- and
   128K-class cases are left to the plain pass: their rows take the same
   block-per-row path as C = 5003. (Under ASan they took about 80 s of this
   test's ten minutes; the rest is per launch and per fiber, not per
   element.) */
enum { MAX_ELEMENTS_SKIP_HUGE = 40000 };

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: vocab_parallel_test cuda|hip [KEY-PATTERN]\n");
    return 2;
  }
  const xent_backend_kind target = strcmp(argv[1], "hip") == 0 ? XENT_BACKEND_HIP : XENT_BACKEND_CUDA;
  static const char* const ops[] = {"fwd", "bwd", "fwd_bwd"};
  static const char* const dtypes[] = {"f32", "f16", "bf16", "f64"};
  static const char* const labels[] = {"i32", "i64", "prob"};
  static const char* const reductions[] = {"none", "sum", "mean"};
  const int skip_huge = getenv("XENT_EMU_SKIP_HUGE") != NULL;
  const int sample = getenv("XENT_EMU_SAMPLE") != NULL;
  const int64_t max_elements = skip_huge ? MAX_ELEMENTS_SKIP_HUGE : MAX_ELEMENTS;
  /* Bazel's test sharding (tests/BUILD's shard_count): every other variant
     a shard, so that the tail of a test run keeps both of CI's cores busy. */
  int shard, shards;
  if (tu_test_shard(&shard, &shards) != 0) return 2;
  int failures = 0, runs = 0, variant = 0;
  struct timespec t0, t1;
  clock_gettime(CLOCK_MONOTONIC, &t0);
  for (int o = 0; o < 3; ++o)
    for (int dt = 0; dt < 4; ++dt)
      for (int l = 0; l < 3; ++l)
        for (int r = 0; r < 3; ++r, ++variant) {
          char key[96];
          snprintf(key, sizeof key, "ce_%s_%s_%s_%s", ops[o], dtypes[dt], labels[l], reductions[r]);
          if (argc > 2 && fnmatch(argv[2], key, 0) != 0) continue;
          if (variant % shards != shard) continue;
          /* XENT_EMU_SAMPLE (the sanitizer pass): tu_sampled's variants;
             with the halving below, each case still runs for one of them. */
          if (sample && !tu_sampled(key)) continue;
          for (int c = 0; c < tu_ncases; ++c) {
            const tu_case* tc = &tu_cases[c];
            if (tc->rows * tc->classes > max_elements || tc->rows > MAX_ROWS) continue;
            /* Under XENT_EMU_SKIP_HUGE, each variant takes every other case
               (alternating by variant pair), so every variant and every case
               still runs, with 2 and 3 ranks: the ASan pass's longest test
               (ten minutes, mostly per launch and per fiber) halves. */
            if (skip_huge && (c + variant / 2) % 2) continue;
            xent_ce_desc d;
            xent_op op;
            const int flags = tu_case_setup(tc, key, &op, &d);
            if (flags == TU_NOT_APPLICABLE) continue;
            if (flags == TU_NOT_A_KEY) {
              printf("FAIL %s: not a key\n", key);
              return 1;
            }
            /* 3 ranks (one holding a single class) or 2, alternately. */
            int ranks = (c + variant) % 2 ? 2 : 3;
            if (ranks > d.classes) ranks = (int)d.classes;
            char name[256];
            snprintf(name, sizeof name, "%s [%s] N=%lld C=%lld inner=%lld mix=%d ranks=%d", key, argv[1],
                     (long long)d.rows, (long long)d.classes, (long long)d.inner, tc->mix, ranks);
            failures += tu_check_vocab_parallel(XENT_BACKEND_CPU, target, op, &d, 104729u * (unsigned)variant + (unsigned)c,
                                                flags, ranks, name);
            ++runs;
            fflush(stdout);
          }
        }
  clock_gettime(CLOCK_MONOTONIC, &t1);
  printf("%s rendering, shard %d of %d: %d vocabulary-parallel calls in %.1f s\n", argv[1], shard + 1, shards, runs,
         (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec));
  printf("%d passed, %d failed\n", runs - failures, failures);
  return failures ? 1 : 0;
}
