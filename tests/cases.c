/* The cases every kernel test runs: shapes where kernels go wrong, crossed
   with option mixes. */
#include <stdio.h>
#include <string.h>

#include "tests/testutil.h"

/* {rows, classes, inner, mix}. mix 0: PyTorch defaults; 1: class weights,
   label_smoothing 0.1 and ignore_index 0; 2: every row ignored; 3: some
   labels out of range (NaN rows; ASan builds check nothing is read out of
   bounds; xent_check names the first); 4: z-loss 0.01 and a soft cap of 3
   on top of mix 1; 5: out-of-range labels counted as ignored; 6: mix 1
   plus the extra tensors (log_prob, softmax, grad_bias, grad_labels); 7:
   mix 6 with f32 loss and gradient (f16/bf16 keys only). inner > 1: the
   class axis is strided ([rows / inner, C, inner] logits). */
const tu_case tu_cases[] = {
    {3, 7, 1, 0},      /* fewer rows and classes than a warp */
    {5, 1003, 1, 1},   /* a width that is no multiple of a warp or a vector */
    {2, 5003, 1, 0},   /* longer than one block's tile (1024 threads x 4) */
    {1, 64, 1, 1},     /* N = 1 */
    {9, 1, 1, 0},      /* C = 1 */
    {9, 1, 1, 1},      /* C = 1 with smoothing and weights */
    {2, 131072, 1, 1}, /* a 128K vocabulary */
    {4, 100, 1, 2},    /* ignore_index on every row */
    {40, 33, 1, 0},    /* more rows than a warp */
    {6, 40, 1, 3},     /* labels outside [0, C) */
    {25, 2100, 1, 4},  /* z-loss and soft-capping; 32 threads a row (the cuda fused kernels), 64 (hip), 4+ tiles */
    {8, 50, 1, 5},     /* out-of-range labels ignored */
    {6, 300, 1, 6},    /* extra outputs and inputs */
    {6, 300, 1, 7},    /* f32 outputs from f16/bf16 logits */
    {1, 20000, 1, 6},  /* the extras over several batches of loads a thread (xent_row_walk_io's kCompact) */
    {3 * 37, 21, 37, 0},   /* [3, 21, 37]: class axis 1, segmentation-like */
    {2 * 300, 5, 300, 6},  /* more positions than a block of threads, with the extras */
    {2 * 3, 1003, 3, 4},   /* a long strided row with z-loss and the cap */
    /* inner a multiple of every vector (16 bytes): the strided 16-byte path
       (xent_column_walk), a step of classes and a partial one, z-loss and
       the cap, the extras, f32 outputs (stored one by one), and more rows
       than the emulator's 3 blocks (grid-striding, a part-filled tile) */
    {2 * 48, 37, 48, 0},
    {2 * 64, 1003, 64, 4},
    {3 * 16, 70, 16, 6},
    {3 * 40, 40, 40, 7},
    {8 * 136, 5, 136, 1},
    {65536 + 37, 3, 1, 0}, /* many rows of a thread each (one variant: slow) */
    /* The tile shapes' rows floor (16384): 8 and 32 threads a row (cuda),
       64 (hip), staged; the emulator runs them for a few variants (slow) */
    {16384 + 37, 70, 1, 1},
    {16384 + 37, 300, 1, 4},
    /* A short row the tile takes, with the outputs it does not stage (the
       extras, f32 outputs): those calls run the same shape from memory */
    {6, 12, 1, 6},
    {40, 40, 1, 7},
    /* The spec's launch shapes (tune), each with more tiles of rows than the
       emulator's 3 blocks, so that every shape grid-strides: */
    {500, 20, 1, 1},   /* 4 threads a row (cuda), 8 (hip) */
    {100, 300, 1, 4},  /* 8 threads a row (cuda), 64 (hip) */
    {4, 20000, 1, 1},  /* a block of 512 a row (cuda), 256 (hip) */
};
const int tu_ncases = (int)(sizeof tu_cases / sizeof tu_cases[0]);

