/* The CUDA rendering's launch path against the driver's launch rules, as the
   SIMT emulator models them (runtime/emu/emu.h): what the first H100 run
   would otherwise find out at launch.

   - The on-chip shape's shared memory at the 48 KiB boundary: C = 24,576
     and 49,152 in bf16 and f32, through the fused cross entropy and the
     softmax forward. Their dynamic requests are 49,152 bytes a block, which
     with the kernel's static shared memory pass 48 KiB: the driver refuses
     them unless the kernel's cudaFuncAttributeMaxDynamicSharedMemorySize
     was raised.
   - That attribute is raised once per kernel and device, to the opt-in
     maximum less the static reserve (XENT_STATIC_SMEM), never per call: the
     emulator's stand-in records every set.
   - Clusters from the kernel's own code, not the device: on an H100 running
     code built for compute_80 (JIT-compiled PTX), a 128K row is never
     launched in clusters; on an A100-like device (no clusters, 163 KiB
     opt-in) neither.
   - Threads launching one kernel with different sizes at once.
   - A shape chosen by the row count as well as C (a tune shape's `rows`):
     the spec's CUDA forward gives a warp a row to 2048 rows or more past
     4096 classes, and a block of 256 a row to fewer.
   Each call is checked against the CPU reference (tests/testutil.c).
   usage: emu_launch_rules_test */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <string.h>

#include "runtime/emu/emu.h"
#include "tests/testutil.h"

#define STATIC_RESERVE 2048 /* xent_device.h's XENT_STATIC_SMEM */
#define H100_OPTIN (227u * 1024u)
#define A100_OPTIN (163u * 1024u)

static int failures, runs;

static void fail(const char* what) {
  printf("FAIL %s\n", what);
  failures++;
}

static xent_handle* emulating_cuda(void) {
  xent_handle* h = NULL;
  if (xent_create(&h, XENT_BACKEND_CPU) != XENT_OK || xent_cpu_emulate(h, XENT_BACKEND_CUDA) != XENT_OK) {
    printf("FAIL: %s\n", xent_last_error());
    return NULL;
  }
  return h;
}

/* Every on-chip key once on 2 rows of C classes against the reference
   (key k with seed + k); adds the calls to runs. */
static void check_keys_at(xent_handle* h, int64_t C, unsigned seed) {
  for (int k = 0; k < TU_ON_CHIP_KEYS; ++k, ++runs)
    failures += tu_check_key_at(h, tu_on_chip_keys[k], 2, C, seed + (unsigned)k, "");
}

static unsigned long long multi_block_clusters(void) {
  unsigned long long counts[XENT_EMU_MAX_CLUSTER + 1], n = 0;
  xent_emu_cluster_launch_counts(counts);
  for (int k = 2; k <= XENT_EMU_MAX_CLUSTER; ++k) n += counts[k];
  return n;
}

/* Every function that had its attribute set on `device`: set once, to the
   opt-in maximum less the reserve. Returns how many there were. */
static int check_attributes(int device, size_t optin, const char* phase) {
  static xent_emu_func_record recs[8192];
  const int n = xent_emu_func_records(recs, 8192);
  int raised = 0;
  char what[320];
  for (int i = 0; i < n && i < 8192; ++i) {
    const xent_emu_func_record* r = &recs[i];
    if (r->device != device || r->sets == 0) continue;
    raised++;
    if (r->sets != 1) {
      snprintf(what, sizeof what, "%s: %s's cudaFuncAttributeMaxDynamicSharedMemorySize was set %llu times (once "
               "per kernel and device: a set per call races with other threads' launches)", phase, r->name, r->sets);
      fail(what);
    }
    if (r->max_dynamic != (long long)(optin - STATIC_RESERVE)) {
      snprintf(what, sizeof what, "%s: %s's attribute is %lld, expected the opt-in maximum less the static reserve "
               "(%zu)", phase, r->name, r->max_dynamic, optin - STATIC_RESERVE);
      fail(what);
    }
    if (r->static_smem > STATIC_RESERVE) {
      snprintf(what, sizeof what, "%s: %s uses %zu bytes of static shared memory, above the reserve of %d", phase,
               r->name, r->static_smem, STATIC_RESERVE);
      fail(what);
    }
  }
  return raised;
}


/* ---- threads ------------------------------------------------------------ */

typedef struct worker {
  int64_t C;
  int failures;
} worker;

static void* run_worker(void* arg) {
  worker* w = arg;
  xent_handle* h = emulating_cuda();
  if (!h) {
    w->failures = 1;
    return NULL;
  }
  for (int round = 0; round < 2; ++round)
    w->failures += tu_check_key_at(h, "ce_fwd_bwd_bf16_i64_mean", 2, w->C, 17u * (unsigned)w->C + (unsigned)round, "");
  xent_destroy(h);
  return NULL;
}

