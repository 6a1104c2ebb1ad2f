/* Calls of more than 2^31 elements (issue 12, item 3), where 32-bit index
   arithmetic overflows: PyTorch's cross entropy has had such bugs for years
   (its issues 85786, 90793, 111484). On a CUDA device (bench/run_gpu.sh):
   - bf16 logits [16384, 131200] (2^31 + 2^24.. elements, 4.3 GB), class
     axis last: forward (per-row losses and their mean), backward from the
     saved lse, and the fused forward+backward in place;
   - bf16 logits [4, 1000, 540000] (2.16e9 elements), class axis 1 (the
     strided path), 2.16M rows, more than 2^31 / C: the same three calls.
   Each is checked against float64 computed here from the inputs' formula
   (no [N, C] copy on the host) on sampled rows: the first and the last,
   those whose elements straddle 2^31 and 2^32, and 64 others; the mean
   against the per-row losses summed in double.
   With --small (//tests:large_shapes_test in CI) the same code runs the
   same checks on small shapes on the cpu backend (the emulated CUDA
   rendering), so the checks themselves are tested where there is no GPU.
   Without a CUDA device and without --small it says SKIPPED. */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#ifdef XENT_TEST_CUDA
#include <cuda_runtime_api.h>
#endif

#include "runtime/numeric.h"
#include "tests/testutil.h"

typedef struct shape {
  int64_t outer, classes, inner; /* logits [outer, classes, inner]; rows = outer * inner */
} shape;

/* A well-mixed value of z alone (one splitmix64 step from state z), so any
   element's logit can be made again where it is checked. */
static uint64_t mix(uint64_t z) { return tu_next_u64(&z); }

/* The logit at flat element index e, already a bf16 value: uniform in
   [-4, 4). */
static uint16_t logit_bits(uint64_t e) {
  return xent_float_to_bf16((float)(tu_uniform(&e) * 8.0 - 4.0));
}

/* Row r's label: ignore_index (-100) on every 97th row, else a class. */
static int64_t label_of(int64_t r, int64_t classes) {
  return r % 97 == 5 ? -100 : (int64_t)(mix((uint64_t)r ^ 0x5bd1e995ull) % (uint64_t)classes);
}

static int64_t element(const shape* s, int64_t row, int64_t c) {
  const int64_t o = row / s->inner, i = row % s->inner;
  return (o * s->classes + c) * s->inner + i;
}

/* Row r in float64: its loss and (when grad != NULL) the gradient of a mean
   over `valid` rows. */
static double row_reference(const shape* s, int64_t r, int64_t valid, double* grad) {
  const int64_t C = s->classes, y = label_of(r, C);
  double m = -INFINITY, sum = 0;
  for (int64_t c = 0; c < C; ++c) m = fmax(m, xent_bf16_to_float(logit_bits((uint64_t)element(s, r, c))));
  for (int64_t c = 0; c < C; ++c) sum += exp(xent_bf16_to_float(logit_bits((uint64_t)element(s, r, c))) - m);
  const double lse = m + log(sum);
  if (grad) {
    for (int64_t c = 0; c < C; ++c) {
      const double p = exp(xent_bf16_to_float(logit_bits((uint64_t)element(s, r, c))) - lse);
      grad[c] = y < 0 ? 0.0 : (p - (c == y)) / (double)valid;
    }
  }
  return y < 0 ? 0.0 : lse - xent_bf16_to_float(logit_bits((uint64_t)element(s, r, y)));
}

/* The rows to check: first, last, those holding elements 2^31 - 1, 2^31,
   2^32 - 1 and 2^32 where they exist, and 64 spread over the rest. */
static int sample_rows(const shape* s, int64_t* rows) {
  const int64_t n = s->outer * s->inner, total = n * s->classes;
  int k = 0;
  rows[k++] = 0;
  rows[k++] = n - 1;
  const int64_t marks[] = {(1ll << 31) - 1, 1ll << 31, (1ll << 32) - 1, 1ll << 32};
  for (int i = 0; i < 4; ++i) {
    if (marks[i] >= total) continue;
    /* The row of flat element e: e = (o * C + c) * inner + i. */
    const int64_t e = marks[i], o = e / (s->classes * s->inner), in = e % s->inner;
    rows[k++] = o * s->inner + in;
  }
  for (int i = 0; i < 64; ++i) rows[k++] = (int64_t)(mix(0xabcdefull + (uint64_t)i) % (uint64_t)n);
  return k;
}

