/* The public API's error paths and the dispatch lookup.
   usage: runtime_test CUDA_MANIFEST HIP_MANIFEST */
#define _POSIX_C_SOURCE 200809L /* setenv */
#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "runtime/dispatch/dispatch.h"
#include "tests/testutil.h"

/* The CUDA table's key schema (xent_dispatch_cuda.c; xent_launch.h declares
   the rest of the table). */
extern const xent_axis_row xent_cuda_dispatch_axes[];

static int failures, checks;

#define CHECK(cond, ...)          \
  do {                            \
    checks++;                     \
    if (!(cond)) {                \
      failures++;                 \
      printf("FAIL line %d: ", __LINE__); \
      printf(__VA_ARGS__);        \
      printf("\n");               \
    }                             \
  } while (0)

/* The call fails with `status` and a message containing `needle`. */
static void expect_error(xent_status got, xent_status status, const char* needle, const char* what) {
  CHECK(got == status, "%s: status %s, expected %s", what, xent_status_string(got), xent_status_string(status));
  CHECK(strstr(xent_last_error(), needle) != NULL, "%s: message '%s' lacks '%s'", what, xent_last_error(), needle);
}

/* python/xent/_capi.py mirrors xent_ce_desc; both sides pin its layout. */
static void test_desc_layout(void) {
  CHECK(sizeof(xent_ce_desc) == 120 && offsetof(xent_ce_desc, all_ignored_zero) == 64 &&
            offsetof(xent_ce_desc, softcap) == 80 && offsetof(xent_ce_desc, vocab_shard) == 96 &&
            offsetof(xent_ce_desc, temperature) == 104 && offsetof(xent_ce_desc, token_weight_mean) == 112 &&
            sizeof(xent_ce_tensors) == 18 * sizeof(void*),
        "xent_ce_desc/tensors layout changed: update python/xent/_capi.py (DESC_LAYOUT, Tensors) too");
  CHECK(sizeof(xent_linear_ce_desc) == 168 && offsetof(xent_linear_ce_desc, accumulate) == 136 &&
            offsetof(xent_linear_ce_desc, main_grad) == 140 && offsetof(xent_linear_ce_desc, memory_mib) == 152 &&
            offsetof(xent_linear_ce_desc, plan) == 160 &&
            sizeof(xent_linear_ce_tensors) == 18 * sizeof(void*),
        "xent_linear_ce_desc/tensors layout changed: update python/xent/_capi.py (LinearDesc) too");
}

