/* A property test of the C API on the cpu backend (its own code and both
   emulated renderings): random calls (op, dtype,
   label type, reduction, shape with any class axis, options, extra tensors),
   each made either well-formed, or with one fault planted: a pointer off its
   element's alignment, or an output over another buffer of the call.
     - A well-formed call matches the CPU reference (tu_check_call, which
       also reruns it in place and with a shifted gradient buffer).
     - A faulty call returns XENT_ERROR_INVALID_ARGUMENT naming the buffer
       (and, for an overlap, "overlaps"), and writes nothing: every output
       buffer keeps its bytes.
   The seed is fixed; XENT_PROPERTY_CALLS sets how many calls (default 400). */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "tests/testutil.h"

static uint64_t rng = 0x243F6A8885A308D3ull;
static uint64_t next(void) {
  rng ^= rng << 13;
  rng ^= rng >> 7;
  rng ^= rng << 17;
  return rng;
}
static int64_t pick(int64_t lo, int64_t hi) { return lo + (int64_t)(next() % (uint64_t)(hi - lo + 1)); }

enum { SLOTS = 13 };
static const char* const slot_names[SLOTS] = {"logits", "labels", "weights", "lse_in", "dloss", "grad_bias", "loss",
                                              "lse", "log_prob", "softmax", "grad", "grad_labels", "workspace"};
/* Slots the call writes (the outputs and the workspace). */
static int written(int slot) { return slot >= 6; }

/* A random descriptor the generated variants serve. */
static void random_desc(xent_ce_desc* d, xent_op* op) {
  static const xent_dtype dtypes[] = {XENT_F32, XENT_F16, XENT_BF16, XENT_F64};
  static const xent_label_type labels[] = {XENT_I32, XENT_I64, XENT_PROB};
  const int64_t inner = pick(0, 3) == 0 ? pick(2, 5) : 1;
  xent_ce_desc_init(d, pick(0, 12) * inner, pick(1, 300), dtypes[pick(0, 3)], labels[pick(0, 2)],
                    (xent_reduction)pick(0, 2));
  d->inner = inner;
  *op = (xent_op)pick(0, 2);
  if (pick(0, 1)) d->label_smoothing = 0.1 * (double)pick(1, 5);
  if (pick(0, 2) == 0) d->ignore_index = pick(0, 2) ? 0 : XENT_NO_IGNORE_INDEX;
  if (pick(0, 3) == 0) d->z_loss = 0.01;
  if (pick(0, 3) == 0) d->softcap = 5.0;
  if ((d->dtype == XENT_F16 || d->dtype == XENT_BF16) && pick(0, 3) == 0) d->loss_dtype = d->grad_dtype = XENT_F32;
}

/* Whether msg names buffer `name` as a word (" grad " or " grad" at the
   end, not "grad_bias"). */
static int names(const char* msg, const char* name) {
  const size_t n = strlen(name);
  for (const char* at = strstr(msg, name); at; at = strstr(at + 1, name)) {
    if (at > msg && at[-1] == ' ' && (at[n] == ' ' || at[n] == 0)) return 1;
  }
  return 0;
}

/* One faulty call: buffers of the right sizes in one arena, then one fault.
   Returns 1 on a failure. */