int tu_case_setup(const tu_case* c, const char* key, xent_op* op, xent_ce_desc* d) {
  memset(d, 0, sizeof *d);
  d->rows = c->rows;
  d->classes = c->classes;
  d->inner = c->inner;
  if (tu_parse_key(key, op, d) != 0) return TU_NOT_A_KEY;
  const int mix = c->mix;
  /* Soft labels have no ignore_index and no label range. */
  if (d->label_type == XENT_PROB && (mix == 2 || mix == 3 || mix == 5)) return TU_NOT_APPLICABLE;
  if (mix == 7 && d->dtype != XENT_F16 && d->dtype != XENT_BF16) return TU_NOT_APPLICABLE;
  if (mix == 7) d->loss_dtype = d->grad_dtype = XENT_F32;
  if (mix == 1 || mix == 4 || mix >= 6) {
    d->label_smoothing = 0.1;
    d->ignore_index = 0;
  }
  if (mix == 4) {
    d->z_loss = 0.01;
    d->softcap = 3.0;
  }
  if (mix == 5) d->invalid_labels = XENT_INVALID_LABELS_IGNORE;
  if (mix == 2) d->all_ignored_zero = (int)(strlen(key) % 2); /* both policies, across keys */
  if (mix == 1 || mix == 4) return TU_WEIGHTED;
  if (mix >= 6) return TU_WEIGHTED | TU_EXTRAS;
  if (mix == 2) return TU_IGNORE_ALL;
  if (mix == 3 || mix == 5) return TU_BAD_LABELS;
  return 0;
}

const int64_t tu_softmax_shapes[][3] = {
    {3, 7, 1},       /* fewer rows and classes than a warp */
    {5, 1003, 1},    /* no multiple of a warp */
    {2, 5003, 1},    /* longer than one block's tile */
    {9, 1, 1},       /* one class */
    {2, 131072, 1},  /* a 128K axis */
    {3 * 37, 21, 37}, /* axis 1 of [3, 21, 37] */
    {2 * 300, 5, 300}, /* more positions than a block of threads */
    {2 * 3, 1003, 3}, /* a long strided axis */
    {2 * 48, 37, 48},  /* strided, 16-byte loads (xent_column_walk) */
    {2 * 64, 1003, 64}, /* the same, a long axis */
    {500, 20, 1},     /* several rows a warp, grid-striding (as in tu_cases) */
    {4, 20000, 1},    /* a block a row, grid-striding */
};
const int tu_softmax_nshapes = (int)(sizeof tu_softmax_shapes / sizeof tu_softmax_shapes[0]);

/* tu_check_key's cases of at most max_rows rows and max_classes classes,
   with contiguous_only the class axis last only. */
static int check_key_where(xent_handle* h, const char* key, const char* tag, unsigned seed, int64_t max_rows,
                           int64_t max_classes, int contiguous_only, int* runs) {
  int failures = 0;
  char name[256];
  /* The fused linear cross entropy's steps run inside xent_linear_ce_run,
     around GEMMs: //tests:linear_ce_vs_torch_test checks them, against
     PyTorch, through that call. */
  if (strncmp(key, "lce_", 4) == 0) return 0;
  if (strncmp(key, "sm_", 3) == 0) {
    for (int c = 0; c < tu_softmax_nshapes; ++c) {
      xent_softmax_desc d = {.rows = tu_softmax_shapes[c][0], .classes = tu_softmax_shapes[c][1],
                             .inner = tu_softmax_shapes[c][2]};
      if (d.rows > max_rows || d.classes > max_classes || (contiguous_only && d.inner > 1)) continue;
      xent_op op;
      if (tu_parse_softmax_key(key, &op, &d) != 0) {
        printf("FAIL %s: not a softmax key\n", key);
        return failures + 1;
      }
      snprintf(name, sizeof name, "%s%s N=%lld C=%lld inner=%lld", key, tag, (long long)d.rows, (long long)d.classes,
               (long long)d.inner);
      failures += tu_check_softmax(h, op, &d, seed + (unsigned)c, name);
      ++*runs;
    }
    return failures;
  }
  for (int c = 0; c < tu_ncases; ++c) {
    if (tu_cases[c].rows > max_rows || tu_cases[c].classes > max_classes) continue;
    if (contiguous_only && tu_cases[c].inner > 1) continue;
    xent_ce_desc d;
    xent_op op;
    const int flags = tu_case_setup(&tu_cases[c], key, &op, &d);
    if (flags == TU_NOT_A_KEY) {
      printf("FAIL %s: not a cross_entropy key\n", key);
      return failures + 1;
    }
    if (flags == TU_NOT_APPLICABLE) continue;
    snprintf(name, sizeof name, "%s%s N=%lld C=%lld inner=%lld mix=%d", key, tag, (long long)d.rows,
             (long long)d.classes, (long long)d.inner, tu_cases[c].mix);
    failures += tu_check_call(h, op, &d, seed + (unsigned)c, flags, name);
    ++*runs;
  }
  return failures;
}