/* Threads a block of the last launch of the kernel whose name holds `name`
   (0 if it never ran). */
static unsigned last_block_of(const char* name) {
  xent_emu_func_record recs[512];
  const int n = xent_emu_func_records(recs, 512);
  for (int i = 0; i < n && i < 512; ++i)
    if (recs[i].launches && strstr(recs[i].name, name)) return recs[i].last_block;
  return 0;
}

/* The bf16 forward at 4097 classes (past the 8-threads-a-row shape) on
   2047 and 2048 rows: the spec's `rows = 2048` shape (a warp a row, blocks
   of 512) serves the second only, a block of 256 a row the first. Both
   against the reference. */
static void check_shape_by_rows(xent_handle* h) {
  static const struct {
    int64_t rows;
    unsigned block;
  } cases[] = {{2047, 256}, {2048, 512}, {1, 256}};
  for (int i = 0; i < 3; ++i, ++runs) {
    failures += tu_check_key_at(h, "ce_fwd_bf16_i64_mean", cases[i].rows, 4097, 500u + (unsigned)i, "");
    /* The rows kernel the mean and the sum, i32 and i64 variants share. */
    const unsigned got = last_block_of("ce_fwd_bf16_int_reduced_rows<XENT_ROW>");
    if (got != cases[i].block) {
      printf("FAIL ce_fwd_bf16_i64_mean, %lld rows of 4097: launched blocks of %u threads, the tune table says %u\n",
             (long long)cases[i].rows, got, cases[i].block);
      failures++;
    }
  }
}

int main(void) {
  xent_handle* h = emulating_cuda();
  if (!h) return 1;

  /* 1. An H100 running the sm_90 build: the 48 KiB boundary. */
  xent_emu_set_device((xent_emu_device){0, H100_OPTIN, 1, 90});
  const unsigned long long clusters_before = multi_block_clusters();
  failures += tu_check_on_chip_boundary(h, "", 100u, &runs);
  if (multi_block_clusters() == clusters_before)
    fail("H100: no boundary case ran in a cluster of several blocks (C = 24576 bf16 takes 2)");
  if (check_attributes(0, H100_OPTIN, "H100") < TU_ON_CHIP_KEYS)
    fail("H100: not every on-chip kernel had its shared-memory attribute raised");
  /* The pipeline's rows in turn (the emulated device holds 2 clusters),
     the tables' and asked for: 5 rows. */
  failures += tu_check_on_chip_rows(h, "", 150u, 5, 20001, &runs);
  /* Again: nothing more is set. */
  check_keys_at(h, 24576, 200u);
  check_attributes(0, H100_OPTIN, "H100, second calls");

  /* 2. The same H100 running code built for compute_80 only (its PTX
        JIT-compiled): no clusters, whatever the device has. */
  xent_emu_set_device((xent_emu_device){1, H100_OPTIN, 1, 80});
  const unsigned long long clusters_80 = multi_block_clusters();
  check_keys_at(h, 131072, 300u);
  check_keys_at(h, 24576, 310u);
  if (multi_block_clusters() != clusters_80) fail("compute_80 build: a launch ran in clusters");
  check_attributes(1, H100_OPTIN, "compute_80 build");

  /* 3. An A100-like device: no clusters, 163 KiB opt-in. */
  xent_emu_set_device((xent_emu_device){2, A100_OPTIN, 0, 80});
  const unsigned long long clusters_a100 = multi_block_clusters();
  check_keys_at(h, 49152, 400u);
  check_keys_at(h, 24576, 410u);
  if (multi_block_clusters() != clusters_a100) fail("A100: a launch ran in clusters");
  if (check_attributes(2, A100_OPTIN, "A100") == 0) fail("A100: no on-chip kernel had its attribute raised");

  /* 4. Threads, each with its own handle, launching the fused kernel at
        once with different sizes on a fresh device. */
  xent_emu_set_device((xent_emu_device){3, H100_OPTIN, 1, 90});
  static const int64_t sizes[] = {24576, 49152, 32768, 40000};
  worker workers[4];
  pthread_t threads[4];
  for (int i = 0; i < 4; ++i) {
    workers[i] = (worker){sizes[i], 0};
    if (pthread_create(&threads[i], NULL, run_worker, &workers[i]) != 0) {
      fail("pthread_create");
      workers[i].C = 0;
    }
  }
  for (int i = 0; i < 4; ++i) {
    if (workers[i].C) pthread_join(threads[i], NULL);
    failures += workers[i].failures;
    runs += 2;
  }
  check_attributes(3, H100_OPTIN, "threads");

  /* 5. The launch shape by the number of rows. */
  check_shape_by_rows(h);

  xent_destroy(h);
  printf("%d passed, %d failed\n", runs - failures, failures);
  return failures ? 1 : 0;
}
