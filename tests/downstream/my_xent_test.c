/* The downstream library (my_losses.lua) on the cpu backend, both
   renderings: it holds exactly the spec's variants, its calls match a
   float64 oracle written here, and a call outside the spec is refused.
   Prints "N passed, M failed". */
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <xent.h>

static int failures = 0, passes = 0;

static void expect(int ok, const char* what) {
  if (ok) {
    ++passes;
  } else {
    ++failures;
    printf("FAIL: %s\n", what);
  }
}

/* The variants of my_losses.lua: op x dtype x z-loss (label i64, mean),
   each without the temperature, the per-token outputs and the token weights it
   does not name. */
static const char* const expected_keys[] = {
    "ce_bwd_bf16_i64_mean_nozloss_notemp_nostats_notokw", "ce_bwd_bf16_i64_mean_zloss_notemp_nostats_notokw",
    "ce_bwd_f32_i64_mean_nozloss_notemp_nostats_notokw",  "ce_bwd_f32_i64_mean_zloss_notemp_nostats_notokw",
    "ce_fwd_bf16_i64_mean_nozloss_notemp_nostats_notokw", "ce_fwd_bf16_i64_mean_zloss_notemp_nostats_notokw",
    "ce_fwd_f32_i64_mean_nozloss_notemp_nostats_notokw",  "ce_fwd_f32_i64_mean_zloss_notemp_nostats_notokw",
};
enum { EXPECTED = sizeof expected_keys / sizeof expected_keys[0] };

static void check_kernels(xent_handle* h, const char* rendering) {
  char what[160];
  size_t count = 0;
  expect(xent_kernel_count(h, &count) == XENT_OK && count == EXPECTED, "the table has the spec's 8 kernels");
  for (size_t i = 0; i < count && i < EXPECTED; ++i) {
    const char* key = NULL;
    snprintf(what, sizeof what, "%s kernel %zu is %s", rendering, i, expected_keys[i]);
    expect(xent_kernel_key(h, i, &key) == XENT_OK && key && strcmp(key, expected_keys[i]) == 0, what);
  }
}

static float bf16_to_float(uint16_t b) {
  uint32_t u = (uint32_t)b << 16;
  float f;
  memcpy(&f, &u, 4);
  return f;
}

static uint16_t float_to_bf16(float f) { /* round to nearest even */
  uint32_t u;
  memcpy(&u, &f, 4);
  return (uint16_t)((u + 0x7FFFu + ((u >> 16) & 1u)) >> 16);
}

enum { ROWS = 37, CLASSES = 3001 };

/* One row's loss and d loss / d logit in float64, straight from the
   definition: loss = lse - x[y] + z * lse^2, mean over the rows. */
static double oracle(const double* x, int64_t y, double z, double* grad, double scale) {
  double m = -INFINITY, s = 0;
  for (int c = 0; c < CLASSES; ++c) m = x[c] > m ? x[c] : m;
  for (int c = 0; c < CLASSES; ++c) s += exp(x[c] - m);
  const double lse = m + log(s);
  for (int c = 0; c < CLASSES; ++c)
    grad[c] = scale * (exp(x[c] - lse) * (1 + 2 * z * lse) - (c == y ? 1.0 : 0.0));
  return lse - x[y] + z * lse * lse;
}

