/* tu_check_softmax: one softmax-family call on a backend against the CPU
   reference, out of place and in place. */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/numeric.h"
#include "runtime/reference.h"
#include "tests/testutil.h"

int tu_parse_softmax_key(const char* key, xent_op* op, xent_softmax_desc* d) {
  char opname[8], dtype[8], kind[16];
  if (sscanf(key, "sm_%7[^_]_%7[^_]_%15s", opname, dtype, kind) != 3) return -1;
  if (strcmp(opname, "fwd") == 0) *op = XENT_OP_FORWARD;
  else if (strcmp(opname, "bwd") == 0) *op = XENT_OP_BACKWARD;
  else return -1;
  if (tu_parse_dtype(dtype, &d->dtype) != 0) return -1;
  if (strcmp(kind, "softmax") == 0) d->kind = XENT_SOFTMAX;
  else if (strcmp(kind, "log_softmax") == 0) d->kind = XENT_LOG_SOFTMAX;
  else return -1;
  return 0;
}

/* Uniform in [-1, 1). */
static double noise(uint64_t* state) { return 2 * tu_uniform(state) - 1; }

int tu_check_softmax(xent_handle* h, xent_op op, const xent_softmax_desc* d, uint64_t seed, const char* name) {
  const xent_backend_kind kind = xent_handle_backend(h);
  const int64_t n = d->rows * d->classes;
  const size_t bytes = (size_t)(n > 0 ? n : 1) * tu_dtype_bytes(d->dtype);
  void* in = malloc(bytes);   /* x (fwd) or y (bwd) */
  void* dy = malloc(bytes);
  double* want = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
  uint64_t state = seed;
  if (op == XENT_OP_FORWARD) {
    for (int64_t i = 0; i < n; ++i) xent_store(d->dtype, in, i, 5.0 * noise(&state));
    xent_ref_softmax_forward(d, in, want);
  } else {
    /* y: a real forward output (rounded to the dtype), dy random. */
    double* y = calloc((size_t)(n > 0 ? n : 1), sizeof(double));
    void* x = malloc(bytes);
    for (int64_t i = 0; i < n; ++i) xent_store(d->dtype, x, i, 5.0 * noise(&state));
    xent_ref_softmax_forward(d, x, y);
    for (int64_t i = 0; i < n; ++i) xent_store(d->dtype, in, i, y[i]);
    for (int64_t i = 0; i < n; ++i) xent_store(d->dtype, dy, i, noise(&state));
    xent_ref_softmax_backward(d, in, dy, want);
    free(x);
    free(y);
  }
  void* in_dev = tu_alloc(kind, bytes);
  void* dy_dev = tu_alloc(kind, bytes);
  void* out_dev = tu_alloc(kind, bytes);
  tu_to_device(kind, in_dev, in, bytes);
  tu_to_device(kind, dy_dev, dy, bytes);
  int failed = 0;
  void* got = malloc(bytes);
  for (int in_place = 0; in_place < 2 && !failed; ++in_place) {
    /* In place: y over x, or dx over dy. */
    void* out = in_place ? (op == XENT_OP_FORWARD ? in_dev : dy_dev) : out_dev;
    /* In place under the emulator: its global-memory race detector on. */
    const int was = tu_global_race_checks(kind, in_place);
    const xent_status s = op == XENT_OP_FORWARD ? xent_softmax_forward(h, d, in_dev, out, NULL)
                                                : xent_softmax_backward(h, d, in_dev, dy_dev, out, NULL);
    tu_sync(kind);
    tu_global_race_checks(kind, was);
    if (s != XENT_OK) {
      printf("FAIL %s: %s: %s\n", name, xent_status_string(s), xent_last_error());
      failed = 1;
      break;
    }
    tu_to_host(kind, got, out, bytes);
    double scale = 0;
    for (int64_t i = 0; i < n; ++i) scale = fmax(scale, fabs(want[i]));
    /* Softmax values are relative to 1 (the row sums to 1); log-softmax and
       the gradients relative to their largest entry. */
    const double tol = tu_tolerance(d->dtype, d->classes);
    const double atol = d->kind == XENT_SOFTMAX && op == XENT_OP_FORWARD ? 1.0 : scale + 1e-30;
    const double err = tu_max_error(d->dtype, got, want, n, atol);
    if (err > tol) {
      printf("FAIL %s%s: error %.3g > %.3g\n", name, in_place ? " (in place)" : "", err, tol);
      failed = 1;
    }
  }
  free(got);
  tu_free(kind, in_dev);
  tu_free(kind, dy_dev);
  tu_free(kind, out_dev);
  free(in);
  free(dy);
  free(want);
  return failed;
}
