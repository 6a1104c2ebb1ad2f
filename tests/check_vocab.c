/* tu_check_vocab_parallel: one call with the vocabulary split over ranks,
   each rank a thread with its own handle, joined by an in-process
   all-gather; the ranks' losses and the gradient put back together are
   checked against the CPU reference of the unsplit call. */
#define _POSIX_C_SOURCE 200809L
#include <math.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/numeric.h"
#include "runtime/reference.h"
#include "tests/testutil.h"

#define MAX_RANKS 8

/* The in-process collective: every rank publishes its part, waits for the
   others, and copies theirs into its own receive buffer. */
typedef struct group {
  pthread_barrier_t barrier;
  xent_backend_kind kind;
  const void* parts[MAX_RANKS];
} group;

typedef struct rank_ctx {
  group* g;
  int rank, ranks;
  int gathers; /* calls of all_gather made */
} rank_ctx;

static int thread_all_gather(void* ctx, const void* send, void* recv, size_t bytes, void* stream) {
  (void)stream; /* the tests run on the default stream */
  rank_ctx* r = ctx;
  if ((const char*)send != (const char*)recv + (size_t)r->rank * bytes) return 1; /* the documented in-place form */
  r->gathers++;
  tu_sync(r->g->kind);
  r->g->parts[r->rank] = send;
  pthread_barrier_wait(&r->g->barrier);
  for (int k = 0; k < r->ranks; ++k)
    if (k != r->rank) tu_copy(r->g->kind, (char*)recv + (size_t)k * bytes, r->g->parts[k], bytes);
  pthread_barrier_wait(&r->g->barrier);
  return 0;
}

/* One rank's call: its slice of the logits (and soft labels, grad_bias),
   the global labels, weights and dloss. */
typedef struct rank_call {
  xent_backend_kind kind, emulate;
  xent_op op;
  xent_ce_desc desc;
  xent_vocab_shard shard;
  rank_ctx ctx;
  xent_ce_tensors t;
  xent_status status, checked;
  char message[512], check_message[512];
} rank_call;

static void* run_rank(void* arg) {
  rank_call* rc = arg;
  xent_handle* h = NULL;
  rc->status = xent_create(&h, rc->kind);
  if (rc->status == XENT_OK && rc->kind == XENT_BACKEND_CPU) rc->status = xent_cpu_emulate(h, rc->emulate);
  size_t bytes = 0;
  void* ws = NULL;
  if (rc->status == XENT_OK) rc->status = xent_ce_workspace_size(h, &rc->desc, rc->op, &bytes);
  if (rc->status == XENT_OK) {
    ws = tu_alloc(rc->kind, bytes ? bytes : 1);
    rc->status = xent_ce_run(h, &rc->desc, rc->op, &rc->t, ws, bytes, NULL);
  }
  snprintf(rc->message, sizeof rc->message, "%s", xent_last_error());
  if (h) {
    tu_sync(rc->kind);
    rc->checked = xent_check(h);
    snprintf(rc->check_message, sizeof rc->check_message, "%s", xent_last_error());
    xent_destroy(h);
  }
  if (ws) tu_free(rc->kind, ws);
  return NULL;
}

/* Copies classes [off, off + Ck) of every row of a [rows, C] tensor (desc's
   layout) into or out of a [rows, Ck] one. */
static void slice(const xent_ce_desc* global, const xent_ce_desc* local, int64_t off, xent_dtype dtype,
                  const void* from_global, void* to_local) {
  const size_t b = tu_dtype_bytes(dtype);
  for (int64_t n = 0; n < global->rows; ++n)
    for (int64_t c = 0; c < local->classes; ++c)
      memcpy((char*)to_local + (size_t)xent_ref_index(local, n, c) * b,
             (const char*)from_global + (size_t)xent_ref_index(global, n, off + c) * b, b);
}

static void unslice(const xent_ce_desc* global, const xent_ce_desc* local, int64_t off, xent_dtype dtype,
                    const void* from_local, void* to_global) {
  const size_t b = tu_dtype_bytes(dtype);
  for (int64_t n = 0; n < global->rows; ++n)
    for (int64_t c = 0; c < local->classes; ++c)
      memcpy((char*)to_global + (size_t)xent_ref_index(global, n, off + c) * b,
             (const char*)from_local + (size_t)xent_ref_index(local, n, c) * b, b);
}