static void test_error_paths(void) {
  xent_handle* h = NULL;
  expect_error(xent_create(NULL, XENT_BACKEND_CPU), XENT_ERROR_INVALID_ARGUMENT, "handle is NULL", "create(NULL)");
  expect_error(xent_create(&h, (xent_backend_kind)9), XENT_ERROR_INVALID_ARGUMENT, "kind 9", "create(kind 9)");
  expect_error(xent_create(&h, XENT_BACKEND_HIP), XENT_ERROR_BACKEND_UNAVAILABLE, "hip backend", "create(HIP)");
  CHECK(h == NULL, "failed create leaves *handle NULL");
  CHECK(xent_create(&h, XENT_BACKEND_CPU) == XENT_OK, "create(CPU): %s", xent_last_error());
  CHECK(strcmp(xent_last_error(), "") == 0, "success clears the message");

  xent_ce_desc d;
  xent_ce_desc_init(&d, 4, 10, XENT_F32, XENT_I64, XENT_REDUCTION_MEAN);
  CHECK(d.ignore_index == -100 && d.label_smoothing == 0 && d.all_ignored_zero == 0, "PyTorch defaults");
  float logits[40] = {0}, loss[4], grad[40], lse[4];
  int64_t labels[4] = {1, 2, 3, -100};
  expect_error(xent_ce_forward(NULL, &d, logits, labels, NULL, loss, NULL, NULL, 0, NULL), XENT_ERROR_INVALID_ARGUMENT,
               "handle is NULL", "forward(handle NULL)");
  expect_error(xent_ce_forward(h, NULL, logits, labels, NULL, loss, NULL, NULL, 0, NULL), XENT_ERROR_INVALID_ARGUMENT,
               "desc is NULL", "forward(desc NULL)");
  expect_error(xent_ce_forward(h, &d, NULL, labels, NULL, loss, NULL, NULL, 0, NULL), XENT_ERROR_INVALID_ARGUMENT,
               "xent_ce_forward: logits is NULL", "forward(logits NULL)");
  expect_error(xent_ce_forward(h, &d, logits, NULL, NULL, loss, NULL, NULL, 0, NULL), XENT_ERROR_INVALID_ARGUMENT,
               "labels is NULL", "forward(labels NULL)");
  expect_error(xent_ce_forward(h, &d, logits, labels, NULL, NULL, NULL, NULL, 0, NULL), XENT_ERROR_INVALID_ARGUMENT,
               "loss is NULL", "forward(loss NULL)");
  expect_error(xent_ce_backward(h, &d, logits, labels, NULL, NULL, NULL, grad, NULL, 0, NULL),
               XENT_ERROR_INVALID_ARGUMENT, "lse is NULL", "backward(lse NULL)");
  expect_error(xent_ce_backward(h, &d, logits, labels, NULL, lse, NULL, NULL, NULL, 0, NULL),
               XENT_ERROR_INVALID_ARGUMENT, "grad is NULL", "backward(grad NULL)");
  expect_error(xent_ce_backward(h, &d, logits, labels, NULL, lse, NULL, logits, NULL, 0, NULL),
               XENT_ERROR_INVALID_ARGUMENT, "grad overlaps logits", "backward(grad == logits)");
  expect_error(xent_ce_forward_backward(h, &d, logits, labels, NULL, NULL, loss, NULL, logits + 1, NULL, 0, NULL),
               XENT_ERROR_INVALID_ARGUMENT, "grad overlaps logits", "fwd_bwd(partial overlap)");

  xent_ce_desc bad = d;
  bad.rows = -1;
  expect_error(xent_ce_forward(h, &bad, logits, labels, NULL, loss, NULL, NULL, 0, NULL), XENT_ERROR_INVALID_ARGUMENT,
               "desc->rows is -1", "rows -1");
  bad = d;
  bad.classes = 0;
  expect_error(xent_ce_forward(h, &bad, logits, labels, NULL, loss, NULL, NULL, 0, NULL), XENT_ERROR_INVALID_ARGUMENT,
               "desc->classes is 0", "classes 0");
  bad = d;
  bad.rows = (int64_t)1 << 40;
  bad.classes = (int64_t)1 << 40;
  expect_error(xent_ce_forward(h, &bad, logits, labels, NULL, loss, NULL, NULL, 0, NULL), XENT_ERROR_INVALID_ARGUMENT,
               "overflows", "rows * classes overflow");
  bad = d;
  bad.dtype = (xent_dtype)7;
  expect_error(xent_ce_forward(h, &bad, logits, labels, NULL, loss, NULL, NULL, 0, NULL), XENT_ERROR_INVALID_ARGUMENT,
               "desc->dtype 7", "dtype 7");
  bad = d;
  bad.label_smoothing = 1.5;
  expect_error(xent_ce_forward(h, &bad, logits, labels, NULL, loss, NULL, NULL, 0, NULL), XENT_ERROR_INVALID_ARGUMENT,
               "desc->label_smoothing is 1.5", "smoothing 1.5");
  bad.label_smoothing = NAN;
  expect_error(xent_ce_forward(h, &bad, logits, labels, NULL, loss, NULL, NULL, 0, NULL), XENT_ERROR_INVALID_ARGUMENT,
               "label_smoothing", "smoothing NaN");
  bad = d;
  bad.z_loss = -1;
  expect_error(xent_ce_forward(h, &bad, logits, labels, NULL, loss, NULL, NULL, 0, NULL), XENT_ERROR_INVALID_ARGUMENT,
               "desc->z_loss is -1", "z_loss -1");
  bad = d;
  bad.softcap = INFINITY;
  expect_error(xent_ce_forward(h, &bad, logits, labels, NULL, loss, NULL, NULL, 0, NULL), XENT_ERROR_INVALID_ARGUMENT,
               "desc->softcap is inf", "softcap inf");
  bad = d;
  bad.invalid_labels = (xent_invalid_labels)3;
  expect_error(xent_ce_forward(h, &bad, logits, labels, NULL, loss, NULL, NULL, 0, NULL), XENT_ERROR_INVALID_ARGUMENT,
               "desc->invalid_labels 3", "invalid_labels 3");
  bad = d;
  bad.inner = 0;
  expect_error(xent_ce_forward(h, &bad, logits, labels, NULL, loss, NULL, NULL, 0, NULL), XENT_ERROR_INVALID_ARGUMENT,
               "desc->inner is 0", "inner 0");
  bad.inner = 3;
  expect_error(xent_ce_forward(h, &bad, logits, labels, NULL, loss, NULL, NULL, 0, NULL), XENT_ERROR_INVALID_ARGUMENT,
               "desc->rows (4) is not a multiple of desc->inner (3)", "rows % inner");
  bad = d;
  bad.loss_dtype = XENT_F64;
  expect_error(xent_ce_forward(h, &bad, logits, labels, NULL, loss, NULL, NULL, 0, NULL), XENT_ERROR_INVALID_ARGUMENT,
               "desc->loss_dtype 3 must be desc->dtype (f32 outputs are for f16/bf16 logits)", "loss_dtype f64 for f32");
  bad = d;
  bad.dtype = XENT_BF16;
  bad.loss_dtype = XENT_BF16;
  bad.grad_dtype = XENT_F16;
  expect_error(xent_ce_forward(h, &bad, logits, labels, NULL, loss, NULL, NULL, 0, NULL), XENT_ERROR_INVALID_ARGUMENT,
               "desc->grad_dtype 1 must be desc->dtype or XENT_F32", "grad_dtype f16 for bf16");
  bad = d;
  bad.label_type = (xent_label_type)3;
  expect_error(xent_ce_forward(h, &bad, logits, labels, NULL, loss, NULL, NULL, 0, NULL), XENT_ERROR_INVALID_ARGUMENT,
               "desc->label_type 3", "label_type 3");
  {
    /* The tensors struct: unknown op, NULL struct, grad_labels of hard
       labels, in place across dtypes, outputs overlapping inputs. */
    xent_ce_tensors t = {.logits = logits, .labels = labels, .loss = loss, .grad = grad, .lse_in = lse};
    expect_error(xent_ce_run(h, &d, (xent_op)7, &t, NULL, 0, NULL), XENT_ERROR_INVALID_ARGUMENT, "op 7", "run(op 7)");
    expect_error(xent_ce_run(h, &d, XENT_OP_FORWARD, NULL, NULL, 0, NULL), XENT_ERROR_INVALID_ARGUMENT,
                 "xent_ce_run: tensors is NULL", "run(NULL tensors)");
    t.grad_labels = lse;
    expect_error(xent_ce_run(h, &d, XENT_OP_BACKWARD, &t, NULL, 0, NULL), XENT_ERROR_INVALID_ARGUMENT,
                 "grad_labels is set, but hard labels", "grad_labels with hard labels");
    t.grad_labels = NULL;
    t.log_prob = logits + 3;
    expect_error(xent_ce_run(h, &d, XENT_OP_FORWARD, &t, NULL, 0, NULL), XENT_ERROR_INVALID_ARGUMENT,
                 "log_prob overlaps logits", "log_prob over logits");
    t.log_prob = NULL;
    xent_ce_desc mixed;
    xent_ce_desc_init(&mixed, 4, 10, XENT_BF16, XENT_I64, XENT_REDUCTION_NONE);
    mixed.grad_dtype = XENT_F32;
    t.grad = (void*)t.logits;
    expect_error(xent_ce_run(h, &mixed, XENT_OP_FORWARD_BACKWARD, &t, NULL, 0, NULL), XENT_ERROR_INVALID_ARGUMENT,
                 "in place) needs desc->grad_dtype == desc->dtype", "in place with f32 grad");
  }
  {
    /* N-d shapes: [2, 5, 3, 4] with the class axis at 1 (PyTorch) and -1 (Paddle). */
    const int64_t shape[4] = {2, 5, 3, 4};
    xent_ce_desc nd;
    CHECK(xent_ce_desc_init_nd(&nd, 4, shape, 1, XENT_F32, XENT_I64, XENT_REDUCTION_MEAN) == XENT_OK &&
              nd.rows == 24 && nd.classes == 5 && nd.inner == 12 && nd.ignore_index == -100,
          "init_nd axis 1: rows %lld classes %lld inner %lld", (long long)nd.rows, (long long)nd.classes,
          (long long)nd.inner);
    CHECK(xent_ce_desc_init_nd(&nd, 4, shape, -1, XENT_F32, XENT_I64, XENT_REDUCTION_MEAN) == XENT_OK &&
              nd.rows == 30 && nd.classes == 4 && nd.inner == 1,
          "init_nd axis -1");
    expect_error(xent_ce_desc_init_nd(&nd, 4, shape, 4, XENT_F32, XENT_I64, XENT_REDUCTION_MEAN),
                 XENT_ERROR_INVALID_ARGUMENT, "axis 4 is outside [-4, 4)", "init_nd axis 4");
    const int64_t zero_classes[2] = {3, 0};
    expect_error(xent_ce_desc_init_nd(&nd, 2, zero_classes, 1, XENT_F32, XENT_I64, XENT_REDUCTION_MEAN),
                 XENT_ERROR_INVALID_ARGUMENT, "shape[1] is 0, must be >= 1", "init_nd zero classes");
  }
  {
    /* The softmax family's argument checks. */
    xent_softmax_desc sd = {.rows = 4, .classes = 10, .inner = 1, .dtype = XENT_F32, .kind = XENT_SOFTMAX};
    float y[40], dy[40];
    expect_error(xent_softmax_forward(h, &sd, NULL, y, NULL), XENT_ERROR_INVALID_ARGUMENT,
                 "xent_softmax_forward: x is NULL", "softmax x NULL");
    expect_error(xent_softmax_backward(h, &sd, y, NULL, dy, NULL), XENT_ERROR_INVALID_ARGUMENT,
                 "xent_softmax_backward: dy is NULL", "softmax dy NULL");
    expect_error(xent_softmax_forward(h, &sd, logits, logits + 1, NULL), XENT_ERROR_INVALID_ARGUMENT,
                 "overlaps an input", "softmax partial overlap");
    CHECK(xent_softmax_forward(h, &sd, logits, logits, NULL) == XENT_OK, "softmax in place: %s", xent_last_error());
    sd.inner = 3;
    expect_error(xent_softmax_forward(h, &sd, logits, y, NULL), XENT_ERROR_INVALID_ARGUMENT,
                 "desc->rows (4) is not a multiple of desc->inner (3)", "softmax rows % inner");
    sd.inner = 1;
    sd.kind = (xent_softmax_kind)4;
    expect_error(xent_softmax_forward(h, &sd, logits, y, NULL), XENT_ERROR_INVALID_ARGUMENT, "desc->kind 4",
                 "softmax kind 4");
    const int64_t shape[3] = {2, 3, 5};
    CHECK(xent_softmax_desc_init_nd(&sd, 3, shape, -2, XENT_F16, XENT_LOG_SOFTMAX) == XENT_OK && sd.rows == 10 &&
              sd.classes == 3 && sd.inner == 5,
          "softmax init_nd");
    expect_error(xent_softmax_desc_init_nd(&sd, 3, shape, 3, XENT_F16, XENT_LOG_SOFTMAX), XENT_ERROR_INVALID_ARGUMENT,
                 "xent_softmax_desc_init_nd: axis 3", "softmax init_nd axis 3");
  }
  expect_error(xent_check(NULL), XENT_ERROR_INVALID_ARGUMENT, "xent_check: handle is NULL", "check(NULL)");
  CHECK(xent_check(h) == XENT_OK, "a fresh handle has seen no bad label: %s", xent_last_error());
  size_t ws = 0;
  expect_error(xent_ce_workspace_size(h, &d, (xent_op)5, &ws), XENT_ERROR_INVALID_ARGUMENT, "op 5", "workspace(op 5)");
  expect_error(xent_ce_workspace_size(h, &d, XENT_OP_FORWARD, NULL), XENT_ERROR_INVALID_ARGUMENT, "bytes is NULL",
               "workspace(NULL)");

  /* N = 0 is legal: a sum of nothing is 0, a mean of nothing NaN. */
  xent_ce_desc empty = d;
  empty.rows = 0;
  loss[0] = 123;
  double workspace[1100];
  size_t need = 0;
  CHECK(xent_ce_workspace_size(h, &empty, XENT_OP_FORWARD, &need) == XENT_OK && need <= sizeof workspace, "workspace");
  CHECK(xent_ce_forward(h, &empty, NULL, NULL, NULL, loss, NULL, workspace, need, NULL) == XENT_OK, "N=0: %s",
        xent_last_error());
  CHECK(isnan(loss[0]), "mean over no rows is NaN, got %g", loss[0]);

  /* A reduced loss needs O(N) workspace, never O(N*C). */
  CHECK(xent_ce_workspace_size(h, &d, XENT_OP_FORWARD, &need) == XENT_OK, "workspace size");
  /* Two totals, a loss and a weight per row, the reductions' partial pairs. */
  CHECK(need == 4 * (2 + 2 * 4 + 2 * 1024), "f32 mean over 4 rows: %zu bytes", need);
  expect_error(xent_ce_forward(h, &d, logits, labels, NULL, loss, NULL, workspace, need - 1, NULL),
               XENT_ERROR_WORKSPACE_TOO_SMALL, "this call needs 8232", "workspace too small");
  expect_error(xent_ce_forward(h, &d, logits, labels, NULL, loss, NULL, NULL, need, NULL), XENT_ERROR_INVALID_ARGUMENT,
               "workspace is NULL", "workspace NULL");
  xent_destroy(h);
}