static int faulty_call(xent_handle* h, const xent_ce_desc* d, xent_op op, int n) {
  const int soft = d->label_type == XENT_PROB;
  const int forward = op != XENT_OP_BACKWARD, backward = op != XENT_OP_FORWARD;
  const size_t rows = (size_t)d->rows, elems = rows * (size_t)d->classes;
  const size_t eb = tu_dtype_bytes(d->dtype), ab = d->dtype == XENT_F64 ? 8 : 4;
  const size_t lb = tu_dtype_bytes(d->loss_dtype), gb = tu_dtype_bytes(d->grad_dtype);
  const size_t nloss = d->reduction == XENT_REDUCTION_NONE ? rows : 1;
  size_t ws_bytes = 0;
  if (xent_ce_workspace_size(h, d, op, &ws_bytes) != XENT_OK) return printf("FAIL call %d: %s\n", n, xent_last_error()), 1;
  const size_t label_b = soft ? eb : d->label_type == XENT_I32 ? 4 : 8;
  size_t bytes[SLOTS] = {elems * eb, (soft ? elems : rows) * label_b, (size_t)d->classes * ab, rows * ab, nloss * lb,
                         elems * gb, nloss * lb, rows * ab, elems * eb, elems * eb, elems * gb, elems * eb, ws_bytes};
  const size_t align[SLOTS] = {eb, label_b, ab, ab, lb, gb, lb, ab, eb, eb, gb, eb, 8};
  /* Which slots this call has (the others stay NULL). */
  int present[SLOTS] = {1, 1, (int)pick(0, 1), op == XENT_OP_BACKWARD, backward, backward && pick(0, 1), forward,
                        forward && pick(0, 1), forward && pick(0, 2) == 0, forward && pick(0, 2) == 0, backward,
                        backward && soft && pick(0, 1), 1};
  size_t off[SLOTS], total = 0;
  for (int i = 0; i < SLOTS; ++i) {
    off[i] = total;
    total += (bytes[i] + 64 + 15) / 16 * 16;
  }
  /* The fault: misalign a present slot whose element is wider than a byte, or
     point a present output into another present buffer. */
  int fault_slot = -1, other = -1, misalign = 0;
  for (int tries = 0; tries < 50 && fault_slot < 0; ++tries) {
    const int s = (int)pick(0, SLOTS - 1);
    if (!present[s] || bytes[s] == 0) continue;
    if (pick(0, 1) && align[s] > 1) {
      fault_slot = s;
      misalign = (int)pick(1, (int64_t)align[s] - 1);
    } else if (written(s)) {
      const int o = (int)pick(0, SLOTS - 1);
      if (o == s || !present[o] || bytes[o] == 0) continue;
      if ((s == 10 && o == 0) && op == XENT_OP_FORWARD_BACKWARD) continue; /* grad over logits may be in place */
      fault_slot = s;
      other = o;
    }
  }
  if (fault_slot < 0) return 0;
  unsigned char* arena = malloc(total + 64);
  unsigned char* base = (unsigned char*)(((uintptr_t)arena + 15) & ~(uintptr_t)15);
  for (size_t i = 0; i < total; ++i) base[i] = (unsigned char)(i * 131 + 7);
  void* p[SLOTS];
  for (int i = 0; i < SLOTS; ++i) p[i] = present[i] ? base + off[i] : NULL;
  if (misalign) p[fault_slot] = (unsigned char*)p[fault_slot] + misalign;
  /* Inside the other buffer, at an aligned offset of its element. */
  if (other >= 0) p[fault_slot] = base + off[other] + (bytes[other] > 16 ? 8 : 0) / align[fault_slot] * align[fault_slot];
  unsigned char* before = malloc(total);
  memcpy(before, base, total);
  xent_ce_tensors t = {.logits = p[0], .labels = p[1], .weights = p[2], .lse_in = p[3], .dloss = p[4],
                       .grad_bias = p[5], .loss = p[6], .lse = p[7], .log_prob = p[8], .softmax = p[9], .grad = p[10],
                       .grad_labels = p[11]};
  const xent_status s = xent_ce_run(h, d, op, &t, p[12], ws_bytes, NULL);
  int failed = 0;
  const char* msg = xent_last_error();
  if (s != XENT_ERROR_INVALID_ARGUMENT || !names(msg, slot_names[fault_slot]) ||
      (other >= 0 && !strstr(msg, "overlaps")) || (misalign && !strstr(msg, "is not aligned"))) {
    printf("FAIL call %d (op %d, %s%s%s): status %s, message '%s'\n", n, (int)op, slot_names[fault_slot],
           misalign ? " misaligned" : " over ", other >= 0 ? slot_names[other] : "", xent_status_string(s), msg);
    failed = 1;
  } else if (memcmp(before, base, total) != 0) {
    printf("FAIL call %d: refused, but wrote to its buffers\n", n);
    failed = 1;
  }
  free(before);
  free(arena);
  return failed;
}

int main(void) {
  const char* env = getenv("XENT_PROPERTY_CALLS");
  const int calls = env ? atoi(env) : 400;
  xent_handle* h = NULL;
  if (xent_create(&h, XENT_BACKEND_CPU) != XENT_OK) return printf("FAIL: %s\n", xent_last_error()), 1;
  int failures = 0, good = 0, bad = 0;
  for (int n = 0; n < calls; ++n) {
    xent_ce_desc d;
    xent_op op;
    random_desc(&d, &op);
    /* The cpu backend's own code, or either rendering under the emulator. */
    const int64_t runs = pick(0, 2);
    xent_cpu_emulate(h, runs == 0 ? XENT_BACKEND_CPU : runs == 1 ? XENT_BACKEND_HIP : XENT_BACKEND_CUDA);
    if (pick(0, 1)) {
      char name[96];
      snprintf(name, sizeof name, "call %d (op %d dtype %d label %d red %d N=%lld C=%lld inner=%lld)", n, (int)op,
               (int)d.dtype, (int)d.label_type, (int)d.reduction, (long long)d.rows, (long long)d.classes,
               (long long)d.inner);
      const int flags = (pick(0, 1) ? TU_WEIGHTED : 0) | (pick(0, 1) ? TU_EXTRAS : 0) |
                        (d.label_type != XENT_PROB && pick(0, 3) == 0 ? TU_BAD_LABELS : 0);
      failures += tu_check_call(h, op, &d, (uint64_t)n, flags, name);
      good++;
    } else {
      failures += faulty_call(h, &d, op, n);
      bad++;
    }
  }
  xent_destroy(h);
  printf("%d random calls: %d well-formed against the reference, %d with a planted fault; %d failures\n", calls, good,
         bad, failures);
  return failures != 0;
}