static void check_call(xent_handle* h, xent_dtype dtype, double z_loss, const char* rendering) {
  char what[200];
  const size_t n = (size_t)ROWS * CLASSES, size = dtype == XENT_F32 ? 4 : 2;
  double* x = malloc(n * sizeof *x);
  double* want_grad = malloc(n * sizeof *want_grad);
  unsigned char* logits = malloc(n * size);
  unsigned char* grad = malloc(n * size);
  int64_t labels[ROWS];
  float lse[ROWS];
  uint32_t seed = 12345u;
  for (size_t i = 0; i < n; ++i) {
    seed = seed * 1664525u + 1013904223u;
    const float v = (float)((seed >> 8) * (1.0 / 16777216.0) * 16.0 - 8.0);
    if (dtype == XENT_F32) {
      memcpy(logits + 4 * i, &v, 4);
      x[i] = v;
    } else {
      const uint16_t b = float_to_bf16(v);
      memcpy(logits + 2 * i, &b, 2);
      x[i] = bf16_to_float(b);
    }
  }
  for (int r = 0; r < ROWS; ++r) labels[r] = (r * 7919) % CLASSES;
  double want = 0;
  for (int r = 0; r < ROWS; ++r)
    want += oracle(x + (size_t)r * CLASSES, labels[r], z_loss, want_grad + (size_t)r * CLASSES, 1.0 / ROWS);
  want /= ROWS;

  xent_ce_desc d;
  xent_ce_desc_init(&d, ROWS, CLASSES, dtype, XENT_I64, XENT_REDUCTION_MEAN);
  d.z_loss = z_loss;
  d.loss_dtype = XENT_F32; /* the mean in f32 whatever the logits */
  size_t ws_bytes = 0;
  xent_ce_workspace_size(h, &d, XENT_OP_FORWARD, &ws_bytes);
  size_t bwd_bytes = 0;
  xent_ce_workspace_size(h, &d, XENT_OP_BACKWARD, &bwd_bytes);
  if (bwd_bytes > ws_bytes) ws_bytes = bwd_bytes;
  void* ws = malloc(ws_bytes ? ws_bytes : 1);
  float loss = 0;
  xent_status s = xent_ce_forward(h, &d, logits, labels, NULL, &loss, lse, ws, ws_bytes, NULL);
  snprintf(what, sizeof what, "%s %s z_loss %g: forward runs (%s)", rendering, dtype == XENT_F32 ? "f32" : "bf16",
           z_loss, s == XENT_OK ? "ok" : xent_last_error());
  expect(s == XENT_OK, what);
  s = xent_ce_backward(h, &d, logits, labels, NULL, lse, NULL, grad, ws, ws_bytes, NULL);
  snprintf(what, sizeof what, "%s %s z_loss %g: backward runs (%s)", rendering, dtype == XENT_F32 ? "f32" : "bf16",
           z_loss, s == XENT_OK ? "ok" : xent_last_error());
  expect(s == XENT_OK, what);

  /* Tolerances: the f32 loss sums 3001 exps per row in f32 (relative error
     ~1e-6 of lse ~ 10); a bf16 gradient element is rounded once to 8 bits
     of mantissa (2^-9 relative) on top of f32 arithmetic. */
  snprintf(what, sizeof what, "%s %s z_loss %g: loss %.7f vs float64 %.7f", rendering,
           dtype == XENT_F32 ? "f32" : "bf16", z_loss, loss, want);
  expect(fabs(loss - want) <= 1e-5 * fabs(want) + 1e-6, what);
  double worst = 0;
  for (size_t i = 0; i < n; ++i) {
    float g;
    if (dtype == XENT_F32) {
      memcpy(&g, grad + 4 * i, 4);
    } else {
      uint16_t b;
      memcpy(&b, grad + 2 * i, 2);
      g = bf16_to_float(b);
    }
    const double tol = (dtype == XENT_F32 ? 1e-5 : 4e-3) * fabs(want_grad[i]) + 1e-9;
    const double excess = fabs(g - want_grad[i]) / tol;
    worst = excess > worst ? excess : worst;
  }
  snprintf(what, sizeof what, "%s %s z_loss %g: gradient within tolerance (worst %.2f of it)", rendering,
           dtype == XENT_F32 ? "f32" : "bf16", z_loss, worst);
  expect(worst <= 1, what);
  free(x);
  free(want_grad);
  free(logits);
  free(grad);
  free(ws);
}