static int failing_gather(void* ctx, const void* send, void* recv, size_t bytes, void* stream) {
  (void)ctx, (void)send, (void)recv, (void)bytes, (void)stream;
  return 7;
}

/* desc->vocab_shard: each bad field named, the workspace holding every
   rank's statistics, a failing collective reported, NCCL only for GPUs. */
static void test_vocab_shard_errors(void) {
  xent_handle* h = NULL;
  CHECK(xent_create(&h, XENT_BACKEND_CPU) == XENT_OK, "create: %s", xent_last_error());
  xent_ce_desc d;
  xent_ce_desc_init(&d, 4, 10, XENT_F32, XENT_I64, XENT_REDUCTION_MEAN);
  xent_vocab_shard shard = {.class_offset = 10, .global_classes = 30, .rank = 1, .ranks = 3,
                            .all_gather = failing_gather};
  d.vocab_shard = &shard;
  size_t need = 0;
  CHECK(xent_ce_workspace_size(h, &d, XENT_OP_FORWARD, &need) == XENT_OK, "sharded workspace: %s", xent_last_error());
  /* Launchers: 2 + 2 * rows + 2 * 1024 f32 values; then ranks * rows
     records, wide ones (a call with per-token outputs gathers 8 f32 values
     and an int64 per row; a plain call uses the first 4 f32 of each). */
  CHECK(need == 4 * (2 + 2 * 4 + 2 * 1024) + 3 * 4 * (8 * 4 + 8), "f32 mean, 4 rows, 3 ranks: %zu bytes", need);
  float logits[40] = {0}, loss[4], workspace[2200];
  int64_t labels[4] = {1, 12, 29, -100};
  xent_ce_tensors t = {.logits = logits, .labels = labels, .loss = loss};
  expect_error(xent_ce_run(h, &d, XENT_OP_FORWARD, &t, workspace, need, NULL), XENT_ERROR_COLLECTIVE,
               "all_gather returned 7 (rank 1 of 3", "failing all_gather");
  float log_prob[40];
  t.log_prob = log_prob;
  expect_error(xent_ce_run(h, &d, XENT_OP_FORWARD, &t, workspace, need, NULL), XENT_ERROR_INVALID_ARGUMENT,
               "log_prob and softmax are not available with desc->vocab_shard", "sharded log_prob");
  t.log_prob = NULL;
  const int64_t device_offset = 10;
  const struct {
    xent_vocab_shard shard;
    const char* needle;
  } bad[] = {
      {{10, 30, 0, 0, failing_gather, NULL, NULL, NULL}, "vocab_shard->ranks is 0"},
      {{10, 30, 3, 3, failing_gather, NULL, NULL, NULL}, "vocab_shard->rank is 3, must be in [0, 3)"},
      {{-1, 30, 0, 3, failing_gather, NULL, NULL, NULL}, "vocab_shard->class_offset is -1"},
      {{25, 30, 0, 3, failing_gather, NULL, NULL, NULL},
       "global_classes is 30, must be >= class_offset + desc->classes (25 + 10)"},
      {{0, 30, 0, 3, NULL, NULL, NULL, NULL}, "all_gather is NULL (xent_vocab_shard_nccl fills it in) and so is gathered"},
      {{0, 40, 0, 3, failing_gather, NULL, NULL, &device_offset},
       "class_offset_at is set: class_offset must be 0 (it is 0) and global_classes ranks * desc->classes (30, not 40)"},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; ++i) {
    shard = bad[i].shard;
    expect_error(xent_ce_run(h, &d, XENT_OP_FORWARD, &t, workspace, sizeof workspace, NULL),
                 XENT_ERROR_INVALID_ARGUMENT, bad[i].needle, bad[i].needle);
  }
  /* The two halves of a call whose collective is the caller's. */
  shard = (xent_vocab_shard){.class_offset = 10, .global_classes = 30, .rank = 1, .ranks = 3};
  size_t records = 0;
  expect_error(xent_ce_shard_records(h, &d, XENT_OP_FORWARD, &t, NULL, workspace, sizeof workspace, NULL),
               XENT_ERROR_INVALID_ARGUMENT, "xent_ce_shard_records: records is NULL", "records NULL");
  CHECK(xent_ce_shard_records_size(h, &d, XENT_OP_FORWARD, &t, &records) == XENT_OK && records == 4 * 16,
        "records: 16 bytes a row (4 f32 values)");
  d.vocab_shard = NULL;
  expect_error(xent_ce_shard_records_size(h, &d, XENT_OP_FORWARD, &t, &records), XENT_ERROR_INVALID_ARGUMENT,
               "desc->vocab_shard is NULL: records are a vocabulary-parallel call's", "records without a shard");
  d.vocab_shard = &shard;
  int comm = 0;
  expect_error(xent_vocab_shard_nccl(h, &shard, &comm, 0, 30), XENT_ERROR_INVALID_ARGUMENT,
               "NCCL and RCCL need a CUDA or HIP handle", "nccl on the cpu backend");
  expect_error(xent_vocab_shard_nccl(h, &shard, NULL, 0, 30), XENT_ERROR_INVALID_ARGUMENT, "comm is NULL",
               "nccl comm NULL");
  xent_destroy(h);
}

