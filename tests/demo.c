/* ./bazelw run //:demo          (the cpu backend; no GPU kernel is built)
   ./bazelw run --config=cuda //:demo   (the CUDA plugin too, used where there is a GPU)
   A cross-entropy forward and backward on the best backend present (a CUDA
   GPU if there is one and its plugin was built, else the CPU), checked
   against the CPU reference. --plugin-dir=DIR: where the GPU plugins are
   (Bazel's run gives the runfiles' runtime/), unless XENT_PLUGIN_PATH says. */
#define _POSIX_C_SOURCE 200809L
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (strncmp(argv[i], "--plugin-dir=", 13) == 0) setenv("XENT_PLUGIN_PATH", argv[i] + 13, 0);
  }
  xent_handle* h = NULL;
  if (xent_create(&h, XENT_BACKEND_AUTO) != XENT_OK) {
    fprintf(stderr, "demo: %s\n", xent_last_error());
    return 1;
  }
  const xent_backend_kind kind = xent_handle_backend(h);
  printf("backend: %s\n", xent_backend_name(kind));

  /* 64 rows of a 32000-token vocabulary, bf16 logits, int64 labels, mean. */
  xent_ce_desc d;
  xent_ce_desc_init(&d, 64, 32000, XENT_BF16, XENT_I64, XENT_REDUCTION_MEAN);
  d.label_smoothing = 0.1;
  tu_inputs in;
  tu_make_inputs(&d, 42, 4.0, 0, &in);
  const size_t logits_bytes = (size_t)(d.rows * d.classes) * 2;
  void* logits = tu_alloc(kind, logits_bytes);
  void* labels = tu_alloc(kind, (size_t)d.rows * 8);
  void* loss = tu_alloc(kind, 2);
  void* lse = tu_alloc(kind, (size_t)d.rows * 4);
  void* grad = tu_alloc(kind, logits_bytes);
  size_t ws_bytes = 0;
  xent_ce_workspace_size(h, &d, XENT_OP_FORWARD_BACKWARD, &ws_bytes);
  void* ws = tu_alloc(kind, ws_bytes);
  tu_to_device(kind, logits, in.logits, logits_bytes);
  tu_to_device(kind, labels, in.labels, (size_t)d.rows * 8);

  xent_status s = xent_ce_forward_backward(h, &d, logits, labels, NULL, NULL, loss, lse, grad, ws, ws_bytes, NULL);
  if (s != XENT_OK) {
    fprintf(stderr, "demo: %s: %s\n", xent_status_string(s), xent_last_error());
    return 1;
  }
  tu_sync(kind);
  unsigned short loss_bits = 0;
  tu_to_host(kind, &loss_bits, loss, 2);
  float loss_value = 0;
  {
    unsigned int u = (unsigned int)loss_bits << 16;
    __builtin_memcpy(&loss_value, &u, 4);
  }
  printf("loss (bf16, mean over %lld rows of %lld classes, label_smoothing 0.1): %.6f\n", (long long)d.rows,
         (long long)d.classes, loss_value);

  /* The same call, every output, against the CPU reference. */
  const int failed = tu_check_call(h, XENT_OP_FORWARD_BACKWARD, &d, 42, 0, "demo");
  printf("%s\n", failed ? "MISMATCH with the CPU reference" : "matches the CPU reference (loss, lse, gradient)");
  tu_free(kind, logits);
  tu_free(kind, labels);
  tu_free(kind, loss);
  tu_free(kind, lse);
  tu_free(kind, grad);
  tu_free(kind, ws);
  tu_free_inputs(&in);
  xent_destroy(h);
  return failed;
}
