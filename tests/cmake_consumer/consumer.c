/* A consumer of an installed libxent (tests/cmake_vendor_test.sh): built
   once through find_package(xent) and once through pkg-config. It runs the
   two vendored variants (ce_fwd_f32_i64_mean, ce_bwd_f32_i64_mean) on the
   cpu backend against float64 arithmetic written here, and checks that the
   library holds exactly those. Prints "N passed, M failed". */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>
#include <xent.h>

enum { ROWS = 5, CLASSES = 300 };

int main(void) {
  int failures = 0;
  xent_handle* h = NULL;
  if (xent_create(&h, XENT_BACKEND_CPU) != XENT_OK) {
    printf("FAIL: xent_create: %s\n", xent_last_error());
    return 1;
  }
  size_t count = 0;
  const char *first = "", *second = "";
  xent_kernel_count(h, &count);
  if (count == 2) {
    xent_kernel_key(h, 0, &first);
    xent_kernel_key(h, 1, &second);
  }
  if (count != 2 || strcmp(first, "ce_bwd_f32_i64_mean") != 0 || strcmp(second, "ce_fwd_f32_i64_mean") != 0) {
    printf("FAIL: the library holds %zu kernels (%s, %s), not the 2 vendored\n", count, first, second);
    ++failures;
  }

  static float logits[ROWS * CLASSES], grad[ROWS * CLASSES];
  int64_t labels[ROWS];
  float lse[ROWS], loss = 0;
  for (int i = 0; i < ROWS * CLASSES; ++i) logits[i] = (float)sin(0.37 * i) * 6.0f;
  for (int r = 0; r < ROWS; ++r) labels[r] = (r * 61) % CLASSES;
  xent_ce_desc d;
  xent_ce_desc_init(&d, ROWS, CLASSES, XENT_F32, XENT_I64, XENT_REDUCTION_MEAN);
  d.label_smoothing = 0.1;
  static unsigned char ws[1 << 16];
  if (xent_ce_forward(h, &d, logits, labels, NULL, &loss, lse, ws, sizeof ws, NULL) != XENT_OK ||
      xent_ce_backward(h, &d, logits, labels, NULL, lse, NULL, grad, ws, sizeof ws, NULL) != XENT_OK) {
    printf("FAIL: %s\n", xent_last_error());
    return 1;
  }

  /* PyTorch's definition with label smoothing eps: (1 - eps) * (lse - x[y])
     + eps * mean over c of (lse - x[c]); mean over the rows. Tolerances:
     f32 sums of 300 terms, relative ~1e-6. */
  const double eps = 0.1;
  double want = 0, worst = 0;
  for (int r = 0; r < ROWS; ++r) {
    const float* x = logits + r * CLASSES;
    double m = -INFINITY, s = 0, sum_x = 0;
    for (int c = 0; c < CLASSES; ++c) m = fmax(m, x[c]);
    for (int c = 0; c < CLASSES; ++c) s += exp(x[c] - m), sum_x += x[c];
    const double l = m + log(s);
    want += ((1 - eps) * (l - x[labels[r]]) + eps * (l - sum_x / CLASSES)) / ROWS;
    for (int c = 0; c < CLASSES; ++c) {
      const double g = (exp(x[c] - l) - eps / CLASSES - (c == labels[r] ? 1 - eps : 0)) / ROWS;
      worst = fmax(worst, fabs(grad[r * CLASSES + c] - g) / (1e-5 * fabs(g) + 1e-8));
    }
  }
  if (fabs(loss - want) > 1e-5 * fabs(want)) {
    printf("FAIL: loss %.7f, float64 says %.7f\n", loss, want);
    ++failures;
  }
  if (worst > 1) {
    printf("FAIL: gradient off by %.2f of its tolerance\n", worst);
    ++failures;
  }
  xent_destroy(h);
  printf("%d passed, %d failed\n", 3 - failures, failures);
  return failures != 0;
}