/* The option axes in xent_ce_lookup: the most specialized entry wins, a
   run-time entry serves every value, and a miss names the key and the spec. */
static int fake_launch(const void* a) {
  (void)a;
  return 0;
}

static void test_lookup_preference(void) {
  static const xent_dispatch_entry table[] = {
      {"ce_fwd_f32_i64_mean", fake_launch, 70},
      {"ce_fwd_f32_i64_mean_weighted_nosmooth_ignore", fake_launch, 70},
      {"ce_fwd_f32_i64_sum_unweighted", fake_launch, 70},
  };
  /* A library generated from a downstream team's own spec: the miss names
     that file, not xent's specs/cross_entropy.lua. */
  static const xent_dispatch_spec specs[] = {{"cross_entropy", "team/ours.lua"}, {"softmax", "team/sm.lua"}, {0, 0}};
  const xent_table t = {table, 3, "test", specs, xent_cuda_dispatch_axes};
  xent_ce_desc d;
  xent_ce_desc_init(&d, 1, 1, XENT_F32, XENT_I64, XENT_REDUCTION_MEAN);
  char key[160];
  const xent_dispatch_entry* e = xent_ce_lookup(&t, &d, XENT_OP_FORWARD, 1, key, sizeof key);
  CHECK(e == &table[1], "weighted mean picks the specialized entry, got %s", e ? e->key : "NULL");
  e = xent_ce_lookup(&t, &d, XENT_OP_FORWARD, 0, key, sizeof key);
  CHECK(e == &table[0], "unweighted mean falls back to the run-time entry, got %s", e ? e->key : "NULL");
  d.reduction = XENT_REDUCTION_SUM;
  e = xent_ce_lookup(&t, &d, XENT_OP_FORWARD, 0, key, sizeof key);
  CHECK(e == &table[2], "unweighted sum finds its entry");
  e = xent_ce_lookup(&t, &d, XENT_OP_FORWARD, 1, key, sizeof key);
  CHECK(e == NULL, "weighted sum is not generated");
  CHECK(strstr(xent_last_error(), "ce_fwd_f32_i64_sum") &&
            strstr(xent_last_error(), "add it to the spec of family cross_entropy (team/ours.lua)") &&
            !strstr(xent_last_error(), "specs/"),
        "miss names key and the library's spec: %s", xent_last_error());
  /* A family the library's specs left out: its file under specs/. */
  e = xent_lce_lookup(&t, &d, 0, key, sizeof key);
  CHECK(e == NULL && strstr(xent_last_error(), "lce_fwd_bwd_f32_i64_sum") &&
            strstr(xent_last_error(), "specs/linear_cross_entropy.lua"),
        "a linear cross entropy miss names its key and spec: %s", xent_last_error());
  /* Two entries each naming one option the call has: the later option in
     the schema's order wins (the largest mask), as when every key was
     tried in turn. */
  static const xent_dispatch_entry two[] = {
      {"ce_fwd_f32_i64_mean", fake_launch, 70},
      {"ce_fwd_f32_i64_mean_nosmooth", fake_launch, 70},
      {"ce_fwd_f32_i64_mean_weighted", fake_launch, 70},
  };
  const xent_table t2 = {two, 3, "test", specs, xent_cuda_dispatch_axes};
  d.reduction = XENT_REDUCTION_MEAN;
  e = xent_ce_lookup(&t2, &d, XENT_OP_FORWARD, 1, key, sizeof key);
  CHECK(e == &two[1] && strcmp(key, two[1].key) == 0, "the later named option wins, got %s",
        e ? e->key : "NULL");
  xent_softmax_desc sd = {.rows = 1, .classes = 1, .inner = 1, .dtype = XENT_F16};
  e = xent_softmax_lookup(&t, &sd, XENT_OP_FORWARD, key, sizeof key);
  CHECK(e == NULL && strstr(xent_last_error(), "sm_fwd_f16_softmax") && strstr(xent_last_error(), "(team/sm.lua)"),
        "a softmax miss names the library's softmax spec: %s", xent_last_error());
}

