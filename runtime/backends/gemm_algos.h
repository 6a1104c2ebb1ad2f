/* The algorithm a GEMM library's heuristic chose for each kind of GEMM a
   handle has run, so that a later call of the same shape, layouts, dtypes,
   epilogue, alignments and workspace runs it without asking again: the
   tiled plans of the linear cross entropy make five GEMMs a tile, thousands
   a step, of a few shapes, and hipBLASLt's heuristic is reported to take
   15 to over 100 us a call, as long as a tile's GEMM (cuBLASLt keeps a
   cache of its own; this saves its lookup too). Shared by gemm_cuda.c and
   gemm_hip.c, whose handle's `gemm` is a xent_gemm_state. */
#ifndef XENT_GEMM_ALGOS_H
#define XENT_GEMM_ALGOS_H

#include <pthread.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/base/internal.h"

enum {
  XENT_GEMM_KEPT = 32,        /* kinds of GEMM a handle keeps, the oldest replaced */
  XENT_GEMM_ALGO_BYTES = 1024 /* a heuristic's result: hipblaslt_abi.h's room for one */
};

/* What a heuristic's choice depends on: every property of the call but
   its pointers (save their alignments, where the library is told them) and
   its scalars. Compared bytewise: made by xent_gemm_key_of alone. */
typedef struct xent_gemm_key {
  int64_t m, n, k, lda, ldb, ldc;
  int32_t a_dtype, b_dtype, c_dtype, ta, tb, bias;
  uint32_t align_a, align_b, align_c, unused;
  uint64_t workspace_bytes;
} xent_gemm_key;

typedef struct xent_gemm_state {
  void* library; /* the library's handle */
  pthread_mutex_t lock;
  int count, next;
  struct {
    xent_gemm_key key;
    unsigned char algo[XENT_GEMM_ALGO_BYTES];
  } kept[XENT_GEMM_KEPT];
} xent_gemm_state;

/* The largest power of two up to 256 that p is aligned to. */
static inline uint32_t xent_gemm_alignment(const void* p) {
  uint32_t k = 256;
  while (k > 1 && (uintptr_t)p % k != 0) k /= 2;
  return k;
}

/* aligned: the library's heuristic is told the operands' alignments. */
static inline xent_gemm_key xent_gemm_key_of(const xent_gemm* g, size_t workspace_bytes, int aligned) {
  xent_gemm_key key;
  memset(&key, 0, sizeof key);
  key.m = g->m, key.n = g->n, key.k = g->k, key.lda = g->lda, key.ldb = g->ldb, key.ldc = g->ldc;
  key.a_dtype = (int32_t)g->a_dtype, key.b_dtype = (int32_t)g->b_dtype, key.c_dtype = (int32_t)g->c_dtype;
  key.ta = g->ta, key.tb = g->tb, key.bias = g->bias != NULL;
  if (aligned) {
    key.align_a = xent_gemm_alignment(g->a), key.align_b = xent_gemm_alignment(g->b);
    key.align_c = xent_gemm_alignment(g->c);
  }
  key.workspace_bytes = workspace_bytes;
  return key;
}

/* A state for the library's handle, or NULL where memory ran out. */
static inline xent_gemm_state* xent_gemm_state_new(void* library) {
  xent_gemm_state* s = (xent_gemm_state*)calloc(1, sizeof *s);
  if (!s) return NULL;
  if (pthread_mutex_init(&s->lock, NULL) != 0) {
    free(s);
    return NULL;
  }
  s->library = library;
  return s;
}

static inline void xent_gemm_state_free(xent_gemm_state* s) {
  pthread_mutex_destroy(&s->lock);
  free(s);
}

/* Makes a state for `library` the handle's (*slot) unless another thread's
   came first: into *out the state in use, or NULL where memory ran out.
   1: `library` is the state's now; 0: the caller destroys it. */
static inline int xent_gemm_state_install(void** slot, void* library, xent_gemm_state** out) {
  xent_gemm_state* made = xent_gemm_state_new(library);
  void* have = NULL;
  if (made && __atomic_compare_exchange_n(slot, &have, (void*)made, 0, __ATOMIC_ACQ_REL, __ATOMIC_ACQUIRE)) {
    *out = made;
    return 1;
  }
  if (made) xent_gemm_state_free(made);
  *out = (xent_gemm_state*)have;
  return 0;
}

/* The handle's state freed and its slot emptied: its library handle, for
   the caller to destroy (NULL: none was made). */
static inline void* xent_gemm_state_release(void** slot) {
  xent_gemm_state* s = (xent_gemm_state*)*slot;
  if (!s) return NULL;
  void* library = s->library;
  xent_gemm_state_free(s);
  *slot = NULL;
  return library;
}

/* The algorithm kept for key into algo (bytes of it): 1, or 0 if none. */
static inline int xent_gemm_algo_find(xent_gemm_state* s, const xent_gemm_key* key, void* algo, size_t bytes) {
  int found = 0;
  pthread_mutex_lock(&s->lock);
  for (int i = 0; i < s->count && !found; ++i) {
    if (memcmp(&s->kept[i].key, key, sizeof *key) != 0) continue;
    memcpy(algo, s->kept[i].algo, bytes);
    found = 1;
  }
  pthread_mutex_unlock(&s->lock);
  return found;
}

/* Keeps algo (bytes, at most XENT_GEMM_ALGO_BYTES) for key. Two threads
   may both have asked the heuristic: the second's replaces the first's. */
static inline void xent_gemm_algo_keep(xent_gemm_state* s, const xent_gemm_key* key, const void* algo, size_t bytes) {
  pthread_mutex_lock(&s->lock);
  int at = -1;
  for (int i = 0; i < s->count && at < 0; ++i)
    if (memcmp(&s->kept[i].key, key, sizeof *key) == 0) at = i;
  if (at < 0 && s->count < XENT_GEMM_KEPT) at = s->count++;
  if (at < 0) at = s->next, s->next = (s->next + 1) % XENT_GEMM_KEPT;
  memcpy(&s->kept[at].key, key, sizeof *key);
  memcpy(s->kept[at].algo, algo, bytes);
  pthread_mutex_unlock(&s->lock);
}

#endif