static double max_abs(const double* v, int64_t n) {
  double m = 0;
  for (int64_t i = 0; i < n; ++i) m = fmax(m, isnan(v[i]) ? 0 : fabs(v[i]));
  return m;
}

static int report(const char* name, const char* what, double err, double tol) {
  if (err <= tol) return 0;
  printf("FAIL %s: %s error %.3g > %.3g\n", name, what, err, tol);
  return 1;
}

static void* upload(xent_backend_kind kind, const void* host, size_t bytes) {
  void* p = tu_alloc(kind, bytes ? bytes : 1);
  if (host && bytes) tu_to_device(kind, p, host, bytes);
  return p;
}

int tu_check_vocab_parallel(xent_backend_kind kind, xent_backend_kind emulate, xent_op op, const xent_ce_desc* d,
                            uint64_t seed, int flags, int ranks, const char* name) {
  if (ranks < 1 || ranks > MAX_RANKS || ranks > d->classes) {
    printf("FAIL %s: %d ranks for %lld classes\n", name, ranks, (long long)d->classes);
    return 1;
  }
  const int64_t N = d->rows, C = d->classes, NC = N * C;
  const int soft = d->label_type == XENT_PROB;
  const int forward = op != XENT_OP_BACKWARD, backward = op != XENT_OP_FORWARD;
  const int none = d->reduction == XENT_REDUCTION_NONE;
  const int64_t nloss = none ? N : 1;
  const size_t eb = tu_dtype_bytes(d->dtype), lb = tu_dtype_bytes(d->loss_dtype), gb = tu_dtype_bytes(d->grad_dtype);
  const xent_dtype acc = xent_acc_dtype(d->dtype);
  const size_t ab = tu_dtype_bytes(acc);
#define COUNT(n) ((size_t)((n) > 0 ? (n) : 1))
  tu_inputs in;
  tu_make_inputs(d, seed, 4.0, flags & ~TU_EXTRAS, &in);
  /* grad_bias and grad_labels work on slices; log_prob and softmax are not
     offered for split vocabularies. */
  double* bias = NULL;
  if ((flags & TU_EXTRAS) && backward) {
    in.grad_bias = malloc(COUNT(NC) * gb);
    bias = malloc(COUNT(NC) * sizeof *bias);
    uint64_t s = seed ^ 0x5eed;
    for (int64_t i = 0; i < NC; ++i) xent_store(d->grad_dtype, in.grad_bias, i, 0.01 * (2 * tu_uniform(&s) - 1));
    for (int64_t i = 0; i < NC; ++i) bias[i] = xent_load(d->grad_dtype, in.grad_bias, i);
  }
  const int with_grad_labels = soft && (flags & TU_EXTRAS) && backward;

  /* The unsplit reference. */
  double* want_rows = calloc(COUNT(N), sizeof(double));
  double* want_lse = calloc(COUNT(N), sizeof(double));
  double* want_grad = calloc(COUNT(NC), sizeof(double));
  double* want_grad_labels = calloc(COUNT(NC), sizeof(double));
  double* dloss = calloc(COUNT(nloss), sizeof(double));
  double want_total = 0;
  for (int64_t i = 0; i < nloss; ++i) dloss[i] = xent_load(d->loss_dtype, in.dloss, i);
  xent_ref_ce_forward(d, in.logits, in.labels, in.weights, want_rows, &want_total, want_lse, NULL, NULL);
  if (backward) xent_ref_ce_backward(d, in.logits, in.labels, in.weights, NULL, dloss, bias, want_grad, want_grad_labels);
  void* lse_host = malloc(COUNT(N) * ab);
  for (int64_t n = 0; n < N; ++n) xent_store(acc, lse_host, n, want_lse[n]);

  /* Uneven slices: rank 0 a quarter, rank 1 a single class, the rest shared. */
  int64_t sizes[MAX_RANKS], offsets[MAX_RANKS];
  int64_t left = C;
  for (int k = 0; k < ranks; ++k) {
    const int rest = ranks - k - 1;
    int64_t size = k == 0 ? C / 4 : k == 1 ? 1 : (left - rest) / (rest + 1);
    if (size < 1) size = 1;
    if (size > left - rest) size = left - rest;
    if (k == ranks - 1) size = left;
    offsets[k] = C - left;
    sizes[k] = size;
    left -= size;
  }

  group g;
  memset(&g, 0, sizeof g);
  g.kind = kind;
  pthread_barrier_init(&g.barrier, NULL, (unsigned)ranks);
  rank_call calls[MAX_RANKS];
  pthread_t threads[MAX_RANKS];
  memset(calls, 0, sizeof calls);
  for (int k = 0; k < ranks; ++k) {
    rank_call* rc = &calls[k];
    rc->kind = kind;
    rc->emulate = emulate;
    rc->op = op;
    rc->desc = *d;
    rc->desc.classes = sizes[k];
    rc->shard = (xent_vocab_shard){.class_offset = offsets[k], .global_classes = C, .rank = k, .ranks = ranks,
                                   .all_gather = thread_all_gather, .ctx = &rc->ctx};
    rc->desc.vocab_shard = &rc->shard;
    rc->ctx = (rank_ctx){.g = &g, .rank = k, .ranks = ranks};
    const int64_t nck = N * sizes[k];
    void* host = malloc(COUNT(nck) * 8);
    slice(d, &rc->desc, offsets[k], d->dtype, in.logits, host);
    rc->t.logits = upload(kind, host, (size_t)nck * eb);
    if (soft) {
      slice(d, &rc->desc, offsets[k], d->dtype, in.labels, host);
      rc->t.labels = upload(kind, host, (size_t)nck * eb);
    } else {
      rc->t.labels = upload(kind, in.labels, (size_t)N * (d->label_type == XENT_I32 ? 4 : 8));
    }
    if (in.grad_bias) {
      slice(d, &rc->desc, offsets[k], d->grad_dtype, in.grad_bias, host);
      rc->t.grad_bias = upload(kind, host, (size_t)nck * gb);
    }
    free(host);
    rc->t.weights = in.weights ? upload(kind, in.weights, (size_t)C * ab) : NULL;
    rc->t.dloss = upload(kind, in.dloss, (size_t)nloss * lb);
    rc->t.lse_in = upload(kind, lse_host, (size_t)N * ab);
    rc->t.loss = upload(kind, NULL, (size_t)nloss * lb);
    rc->t.lse = upload(kind, NULL, (size_t)N * ab);
    rc->t.grad = upload(kind, NULL, (size_t)nck * gb);
    if (with_grad_labels) rc->t.grad_labels = upload(kind, NULL, (size_t)nck * eb);
  }
  for (int k = 0; k < ranks; ++k) pthread_create(&threads[k], NULL, run_rank, &calls[k]);
  for (int k = 0; k < ranks; ++k) pthread_join(threads[k], NULL);
  pthread_barrier_destroy(&g.barrier);

  int failed = 0;
  int64_t bad_row = -1;
  for (int64_t n = 0; !soft && n < N && bad_row < 0 && d->invalid_labels == XENT_INVALID_LABELS_REPORT; ++n) {
    const int64_t y = xent_load_label(d->label_type, in.labels, n);
    if (y != d->ignore_index && (y < 0 || y >= C)) bad_row = n;
  }
  /* One all-gather when the call needs the row statistics, none otherwise. */
  const int gathers = N > 0 && (forward || soft) ? 1 : 0;
  for (int k = 0; k < ranks && !failed; ++k) {
    if (calls[k].status != XENT_OK) {
      printf("FAIL %s: rank %d: %s: %s\n", name, k, xent_status_string(calls[k].status), calls[k].message);
      failed = 1;
    } else if (calls[k].ctx.gathers != gathers) {
      printf("FAIL %s: rank %d ran %d all-gathers, expected %d\n", name, k, calls[k].ctx.gathers, gathers);
      failed = 1;
    } else if (bad_row < 0 && calls[k].checked != XENT_OK) {
      printf("FAIL %s: rank %d: xent_check: %s\n", name, k, calls[k].check_message);
      failed = 1;
    } else if (bad_row >= 0) {
      char expect[64];
      snprintf(expect, sizeof expect, "row %lld has a label outside", (long long)bad_row);
      if (calls[k].checked != XENT_ERROR_INVALID_LABEL || !strstr(calls[k].check_message, expect)) {
        printf("FAIL %s: rank %d: xent_check should name row %lld: %s\n", name, k, (long long)bad_row,
               calls[k].check_message);
        failed = 1;
      }
    }
  }
  void* host = malloc(COUNT(NC) * 8 + COUNT(N) * 8);
  void* first = malloc(COUNT(N) * 8);
  if (!failed && forward) {
    double mag = 0;
    for (int64_t n = 0; n < N; ++n) mag += isnan(want_rows[n]) ? 0 : fabs(want_rows[n]);
    const double tol = tu_tolerance(d->loss_dtype == d->dtype ? d->dtype : XENT_F32, C);
    for (int k = 0; k < ranks && !failed; ++k) {
      tu_to_host(kind, host, calls[k].t.loss, (size_t)nloss * lb);
      /* Every rank combines the same gathered statistics in the same order:
         the same bits everywhere. */
      if (k == 0) memcpy(first, host, (size_t)nloss * lb);
      else if (memcmp(first, host, (size_t)nloss * lb) != 0) {
        printf("FAIL %s: rank %d's loss differs from rank 0's\n", name, k);
        failed = 1;
      }
      const double err = none ? tu_max_error(d->loss_dtype, host, want_rows, N, 1e-3)
                              : tu_max_error(d->loss_dtype, host, &want_total, 1, mag / (double)COUNT(N) + 1e-3);
      failed |= report(name, "loss", err, tol);
      tu_to_host(kind, host, calls[k].t.lse, (size_t)N * ab);
      failed |= report(name, "lse", tu_max_error(acc, host, want_lse, N, 1.0), tu_tolerance(d->dtype, C));
    }
  }
  if (!failed && backward) {
    void* grad = malloc(COUNT(NC) * gb);
    void* grad_labels = malloc(COUNT(NC) * eb);
    for (int k = 0; k < ranks; ++k) {
      const size_t nck = (size_t)(N * sizes[k]);
      tu_to_host(kind, host, calls[k].t.grad, nck * gb);
      unslice(d, &calls[k].desc, offsets[k], d->grad_dtype, host, grad);
      if (with_grad_labels) {
        tu_to_host(kind, host, calls[k].t.grad_labels, nck * eb);
        unslice(d, &calls[k].desc, offsets[k], d->dtype, host, grad_labels);
      }
    }
    const double tol = tu_tolerance(d->grad_dtype == d->dtype ? d->dtype : XENT_F32, C);
    const double gscale = C == 1 ? fmax(max_abs(want_grad, NC), max_abs(dloss, nloss)) : max_abs(want_grad, NC);
    const double sub = d->grad_dtype == XENT_F16 ? ldexp(1.0, -25) / tol : 0.0;
    failed |= report(name, "grad", tu_max_error(d->grad_dtype, grad, want_grad, NC, gscale + 1e-30 + sub), tol);
    if (with_grad_labels)
      failed |= report(name, "grad_labels",
                       tu_max_error(d->dtype, grad_labels, want_grad_labels, NC, max_abs(want_grad_labels, NC) + 1e-30 + sub),
                       tu_tolerance(d->dtype, C));
    free(grad);
    free(grad_labels);
  }
  free(host);
  free(first);
  for (int k = 0; k < ranks; ++k) {
    void* device[] = {(void*)calls[k].t.logits, (void*)calls[k].t.labels, (void*)calls[k].t.weights,
                      (void*)calls[k].t.dloss, (void*)calls[k].t.grad_bias, (void*)calls[k].t.lse_in,
                      calls[k].t.loss, calls[k].t.lse, calls[k].t.grad, calls[k].t.grad_labels};
    for (size_t i = 0; i < sizeof device / sizeof device[0]; ++i)
      if (device[i]) tu_free(kind, device[i]);
  }
  free(want_rows);
  free(want_lse);
  free(want_grad);
  free(want_grad_labels);
  free(dloss);
  free(bias);
  free(lse_host);
  tu_free_inputs(&in);
  return failed;
#undef COUNT
}