/* The keys come from the table's schema, not from a list in the runtime:
   a schema with other tokens and another order finds its own keys; an axis
   the runtime does not know, a malformed row and a table with no schema are
   refused by name. The schemas here are written by hand, as gen/lua/dsl.lua's
   format documents them (the generated one is tested above and below). */
/* A cross-entropy lookup in a table of no kernels with schema `axes` fails
   with XENT_ERROR_NOT_GENERATED and a message containing `needle`. */
static void expect_schema_refused(const xent_axis_row* axes, const char* needle, const char* what) {
  const xent_table t = {NULL, 0, "test", NULL, axes};
  xent_ce_desc d;
  xent_ce_desc_init(&d, 1, 1, XENT_F16, XENT_I32, XENT_REDUCTION_MEAN);
  char key[160];
  const xent_dispatch_entry* e = xent_ce_lookup(&t, &d, XENT_OP_BACKWARD, 0, key, sizeof key);
  expect_error(e ? XENT_OK : XENT_ERROR_NOT_GENERATED, XENT_ERROR_NOT_GENERATED, needle, what);
}

static void test_lookup_from_schema(void) {
  static const xent_dispatch_entry table[] = {
      {"ce_bwd_mean_f16_i32_W", fake_launch, 70},
      {"ce_bwd_mean_f16_i32_w", fake_launch, 70},
      {"ce_bwd_mean_f16_i32_w_Z", fake_launch, 70},
  };
  static const xent_axis_row reordered[] = {
      {"cross_entropy", "ce", "reduction", "type", "none sum mean"},
      {"cross_entropy", "ce", "dtype", "type", "f32 f16 bf16 f64"},
      {"cross_entropy", "ce", "label", "type", "i32 i64 prob"},
      {"cross_entropy", "ce", "weights", "option", "w W"},
      {"cross_entropy", "ce", "z_loss", "option", "z Z"},
      {0, 0, 0, 0, 0},
  };
  const xent_table t = {table, 3, "test", NULL, reordered};
  xent_ce_desc d;
  xent_ce_desc_init(&d, 1, 1, XENT_F16, XENT_I32, XENT_REDUCTION_MEAN);
  char key[160];
  const xent_dispatch_entry* e = xent_ce_lookup(&t, &d, XENT_OP_BACKWARD, 1, key, sizeof key);
  CHECK(e == &table[0], "weighted: the schema's order and token, got %s", e ? e->key : xent_last_error());
  e = xent_ce_lookup(&t, &d, XENT_OP_BACKWARD, 0, key, sizeof key);
  CHECK(e == &table[1], "unweighted, z-loss off: the most specialized key, got %s", e ? e->key : xent_last_error());
  d.z_loss = 1e-4;
  e = xent_ce_lookup(&t, &d, XENT_OP_BACKWARD, 0, key, sizeof key);
  CHECK(e == &table[2], "z-loss on, got %s", e ? e->key : xent_last_error());
  e = xent_ce_lookup(&t, &d, XENT_OP_BACKWARD, 1, key, sizeof key);
  CHECK(e == &table[0], "weighted with z-loss: the weighted kernel (z-loss at run time), got %s",
        e ? e->key : xent_last_error());
  d.dtype = XENT_F32;
  e = xent_ce_lookup(&t, &d, XENT_OP_BACKWARD, 1, key, sizeof key);
  CHECK(e == NULL && strstr(xent_last_error(), "for ce_bwd_mean_f32_i32 (weights: W, z_loss: Z)"),
        "a miss lists the schema's options and the call's tokens: %s", xent_last_error());

  static const xent_axis_row newer[] = {
      {"cross_entropy", "ce", "dtype", "type", "f32 f16 bf16 f64"},
      {"cross_entropy", "ce", "precision", "option", "exact fast"},
      {0, 0, 0, 0, 0},
  };
  expect_schema_refused(newer, "keys have axis 'precision' (family cross_entropy), which this libxent",
                        "an axis the runtime does not know");
  static const xent_axis_row one_value[] = {
      {"cross_entropy", "ce", "softcap", "option", "nocap"},
      {0, 0, 0, 0, 0},
  };
  expect_schema_refused(one_value, "schema is malformed at axis 'softcap'", "an option with one value");
  static const xent_axis_row type_as_option[] = {
      {"cross_entropy", "ce", "dtype", "option", "f32 f16"},
      {0, 0, 0, 0, 0},
  };
  expect_schema_refused(type_as_option, "schema is malformed at axis 'dtype'", "a type axis marked an option");
  expect_schema_refused(NULL, "for family cross_entropy (the table has none): add it to the spec of "
                        "family cross_entropy (specs/cross_entropy.lua)", "a table with no schema");
}

