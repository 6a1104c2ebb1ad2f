#define _POSIX_C_SOURCE 200809L
#include "tests/testutil.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/emu/emu.h"
#include "runtime/numeric.h"
#include "runtime/reference.h"

/* Device memory of a GPU handle, through its runtime's five calls (the CUDA
   and HIP runtimes spell them alike, with the same copy kinds). A test
   linked with the CUDA backend (XENT_TEST_CUDA) takes them from the cudart
   it links; one over libxent and its plugins (the demo) loads the runtime
   of the handle's backend when it first needs it, as the plugin does. */
typedef struct device_runtime {
  int (*malloc_)(void**, size_t);
  int (*memset_)(void*, int, size_t);
  int (*memcpy_)(void*, const void*, size_t, int);
  int (*free_)(void*);
  int (*synchronize)(void);
} device_runtime;
enum { TU_TO_DEVICE = 1, TU_TO_HOST = 2, TU_DEVICE_TO_DEVICE = 3 }; /* cudaMemcpyKind, hipMemcpyKind */

#ifdef XENT_TEST_CUDA
#include <cuda_runtime_api.h>

static int cuda_malloc(void** p, size_t n) { return (int)cudaMalloc(p, n); }
static int cuda_memset(void* p, int v, size_t n) { return (int)cudaMemset(p, v, n); }
static int cuda_memcpy(void* d, const void* s, size_t n, int k) { return (int)cudaMemcpy(d, s, n, (enum cudaMemcpyKind)k); }
static int cuda_free(void* p) { return (int)cudaFree(p); }
static int cuda_synchronize(void) { return (int)cudaDeviceSynchronize(); }

/* Buffers of a CUDA handle, or of a HIP handle running on the NVIDIA GPU
   through runtime/hip_on_cuda, are cudart allocations. */
static const device_runtime* tu_runtime(xent_backend_kind kind) {
  static const device_runtime cudart = {cuda_malloc, cuda_memset, cuda_memcpy, cuda_free, cuda_synchronize};
#ifdef XENT_TEST_HIP_ON_CUDA
  if (kind == XENT_BACKEND_HIP) return &cudart;
#endif
  return kind == XENT_BACKEND_CUDA ? &cudart : NULL;
}
#else
#include <dlfcn.h>

static const device_runtime* tu_runtime(xent_backend_kind kind) {
  if (kind != XENT_BACKEND_CUDA && kind != XENT_BACKEND_HIP) return NULL;
  static device_runtime loaded[2];
  device_runtime* r = &loaded[kind == XENT_BACKEND_HIP];
  if (r->malloc_) return r;
  static const char* const cuda[] = {"libcudart.so.13", "libcudart.so.12", "libcudart.so"};
  static const char* const hip[] = {"libamdhip64.so.6", "libamdhip64.so.5", "libamdhip64.so"};
  const char* const* names = kind == XENT_BACKEND_HIP ? hip : cuda;
  const char* prefix = kind == XENT_BACKEND_HIP ? "hip" : "cuda";
  void* so = NULL;
  for (int i = 0; !so && i < 3; ++i) so = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
  if (!so) {
    fprintf(stderr, "testutil: cannot load the %s runtime for device memory: %s\n", prefix, dlerror());
    exit(2);
  }
  static const char* const calls[] = {"Malloc", "Memset", "Memcpy", "Free", "DeviceSynchronize"};
  void** slots[] = {(void**)&r->malloc_, (void**)&r->memset_, (void**)&r->memcpy_, (void**)&r->free_,
                    (void**)&r->synchronize};
  for (int i = 4; i >= 0; --i) { /* malloc_ last: it says the table is full */
    char name[64];
    snprintf(name, sizeof name, "%s%s", prefix, calls[i]);
    if (!(*slots[i] = dlsym(so, name))) {
      fprintf(stderr, "testutil: the %s runtime lacks %s\n", prefix, name);
      exit(2);
    }
  }
  return r;
}
#endif

size_t tu_dtype_bytes(xent_dtype dtype) { return dtype == XENT_F64 ? 8 : dtype == XENT_F32 ? 4 : 2; }

int tu_parse_dtype(const char* token, xent_dtype* dtype) {
  static const char* const names[] = {"f32", "f16", "bf16", "f64"};
  static const xent_dtype values[] = {XENT_F32, XENT_F16, XENT_BF16, XENT_F64};
  for (int i = 0; i < 4; ++i) {
    if (strcmp(token, names[i]) == 0) {
      *dtype = values[i];
      return 0;
    }
  }
  return -1;
}