static void upload_logits(xent_backend_kind kind, const shape* s, void* dev) {
  const int64_t total = s->outer * s->classes * s->inner, block = 1 << 24;
  uint16_t* host = malloc((size_t)block * 2);
  for (int64_t e0 = 0; e0 < total; e0 += block) {
    const int64_t n = total - e0 < block ? total - e0 : block;
    for (int64_t j = 0; j < n; ++j) host[j] = logit_bits((uint64_t)(e0 + j));
    tu_to_device(kind, (uint16_t*)dev + e0, host, (size_t)n * 2);
  }
  free(host);
}

/* Row r of a [outer, C, inner] bf16 tensor on the device, as doubles. */
static void fetch_row(xent_backend_kind kind, const shape* s, const void* dev, int64_t r, double* out) {
  const int64_t C = s->classes;
  uint16_t* host = malloc((size_t)C * 2);
  const uint16_t* first = (const uint16_t*)dev + element(s, r, 0);
#ifdef XENT_TEST_CUDA
  if (kind == XENT_BACKEND_CUDA) {
    cudaMemcpy2D(host, 2, first, (size_t)s->inner * 2, 2, (size_t)C, cudaMemcpyDeviceToHost);
  } else
#endif
  {
    (void)kind;
    for (int64_t c = 0; c < C; ++c) host[c] = first[c * s->inner];
  }
  for (int64_t c = 0; c < C; ++c) out[c] = xent_bf16_to_float(host[c]);
  free(host);
}

static int fail(const char* name, const char* what) {
  printf("FAIL %s: %s: %s\n", name, what, xent_last_error());
  return 1;
}