/* Every row of both manifests is found by the runtime's key builder in the
   CUDA table (linked here), and both targets generate the same keys. */
static void test_every_manifest_key(const char* cuda_manifest, const char* hip_manifest) {
  char **cuda = NULL, **hip = NULL;
  const int n = tu_read_manifest(cuda_manifest, &cuda);
  const int m = tu_read_manifest(hip_manifest, &hip);
  CHECK(n > 0 && n == (int)xent_cuda_dispatch_count, "cuda manifest rows %d, table %zu", n, xent_cuda_dispatch_count);
  CHECK(m == n, "hip manifest has %d rows, cuda %d", m, n);
  const xent_table cuda_table = {xent_cuda_dispatch, xent_cuda_dispatch_count, "cuda", xent_cuda_dispatch_specs,
                                 xent_cuda_dispatch_axes};
  /* The table names the specs the build gave xentgen, a family each. */
  int named = 0;
  for (const xent_dispatch_spec* s = xent_cuda_dispatch_specs; s->family; ++s) {
    CHECK(strstr(s->spec, "specs/") && strstr(s->spec, s->family), "family %s from %s", s->family, s->spec);
    named++;
  }
  CHECK(named == 3, "the table names %d specs, expected cross_entropy, linear_cross_entropy and softmax", named);
  for (int i = 0; i < n; ++i) {
    if (i < m) CHECK(strcmp(cuda[i], hip[i]) == 0, "row %d: cuda %s, hip %s", i, cuda[i], hip[i]);
    if (strncmp(cuda[i], "sm_", 3) == 0) {
      xent_softmax_desc sd = {.rows = 1, .classes = 1, .inner = 1};
      xent_op op;
      CHECK(tu_parse_softmax_key(cuda[i], &op, &sd) == 0, "%s parses", cuda[i]);
      char key[96];
      const xent_dispatch_entry* e =
          xent_softmax_lookup(&cuda_table, &sd, op, key, sizeof key);
      CHECK(e && strcmp(e->key, cuda[i]) == 0 && e->launch, "lookup of %s", cuda[i]);
      continue;
    }
    if (strncmp(cuda[i], "lce_", 4) == 0) {
      /* The linear cross entropy's steps: found from the axes of the chunk's
         loss, and the fused cross-entropy kernel they run around (the same
         key after "l") is in the table too. */
      xent_ce_desc d = {.rows = 1, .classes = 1};
      xent_op op;
      CHECK(tu_parse_key(cuda[i] + 1, &op, &d) == 0 && op == XENT_OP_FORWARD_BACKWARD, "%s parses", cuda[i]);
      char key[160];
      const xent_dispatch_entry* e =
          xent_lce_lookup(&cuda_table, &d, 0, key, sizeof key);
      CHECK(e && strcmp(e->key, cuda[i]) == 0 && e->launch, "lookup of %s: %s", cuda[i], e ? e->key : xent_last_error());
      e = xent_ce_lookup(&cuda_table, &d, op, 0, key, sizeof key);
      CHECK(e && strcmp(e->key, cuda[i] + 1) == 0, "%s has its fused kernel %s: %s", cuda[i], cuda[i] + 1,
            e ? e->key : xent_last_error());
      continue;
    }
    xent_ce_desc d = {.rows = 1, .classes = 1};
    xent_op op;
    CHECK(tu_parse_key(cuda[i], &op, &d) == 0, "%s parses", cuda[i]);
    char key[160];
    const xent_dispatch_entry* e =
        xent_ce_lookup(&cuda_table, &d, op, 0, key, sizeof key);
    CHECK(e && strcmp(e->key, cuda[i]) == 0 && e->launch, "lookup of %s: %s", cuda[i], e ? e->key : xent_last_error());
    e = xent_ce_lookup(&cuda_table, &d, op, 1, key, sizeof key);
    CHECK(e && strcmp(e->key, cuda[i]) == 0, "weighted lookup of %s", cuda[i]);
  }
  for (int i = 1; i < n; ++i) CHECK(strcmp(xent_cuda_dispatch[i - 1].key, xent_cuda_dispatch[i].key) < 0, "table sorted");
  tu_free_manifest(cuda, n);
  tu_free_manifest(hip, m);
}

/* xent_kernel_count / xent_kernel_key on a cpu handle list the emulated
   rendering's table: the manifest's keys, in its (sorted) order, for each
   rendering; bad arguments are named. */
static void test_kernel_listing(const char* cuda_manifest, const char* hip_manifest) {
  xent_handle* h = NULL;
  CHECK(xent_create(&h, XENT_BACKEND_CPU) == XENT_OK, "create: %s", xent_last_error());
  const char* manifests[2] = {cuda_manifest, hip_manifest};
  const xent_backend_kind renderings[2] = {XENT_BACKEND_CUDA, XENT_BACKEND_HIP};
  for (int r = 0; r < 2; ++r) {
    char** keys = NULL;
    const int n = tu_read_manifest(manifests[r], &keys);
    CHECK(xent_cpu_emulate(h, renderings[r]) == XENT_OK, "emulate");
    size_t count = 0;
    CHECK(xent_kernel_count(h, &count) == XENT_OK && n > 0 && count == (size_t)n, "%s: %zu kernels listed, manifest %d",
          xent_backend_name(renderings[r]), count, n);
    for (int i = 0; i < n && (size_t)i < count; ++i) {
      const char* key = NULL;
      CHECK(xent_kernel_key(h, (size_t)i, &key) == XENT_OK && key && strcmp(key, keys[i]) == 0, "kernel %d: %s, manifest %s",
            i, key ? key : "NULL", keys[i]);
    }
    const char* key = "unchanged";
    expect_error(xent_kernel_key(h, count, &key), XENT_ERROR_INVALID_ARGUMENT, "index", "key past the end");
    CHECK(strcmp(key, "unchanged") == 0, "a refused xent_kernel_key leaves *key alone");
    tu_free_manifest(keys, n);
  }
  size_t count = 0;
  const char* key = NULL;
  expect_error(xent_kernel_count(NULL, &count), XENT_ERROR_INVALID_ARGUMENT, "handle", "count of NULL handle");
  expect_error(xent_kernel_count(h, NULL), XENT_ERROR_INVALID_ARGUMENT, "count", "NULL count");
  expect_error(xent_kernel_key(NULL, 0, &key), XENT_ERROR_INVALID_ARGUMENT, "handle", "key of NULL handle");
  expect_error(xent_kernel_key(h, 0, NULL), XENT_ERROR_INVALID_ARGUMENT, "key", "NULL key");
  xent_destroy(h);
}