int tu_parse_key(const char* key, xent_op* op, xent_ce_desc* d) {
  static const char* ops[] = {"ce_fwd_bwd_", "ce_fwd_", "ce_bwd_"};
  static const xent_op op_values[] = {XENT_OP_FORWARD_BACKWARD, XENT_OP_FORWARD, XENT_OP_BACKWARD};
  const char* rest = NULL;
  for (int i = 0; i < 3 && !rest; ++i) {
    if (strncmp(key, ops[i], strlen(ops[i])) == 0) {
      *op = op_values[i];
      rest = key + strlen(ops[i]);
    }
  }
  if (!rest) return -1;
  char dtype[8], label[8], reduction[8];
  if (sscanf(rest, "%7[^_]_%7[^_]_%7[^_]", dtype, label, reduction) != 3) return -1;
  xent_dtype dt;
  if (tu_parse_dtype(dtype, &dt) != 0) return -1;
  xent_label_type lt;
  if (strcmp(label, "i32") == 0) lt = XENT_I32;
  else if (strcmp(label, "i64") == 0) lt = XENT_I64;
  else if (strcmp(label, "prob") == 0) lt = XENT_PROB;
  else return -1;
  xent_reduction red;
  if (strcmp(reduction, "none") == 0) red = XENT_REDUCTION_NONE;
  else if (strcmp(reduction, "sum") == 0) red = XENT_REDUCTION_SUM;
  else if (strcmp(reduction, "mean") == 0) red = XENT_REDUCTION_MEAN;
  else return -1;
  const int64_t inner = d->inner;
  xent_ce_desc_init(d, d->rows, d->classes, dt, lt, red);
  d->inner = inner > 0 ? inner : 1;
  return 0;
}

int tu_read_manifest(const char* path, char*** keys_out) {
  FILE* f = fopen(path, "r");
  if (!f) return -1;
  char line[2048];
  int n = 0, cap = 0;
  char** keys = NULL;
  while (fgets(line, sizeof line, f)) {
    if (line[0] == '#' || line[0] == '\n') continue;
    char* tab = strchr(line, '\t');
    if (tab) *tab = 0;
    if (n == cap) {
      cap = cap ? 2 * cap : 64;
      keys = realloc(keys, (size_t)cap * sizeof *keys);
    }
    keys[n++] = strdup(line);
  }
  fclose(f);
  *keys_out = keys;
  return n;
}

void tu_free_manifest(char** keys, int count) {
  for (int i = 0; i < count; ++i) free(keys[i]);
  free(keys);
}

int tu_test_shard(int* index, int* count) {
  const char* total = getenv("TEST_TOTAL_SHARDS");
  const char* at = getenv("TEST_SHARD_INDEX");
  *count = total ? atoi(total) : 1;
  *index = at ? atoi(at) : 0;
  if (*count < 1 || *index < 0 || *index >= *count) {
    fprintf(stderr, "bad test shard: TEST_SHARD_INDEX=%s of TEST_TOTAL_SHARDS=%s\n", at ? at : "(unset)",
            total ? total : "(unset)");
    return -1;
  }
  const char* status = getenv("TEST_SHARD_STATUS_FILE");
  if (status) {
    FILE* f = fopen(status, "w");
    if (f) fclose(f);
  }
  return 0;
}

int tu_sampled(const char* key) {
  static const char* const pairs[] = {"_i64_mean", "_i32_none", "_prob_sum"};
  if (strncmp(key, "sm_", 3) == 0)
    return (strstr(key, "_bf16_") || strstr(key, "_f32_")) == (strstr(key, "_log_softmax") == NULL);
  const size_t n = strlen(key);
  for (int i = 0; i < 3; ++i) {
    const size_t m = strlen(pairs[i]);
    if (n >= m && strcmp(key + n - m, pairs[i]) == 0) return 1;
  }
  return 0;
}

uint64_t tu_next_u64(uint64_t* s) {
  uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
  return z ^ (z >> 31);
}

double tu_uniform(uint64_t* s) { return (double)(tu_next_u64(s) >> 11) * (1.0 / 9007199254740992.0); }