int tu_check_key(xent_handle* h, const char* key, const char* tag, unsigned seed, int64_t max_rows, int* runs) {
  return check_key_where(h, key, tag, seed, max_rows, INT64_MAX, 0, runs);
}

int tu_check_key_on_chip(xent_handle* h, const char* key, const char* tag, unsigned seed, int64_t max_classes,
                         int* runs) {
  if (xent_set_row_shape(h, XENT_ROW_SHAPE_ON_CHIP, 0) != XENT_OK) {
    printf("FAIL %s: xent_set_row_shape(XENT_ROW_SHAPE_ON_CHIP, 0): %s\n", key, xent_last_error());
    return 1;
  }
  /* At most 128 rows: 100 already walk 33 rows a block through the
     pipeline (the emulator's 3 blocks); the launch shapes' 500-row case
     added nothing to that and took half of these runs' time. */
  const int failures = check_key_where(h, key, tag, seed, 128, max_classes, 1, runs);
  xent_set_row_shape(h, 0, 0);
  return failures;
}

int tu_check_key_at(xent_handle* h, const char* key, int64_t rows, int64_t C, unsigned seed, const char* tag) {
  char name[200];
  snprintf(name, sizeof name, "%s%s N=%lld C=%lld", key, tag, (long long)rows, (long long)C);
  xent_op op;
  if (strncmp(key, "sm_", 3) == 0) {
    xent_softmax_desc d = {.rows = rows, .classes = C, .inner = 1};
    if (tu_parse_softmax_key(key, &op, &d) != 0) {
      printf("FAIL %s: not a softmax key\n", key);
      return 1;
    }
    return tu_check_softmax(h, op, &d, seed, name);
  }
  const tu_case c = {rows, C, 1, 0};
  xent_ce_desc d;
  if (tu_case_setup(&c, key, &op, &d) == TU_NOT_A_KEY) {
    printf("FAIL %s: not a cross_entropy key\n", key);
    return 1;
  }
  return tu_check_call(h, op, &d, seed, 0, name);
}

int tu_check_key_on_chip_at(xent_handle* h, const char* key, int64_t rows, int64_t C, unsigned seed, const char* tag) {
  if (xent_set_row_shape(h, XENT_ROW_SHAPE_ON_CHIP, 0) != XENT_OK) {
    printf("FAIL %s: xent_set_row_shape(XENT_ROW_SHAPE_ON_CHIP, 0): %s\n", key, xent_last_error());
    return 1;
  }
  const int failures = tu_check_key_at(h, key, rows, C, seed, tag);
  xent_set_row_shape(h, 0, 0);
  return failures;
}

const char* const tu_on_chip_keys[TU_ON_CHIP_KEYS] = {"ce_fwd_bwd_bf16_i64_mean", "ce_fwd_bwd_f32_i64_mean",
                                                      "sm_fwd_bf16_softmax", "sm_fwd_f32_softmax"};
const int64_t tu_on_chip_boundary[2] = {24576, 49152};

int tu_check_on_chip_boundary(xent_handle* h, const char* tag, unsigned seed, int* runs) {
  int failures = 0;
  for (int k = 0; k < TU_ON_CHIP_KEYS; ++k) {
    for (int c = 0; c < 2; ++c) {
      failures += tu_check_key_at(h, tu_on_chip_keys[k], 2, tu_on_chip_boundary[c], seed + (unsigned)(2 * k + c), tag);
      ++*runs;
    }
  }
  return failures;
}

int tu_check_on_chip_rows(xent_handle* h, const char* tag, unsigned seed, int64_t max_rows, int64_t C, int* runs) {
  int failures = 0;
  const int64_t table_rows = max_rows < 500 ? max_rows : 500, asked_rows = max_rows < 2048 ? max_rows : 2048;
  for (int k = 0; k < TU_ON_CHIP_KEYS; ++k) {
    failures += tu_check_key_at(h, tu_on_chip_keys[k], table_rows, C, seed + (unsigned)k, tag);
    ++*runs;
  }
  char asked[160];
  snprintf(asked, sizeof asked, "%s [the row on chip, asked for]", tag);
  failures += tu_check_key_on_chip_at(h, tu_on_chip_keys[0], asked_rows, C, seed + 100u, asked);
  ++*runs;
  return failures;
}