/* Every pointer is checked for its element's alignment, every pair of
   buffers that a call writes one of for overlap (issue 14: f32 logits off
   by one byte crashed the cpu backend; loss == logits, lse == logits, grad
   over the saved lse, workspace == grad and loss over the labels returned
   XENT_OK with wrong answers), and options that f32 kernels cannot hold are
   refused. */
static void test_alignment_overlap_and_ranges(void) {
  xent_handle* h = NULL;
  CHECK(xent_create(&h, XENT_BACKEND_CPU) == XENT_OK, "create(CPU): %s", xent_last_error());
  xent_ce_desc d;
  xent_ce_desc_init(&d, 4, 10, XENT_F32, XENT_I64, XENT_REDUCTION_NONE);
  static double store[64][16]; /* 8-byte aligned blocks */
  /* 256 bytes apart: no two buffers share memory unless a case says so. */
  float* logits = (float*)store[0];
  int64_t* labels = (int64_t*)store[2];
  float* loss = (float*)store[4];
  float* lse = (float*)store[6];
  float* grad = (float*)store[8];
  float* weights = (float*)store[10];
  void* ws = store[12];
  for (int i = 0; i < 40; ++i) logits[i] = (float)(i % 7);
  for (int i = 0; i < 4; ++i) labels[i] = i;
  for (int i = 0; i < 10; ++i) weights[i] = 1;
  const char* bytes = (const char*)store;
  struct {
    const char* field;
    xent_op op;
    size_t offset; /* bytes added to the field's pointer */
  } misaligned[] = {
      {"logits", XENT_OP_FORWARD, 1}, {"labels", XENT_OP_FORWARD, 4}, {"weights", XENT_OP_FORWARD, 2},
      {"loss", XENT_OP_FORWARD, 1},   {"lse", XENT_OP_FORWARD, 3},    {"lse_in", XENT_OP_BACKWARD, 2},
      {"grad", XENT_OP_BACKWARD, 2},  {"dloss", XENT_OP_BACKWARD, 1}, {"workspace", XENT_OP_FORWARD, 4},
  };
  float* dloss = (float*)store[14];
  for (size_t i = 0; i < sizeof misaligned / sizeof misaligned[0]; ++i) {
    xent_ce_tensors t = {.logits = logits, .labels = labels, .weights = weights, .loss = loss, .lse = lse,
                         .lse_in = lse, .grad = grad, .dloss = dloss};
    void* w = ws;
    const size_t off = misaligned[i].offset;
    const char* f = misaligned[i].field;
    if (!strcmp(f, "logits")) t.logits = bytes + ((const char*)logits - bytes) + off;
    if (!strcmp(f, "labels")) t.labels = (const char*)labels + off;
    if (!strcmp(f, "weights")) t.weights = (const char*)weights + off;
    if (!strcmp(f, "loss")) t.loss = (char*)loss + off;
    if (!strcmp(f, "lse")) t.lse = (char*)lse + off;
    if (!strcmp(f, "lse_in")) t.lse_in = (const char*)lse + off;
    if (!strcmp(f, "grad")) t.grad = (char*)grad + off;
    if (!strcmp(f, "dloss")) t.dloss = (const char*)dloss + off;
    if (!strcmp(f, "workspace")) w = (char*)ws + off;
    char want[64];
    snprintf(want, sizeof want, ": %s (", f);
    expect_error(xent_ce_run(h, &d, misaligned[i].op, &t, w, 256, NULL), XENT_ERROR_INVALID_ARGUMENT, want, f);
    CHECK(strstr(xent_last_error(), "is not aligned to its") != NULL, "%s: %s", f, xent_last_error());
  }
  {
    float y[40];
    xent_softmax_desc sd = {.rows = 4, .classes = 10, .inner = 1, .dtype = XENT_F32, .kind = XENT_SOFTMAX};
    expect_error(xent_softmax_forward(h, &sd, (const char*)logits + 2, y, NULL), XENT_ERROR_INVALID_ARGUMENT,
                 "x (", "softmax x misaligned");
  }
  /* Overlaps: an output over an input or another output. */
  struct {
    const char* what;
    xent_op op;
    const char* message;
  } overlaps[] = {
      {"loss == logits", XENT_OP_FORWARD, "loss overlaps logits"},
      {"lse == logits", XENT_OP_FORWARD, "lse overlaps logits"},
      {"loss over labels", XENT_OP_FORWARD, "loss overlaps labels"},
      {"lse == loss", XENT_OP_FORWARD, "lse overlaps loss"},
      {"grad over lse_in", XENT_OP_BACKWARD, "grad overlaps lse_in"},
      {"workspace == grad", XENT_OP_FORWARD_BACKWARD, "workspace overlaps grad"},
      {"workspace == weights", XENT_OP_FORWARD, "workspace overlaps weights"},
  };
  for (size_t i = 0; i < sizeof overlaps / sizeof overlaps[0]; ++i) {
    xent_ce_tensors t = {.logits = logits, .labels = labels, .weights = weights, .loss = loss, .lse = lse,
                         .lse_in = lse, .grad = grad, .dloss = dloss};
    void* w = ws;
    switch (i) {
      case 0: t.loss = logits; break;
      case 1: t.lse = logits + 4; break;
      case 2: t.loss = (char*)labels + 8; break;
      case 3: t.lse = loss + 2; break;
      case 4: t.grad = lse; break;
      case 5: w = grad; break;
      case 6: w = weights; break;
    }
    expect_error(xent_ce_run(h, &d, overlaps[i].op, &t, w, 256, NULL), XENT_ERROR_INVALID_ARGUMENT,
                 overlaps[i].message, overlaps[i].what);
  }
  {
    /* Inputs may share memory: they are only read. */
    xent_ce_tensors t = {.logits = logits, .labels = labels, .weights = logits, .loss = loss};
    CHECK(xent_ce_run(h, &d, XENT_OP_FORWARD, &t, ws, 256, NULL) == XENT_OK, "weights over logits: %s", xent_last_error());
  }
  /* XENT_NO_IGNORE_INDEX matches no label, INT64_MIN included: that row is
     out of range, NaN, and reported. */
  {
    xent_ce_desc n = d;
    n.ignore_index = XENT_NO_IGNORE_INDEX;
    labels[2] = INT64_MIN;
    xent_ce_tensors t = {.logits = logits, .labels = labels, .loss = loss};
    CHECK(xent_ce_run(h, &n, XENT_OP_FORWARD, &t, ws, 256, NULL) == XENT_OK, "INT64_MIN label: %s", xent_last_error());
    CHECK(isnan(loss[2]) && isfinite(loss[1]), "INT64_MIN label: loss %g (want NaN), %g", loss[2], loss[1]);
    expect_error(xent_check(h), XENT_ERROR_INVALID_LABEL, "row 2 has a label outside", "INT64_MIN label reported");
    labels[2] = 2;
  }
  /* Options an f32 kernel would round to 0 or infinity. */
  {
    xent_ce_desc o = d;
    o.softcap = 1e-300;
    xent_ce_tensors t = {.logits = logits, .labels = labels, .loss = loss};
    expect_error(xent_ce_run(h, &o, XENT_OP_FORWARD, &t, ws, 256, NULL), XENT_ERROR_INVALID_ARGUMENT,
                 "desc->softcap is 1e-300, outside f32's normal range", "softcap 1e-300");
    o.softcap = 1e300;
    expect_error(xent_ce_run(h, &o, XENT_OP_FORWARD, &t, ws, 256, NULL), XENT_ERROR_INVALID_ARGUMENT,
                 "desc->softcap is 1e+300", "softcap 1e300");
    o = d;
    o.z_loss = 1e-310;
    expect_error(xent_ce_run(h, &o, XENT_OP_FORWARD, &t, ws, 256, NULL), XENT_ERROR_INVALID_ARGUMENT,
                 "desc->z_loss is", "z_loss 1e-310");
    o.dtype = o.loss_dtype = o.grad_dtype = XENT_F64; /* f64 kernels compute in f64 */
    size_t b = 0;
    CHECK(xent_ce_workspace_size(h, &o, XENT_OP_FORWARD, &b) == XENT_OK, "f64 z_loss 1e-310: %s", xent_last_error());
  }
  /* A workspace size that would wrap around 64 bits is an error, not 0. */
  {
    xent_ce_desc big;
    /* 2^60 - 1 rows of one f64 class pass the element count's check; two
       workspace values per row are 2^64 bytes, which wrapped to 0. */
    xent_ce_desc_init(&big, ((int64_t)1 << 60) - 1, 1, XENT_F64, XENT_I64, XENT_REDUCTION_MEAN);
    size_t b = 12345;
    expect_error(xent_ce_workspace_size(h, &big, XENT_OP_FORWARD, &b), XENT_ERROR_INVALID_ARGUMENT,
                 "the workspace's byte count overflows", "workspace overflow");
  }
  xent_destroy(h);
}

