/* Every generated CUDA variant (manifest.tsv) on a real GPU against the CPU
   reference, on several shapes and option mixes. Without a CUDA device it
   prints "SKIPPED: ..." and exits 0; ./bazelw reports it as skipped. */
#include <stdio.h>
#include <stdlib.h>

#include "tests/testutil.h"

int main(int argc, char** argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: gpu_test MANIFEST.tsv\n");
    return 2;
  }
  xent_handle* h = NULL;
  if (xent_create(&h, XENT_BACKEND_CUDA) != XENT_OK) {
    printf("SKIPPED: no CUDA device: %s\n", xent_last_error());
    return 0;
  }
  char** keys = NULL;
  const int count = tu_read_manifest(argv[1], &keys);
  if (count <= 0) {
    fprintf(stderr, "cannot read %s\n", argv[1]);
    return 1;
  }
  /* rows x classes: below a warp, not a multiple of anything, more than one
     block's worth of columns, one row, one class, a 128K vocabulary. */
  static const int64_t shapes[][2] = {{7, 5}, {33, 1000}, {3, 5003}, {1, 4096}, {17, 1}, {2, 131072}, {300, 64}};
  int failures = 0, runs = 0;
  for (int k = 0; k < count; ++k) {
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
      for (int mix = 0; mix < 3; ++mix) {
        xent_ce_desc d;
        xent_op op;
        d.rows = shapes[s][0];
        d.classes = shapes[s][1];
        if (tu_parse_key(keys[k], &op, &d) != 0) {
          printf("FAIL %s: not a cross_entropy key\n", keys[k]);
          failures++;
          break;
        }
        /* mix 0: PyTorch defaults; 1: weights + smoothing + ignore_index 0;
           2: every row ignored (mean -> NaN, or 0 when asked). */
        if (mix == 1) {
          d.label_smoothing = 0.1;
          d.ignore_index = 0;
        }
        if (mix == 2) d.all_ignored_zero = (int)(s % 2);
        char name[256];
        snprintf(name, sizeof name, "%s N=%lld C=%lld mix=%d", keys[k], (long long)d.rows, (long long)d.classes, mix);
        const int flags = mix == 1 ? TU_WEIGHTED : mix == 2 ? TU_IGNORE_ALL : TU_BAD_LABELS * (s == 1);
        failures += tu_check_call(h, op, &d, 1000u * (unsigned)k + s, flags, name);
        runs++;
      }
    }
  }
  printf("%d passed, %d failed\n", runs - failures, failures);
  tu_free_manifest(keys, count);
  xent_destroy(h);
  return failures ? 1 : 0;
}
