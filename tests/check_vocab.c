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
    rc->t.logits = tu_upload(kind, host, (size_t)nck * eb);
    if (soft) {
      slice(d, &rc->desc, offsets[k], d->dtype, in.labels, host);
      rc->t.labels = tu_upload(kind, host, (size_t)nck * eb);
    } else {
      rc->t.labels = tu_upload(kind, in.labels, (size_t)N * (d->label_type == XENT_I32 ? 4 : 8));
    }
    if (in.grad_bias) {
      slice(d, &rc->desc, offsets[k], d->grad_dtype, in.grad_bias, host);
      rc->t.grad_bias = tu_upload(kind, host, (size_t)nck * gb);
    }
    free(host);
    rc->t.weights = in.weights ? tu_upload(kind, in.weights, (size_t)C * ab) : NULL;
    rc->t.dloss = tu_upload(kind, in.dloss, (size_t)nloss * lb);
    rc->t.lse_in = tu_upload(kind, lse_host, (size_t)N * ab);
    rc->t.loss = tu_upload(kind, NULL, (size_t)nloss * lb);
    rc->t.lse = tu_upload(kind, NULL, (size_t)N * ab);
    rc->t.grad = tu_upload(kind, NULL, (size_t)nck * gb);
    if (with_grad_labels) rc->t.grad_labels = tu_upload(kind, NULL, (size_t)nck * eb);
  }
  for (int k = 0; k < ranks; ++k) pthread_create(&threads[k], NULL, run_rank, &calls[k]);
  for (int k = 0; k < ranks; ++k) pthread_join(threads[k], NULL);
  pthread_barrier_destroy(&g.barrier);

  int failed = 0;
  const int64_t bad_row = tu_first_bad_row(d, in.labels);
  /* One all-gather when the call needs the row statistics, none otherwise. */
  const int gathers = N > 0 && (forward || soft) ? 1 : 0;
  for (int k = 0; k < ranks && !failed; ++k) {
    if (calls[k].status != XENT_OK) {
      printf("FAIL %s: rank %d: %s: %s\n", name, k, xent_status_string(calls[k].status), calls[k].message);
      failed = 1;
    } else if (calls[k].ctx.gathers != gathers) {
      printf("FAIL %s: rank %d ran %d all-gathers, expected %d\n", name, k, calls[k].ctx.gathers, gathers);
      failed = 1;
    } else {
      failed = tu_expect_check(name, calls[k].checked, calls[k].check_message, bad_row);
    }
  }
  void* host = malloc(COUNT(NC) * 8 + COUNT(N) * 8);
  void* first = malloc(COUNT(N) * 8);
  if (!failed && forward) {
    void* lse = malloc(COUNT(N) * ab);
    for (int k = 0; k < ranks && !failed; ++k) {
      tu_to_host(kind, host, calls[k].t.loss, (size_t)nloss * lb);
      /* Every rank combines the same gathered statistics in the same order:
         the same bits everywhere. */
      if (k == 0) memcpy(first, host, (size_t)nloss * lb);
      else if (memcmp(first, host, (size_t)nloss * lb) != 0) {
        printf("FAIL %s: rank %d's loss differs from rank 0's\n", name, k);
        failed = 1;
      }
      tu_to_host(kind, lse, calls[k].t.lse, (size_t)N * ab);
      failed |= tu_compare_loss(name, d, host, lse, want_rows, want_total, want_lse);
    }
    free(lse);
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
    failed |= tu_compare_grad(name, d, grad, want_grad, dloss, with_grad_labels ? grad_labels : NULL, want_grad_labels);
    free(grad);
    free(grad_labels);
  }
  free(host);
  free(first);
  for (int k = 0; k < ranks; ++k) tu_free_tensors(kind, &calls[k].t);
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