/* What a cpu handle runs: by default its own code, which has no launch
   shapes (xent_set_row_shape asks the renderings'), else the rendering
   that XENT_CPU_EMULATE names at xent_create, where a block of 32 threads
   is not whole 64-lane wavefronts; any other value is refused, naming the
   variable. Each call's loss is PyTorch's for zero logits: log 10. */
static void test_cpu_rendering(void) {
  xent_ce_desc d;
  xent_ce_desc_init(&d, 4, 10, XENT_F32, XENT_I64, XENT_REDUCTION_MEAN);
  float logits[40] = {0}, loss[1] = {0};
  int64_t labels[4] = {1, 2, 3, 0};
  static unsigned char ws[1 << 16];
  for (int i = 0; i < 3; ++i) {
    const char* env[3] = {NULL, "hip", "cuda"};
    if (env[i]) setenv("XENT_CPU_EMULATE", env[i], 1);
    else unsetenv("XENT_CPU_EMULATE");
    xent_handle* h = NULL;
    CHECK(xent_create(&h, XENT_BACKEND_CPU) == XENT_OK, "create: %s", xent_last_error());
    CHECK(xent_set_row_shape(h, 0, 32) == XENT_OK, "row shape: %s", xent_last_error());
    const xent_status s = xent_ce_forward(h, &d, logits, labels, NULL, loss, NULL, ws, sizeof ws, NULL);
    if (i == 1) {
      CHECK(s != XENT_OK && strstr(xent_last_error(), "xent_set_row_shape"),
            "XENT_CPU_EMULATE=hip runs the HIP rendering, which refuses 32 threads: %s", xent_last_error());
    } else {
      CHECK(s == XENT_OK && fabsf(loss[0] - logf(10.0f)) < 1e-6f, "%s: loss %g: %s",
            env[i] ? env[i] : "the cpu backend's own code", (double)loss[0], xent_last_error());
    }
    xent_destroy(h);
  }
  setenv("XENT_CPU_EMULATE", "gpu", 1);
  xent_handle* h = NULL;
  expect_error(xent_create(&h, XENT_BACKEND_CPU), XENT_ERROR_INVALID_ARGUMENT, "XENT_CPU_EMULATE is 'gpu'",
               "XENT_CPU_EMULATE=gpu");
  CHECK(h == NULL, "a refused create leaves *handle NULL");
  unsetenv("XENT_CPU_EMULATE");
  CHECK(xent_create(&h, XENT_BACKEND_CPU) == XENT_OK, "create: %s", xent_last_error());
  expect_error(xent_cpu_emulate(h, XENT_BACKEND_AUTO), XENT_ERROR_INVALID_ARGUMENT, "XENT_BACKEND_CPU",
               "emulate(AUTO)");
  xent_destroy(h);
}

int main(int argc, char** argv) {
  if (argc < 3) {
    fprintf(stderr, "usage: runtime_test CUDA_MANIFEST HIP_MANIFEST\n");
    return 2;
  }
  test_desc_layout();
  test_error_paths();
  test_alignment_overlap_and_ranges();
  test_vocab_shard_errors();
  test_lookup_preference();
  test_lookup_from_schema();
  test_every_manifest_key(argv[1], argv[2]);
  test_kernel_listing(argv[1], argv[2]);
  test_cpu_rendering();
  printf("%d passed, %d failed\n", checks - failures, failures);
  return failures ? 1 : 0;
}
