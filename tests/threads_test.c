/* Calls from several threads at once, on the cpu backend (the generated
   kernels under the emulator): first a handle per thread, then one handle
   shared by every thread. Each call is checked against the CPU reference
   (tu_check_call); on the shared handle, every thread also records a bad
   label at a row of its own, and one xent_check after they join must name
   the lowest of them. Built and run under ThreadSanitizer by .ci/run
   (--config=tsan), which also sees any data race inside the library. */
#define _POSIX_C_SOURCE 200809L
#include <pthread.h>
#include <stdio.h>
#include <string.h>

#include "tests/testutil.h"

enum { THREADS = 4 };

static const char* const keys[] = {"ce_fwd_bwd_bf16_i64_mean", "ce_fwd_f32_i32_none", "ce_bwd_f16_i64_sum",
                                   "ce_fwd_bwd_f32_prob_mean"};
/* {rows, classes}: a warp's worth of short rows, and rows a block each. */
static const int64_t shapes[][2] = {{40, 33}, {3, 2100}};

/* The shared run's threads meet here before they record bad labels, so
   that no thread's xent_check (inside tu_check_call) takes another's. */
static pthread_barrier_t checked;

typedef struct job {
  int index;
  xent_handle* shared; /* NULL: make a handle of its own */
  int failures;
} job;

static void* run(void* arg) {
  job* j = arg;
  xent_handle* h = j->shared;
  if (!h && (xent_create(&h, XENT_BACKEND_CPU) != XENT_OK ||
             xent_cpu_emulate(h, j->index % 2 ? XENT_BACKEND_HIP : XENT_BACKEND_CUDA) != XENT_OK)) {
    printf("FAIL thread %d: xent_create: %s\n", j->index, xent_last_error());
    j->failures++;
    return NULL;
  }
  for (size_t k = 0; k < sizeof keys / sizeof keys[0]; ++k) {
    for (size_t s = 0; s < sizeof shapes / sizeof shapes[0]; ++s) {
      xent_op op;
      xent_ce_desc d;
      memset(&d, 0, sizeof d);
      d.rows = shapes[s][0];
      d.classes = shapes[s][1];
      d.inner = 1;
      if (tu_parse_key(keys[k], &op, &d) != 0) {
        printf("FAIL: %s is not a key\n", keys[k]);
        j->failures++;
        continue;
      }
      /* Bad labels only where no other thread's call can record one between
         this call and its xent_check. */
      const int flags = TU_WEIGHTED | (!j->shared && d.label_type != XENT_PROB ? TU_BAD_LABELS : 0);
      char name[128];
      snprintf(name, sizeof name, "thread %d %s %s N=%lld C=%lld", j->index, j->shared ? "shared" : "own", keys[k],
               (long long)d.rows, (long long)d.classes);
      j->failures += tu_check_call(h, op, &d, 1000u * (unsigned)j->index + 10u * (unsigned)k + (unsigned)s, flags, name);
    }
  }
  if (j->shared) {
    pthread_barrier_wait(&checked);
    /* A bad label at row index + 1 of a forward call, recorded, not checked. */
    xent_ce_desc d;
    xent_ce_desc_init(&d, 8, 16, XENT_F32, XENT_I64, XENT_REDUCTION_NONE);
    float logits[8 * 16] = {0}, loss[8];
    double workspace[8];
    int64_t labels[8] = {0};
    labels[j->index + 1] = 99;
    if (xent_ce_forward(h, &d, logits, labels, NULL, loss, NULL, workspace, sizeof workspace, NULL) != XENT_OK) {
      printf("FAIL thread %d: forward with a bad label: %s\n", j->index, xent_last_error());
      j->failures++;
    }
  } else {
    xent_destroy(h);
  }
  return NULL;
}

static int run_threads(xent_handle* shared) {
  pthread_t threads[THREADS];
  job jobs[THREADS];
  pthread_barrier_init(&checked, NULL, THREADS);
  for (int i = 0; i < THREADS; ++i) {
    jobs[i] = (job){.index = i, .shared = shared};
    pthread_create(&threads[i], NULL, run, &jobs[i]);
  }
  int failures = 0;
  for (int i = 0; i < THREADS; ++i) {
    pthread_join(threads[i], NULL);
    failures += jobs[i].failures;
  }
  pthread_barrier_destroy(&checked);
  return failures;
}

int main(void) {
  int failures = run_threads(NULL);
  xent_handle* shared = NULL;
  if (xent_create(&shared, XENT_BACKEND_CPU) != XENT_OK) {
    printf("FAIL: xent_create: %s\n", xent_last_error());
    return 1;
  }
  failures += run_threads(shared);
  failures += tu_expect_check("shared handle after every thread's bad label", xent_check(shared), xent_last_error(), 1);
  xent_destroy(shared);
  printf("%d threads, a handle each and one shared: %d failures\n", THREADS, failures);
  return failures != 0;
}