void tu_make_inputs(const xent_ce_desc* d, uint64_t seed, double scale, int flags, tu_inputs* in) {
  const int64_t N = d->rows, C = d->classes;
  const size_t eb = tu_dtype_bytes(d->dtype);
  const xent_dtype acc = xent_acc_dtype(d->dtype);
  uint64_t s = seed;
  in->logits = malloc((size_t)(N * C > 0 ? N * C : 1) * eb);
  for (int64_t i = 0; i < N * C; ++i) xent_store(d->dtype, in->logits, i, scale * (2 * tu_uniform(&s) - 1));
  if (d->label_type == XENT_PROB) {
    /* A distribution per row; every fifth row sums to 3 (PyTorch does not
       require a sum of 1; a fixed sum keeps long rows' losses within f16's
       range), every seventh one-hot. */
    in->labels = malloc((size_t)(N * C > 0 ? N * C : 1) * eb);
    double* row = malloc((size_t)C * sizeof *row);
    for (int64_t n = 0; n < N; ++n) {
      double total = 0;
      for (int64_t c = 0; c < C; ++c) total += row[c] = n % 7 == 3 ? (c == n % C) : tu_uniform(&s);
      const double norm = (n % 5 == 2 ? 3.0 : 1.0) / total;
      for (int64_t c = 0; c < C; ++c) xent_store(d->dtype, in->labels, xent_ref_index(d, n, c), row[c] * norm);
    }
    free(row);
  } else {
    in->labels = malloc((size_t)(N > 0 ? N : 1) * 8);
    for (int64_t n = 0; n < N; ++n) {
      int64_t y = (int64_t)(tu_next_u64(&s) % (uint64_t)C);
      if ((flags & TU_IGNORE_ALL) || tu_uniform(&s) < 0.25) y = d->ignore_index;
      else if ((flags & TU_BAD_LABELS) && n % 3 == 1) y = (n % 2) ? C + 5 : -7;
      if (d->label_type == XENT_I32) ((int32_t*)in->labels)[n] = (int32_t)y;
      else ((int64_t*)in->labels)[n] = y;
    }
  }
  in->weights = NULL;
  if (flags & TU_WEIGHTED) {
    in->weights = malloc((size_t)C * 8);
    for (int64_t c = 0; c < C; ++c) xent_store(acc, in->weights, c, 0.25 + 1.5 * tu_uniform(&s));
  }
  const int64_t nd = d->reduction == XENT_REDUCTION_NONE ? N : 1;
  in->dloss = malloc((size_t)(nd > 0 ? nd : 1) * tu_dtype_bytes(d->loss_dtype));
  for (int64_t i = 0; i < nd; ++i) xent_store(d->loss_dtype, in->dloss, i, 0.5 + tu_uniform(&s));
  in->grad_bias = NULL;
  if (flags & TU_EXTRAS) {
    in->grad_bias = malloc((size_t)(N * C > 0 ? N * C : 1) * tu_dtype_bytes(d->grad_dtype));
    for (int64_t i = 0; i < N * C; ++i) xent_store(d->grad_dtype, in->grad_bias, i, 0.01 * (2 * tu_uniform(&s) - 1));
  }
}

void tu_free_inputs(tu_inputs* in) {
  free(in->logits);
  free(in->labels);
  free(in->weights);
  free(in->dloss);
  free(in->grad_bias);
  memset(in, 0, sizeof *in);
}

double tu_tolerance(xent_dtype dtype, int64_t classes) {
  /* Output rounding (half an ulp of the output dtype) plus f32 accumulation
     error that grows with the row length (tree sums: ~log2(C) ulps, taken
     generously as sqrt(C) ulps of f32). */
  const double accumulate = dtype == XENT_F64 ? 1e-12 * sqrt((double)classes) : 1.2e-7 * 8 * sqrt((double)classes);
  switch (dtype) {
    case XENT_F64: return 1e-11 + accumulate;
    case XENT_F32: return 1e-6 + accumulate;
    case XENT_F16: return 1e-3 + accumulate;   /* 2^-11 relative rounding, twice */
    case XENT_BF16: return 8e-3 + accumulate;  /* 2^-8 relative rounding, twice */
  }
  return 0;
}

double tu_max_error(xent_dtype dtype, const void* got, const double* want, int64_t n, double atol) {
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    const double g = xent_load(dtype, got, i), w = want[i];
    double e;
    if (isnan(w) || isnan(g)) e = (isnan(w) && isnan(g)) ? 0 : INFINITY;
    else if (isinf(w) || isinf(g)) e = (g == w) ? 0 : INFINITY;
    else e = fabs(g - w) / (fabs(w) + atol);
    if (e > worst) worst = e;
  }
  return worst;
}

void* tu_alloc(xent_backend_kind kind, size_t bytes) {
  if (bytes == 0) bytes = 1;
  const device_runtime* r = tu_runtime(kind);
  if (r) {
    void* p = NULL;
    if (r->malloc_(&p, bytes) != 0) return NULL;
    r->memset_(p, 0, bytes);
    return p;
  }
  return calloc(1, bytes);
}

void tu_free(xent_backend_kind kind, void* p) {
  const device_runtime* r = tu_runtime(kind);
  if (r) r->free_(p);
  else free(p);
}

void tu_to_device(xent_backend_kind kind, void* dst, const void* src, size_t bytes) {
  const device_runtime* r = tu_runtime(kind);
  if (r) r->memcpy_(dst, src, bytes, TU_TO_DEVICE);
  else if (bytes) memcpy(dst, src, bytes);
}

void tu_to_host(xent_backend_kind kind, void* dst, const void* src, size_t bytes) {
  const device_runtime* r = tu_runtime(kind);
  if (r) r->memcpy_(dst, src, bytes, TU_TO_HOST);
  else if (bytes) memcpy(dst, src, bytes);
}

void tu_copy(xent_backend_kind kind, void* dst, const void* src, size_t bytes) {
  const device_runtime* r = tu_runtime(kind);
  if (r) r->memcpy_(dst, src, bytes, TU_DEVICE_TO_DEVICE);
  else if (bytes) memcpy(dst, src, bytes);
}

void tu_sync(xent_backend_kind kind) {
  const device_runtime* r = tu_runtime(kind);
  if (r) r->synchronize();
}

int tu_global_race_checks(xent_backend_kind kind, int on) {
  return kind == XENT_BACKEND_CPU ? xent_emu_check_global(on) : 0;
}