/* f16 logits and int32 labels are not in my_losses.lua. */
static void check_refused(xent_handle* h, const char* rendering) {
  char what[200];
  xent_ce_desc d;
  xent_ce_desc_init(&d, 4, 100, XENT_F16, XENT_I64, XENT_REDUCTION_MEAN);
  uint16_t logits[400] = {0};
  int64_t labels[4] = {0, 1, 2, 3};
  uint16_t loss = 0;
  float lse[4];
  static unsigned char ws[1 << 16];
  xent_status s = xent_ce_forward(h, &d, logits, labels, NULL, &loss, lse, ws, sizeof ws, NULL);
  snprintf(what, sizeof what, "%s: an f16 call is refused as not generated (%s)", rendering, xent_last_error());
  expect(s == XENT_ERROR_NOT_GENERATED && strstr(xent_last_error(), "ce_fwd_f16_i64_mean"), what);
  snprintf(what, sizeof what, "%s: the refusal names this library's spec, not xent's (%s)", rendering,
           xent_last_error());
  expect(strstr(xent_last_error(), "my_losses.lua") && !strstr(xent_last_error(), "specs/cross_entropy.lua"), what);

  /* An option my_losses.lua predates: a temperature is refused, naming the
     axis and the spec, and nothing is written. */
  float f32_logits[400] = {0}, f32_loss = -1;
  xent_ce_desc_init(&d, 4, 100, XENT_F32, XENT_I64, XENT_REDUCTION_MEAN);
  d.temperature = 2.0;
  s = xent_ce_forward(h, &d, f32_logits, labels, NULL, &f32_loss, lse, ws, sizeof ws, NULL);
  snprintf(what, sizeof what, "%s: a temperature is refused as not generated, naming the axis and spec (%s)",
           rendering, xent_last_error());
  expect(s == XENT_ERROR_NOT_GENERATED && strstr(xent_last_error(), "temperature: temp") &&
             strstr(xent_last_error(), "my_losses.lua") && f32_loss == -1,
         what);
  d.temperature = 1.0;
  /* And token weights, an axis newer still. */
  const float token_weight[4] = {1, 1, 0, 1};
  const xent_ce_tensors weighted = {.logits = f32_logits, .labels = labels, .loss = &f32_loss, .lse = lse,
                                    .token_weight = token_weight};
  s = xent_ce_run(h, &d, XENT_OP_FORWARD, &weighted, ws, sizeof ws, NULL);
  snprintf(what, sizeof what, "%s: token weights are refused as not generated, naming the axis and spec (%s)",
           rendering, xent_last_error());
  expect(s == XENT_ERROR_NOT_GENERATED && strstr(xent_last_error(), "token_weight: tokw") &&
             strstr(xent_last_error(), "my_losses.lua") && f32_loss == -1,
         what);
  s = xent_ce_forward(h, &d, f32_logits, labels, NULL, &f32_loss, lse, ws, sizeof ws, NULL);
  snprintf(what, sizeof what, "%s: the same call without it runs (%s)", rendering,
           s == XENT_OK ? "ok" : xent_last_error());
  expect(s == XENT_OK && fabs(f32_loss - log(100.0)) < 1e-5, what);
}

int main(void) {
  xent_handle* h = NULL;
  if (xent_create(&h, XENT_BACKEND_CPU) != XENT_OK) {
    printf("FAIL: xent_create: %s\n", xent_last_error());
    return 1;
  }
  const xent_backend_kind renderings[2] = {XENT_BACKEND_CUDA, XENT_BACKEND_HIP};
  for (int i = 0; i < 2; ++i) {
    const char* rendering = i == 0 ? "cuda (emulated)" : "hip (emulated)";
    expect(xent_cpu_emulate(h, renderings[i]) == XENT_OK, "xent_cpu_emulate");
    check_kernels(h, rendering);
    check_call(h, XENT_F32, 0.0, rendering);
    check_call(h, XENT_F32, 1e-3, rendering);
    check_call(h, XENT_BF16, 1e-3, rendering);
    check_refused(h, rendering);
  }
  xent_destroy(h);
  /* A GPU backend, where it was built in (--config=cuda / --config=rocm) and
     a device is present, holds the same variants. */
  const xent_backend_kind gpus[2] = {XENT_BACKEND_CUDA, XENT_BACKEND_HIP};
  for (int i = 0; i < 2; ++i) {
    xent_handle* g = NULL;
    if (xent_create(&g, gpus[i]) != XENT_OK) continue;
    check_kernels(g, xent_backend_name(gpus[i]));
    xent_destroy(g);
  }
  printf("%d passed, %d failed\n", passes, failures);
  return failures != 0;
}