/* Forward (none and mean), backward from the saved lse, fused in place. */
static int check_shape(xent_handle* h, xent_backend_kind kind, const shape* s, const char* name) {
  const int64_t n = s->outer * s->inner, C = s->classes;
  const int64_t dims[3] = {s->outer, C, s->inner}; /* [N, C] when inner is 1 */
  const size_t elements = (size_t)(n * C);
  xent_ce_desc d;
  xent_ce_desc_init_nd(&d, s->inner == 1 ? 2 : 3, dims, 1, XENT_BF16, XENT_I64, XENT_REDUCTION_NONE);
  d.loss_dtype = XENT_F32;
  printf("%s: %lld rows x %lld classes = %.3g elements (%.2f GB of bf16)\n", name, (long long)n, (long long)C,
         (double)elements, (double)elements * 2 / 1e9);
  fflush(stdout);

  void* logits = tu_alloc(kind, elements * 2);
  void* grad = tu_alloc(kind, elements * 2);
  int64_t* labels_host = malloc((size_t)n * 8);
  int64_t valid = 0;
  for (int64_t r = 0; r < n; ++r) valid += (labels_host[r] = label_of(r, C)) >= 0;
  void* labels = tu_upload(kind, labels_host, (size_t)n * 8);
  void* loss_rows = tu_alloc(kind, (size_t)n * 4);
  void* lse = tu_alloc(kind, (size_t)n * 4);
  void* loss_mean = tu_alloc(kind, 4);
  if (!logits || !grad || !labels || !loss_rows || !lse || !loss_mean) {
    printf("FAIL %s: cannot allocate %.2f GB on the device\n", name, (double)elements * 4 / 1e9);
    return 1;
  }
  upload_logits(kind, s, logits);
  size_t ws_bytes = 0;
  d.reduction = XENT_REDUCTION_MEAN;
  xent_ce_workspace_size(h, &d, XENT_OP_FORWARD_BACKWARD, &ws_bytes);
  void* ws = tu_alloc(kind, ws_bytes);
  int failed = 0;

  /* Forward: per-row losses and lse, then the mean. */
  d.reduction = XENT_REDUCTION_NONE;
  xent_ce_tensors t = {.logits = logits, .labels = labels, .loss = loss_rows, .lse = lse};
  if (xent_ce_run(h, &d, XENT_OP_FORWARD, &t, ws, ws_bytes, NULL) != XENT_OK) failed |= fail(name, "forward none");
  d.reduction = XENT_REDUCTION_MEAN;
  t.loss = loss_mean, t.lse = NULL;
  if (xent_ce_run(h, &d, XENT_OP_FORWARD, &t, ws, ws_bytes, NULL) != XENT_OK) failed |= fail(name, "forward mean");
  tu_sync(kind);
  float* losses = malloc((size_t)n * 4);
  float mean = 0;
  tu_to_host(kind, losses, loss_rows, (size_t)n * 4);
  tu_to_host(kind, &mean, loss_mean, 4);
  int64_t rows[80];
  const int nsample = sample_rows(s, rows);
  double* want_grad = malloc((size_t)C * sizeof(double));
  double* got_grad = malloc((size_t)C * sizeof(double));
  double worst_loss = 0;
  for (int k = 0; k < nsample; ++k) {
    const double want = row_reference(s, rows[k], valid, NULL);
    worst_loss = fmax(worst_loss, fabs(losses[rows[k]] - want) / (fabs(want) + 1e-3));
  }
  failed |= tu_report(name, "forward: per-row losses of the sampled rows", worst_loss, 1e-5);
  double sum = 0;
  for (int64_t r = 0; r < n; ++r) sum += losses[r];
  const double want_mean = sum / (double)valid;
  failed |= tu_report(name, "forward: the mean against the per-row losses", fabs(mean - want_mean) / want_mean, 1e-5);

  /* Backward from the saved lse, out of place; then fused in place. */
  for (int fused = 0; fused < 2; ++fused) {
    xent_ce_tensors b = {.logits = logits, .labels = labels};
    if (fused) {
      b.grad = (void*)logits; /* in place: the logits are gone after this */
      b.loss = loss_mean;
    } else {
      d.reduction = XENT_REDUCTION_MEAN;
      b.lse_in = lse;
      b.grad = grad;
    }
    const xent_op op = fused ? XENT_OP_FORWARD_BACKWARD : XENT_OP_BACKWARD;
    if (xent_ce_run(h, &d, op, &b, ws, ws_bytes, NULL) != XENT_OK) {
      failed |= fail(name, fused ? "fused in place" : "backward");
      continue;
    }
    tu_sync(kind);
    double worst = 0;
    for (int k = 0; k < nsample; ++k) {
      row_reference(s, rows[k], valid, want_grad);
      fetch_row(kind, s, b.grad, rows[k], got_grad);
      double scale = 0;
      for (int64_t c = 0; c < C; ++c) scale = fmax(scale, fabs(want_grad[c]));
      for (int64_t c = 0; c < C; ++c) worst = fmax(worst, fabs(got_grad[c] - want_grad[c]) / (scale + 1e-300));
    }
    failed |= tu_report(name, fused ? "fused in place: gradient of the sampled rows"
                                    : "backward: gradient of the sampled rows",
                        worst, tu_tolerance(XENT_BF16, C));
    if (fused) {
      float fused_mean = 0;
      tu_to_host(kind, &fused_mean, loss_mean, 4);
      failed |= tu_report(name, "fused in place: the mean", fabs(fused_mean - mean) / fabs(mean), 1e-6);
    }
  }
  if (xent_check(h) != XENT_OK) failed |= fail(name, "xent_check (no label is out of range)");
  if (!failed) printf("%s: %d sampled rows agree with float64 (forward, backward, fused in place)\n", name, nsample);
  free(losses), free(want_grad), free(got_grad), free(labels_host);
  tu_free(kind, logits), tu_free(kind, grad), tu_free(kind, labels), tu_free(kind, loss_rows);
  tu_free(kind, lse), tu_free(kind, loss_mean), tu_free(kind, ws);
  return failed;
}

int main(int argc, char** argv) {
  const int small = argc > 1 && strcmp(argv[1], "--small") == 0;
  xent_backend_kind kind = small ? XENT_BACKEND_CPU : XENT_BACKEND_CUDA;
  xent_handle* h = NULL;
  if (xent_create(&h, kind) != XENT_OK) {
    printf("SKIPPED: no CUDA device for the shapes past 2^31 elements: %s\n", xent_last_error());
    return 0;
  }
  if (small && xent_cpu_emulate(h, XENT_BACKEND_CUDA) != XENT_OK) return fail("setup", "xent_cpu_emulate");
  const shape contiguous = small ? (shape){37, 1003, 1} : (shape){16384, 131200, 1};
  const shape strided = small ? (shape){3, 50, 41} : (shape){4, 1000, 540000};
  int failed = check_shape(h, kind, &contiguous, small ? "contiguous (small)" : "contiguous [16384, 131200]");
  failed |= check_shape(h, kind, &strided, small ? "strided (small)" : "strided [4, 1000, 540000], class axis 1");
  xent_destroy(h);
  printf(failed ? "FAILED\n" : "OK\n");
  return failed ? 1 : 0;
}
